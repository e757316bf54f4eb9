// `shoplens make-data`: writes a synthetic product catalog (images, manifest.csv, classes.txt,
// corruptions.csv) and a make-data.json summary beside it.
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

class MakeDataCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.threads = 0;  // the library defaults to one thread; the command line to every core
    app.add_option("--out", out_, "folder to write the catalog into (created if missing)")->required();
    app.add_option("--num-images", options_.num_images, "number of images")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000000));
    app.add_option("--seed", options_.seed, "random seed; the same seed gives the same bytes")->capture_default_str();
    app.add_option("--image-size-range", size_range_, "long side of the originals, MIN:MAX pixels (MIN >= 32)")
        ->capture_default_str();
    app.add_option("--corrupt-fraction", options_.corrupt_fraction, "fraction of image files to corrupt")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--missing-metadata-fraction", options_.missing_metadata_fraction,
                   "fraction of records with 1-3 empty metadata fields")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--png-fraction", options_.png_fraction, "fraction of images saved as PNG (the rest JPEG)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--val-fraction", options_.val_fraction, "fraction of each class in the val split")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 0.95));
    app.add_option("--test-fraction", options_.test_fraction, "fraction of each class in the test split")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 0.95));
    app.add_option("--threads", options_.threads, "worker threads (0: all usable cores)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1024));
  }

  int run() override {
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
  SynthOptions options_;
  std::string out_;
  std::string size_range_ = "160:640";
};

}  // namespace

std::unique_ptr<Command> make_make_data_command() { return std::make_unique<MakeDataCommand>(); }

}  // namespace shoplens::cli
