// Shared by the model files and the registry; not part of the public interface.
#pragma once

#include <cmath>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "shoplens/models/classifier.h"

namespace shoplens::detail {

// Factories behind make_model; the spec is already validated.
std::shared_ptr<Classifier> make_small_cnn(const ModelSpec& spec);
std::shared_ptr<Classifier> make_resnet(const ModelSpec& spec, int depth);  // 18, 34 or 50
std::shared_ptr<Classifier> make_vit(const ModelSpec& spec, int width, int heads);
std::shared_ptr<Classifier> make_text_encoder(const ModelSpec& spec, int dim, int depth, int heads);

// The attention logits' scale, 1 / sqrt(head size), with timm's whole-number head size
// (dim // heads).
inline double attention_scale(int dim, int heads) {
  const int head_dim = dim / heads;
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

// Converts every 4-d parameter and buffer of `module` to channels_last in place, so that
// cuDNN/oneDNN pick NHWC kernels without a conversion per step.
void to_channels_last(torch::nn::Module& module);

// A new Linear(in, out) head with PyTorch's default init, on the device and dtype of `like`.
torch::nn::Linear fresh_head(const torch::nn::Linear& like, int out_features);

// timm's resample_abs_pos_embed for one class token: a [1, 1 + G*G, D] position embedding
// resized to `shape` [1, 1 + H*H, D] by bicubic, antialiased interpolation of its grid part (in
// float32, returned in the input's dtype). nullopt when the shapes are not of that form.
std::optional<at::Tensor> resample_pos_embed(const at::Tensor& pos_embed, c10::IntArrayRef shape);

// Throws a ConfigError unless num_classes >= 1 (every reset_head checks it).
void check_num_classes(int num_classes);

}  // namespace shoplens::detail
