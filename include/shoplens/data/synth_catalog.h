// A synthetic product catalog shaped like ShopLens data (see docs/DATA.md): real image files
// (mostly JPEG, some PNG) of varied sizes and aspect ratios, 12 imbalanced defect classes each
// made by the physical process it names, ~2% corrupted files, ~8% of records missing metadata,
// and a CSV manifest. Deterministic for a seed, whatever the thread count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace shoplens {

struct SynthOptions {
  std::filesystem::path out_dir;
  int num_images = 1000;
  std::uint64_t seed = 1234;
  int min_side = 160;  // long side of originals is drawn from [min_side, max_side]
  int max_side = 640;
  double corrupt_fraction = 0.02;
  double missing_metadata_fraction = 0.08;
  double val_fraction = 0.1;
  double test_fraction = 0.1;
  double png_fraction = 0.15;
  int threads = 1;  // 0 = every usable core
};

struct SynthClass {
  std::string name;
  double share;  // fraction of the catalog
};

// The 12 classes in label order with their shares (largest 41%, smallest 3.5%).
const std::vector<SynthClass>& synth_classes();

// Metadata columns written to the manifest, in order.
const std::vector<std::string>& synth_metadata_fields();

// Kinds of corrupted file, as written to corruptions.csv: truncated, zero_bytes, not_an_image,
// bad_header, wrong_extension.
const std::vector<std::string>& synth_corruption_kinds();

// Throws UsageError when an option is out of range.
void validate_synth_options(const SynthOptions& options);

struct SynthSummary {
  int images = 0;
  int corrupted = 0;
  int records_missing_metadata = 0;
  std::vector<int> per_class;                    // aligned with synth_classes()
  std::map<std::string, int> corrupted_by_kind;  // kinds with at least one file
  std::uint64_t bytes_written = 0;               // image files only
  int threads = 1;                               // threads actually used
  double seconds = 0;                            // wall time of the generation
  std::filesystem::path manifest;                // <out>/manifest.csv
  std::filesystem::path corruptions;             // <out>/corruptions.csv: ground truth of what was corrupted and how
};

// Writes <out>/images/<class>/<id>.<ext>, <out>/manifest.csv (id,path,label,split,<metadata...>),
// <out>/corruptions.csv and <out>/classes.txt. Paths in the manifest are relative to <out>.
// Throws UsageError for bad options, IoError when <out> cannot be written, InterruptedError on
// SIGINT/SIGTERM (the manifest is then not written, so a partial catalog never looks complete).
SynthSummary generate_synthetic_catalog(const SynthOptions& options);

}  // namespace shoplens
