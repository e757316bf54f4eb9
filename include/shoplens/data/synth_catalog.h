// A synthetic product catalog shaped like ShopLens data (see docs/DATA.md): real image files
// (mostly JPEG, some PNG) of varied sizes and aspect ratios, 12 imbalanced defect classes each
// made by the physical process it names, ~2% corrupted files, ~8% of records missing metadata,
// and a CSV manifest. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

struct SynthOptions {
  std::filesystem::path out_dir;
  int num_images = 1000;
  std::uint64_t seed = 1234;
  int min_side = 160;                 // long side of originals is drawn from [min_side, max_side]
  int max_side = 640;
  double corrupt_fraction = 0.02;
  double missing_metadata_fraction = 0.08;
  double val_fraction = 0.1;
  double test_fraction = 0.1;
  double png_fraction = 0.15;
  int threads = 1;
};

struct SynthClass {
  std::string name;
  double share;  // fraction of the catalog
};

// The 12 classes in label order with their shares (largest 41%, smallest 3.5%).
const std::vector<SynthClass>& synth_classes();

// Metadata columns written to the manifest, in order.
const std::vector<std::string>& synth_metadata_fields();

struct SynthSummary {
  int images = 0;
  int corrupted = 0;
  int records_missing_metadata = 0;
  std::vector<int> per_class;            // aligned with synth_classes()
  std::filesystem::path manifest;        // <out>/manifest.csv
  std::filesystem::path corruptions;     // <out>/corruptions.csv: ground truth of what was corrupted and how
};

// Writes <out>/images/<class>/<id>.<ext>, <out>/manifest.csv (id,path,label,split,<metadata...>),
// <out>/corruptions.csv and <out>/classes.txt. Paths in the manifest are relative to <out>.
SynthSummary generate_synthetic_catalog(const SynthOptions& options);

}  // namespace shoplens
