// One inference core for `score`, `serve`, `predict` and `evaluate`: a model in eval mode on its
// device, the card's evaluation transform, a compute precision (autocast) and a forward pass that
// returns logits and probabilities. Where the model comes from is a ModelSource: an exported
// folder, a training run or one of its checkpoints, or a weights file (.safetensors, .pth/.pt)
// with an architecture name. The model is a Classifier, so tests hand in a fake one: no files,
// no GPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <opencv2/core/mat.hpp>

#include "shoplens/core/precision.h"
#include "shoplens/data/image_io.h"
#include "shoplens/infer/model_export.h"

namespace shoplens {

struct ModelSource {
  std::filesystem::path path;       // model folder, run folder, checkpoint, or weights file
  std::string variant = "fp32";     // model folders: which weights file
  std::string checkpoint = "best";  // runs: best | last
  // Weights files only (a folder or run carries these itself):
  std::string arch;                      // registry name: resnet18, vit_small, ...
  std::vector<std::string> class_names;  // one per output; empty: "0", "1", ... for every output
  int image_size = 224;
  std::vector<double> mean{0.485, 0.456, 0.406};
  std::vector<double> std{0.229, 0.224, 0.225};
  double crop_pct = 0.875;  // eval resize: floor(image_size / crop_pct), then center crop
};

// What kind of thing `path` is, for messages and dispatch.
enum class ModelSourceKind { kModelFolder, kRun, kCheckpoint, kWeightsFile };
ModelSourceKind model_source_kind(const std::filesystem::path& path);

// Loads the model in eval mode on the CPU. UsageError for a weights file without --model, or a
// path that is none of the kinds; DataError when the weights do not fit the architecture (every
// tensor must load: predictions from a half-loaded model would look plausible and be wrong).
LoadedModel load_model_source(const ModelSource& source);

struct InferenceOptions {
  Precision precision = Precision::kFp32;  // bf16, fp16 (CUDA): autocast around the forward pass
  DeviceChoice device = DeviceChoice::kAuto;
  // JPEG at full scale with the accurate DCT, as Pillow decodes (probabilities match a
  // torchvision pipeline); false: fast DCT, and reduced DCT scale down to the resize target.
  bool exact_decode = true;
};

struct InferenceOutput {
  at::Tensor logits;         // [n, classes] float32 on the CPU
  at::Tensor probabilities;  // softmax of the logits
};

class InferenceSession {
 public:
  InferenceSession(LoadedModel model, const InferenceOptions& options);
  ~InferenceSession();
  InferenceSession(const InferenceSession&) = delete;
  InferenceSession& operator=(const InferenceSession&) = delete;

  const LoadedModel& model() const;
  const std::vector<std::string>& class_names() const;
  int image_size() const;
  std::size_t floats_per_sample() const;
  bool on_cuda() const;
  const InferenceOptions& options() const;

  // How image bytes are decoded for this model (exactness, reduced JPEG scale).
  DecodeOptions decode_options() const;
  // The card's evaluation transform: RGB CV_8UC3 -> 3*S*S normalised floats at dst. Thread-safe.
  void preprocess(const cv::Mat& rgb, float* dst) const;
  // Host memory for n preprocessed images: pinned on CUDA (non-blocking copies), pageable on CPU.
  at::Tensor host_batch(std::int64_t n) const;
  // Moves images to the model's device (a no-op on CPU).
  at::Tensor to_device(const at::Tensor& images, bool non_blocking = false) const;
  // Preprocessed images [n, 3, S, S], on the host or already on the device: one forward pass in
  // the session's precision, no autograd.
  InferenceOutput run(const at::Tensor& images);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens
