// Vision Transformer (patch 16, class-token pooling) with timm's VisionTransformer parameter
// names and initialisation, so timm state dicts load unchanged. channels_last does not apply:
// the only convolution is the patch embedding, and the blocks work on [B, N, D] tokens.
#include <cmath>

#include <torch/torch.h>

#include "models_internal.h"
#include "onnx_emit.h"
#include "shoplens/core/errors.h"

namespace shoplens::detail {
namespace {

namespace nn = torch::nn;

constexpr int kPatch = 16;
constexpr int kDepth = 12;
constexpr int kMlpRatio = 4;
constexpr double kLayerNormEps = 1e-6;

// timm's trunc_normal_(t, mean, std, a=-2, b=2). The cut-off is absolute, not in stds: for std
// 0.02 it sits 100 stds out, where a plain normal never reaches, so that case samples normal_
// directly (erfinv_, the inverse-CDF route timm takes, costs ~4 s for ViT-B on one core).
void trunc_normal_(const at::Tensor& t, double mean, double std, double a = -2.0, double b = 2.0) {
  if ((b - mean) / std >= 8.0 && (mean - a) / std >= 8.0) {
    t.normal_(mean, std).clamp_(a, b);
    return;
  }
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = cdf((a - mean) / std), hi = cdf((b - mean) / std);
  t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * std::sqrt(2.0)).add_(mean).clamp_(a, b);
}

nn::LayerNorm layer_norm(int dim) { return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kLayerNormEps)); }

class PatchEmbed : public nn::Module {
 public:
  explicit PatchEmbed(int dim) {
    proj = register_module("proj", nn::Conv2d(nn::Conv2dOptions(3, dim, kPatch).stride(kPatch)));
  }
  // [B, 3, H, W] -> [B, N, D]
  at::Tensor forward(const at::Tensor& x) { return proj->forward(x).flatten(2).transpose(1, 2); }
  nn::Conv2d proj{nullptr};
};

class Attention : public nn::Module {
 public:
  Attention(int dim, int heads) : heads_(heads), scale_(detail::attention_scale(dim, heads)) {
    qkv = register_module("qkv", nn::Linear(dim, dim * 3));
    proj = register_module("proj", nn::Linear(dim, dim));
  }
  at::Tensor forward(const at::Tensor& x) {
    const auto b = x.size(0), n = x.size(1), c = x.size(2);
    auto qkv_out = qkv->forward(x).reshape({b, n, 3, heads_, c / heads_}).permute({2, 0, 3, 1, 4});
    auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
    auto attn = torch::matmul(q * scale_, k.transpose(-2, -1)).softmax(-1);
    auto out = torch::matmul(attn, v).transpose(1, 2).reshape({b, n, c});
    return proj->forward(out);
  }
  nn::Linear qkv{nullptr}, proj{nullptr};

 private:
  int64_t heads_;
  double scale_;
};

class Mlp : public nn::Module {
 public:
  explicit Mlp(int dim) {
    fc1 = register_module("fc1", nn::Linear(dim, dim * kMlpRatio));
    fc2 = register_module("fc2", nn::Linear(dim * kMlpRatio, dim));
  }
  // Exact (erf) GELU, as nn.GELU() in timm.
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::gelu(fc1->forward(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};

// timm's drop_path: in training, each sample's residual branch is zeroed with probability
// `rate` and the kept ones scaled by 1 / (1 - rate); in evaluation (or at rate 0) the identity.
at::Tensor drop_path(const at::Tensor& branch, double rate, bool training) {
  if (rate <= 0.0 || !training) return branch;
  const double keep = 1.0 - rate;
  std::vector<int64_t> shape(branch.dim(), 1);
  shape[0] = branch.size(0);
  auto mask = torch::empty(shape, branch.options()).bernoulli_(keep);
  if (keep > 0.0) mask.div_(keep);
  return branch * mask;
}

class Block : public nn::Module {
 public:
  Block(int dim, int heads, double drop_path_rate) : drop_path_rate_(drop_path_rate) {
    norm1 = register_module("norm1", layer_norm(dim));
    attn = register_module("attn", std::make_shared<Attention>(dim, heads));
    norm2 = register_module("norm2", layer_norm(dim));
    mlp = register_module("mlp", std::make_shared<Mlp>(dim));
  }
  at::Tensor forward(at::Tensor x) {
    x = x + drop_path(attn->forward(norm1->forward(x)), drop_path_rate_, is_training());
    return x + drop_path(mlp->forward(norm2->forward(x)), drop_path_rate_, is_training());
  }
  std::string emit_onnx(OnnxEmitter& e, std::string x, const std::string& name, std::int64_t heads) {
    const auto attended =
        e.self_attention(e.layer_norm(x, *norm1, name + ".norm1"), *attn->qkv, *attn->proj, heads, "", name + ".attn");
    x = e.g.node("Add", {x, attended});
    const auto hidden = e.gelu(e.linear(e.layer_norm(x, *norm2, name + ".norm2"), *mlp->fc1, name + ".mlp.fc1"));
    return e.g.node("Add", {x, e.linear(hidden, *mlp->fc2, name + ".mlp.fc2")});
  }
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  std::shared_ptr<Attention> attn;
  std::shared_ptr<Mlp> mlp;

 private:
  double drop_path_rate_;
};

class VisionTransformer : public Classifier {
 public:
  VisionTransformer(const ModelSpec& spec, int dim, int heads)
      : Classifier(spec), grid_(spec.image_size / kPatch), heads_(heads) {
    patch_embed_ = register_module("patch_embed", std::make_shared<PatchEmbed>(dim));
    cls_token_ = register_parameter("cls_token", torch::zeros({1, 1, dim}));
    pos_embed_ = register_parameter("pos_embed", torch::zeros({1, 1 + grid_ * grid_, dim}));
    blocks_ = register_module("blocks", nn::ModuleList());
    // Stochastic depth rises linearly over depth, 0 at the first block to model.drop_path at the
    // last, as timm's drop_path_rate does.
    for (int i = 0; i < kDepth; ++i)
      blocks_->push_back(std::make_shared<Block>(dim, heads, spec.drop_path * i / (kDepth - 1)));
    norm_ = register_module("norm", layer_norm(dim));
    head_drop_ = register_module("head_drop", nn::Dropout(spec.dropout));
    head_ = register_module("head", nn::Linear(dim, spec.num_classes));
    init_weights();
  }

  at::Tensor forward(const at::Tensor& images) override {
    if (images.dim() != 4 || images.size(2) != grid_ * kPatch || images.size(3) != grid_ * kPatch)
      throw ConfigError(spec_.name + " was built for " + std::to_string(grid_ * kPatch) + "x" +
                        std::to_string(grid_ * kPatch) + " images (model.image_size), got input of shape " +
                        c10::str(images.sizes()));
    auto x = patch_embed_->forward(images);
    x = torch::cat({cls_token_.expand({x.size(0), -1, -1}), x}, 1) + pos_embed_;
    for (auto& block : *blocks_) x = block->as<Block>()->forward(x);
    x = norm_->forward(x).select(1, 0);  // class-token pooling
    return head_->forward(head_drop_->forward(x));
  }

  void emit_onnx(onnx::Graph& graph) override {
    OnnxEmitter e(graph);
    const auto images = e.image_input(spec_.image_size);
    auto x = e.conv(images, *patch_embed_->proj, "patch_embed.proj", kPatch, 0);                 // [B, D, G, G]
    x = graph.node("Reshape", {x, graph.int64s({0, 0, -1})});                                    // [B, D, N]
    x = graph.node("Transpose", {x}, {onnx::attr("perm", std::vector<std::int64_t>{0, 2, 1})});  // [B, N, D]
    // The class token, repeated over the batch: Expand to [B, 1, D].
    const auto cls_shape =
        graph.node("Concat", {e.dim_of(images, 0), graph.int64s({1, cls_token_.size(2)})}, {onnx::attr("axis", 0)});
    const auto cls = graph.node("Expand", {e.weight("cls_token", cls_token_), cls_shape});
    x = graph.node("Concat", {cls, x}, {onnx::attr("axis", 1)});
    x = graph.node("Add", {x, e.weight("pos_embed", pos_embed_)});
    for (std::size_t i = 0; i < blocks_->size(); ++i)
      x = blocks_->ptr(i)->as<Block>()->emit_onnx(e, x, "blocks." + std::to_string(i), heads_);
    x = graph.node("Gather", {e.layer_norm(x, *norm_, "norm"), graph.add_int64s("cls_index", {}, {0})},
                   {onnx::attr("axis", 1)});  // class-token pooling
    e.logits_output(e.linear_2d(x, *head_, "head"), num_classes());
  }

  std::string head_prefix() const override { return "head."; }

  std::vector<std::string> stage_prefixes() const override {
    std::vector<std::string> stages = {"patch_embed.", "cls_token", "pos_embed"};
    for (int i = 0; i < kDepth; ++i) stages.push_back("blocks." + std::to_string(i) + ".");
    stages.push_back("norm.");
    return stages;
  }

  void reset_head(int num_classes) override {
    check_num_classes(num_classes);
    auto head = fresh_head(head_, num_classes);
    init_linear(*head);
    head_ = replace_module("head", head);
    spec_.num_classes = num_classes;
  }

  int num_classes() const override { return static_cast<int>(head_->options.out_features()); }

 private:
  static void init_linear(nn::LinearImpl& linear) {
    torch::NoGradGuard no_grad;
    trunc_normal_(linear.weight, 0.0, 0.02);
    nn::init::zeros_(linear.bias);
  }

  // timm's default ('') scheme: trunc normal 0.02 for pos_embed and every Linear (zero bias),
  // cls_token N(0, 1e-6), LayerNorm 1/0; the patch conv keeps PyTorch's default.
  void init_weights() {
    torch::NoGradGuard no_grad;
    trunc_normal_(pos_embed_, 0.0, 0.02);
    nn::init::normal_(cls_token_, 0.0, 1e-6);
    for (auto& m : modules(/*include_self=*/false))
      if (auto* linear = m->as<nn::Linear>()) init_linear(*linear);
  }

  int64_t grid_;
  int64_t heads_;
  std::shared_ptr<PatchEmbed> patch_embed_;
  at::Tensor cls_token_, pos_embed_;
  nn::ModuleList blocks_{nullptr};
  nn::LayerNorm norm_{nullptr};
  nn::Dropout head_drop_{nullptr};
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_vit(const ModelSpec& spec, int width, int heads) {
  return std::make_shared<VisionTransformer>(spec, width, heads);
}

}  // namespace shoplens::detail
