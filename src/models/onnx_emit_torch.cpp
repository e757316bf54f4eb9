#include <cmath>

#include <torch/torch.h>

#include "onnx_emit.h"

namespace shoplens::detail {

using onnx::attr;
using onnx::DataType;

std::string OnnxEmitter::weight(const std::string& name, const at::Tensor& t) {
  const at::Tensor c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  std::vector<std::int64_t> dims(c.sizes().begin(), c.sizes().end());
  return g.add_floats(name, dims, c.data_ptr<float>());
}

std::string OnnxEmitter::image_input(int image_size) {
  g.add_input("images", DataType::kFloat,
              {onnx::symbolic("batch"), onnx::fixed(3), onnx::fixed(image_size), onnx::fixed(image_size)});
  return "images";
}

void OnnxEmitter::logits_output(const std::string& logits, int num_classes) {
  g.node("Identity", {logits}, {}, "logits");
  g.add_output("logits", DataType::kFloat, {onnx::symbolic("batch"), onnx::fixed(num_classes)});
}

std::string OnnxEmitter::conv(const std::string& x, const torch::nn::Conv2dImpl& conv, const std::string& name,
                              int stride, int padding) {
  std::vector<std::string> inputs = {x, weight(name + ".weight", conv.weight)};
  if (conv.bias.defined()) inputs.push_back(weight(name + ".bias", conv.bias));
  const std::int64_t k = conv.weight.size(2), p = padding;
  return g.node("Conv", inputs,
                {attr("kernel_shape", std::vector<std::int64_t>{k, conv.weight.size(3)}),
                 attr("strides", std::vector<std::int64_t>{stride, stride}),
                 attr("pads", std::vector<std::int64_t>{p, p, p, p})});
}

std::string OnnxEmitter::batch_norm(const std::string& x, const torch::nn::BatchNorm2dImpl& bn,
                                    const std::string& name) {
  // Kept as its own node (not folded into the conv) so the graph computes in torch's order; ONNX
  // Runtime folds it itself when it optimises the graph.
  return g.node("BatchNormalization",
                {x, weight(name + ".weight", bn.weight), weight(name + ".bias", bn.bias),
                 weight(name + ".running_mean", bn.running_mean), weight(name + ".running_var", bn.running_var)},
                {onnx::attr_f("epsilon", static_cast<float>(bn.options.eps()))});
}

std::string OnnxEmitter::max_pool(const std::string& x, int kernel, int stride, int padding) {
  const std::int64_t k = kernel, s = stride, p = padding;
  return g.node(
      "MaxPool", {x},
      {attr("kernel_shape", std::vector<std::int64_t>{k, k}), attr("strides", std::vector<std::int64_t>{s, s}),
       attr("pads", std::vector<std::int64_t>{p, p, p, p})});
}

std::string OnnxEmitter::global_avg_pool(const std::string& x) {
  return g.node("Flatten", {g.node("GlobalAveragePool", {x})}, {attr("axis", 1)});
}

std::string OnnxEmitter::linear_2d(const std::string& x, const torch::nn::LinearImpl& linear, const std::string& name) {
  std::vector<std::string> inputs = {x, weight(name + ".weight", linear.weight)};
  if (linear.bias.defined()) inputs.push_back(weight(name + ".bias", linear.bias));
  return g.node("Gemm", inputs, {attr("transB", 1)});
}

std::string OnnxEmitter::linear(const std::string& x, const torch::nn::LinearImpl& linear, const std::string& name) {
  // MatMul takes W^T [in, out]: stored transposed once here rather than a Transpose per run.
  auto y = g.node("MatMul", {x, weight(name + ".weight_t", linear.weight.t())});
  return linear.bias.defined() ? g.node("Add", {y, weight(name + ".bias", linear.bias)}) : y;
}

std::string OnnxEmitter::layer_norm(const std::string& x, const torch::nn::LayerNormImpl& norm,
                                    const std::string& name) {
  return g.node("LayerNormalization", {x, weight(name + ".weight", norm.weight), weight(name + ".bias", norm.bias)},
                {attr("axis", -1), onnx::attr_f("epsilon", static_cast<float>(norm.options.eps()))});
}

std::string OnnxEmitter::gelu(const std::string& x) {
  const auto erf = g.node("Erf", {g.node("Mul", {x, g.scalar(static_cast<float>(M_SQRT1_2))})});
  const auto half_x = g.node("Mul", {x, g.scalar(0.5f)});
  return g.node("Mul", {half_x, g.node("Add", {erf, g.scalar(1.0f)})});
}

std::string OnnxEmitter::self_attention(const std::string& x, const torch::nn::LinearImpl& qkv,
                                        const torch::nn::LinearImpl& proj, std::int64_t heads,
                                        const std::string& score_bias, const std::string& name) {
  const std::int64_t dim = proj.weight.size(0), head_dim = dim / heads;
  auto y = linear(x, qkv, name + ".qkv");                                                  // [B, N, 3D]
  y = g.node("Reshape", {y, g.int64s({0, 0, 3, heads, head_dim})});                        // [B, N, 3, H, Dh]
  y = g.node("Transpose", {y}, {attr("perm", std::vector<std::int64_t>{2, 0, 3, 1, 4})});  // [3, B, H, N, Dh]
  auto part = [&](std::int64_t i) { return g.node("Gather", {y, g.add_int64s("index", {}, {i})}, {attr("axis", 0)}); };
  const auto q = g.node("Mul", {part(0), g.scalar(static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))))});
  const auto k_t = g.node("Transpose", {part(1)}, {attr("perm", std::vector<std::int64_t>{0, 1, 3, 2})});
  auto scores = g.node("MatMul", {q, k_t});
  if (!score_bias.empty()) scores = g.node("Add", {scores, score_bias});
  auto out = g.node("MatMul", {g.node("Softmax", {scores}, {attr("axis", -1)}), part(2)});  // [B, H, N, Dh]
  out = g.node("Transpose", {out}, {attr("perm", std::vector<std::int64_t>{0, 2, 1, 3})});
  out = g.node("Reshape", {out, g.int64s({0, 0, dim})});
  return linear(out, proj, name + ".proj");
}

std::string OnnxEmitter::dim_of(const std::string& x, std::int64_t axis) {
  return g.node("Slice", {g.node("Shape", {x}), g.int64s({axis}), g.int64s({axis + 1}), g.int64s({0})});
}

}  // namespace shoplens::detail
