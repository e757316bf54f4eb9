// `shoplens make-data`: writes a synthetic product catalog (images, manifest.csv, classes.txt,
// corruptions.csv), or with `--task text` a tokenized text shard folder, and a make-data.json
// summary beside it.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "command.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/make_data.h"

namespace shoplens::cli {
namespace {

// "MIN:MAX": the range the originals' long side is drawn from, in pixels.
std::pair<int, int> parse_size_range(const std::string& text) {
  const auto parts = split(text, ':');
  const std::string expected = "--image-size-range: expected MIN:MAX in pixels, e.g. 160:640 (got '" + text + "')";
  if (parts.size() != 2) throw UsageError(expected);
  int values[2];
  for (int i = 0; i < 2; ++i) {
    const std::string part(trim(parts[i]));
    std::size_t used = 0;
    try {
      values[i] = std::stoi(part, &used);
    } catch (const std::exception&) {
      throw UsageError(expected);
    }
    if (used != part.size()) throw UsageError(expected);
  }
  if (values[0] < 32) throw UsageError("--image-size-range: MIN must be at least 32 pixels (got '" + text + "')");
  if (values[0] > values[1]) throw UsageError("--image-size-range: MIN exceeds MAX (got '" + text + "')");
  return {values[0], values[1]};
}

class MakeDataCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.threads = 0;  // the library defaults to one thread; the command line to every core
    app.add_option("--task", task_, "what to generate: image (a product catalog) or text (tokenized text shards)")
        ->capture_default_str()
        ->check(CLI::IsMember({"image", "text"}));
    app.add_option("-o,--out", out_, "folder to write the catalog (or text shards) into (created if missing)")
        ->required();
    image_only_.push_back(app.add_option("--num-images", options_.num_images, "number of images")
                              ->capture_default_str()
                              ->check(CLI::Range(1, 100000000)));
    text_only_.push_back(app.add_option("--num-examples", text_.num_examples, "number of text examples (--task text)")
                             ->capture_default_str()
                             ->check(CLI::Range(1, 100000000)));
    text_only_.push_back(
        app.add_option("--max-length", text_.max_length, "longest example in tokens, longer ones are cut (--task text)")
            ->capture_default_str()
            ->check(CLI::Range(16, 65536)));
    text_only_.push_back(app.add_option("--vocab-size", text_.vocab_size,
                                        "token vocabulary size (--task text; above 65536 stores int32)")
                             ->capture_default_str()
                             ->check(CLI::Range(1024, 16777216)));
    text_only_.push_back(
        app.add_option("--records-per-shard", text_.records_per_shard, "examples per text shard (--task text)")
            ->capture_default_str()
            ->check(CLI::Range(1, 100000000)));
    text_only_.push_back(app.add_option("--label-noise", text_.label_noise, "fraction of flipped labels (--task text)")
                             ->capture_default_str()
                             ->check(CLI::Range(0.0, 0.5)));
    app.add_option("--seed", options_.seed, "random seed; the same seed gives the same bytes")->capture_default_str();
    image_only_.push_back(
        app.add_option("--image-size-range", size_range_, "long side of the originals, MIN:MAX pixels (MIN >= 32)")
            ->capture_default_str());
    image_only_.push_back(
        app.add_option("--corrupt-fraction", options_.corrupt_fraction, "fraction of image files to corrupt")
            ->capture_default_str()
            ->check(CLI::Range(0.0, 1.0)));
    missing_ =
        app.add_option("--missing-metadata-fraction", options_.missing_metadata_fraction,
                       "fraction of records with 1-3 empty metadata fields (--task text: each field empty with this "
                       "probability, default 0.06)")
            ->capture_default_str()
            ->check(CLI::Range(0.0, 1.0));
    image_only_.push_back(
        app.add_option("--png-fraction", options_.png_fraction, "fraction of images saved as PNG (the rest JPEG)")
            ->capture_default_str()
            ->check(CLI::Range(0.0, 1.0)));
    app.add_option(
           "--val-fraction", options_.val_fraction,
           "fraction of each class in the val split (--task text: the examples just before test, by created_at)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 0.95));
    app.add_option("--test-fraction", options_.test_fraction,
                   "fraction of each class in the test split (--task text: the latest examples by created_at)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 0.95));
    image_only_.push_back(app.add_option("--threads", options_.threads, "worker threads (0: all usable cores)")
                              ->capture_default_str()
                              ->check(CLI::Range(0, 1024)));
  }

  int run() override {
    const bool text = task_ == "text";
    for (const CLI::Option* opt : text ? image_only_ : text_only_)
      if (opt->count() > 0)
        throw UsageError(opt->get_name() + " does not apply to --task " + task_ + " (it is a --task " +
                         (text ? "image" : "text") + " option)");
    if (text) return run_text();
    options_.out_dir = out_;
    std::tie(options_.min_side, options_.max_side) = parse_size_range(size_range_);
    make_image_catalog(options_);
    return 0;
  }

 private:
  int run_text() {
    text_.out_dir = out_;
    text_.seed = options_.seed;
    text_.val_fraction = options_.val_fraction;
    text_.test_fraction = options_.test_fraction;
    if (missing_->count() > 0) text_.missing_fraction = options_.missing_metadata_fraction;
    make_text_dataset(text_);
    return 0;
  }

  SynthOptions options_;
  SynthTextOptions text_;
  std::string task_ = "image";
  std::vector<CLI::Option*> image_only_, text_only_;
  CLI::Option* missing_ = nullptr;
  std::string out_;
  std::string size_range_ = "160:640";
};

}  // namespace

std::unique_ptr<Command> make_make_data_command() { return std::make_unique<MakeDataCommand>(); }

}  // namespace shoplens::cli
