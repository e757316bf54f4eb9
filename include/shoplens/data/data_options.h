// The data layer's sections of the run configuration (docs/CONFIG.md): what the inputs are and
// how prepare stores them (data), how a sample is augmented (augment), how batches are made
// (loader). The schema rows that read them from a config file are in src/core/config.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shoplens/core/enum_names.h"
#include "shoplens/data/shard_format.h"

namespace shoplens {

inline constexpr EnumName<PayloadEncoding> kPayloadEncodingNames[] = {{PayloadEncoding::kJpeg, "jpeg"},
                                                                      {PayloadEncoding::kRaw, "raw"}};

struct DataConfig {
  std::string input;                           // CSV manifest or ImageFolder root
  std::string root;                            // base for relative manifest paths; empty = manifest's folder
  std::map<std::string, std::string> columns;  // logical column -> CSV header (path, label, split, id)
  std::vector<std::string> metadata_fields;    // empty = every CSV column that is not path/label/split/id
  std::vector<std::string> classes;            // empty = discovered from the data, sorted
  std::string shards;                          // folder of prepared shards
  double val_fraction = 0.1;                   // no split column; or no val: carved from train
  double test_fraction = 0.1;
  int storage_size = 256;  // short side of stored images
  PayloadEncoding encoding = PayloadEncoding::kJpeg;
  int jpeg_quality = 90;
  int records_per_shard = 1024;
  double max_megapixels = 100;  // larger originals are quarantined (decompression bombs)
  int max_file_mb = 512;        // larger files are quarantined without being read
  bool scaled_decode = true;    // JPEG DCT-domain downscaling while decoding
};

enum class AutoAugment { kNone, kTrivial };  // trivial: TrivialAugmentWide
inline constexpr EnumName<AutoAugment> kAutoAugmentNames[] = {{AutoAugment::kNone, "none"},
                                                              {AutoAugment::kTrivial, "trivial"}};

struct AugmentConfig {
  int image_size = 224;                       // output side, square
  std::vector<double> crop_scale{0.08, 1.0};  // RandomResizedCrop area fraction
  std::vector<double> crop_ratio{0.75, 4.0 / 3.0};
  double hflip = 0.5;
  double brightness = 0.4;
  double contrast = 0.4;
  double saturation = 0.4;
  double hue = 0.1;
  double mixup_alpha = 0.0;   // 0 disables
  double cutmix_alpha = 0.0;  // 0 disables
  double mix_prob = 1.0;      // chance a batch is mixed when mixup/cutmix is on
  int pad_crop = 0;           // > 0: reflect-pad by this many px and crop back (instead of RandomResizedCrop)
  AutoAugment auto_augment = AutoAugment::kNone;
  double random_erasing = 0.0;  // probability of erasing a box (0 disables)
  std::vector<double> mean{0.485, 0.456, 0.406};
  std::vector<double> std{0.229, 0.224, 0.225};
  // Evaluation transform (torchvision's Resize then CenterCrop(image_size), Pillow's pixels):
  double eval_crop_pct = 0.875;    // resize the short side to floor(image_size / eval_crop_pct)
  int eval_resize_short_side = 0;  // > 0: that short side instead (a model card's value)
  bool worst_case = false;         // largest-footprint setting (the batch finder uses it)
};

struct LoaderConfig {
  int batch_size = 32;      // micro-batch
  bool auto_batch = false;  // batch_size "auto": `train` runs find-batch first
  int workers = 0;          // 0 = run.threads
  int prefetch_batches = 4;
  bool shuffle = true;
  bool drop_last = true;
  std::int64_t token_budget = 0;  // text: padded tokens per micro-batch at most (0: no cap)
  bool pin_memory = true;         // a CUDA job's batches in page-locked memory (no effect on CPU)
};

}  // namespace shoplens
