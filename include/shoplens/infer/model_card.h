// The model card (MODEL_DIR/model_card.json) as loading reads it: every field that decides what is
// built, loaded, compared or fed to the model is checked against the range a real export can have,
// and a card outside it is refused with the file and the key named (docs/DEPLOYING.md, "What a
// model folder's card may hold"). Plain C++: no torch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shoplens {

constexpr int kModelCardVersion = 1;

// The ranges a card's values must lie in. The image side is augment.image_size's range; the class
// count allows far more classes than any catalog, few enough that a head and its logits stay small.
constexpr int kCardMinImageSize = 8;
constexpr int kCardMaxImageSize = 4096;
constexpr int kCardMaxResizeShortSide = 16384;  // augment.eval_resize_short_side's largest
constexpr int kCardMaxClasses = 100000;
constexpr int kCardVerificationRows = 2;  // verification_input(): [2, 3, S, S]
// The fp32 weights' largest logit difference from the card's: the same kernels on the same machine
// give ~0, other CPUs differ slightly. A card may state its own, above kCardMinTolerance and <= 1.
constexpr double kFp32Tolerance = 1e-4;
constexpr double kCardMinTolerance = 1e-12;

// The weights variants a model folder can hold: fp32 always, bf16 and fp16 with export --variants.
// UsageError for another name.
void check_weights_variant(const std::string& variant);
// model.safetensors for fp32, model.<variant>.safetensors otherwise.
std::string weights_file(const std::string& variant);
// The dtype a variant's card entry names: float32, bfloat16, float16.
const char* weights_card_dtype(const std::string& variant);

struct ModelCardFile {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
  std::string dtype;
};

struct ModelCard {
  std::string architecture;  // a registered image model
  int num_classes = 0;
  int image_size = 0;  // also preprocessing.center_crop
  double dropout = 0;
  bool channels_last = false;
  std::vector<std::string> class_names;                  // num_classes of them, unique, non-empty UTF-8
  std::vector<double> mean, std;                         // per RGB channel
  int resize_short_side = 0;                             // image_size .. kCardMaxResizeShortSide
  std::map<std::string, ModelCardFile> files;            // plain file names in the folder
  std::vector<std::string> variants;                     // the weights variants files lists, fp32 first
  std::vector<std::vector<double>> verification_logits;  // [kCardVerificationRows][num_classes]
  double tolerance = 0;
  std::uint32_t weights_crc32 = 0;  // fingerprint.weights_crc32: the fp32 file's CRC-32
};

// The checked card. DataError "CARD_FILE: \"KEY\" ..." for the first field that is missing, of the
// wrong type, out of its range or inconsistent with another (class names and num_classes,
// center_crop and image_size, a weights file and its dtype, the logits' shape).
ModelCard parse_model_card(const nlohmann::json& card, const std::string& card_file);

}  // namespace shoplens
