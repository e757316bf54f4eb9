// `shoplens export`: a trained run becomes a self-describing model folder that scoring (and
// Python users) can load without the run:
//
//   MODEL_DIR/model.safetensors          fp32 weights, torchvision/timm parameter names
//   MODEL_DIR/model.bf16.safetensors     optional reduced-precision variants (and .fp16)
//   MODEL_DIR/model_card.json            architecture, classes, preprocessing, training metrics,
//                                        fingerprints, file checksums, verification logits
//   MODEL_DIR/model.onnx                 with --format onnx: the model as standard ONNX (opset 17)
//
// --format triton writes a Triton model repository instead: OUT/<name>/1/model.onnx and
// OUT/<name>/config.pbtxt (docs/DEPLOYING.md). Text runs export to ONNX only (onnx, triton).
//
// The folder is written under a temporary name and renamed into place only after the weights
// were read back into a fresh model and reproduced the reference logits: a folder named
// MODEL_DIR is always complete and verified. See docs/SCORING.md.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/core/enum_names.h"
#include "shoplens/infer/model_card.h"

namespace shoplens {

class Classifier;

// folder: safetensors + card; onnx: the folder plus model.onnx (a text run: model.onnx only);
// triton: a Triton model repository.
enum class ExportFormat { kFolder, kOnnx, kTriton };
inline constexpr EnumName<ExportFormat> kExportFormatNames[] = {
    {ExportFormat::kFolder, "folder"}, {ExportFormat::kOnnx, "onnx"}, {ExportFormat::kTriton, "triton"}};

// Which of the checkpoint's weights are exported: the EMA when the run kept one (auto), the EMA
// (refused without one), or the raw weights. `--ema auto|on|off`, or the older `--weights`.
enum class ExportWeights { kAuto, kEma, kRaw };
inline constexpr EnumName<ExportWeights> kEmaFlagNames[] = {
    {ExportWeights::kAuto, "auto"}, {ExportWeights::kEma, "on"}, {ExportWeights::kRaw, "off"}};
inline constexpr EnumName<ExportWeights> kExportWeightsNames[] = {
    {ExportWeights::kAuto, "auto"}, {ExportWeights::kEma, "ema"}, {ExportWeights::kRaw, "raw"}};

struct ExportOptions {
  std::filesystem::path run_dir;
  std::filesystem::path out_dir;
  std::string checkpoint = "best";    // best | last | a checkpoint file
  std::vector<std::string> variants;  // "bf16", "fp16"
  bool force = false;                 // replace an existing MODEL_DIR
  ExportFormat format = ExportFormat::kFolder;
  std::string triton_name;    // triton: the model's folder in the repository; empty: the architecture
  int max_batch = 16;         // triton: max_batch_size and the largest batch measured
  double p95_target_ms = 50;  // triton: the latency budget that picks the preferred batch
  int warmup_reps = 5;        // triton: timed passes per measured batch size
  ExportWeights weights = ExportWeights::kAuto;
};

// What an export wrote. A model folder (with model.onnx for --format onnx), a text run's ONNX file
// alone, or a model in a Triton repository.
enum class ExportedArtifact { kModelFolder, kTextOnnx, kTritonModel };

struct ExportResult {
  ExportedArtifact artifact = ExportedArtifact::kModelFolder;
  std::filesystem::path out_dir;    // the model folder, or the Triton repository
  std::filesystem::path card_file;  // the model folder's model_card.json; empty for the others
  std::filesystem::path onnx_file;  // the ONNX file written beside or instead of the card; empty when none
  std::string triton_model;         // the model's folder in the Triton repository
};

ExportResult export_model(const ExportOptions& options);

// The input every export is verified on: [2, 3, S, S] float32 with x[i] = sin(0.007 i + 0.3) over
// the flattened index (easy to rebuild in any language; the card states the formula).
at::Tensor verification_input(int image_size);

struct LoadedModel {
  std::shared_ptr<Classifier> model;  // eval mode, CPU, float32 compute
  nlohmann::json card;
  std::vector<std::string> class_names;
  AugmentConfig preprocessing;  // the eval transform's settings (image_size, mean, std)
  std::string variant;          // fp32 | bf16 | fp16: the weights file that was read
};

// Reads MODEL_DIR: checks every field of the card (parse_model_card) and every listed file's size
// and CRC32, builds the model and loads the weights of `variant`; with `verify`, reruns the verification input and
// compares with the card (fp32: max |diff| within the card's tolerance; variants: same top-1).
// DataError naming the file and what is wrong otherwise.
LoadedModel load_exported_model(const std::filesystem::path& dir, const std::string& variant = "fp32",
                                bool verify = true);

// `export --check`: load_exported_model with verification for the fp32 weights and for each
// reduced-precision copy the card lists (model.onnx is covered by the checksums). Returns the
// checked card.
ModelCard verify_exported_model(const std::filesystem::path& dir);

// A training run's model (checkpoint "best", "last", or a checkpoint file of the run), with the
// run's class names and evaluation transform. UsageError for a text model.
LoadedModel load_run_model(const std::filesystem::path& run_dir, const std::string& checkpoint = "best");

}  // namespace shoplens
