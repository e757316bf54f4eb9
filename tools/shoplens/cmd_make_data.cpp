// `shoplens make-data`: writes a synthetic product catalog (images, manifest.csv, classes.txt,
// corruptions.csv), or with `--task text` a tokenized text shard folder, and a make-data.json
// summary beside it.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/synth_catalog.h"
#include "shoplens/data/synth_text.h"

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

nlohmann::json summary_json(const SynthOptions& o, const SynthSummary& s) {
  nlohmann::json per_class = nlohmann::json::object();
  for (std::size_t c = 0; c < synth_classes().size(); ++c) per_class[synth_classes()[c].name] = s.per_class[c];
  return {
      {"command", "make-data"},
      {"version", shoplens_version()},
      {"commit", build_commit()},
      {"out", o.out_dir.string()},
      {"seed", o.seed},
      {"num_images", s.images},
      {"image_size_range", {o.min_side, o.max_side}},
      {"corrupt_fraction", o.corrupt_fraction},
      {"missing_metadata_fraction", o.missing_metadata_fraction},
      {"png_fraction", o.png_fraction},
      {"val_fraction", o.val_fraction},
      {"test_fraction", o.test_fraction},
      {"threads", s.threads},
      {"seconds", s.seconds},
      {"images_per_second", s.seconds > 0 ? s.images / s.seconds : 0.0},
      {"bytes_written", s.bytes_written},
      {"per_class", per_class},
      {"corrupted", {{"total", s.corrupted}, {"by_kind", s.corrupted_by_kind}}},
      {"records_missing_metadata", s.records_missing_metadata},
      {"manifest", "manifest.csv"},
      {"corruptions", "corruptions.csv"},
      {"classes", "classes.txt"},
  };
}

nlohmann::json text_summary_json(const SynthTextOptions& o, const SynthTextSummary& s) {
  nlohmann::json splits = nlohmann::json::object();
  for (int k = 0; k < kNumSplits; ++k) {
    const auto n = s.per_split[k];
    splits[split_name(static_cast<Split>(k))] = {
        {"count", n},
        {"positives", s.positives_per_split[k]},
        {"positive_fraction", n ? double(s.positives_per_split[k]) / double(n) : 0.0}};
  }
  nlohmann::json missing = nlohmann::json::object();
  for (const auto& [field, fraction] : s.missing_fraction) missing[field] = fraction;
  std::uint64_t positives = 0;
  for (auto p : s.positives_per_split) positives += p;
  return {
      {"command", "make-data"},
      {"task", "text"},
      {"version", shoplens_version()},
      {"commit", build_commit()},
      {"out", o.out_dir.string()},
      {"seed", o.seed},
      {"num_examples", s.examples},
      {"vocab_size", o.vocab_size},
      {"max_length", o.max_length},
      {"records_per_shard", o.records_per_shard},
      {"val_fraction", o.val_fraction},
      {"test_fraction", o.test_fraction},
      {"label_noise", o.label_noise},
      {"missing_metadata_fraction", o.missing_fraction},
      {"positive_fraction", s.examples ? double(positives) / double(s.examples) : 0.0},
      {"splits", splits},
      {"split_rule",
       {{"key", s.split_rule.key},
        {"val_from", s.split_rule.val_from},
        {"test_from", s.split_rule.test_from},
        {"description", s.split_rule.description}}},
      {"missing_fraction", missing},
      {"length",
       {{"min", s.length_min},
        {"p50", s.length_p50},
        {"p90", s.length_p90},
        {"p99", s.length_p99},
        {"max", s.length_max},
        {"truncated", s.truncated}}},
      {"tokens", s.tokens},
      {"label_flips", s.label_flips},
      {"shards", s.shards.size()},
      {"bytes_written", s.bytes_written},
      {"seconds", s.seconds},
      {"dataset", kTextDatasetFile},
  };
}

class MakeDataCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.threads = 0;  // the library defaults to one thread; the command line to every core
    app.add_option("--task", task_, "what to generate: image (a product catalog) or text (tokenized text shards)")
        ->capture_default_str()
        ->check(CLI::IsMember({"image", "text"}));
    app.add_option("--out", out_, "folder to write the catalog (or text shards) into (created if missing)")->required();
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
    std::error_code ec;
    std::filesystem::create_directories(options_.out_dir, ec);
    if (ec) throw IoError("cannot create '" + out_ + "': " + ec.message());
    add_log_file(options_.out_dir / "make-data.log");
    spdlog::info("make-data: {} images of {}-{} px into {} (seed {})", options_.num_images, options_.min_side,
                 options_.max_side, out_, options_.seed);
    const SynthSummary s = generate_synthetic_catalog(options_);

    std::vector<std::string> per_class;
    for (std::size_t c = 0; c < synth_classes().size(); ++c)
      per_class.push_back(synth_classes()[c].name + " " + std::to_string(s.per_class[c]));
    std::vector<std::string> kinds;
    for (const auto& [kind, n] : s.corrupted_by_kind) kinds.push_back(kind + " " + std::to_string(n));
    spdlog::info("make-data: {} images in {:.1f} s ({:.0f} images/s on {} threads, {})", s.images, s.seconds,
                 s.seconds > 0 ? s.images / s.seconds : 0.0, s.threads, format_bytes(double(s.bytes_written)));
    spdlog::info("per class: {}", join(per_class, ", "));
    spdlog::info("corrupted files: {}{}", s.corrupted, kinds.empty() ? "" : " (" + join(kinds, ", ") + ")");
    spdlog::info("records missing metadata: {}", s.records_missing_metadata);

    const auto summary_path = options_.out_dir / "make-data.json";
    write_file_atomic(summary_path, summary_json(options_, s).dump(2) + "\n");
    spdlog::info("manifest: {}", s.manifest.string());
    spdlog::info("summary: {}", summary_path.string());
    return 0;
  }

 private:
  int run_text() {
    text_.out_dir = out_;
    text_.seed = options_.seed;
    text_.val_fraction = options_.val_fraction;
    text_.test_fraction = options_.test_fraction;
    if (missing_->count() > 0) text_.missing_fraction = options_.missing_metadata_fraction;
    validate_synth_text_options(text_);
    std::error_code ec;
    std::filesystem::create_directories(text_.out_dir, ec);
    if (ec) throw IoError("cannot create '" + out_ + "': " + ec.message());
    add_log_file(text_.out_dir / "make-data.log");
    spdlog::info("make-data: {} text examples, max length {}, vocabulary {} into {} (seed {})", text_.num_examples,
                 text_.max_length, text_.vocab_size, out_, text_.seed);
    const SynthTextSummary s = generate_synthetic_text(text_);
    std::vector<std::string> splits;
    for (int k = 0; k < kNumSplits; ++k)
      splits.push_back(fmt::format("{} {} ({:.1f}% positive)", split_name(static_cast<Split>(k)), s.per_split[k],
                                   s.per_split[k] ? 100.0 * s.positives_per_split[k] / s.per_split[k] : 0.0));
    spdlog::info("make-data: {} examples, {} tokens in {} shards, {:.1f} s", s.examples, s.tokens, s.shards.size(),
                 s.seconds);
    spdlog::info("splits by created_at: {}", join(splits, ", "));
    spdlog::info("length: min {}, median {}, p99 {}, max {} ({} truncated)", s.length_min, s.length_p50, s.length_p99,
                 s.length_max, s.truncated);
    const auto summary_path = text_.out_dir / "make-data.json";
    write_file_atomic(summary_path, text_summary_json(text_, s).dump(2) + "\n");
    spdlog::info("dataset: {}", (text_.out_dir / kTextDatasetFile).string());
    spdlog::info("summary: {}", summary_path.string());
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
