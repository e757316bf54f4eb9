// Weight files in and out: safetensors (read and write) and PyTorch `torch.save` state dicts
// (read), plus loading a state dict into a model by parameter name with a report of what did
// not match. The format of a file is chosen by its content, never by its extension.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

namespace torch::nn {
class Module;
}

namespace shoplens {

class Classifier;

// Name -> tensor, in file (or model) order. Names are unique.
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

enum class WeightFormat { kSafetensors, kTorchZip };

// Looks at the first bytes: a zip (torch.save since 1.6) or a safetensors header. DataError,
// naming the file and what was found, for anything else (legacy torch.save, TorchScript is a zip
// and is rejected later, text, empty file).
WeightFormat detect_weight_format(const std::filesystem::path& path);

// Reads a .safetensors file. `metadata`, when given, receives the `__metadata__` map. DataError
// naming the file on a malformed header, an unsupported dtype, or offsets outside the data.
StateDict read_safetensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata = nullptr);

// Writes tensors (any device, any layout; stored contiguous, little-endian) atomically.
void write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads a zip-format `torch.save` file holding a state dict: an OrderedDict or dict of tensors,
// or a checkpoint dict that wraps one under "state_dict", "model_state_dict" or "model".
// Tensors come back on the CPU. DataError naming the file and what it holds otherwise.
StateDict read_torch_state_dict(const std::filesystem::path& path);

// Either of the above, by content.
StateDict read_weights(const std::filesystem::path& path);

// Parameters and buffers with their dotted names, in the order PyTorch's state_dict() lists
// them (module by module: its parameters, then its buffers, then its children).
StateDict model_state_dict(const torch::nn::Module& module);

struct ShapeMismatch {
  std::string name;
  std::vector<std::int64_t> expected;  // the model's
  std::vector<std::int64_t> found;     // the file's
};

struct WeightLoadReport {
  std::string source;                           // file name, or "" for an in-memory state dict
  std::vector<std::string> loaded;              // model names that received a tensor (resampled too)
  std::vector<std::string> missing;             // in the model, not in the weights: keep their init
  std::vector<std::string> unexpected;          // in the weights, not in the model: ignored
  std::vector<ShapeMismatch> shape_mismatched;  // backbone tensors of another shape: not loaded
  std::vector<ShapeMismatch> resampled;         // ViT pos_embed grids resized (bicubic) to the model's
  std::vector<std::string> stripped_prefixes;   // "module." / "model." removed from file names
  std::vector<std::string> converted_dtypes;    // e.g. "Half -> Float (151 tensors)"
  std::size_t model_tensors = 0;                // parameters and buffers of the model
  int untracked_batchnorm = 0;                  // num_batches_tracked absent (old checkpoints): kept 0
  bool head_reset = false;                      // the head's shape differed: freshly initialised
  int weights_num_classes = -1;                 // the file's head size, -1 when it has no head
  int model_num_classes = 0;

  // True when every model tensor was loaded as is (no missing, mismatched or reset head).
  bool complete() const;
  std::string summary() const;  // a few lines for the log
  nlohmann::json to_json() const;
};

// Copies tensors by name into `model` (dtype converted, model's device and memory format kept).
// Names prefixed with "module." (DDP) or "model." are stripped when the bare name is the model's.
// A head of another class count is re-initialised when `new_head_on_mismatch`, otherwise it is a
// ConfigError ("the weights have K classes and the config has C"). Backbone tensors of another
// shape are reported and left at their init (a warning); a ViT position embedding of another
// grid size is resampled like timm's resample_abs_pos_embed.
WeightLoadReport load_weights(Classifier& model, const StateDict& weights, bool new_head_on_mismatch);

// read_weights + load_weights, logging the report's summary (warnings when incomplete). Unless
// `allow_partial`, a ConfigError naming the unmatched tensors when any model tensor is left
// without weights or of another shape (a new head and a resampled position embedding excepted),
// or when nothing matched at all.
WeightLoadReport load_weights_file(Classifier& model, const std::string& path, bool new_head_on_mismatch,
                                   bool allow_partial);

}  // namespace shoplens
