// The building blocks the models' ONNX emitters share (Classifier::emit_onnx): each turns one
// torch module, with its weights as initializers named after its parameters, into the ONNX nodes
// that compute what its forward() computes in eval mode. Private to src/models.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "shoplens/models/onnx_graph.h"

namespace shoplens::detail {

class OnnxEmitter {
 public:
  explicit OnnxEmitter(onnx::Graph& graph) : g(graph) {}

  // A float32 initializer holding `t` (any dtype, device or memory format).
  std::string weight(const std::string& name, const at::Tensor& t);

  // The images input [batch, 3, S, S] float32 and the logits output [batch, classes].
  std::string image_input(int image_size);
  void logits_output(const std::string& logits, int num_classes);

  std::string conv(const std::string& x, const torch::nn::Conv2dImpl& conv, const std::string& name, int stride,
                   int padding);
  std::string batch_norm(const std::string& x, const torch::nn::BatchNorm2dImpl& bn, const std::string& name);
  std::string relu(const std::string& x) { return g.node("Relu", {x}); }
  std::string max_pool(const std::string& x, int kernel, int stride, int padding);
  // [B, C, H, W] -> [B, C]: adaptive_avg_pool2d to 1x1 and flatten, or mean over H and W.
  std::string global_avg_pool(const std::string& x);
  // y = x W^T + b: Gemm for [B, in] inputs, MatMul + Add for [..., in].
  std::string linear_2d(const std::string& x, const torch::nn::LinearImpl& linear, const std::string& name);
  std::string linear(const std::string& x, const torch::nn::LinearImpl& linear, const std::string& name);
  std::string layer_norm(const std::string& x, const torch::nn::LayerNormImpl& norm, const std::string& name);
  // Exact GELU in its erf form: 0.5 x (1 + erf(x / sqrt 2)).
  std::string gelu(const std::string& x);
  // Multi-head self-attention with a fused qkv projection, as in timm: x [B, N, D] -> [B, N, D].
  // `score_bias` ("" for none) is added to the scaled scores [B, H, N, N] before the softmax.
  std::string self_attention(const std::string& x, const torch::nn::LinearImpl& qkv, const torch::nn::LinearImpl& proj,
                             std::int64_t heads, const std::string& score_bias, const std::string& name);
  // x's dimension `axis` as a 1-d int64 tensor of one element.
  std::string dim_of(const std::string& x, std::int64_t axis);

  onnx::Graph& g;
};

}  // namespace shoplens::detail
