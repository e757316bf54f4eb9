// Transformer encoder for tokenized text plus metadata (see text_encoder.h for the contract and
// docs/TEXT.md, "Model", for the choices). Style follows vit_torch.cpp: pre-norm blocks, fused qkv.
#include "shoplens/models/text_encoder.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "models_internal.h"
#include "onnx_emit.h"
#include "shoplens/core/errors.h"
#include "torch_compat.h"

namespace shoplens {
namespace detail {
namespace {

namespace nn = torch::nn;

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-6;

// timm's trunc_normal_(std=0.02, a=-2, b=2): the cut-off is absolute, 100 stds out, so a clamped
// normal draw is the same distribution (see vit_torch.cpp).
void trunc_normal_(const at::Tensor& t) { t.normal_(0.0, kInitStd).clamp_(-2.0, 2.0); }

void init_linear(nn::LinearImpl& linear) {
  torch::NoGradGuard no_grad;
  trunc_normal_(linear.weight);
  if (linear.bias.defined()) linear.bias.zero_();
}

void init_embedding(nn::EmbeddingImpl& embedding) {
  torch::NoGradGuard no_grad;
  trunc_normal_(embedding.weight);
}

nn::LayerNorm layer_norm(int dim) { return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kLayerNormEps)); }

}  // namespace

class TextEmbedding : public nn::Module {
 public:
  TextEmbedding(int vocab_size, int max_length, int dim) {
    token = register_module("token", nn::Embedding(vocab_size, dim));
    position = register_module("position", nn::Embedding(max_length, dim));
    init_embedding(*token);
    init_embedding(*position);
  }
  // [B, L] -> [B, L, D]
  at::Tensor forward(const at::Tensor& ids) {
    return token->forward(ids) + position->weight.slice(0, 0, ids.size(1)).unsqueeze(0);
  }
  nn::Embedding token{nullptr}, position{nullptr};
};

class TextSelfAttention : public nn::Module {
 public:
  TextSelfAttention(int dim, int heads, double dropout, bool fused)
      : heads_(heads), scale_(detail::attention_scale(dim, heads)), fused_(fused) {
    qkv = register_module("qkv", nn::Linear(dim, dim * 3));
    proj = register_module("proj", nn::Linear(dim, dim));
    drop = register_module("drop", nn::Dropout(dropout));
  }

  // x [B, L, D]; attend bool [B, 1, 1, L], true where a key may be attended (every row has one);
  // bias: the same as 0 / -inf in x's dtype, for the explicit path.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& attend, const at::Tensor& bias) {
    const auto b = x.size(0), n = x.size(1), c = x.size(2);
    auto qkv_out = qkv->forward(x).reshape({b, n, 3, heads_, c / heads_}).permute({2, 0, 3, 1, 4});
    auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
    at::Tensor out;
    if (fused_) {
      // Dropout on the attention weights stays 0: 1.13's math path applies it even in eval mode.
      out = compat::scaled_dot_product_attention(q, k, v, attend);
    } else {
      // 1.13's composite, operation for operation (scale q, QK^T, add the mask in place), but with
      // the mask converted once per forward instead of once per layer. An in-place add costs
      // nothing in backward, unlike masked_fill (one more [B, H, L, L] pass each way).
      auto scores = torch::matmul(q * scale_, k.transpose(-2, -1));
      scores.add_(bias);
      out = torch::matmul(scores.softmax(-1), v);
    }
    return drop->forward(proj->forward(out.transpose(1, 2).reshape({b, n, c})));
  }

  nn::Linear qkv{nullptr}, proj{nullptr};
  nn::Dropout drop{nullptr};

 private:
  int64_t heads_;
  double scale_;
  bool fused_;
};

class TextMlp : public nn::Module {
 public:
  TextMlp(int dim, int hidden, double dropout) {
    fc1 = register_module("fc1", nn::Linear(dim, hidden));
    fc2 = register_module("fc2", nn::Linear(hidden, dim));
    drop = register_module("drop", nn::Dropout(dropout));
  }
  at::Tensor forward(const at::Tensor& x) {
    return drop->forward(fc2->forward(drop->forward(torch::gelu(fc1->forward(x)))));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::Dropout drop{nullptr};
};

class TextEncoderLayer : public nn::Module {
 public:
  TextEncoderLayer(int dim, int heads, int hidden, double dropout, bool fused) {
    norm1 = register_module("norm1", layer_norm(dim));
    attn = register_module("attn", std::make_shared<TextSelfAttention>(dim, heads, dropout, fused));
    norm2 = register_module("norm2", layer_norm(dim));
    mlp = register_module("mlp", std::make_shared<TextMlp>(dim, hidden, dropout));
  }
  at::Tensor forward(at::Tensor x, const at::Tensor& attend, const at::Tensor& bias) {
    x = x + attn->forward(norm1->forward(x), attend, bias);
    return x + mlp->forward(norm2->forward(x));
  }
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  std::shared_ptr<TextSelfAttention> attn;
  std::shared_ptr<TextMlp> mlp;
};

class TextMetadata : public nn::Module {
 public:
  TextMetadata(const std::vector<int>& cardinalities, int numeric_fields, int embed_dim)
      : cardinalities_(cardinalities), numeric_fields_(numeric_fields), embed_dim_(embed_dim) {
    categorical = register_module("categorical", nn::ModuleList());
    for (int card : cardinalities) {
      auto embedding = nn::Embedding(card + 1, embed_dim);  // row 0: missing
      init_embedding(*embedding);
      categorical->push_back(embedding);
    }
  }

  int64_t out_features() const {
    return static_cast<int64_t>(cardinalities_.size()) * embed_dim_ + 2 * static_cast<int64_t>(numeric_fields_);
  }

  // Features [B, out_features()] in `dtype`; the inputs are already validated.
  at::Tensor forward(const at::Tensor& codes, const at::Tensor& numeric, c10::ScalarType dtype) {
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < cardinalities_.size(); ++i)
      parts.push_back(categorical[i]->as<nn::Embedding>()->forward(codes.select(1, static_cast<int64_t>(i))));
    if (numeric_fields_ > 0) {
      auto values = numeric.to(dtype);
      auto missing = torch::isfinite(values).logical_not();
      parts.push_back(values.masked_fill(missing, 0.0));
      parts.push_back(missing.to(dtype));
    }
    return torch::cat(parts, 1);
  }

  nn::ModuleList categorical{nullptr};

 private:
  std::vector<int> cardinalities_;
  int numeric_fields_;
  int embed_dim_;
};

class TextHead : public nn::Module {
 public:
  TextHead(int64_t in_features, int hidden, int num_classes, double dropout) {
    fc1 = register_module("fc1", nn::Linear(in_features, hidden));
    drop = register_module("drop", nn::Dropout(dropout));
    fc2 = register_module("fc2", nn::Linear(hidden, num_classes));
    init_linear(*fc1);
    init_linear(*fc2);
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(drop->forward(torch::gelu(fc1->forward(x)))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::Dropout drop{nullptr};
};

}  // namespace detail

bool text_attention_uses_fused(AttentionKernel attention) {
  switch (attention) {
    case AttentionKernel::kFused:
      return true;
    case AttentionKernel::kMath:
      return false;
    case AttentionKernel::kAuto:
      break;
  }
  return compat::kFusedAttentionIsDefault;
}

void validate_text_encoder_spec(const TextEncoderSpec& s) {
  auto fail = [](const std::string& what) { throw ConfigError("text encoder: " + what); };
  if (s.vocab_size < 1) fail(fmt::format("vocab_size must be >= 1, got {}", s.vocab_size));
  if (s.max_length < 1) fail(fmt::format("max_length must be >= 1, got {}", s.max_length));
  if (s.dim < 1 || s.heads < 1 || s.dim % s.heads != 0)
    fail(fmt::format("dim ({}) must be a positive multiple of heads ({})", s.dim, s.heads));
  if (s.depth < 1) fail(fmt::format("depth must be >= 1, got {}", s.depth));
  if (!(s.mlp_ratio > 0) || static_cast<int>(std::lround(s.dim * s.mlp_ratio)) < 1)
    fail(fmt::format("mlp_ratio must be > 0, got {}", s.mlp_ratio));
  if (!(s.dropout >= 0.0 && s.dropout < 1.0)) fail(fmt::format("dropout must be in [0, 1), got {}", s.dropout));
  for (size_t i = 0; i < s.categorical_cardinalities.size(); ++i)
    if (s.categorical_cardinalities[i] < 1)
      fail(fmt::format("categorical field {} has cardinality {}, must be >= 1", i, s.categorical_cardinalities[i]));
  if (s.numeric_fields < 0) fail(fmt::format("numeric_fields must be >= 0, got {}", s.numeric_fields));
  if (s.num_classes < 1) fail(fmt::format("num_classes must be >= 1, got {}", s.num_classes));
  if (s.meta_embed_dim < 1) fail(fmt::format("meta_embed_dim must be >= 1, got {}", s.meta_embed_dim));
}

TextEncoderNet::TextEncoderNet(TextEncoderSpec spec) : spec_(std::move(spec)) {
  validate_text_encoder_spec(spec_);
  fused_ = text_attention_uses_fused(spec_.attention);
  const int hidden = static_cast<int>(std::lround(spec_.dim * spec_.mlp_ratio));
  embed_ =
      register_module("embed", std::make_shared<detail::TextEmbedding>(spec_.vocab_size, spec_.max_length, spec_.dim));
  auto layers = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < spec_.depth; ++i) {
    auto layer = std::make_shared<detail::TextEncoderLayer>(spec_.dim, spec_.heads, hidden, spec_.dropout, fused_);
    for (auto& m : layer->modules())
      if (auto* linear = m->as<torch::nn::Linear>()) detail::init_linear(*linear);
    layers->push_back(layer);
    layers_.push_back(layer);
  }
  norm_ = register_module("norm", detail::layer_norm(spec_.dim));
  meta_ = register_module("meta", std::make_shared<detail::TextMetadata>(spec_.categorical_cardinalities,
                                                                         spec_.numeric_fields, spec_.meta_embed_dim));
  head_ = register_module("head", std::make_shared<detail::TextHead>(spec_.dim + meta_->out_features(), spec_.dim,
                                                                     spec_.num_classes, spec_.dropout));
}

namespace {

std::string shape_of(const at::Tensor& t) { return t.defined() ? c10::str(t.sizes()) : "an undefined tensor"; }

// The inputs' shapes against the spec; DataError or ConfigError naming the input.
void check_shapes(const TextEncoderSpec& spec, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                  const at::Tensor& categorical, const at::Tensor& numeric) {
  if (!input_ids.defined() || input_ids.dim() != 2 || input_ids.size(1) < 1)
    throw DataError("input_ids must be [batch, length] with length >= 1, got " + shape_of(input_ids));
  const int64_t b = input_ids.size(0), len = input_ids.size(1);
  if (len > spec.max_length)
    throw ConfigError(
        fmt::format("input length {} exceeds the text encoder's max_length {} (its position "
                    "embeddings); truncate the inputs or build the model with a larger max_length",
                    len, spec.max_length));
  if (!attention_mask.defined() || attention_mask.sizes() != input_ids.sizes())
    throw DataError("attention_mask must have the shape of input_ids " + c10::str(input_ids.sizes()) + ", got " +
                    shape_of(attention_mask));
  auto check_meta = [&](const at::Tensor& t, int64_t count, const char* name) {
    if (count == 0 && (!t.defined() || t.numel() == 0)) return;
    if (!t.defined() || t.dim() != 2 || t.size(0) != b || t.size(1) != count)
      throw DataError(fmt::format("{} must be [{}, {}], got {}", name, b, count, shape_of(t)));
  };
  check_meta(categorical, static_cast<int64_t>(spec.categorical_cardinalities.size()), "categorical");
  check_meta(numeric, spec.numeric_fields, "numeric");
}

// Token ids within the vocabulary and category codes within their fields (0 = missing): one host
// sync for every check, the details only on failure.
void check_ranges(const TextEncoderSpec& spec, const at::Tensor& ids, const at::Tensor& codes) {
  const auto fields = static_cast<int64_t>(spec.categorical_cardinalities.size());
  auto bad = (ids.lt(0) | ids.ge(spec.vocab_size)).any();
  if (fields > 0) {
    const auto limits = torch::tensor(std::vector<int64_t>(spec.categorical_cardinalities.begin(),
                                                           spec.categorical_cardinalities.end()))
                            .to(codes.device());
    bad = bad | (codes.lt(0) | codes.gt(limits.unsqueeze(0))).any();
  }
  if (!bad.item<bool>()) return;
  const auto lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= spec.vocab_size)
    throw DataError(
        fmt::format("token ids must be in [0, {}) (vocab_size), found {}", spec.vocab_size, lo < 0 ? lo : hi));
  for (int64_t i = 0; i < fields; ++i) {
    auto col = codes.select(1, i);
    const auto clo = col.min().item<int64_t>(), chi = col.max().item<int64_t>();
    const int card = spec.categorical_cardinalities[static_cast<size_t>(i)];
    if (clo < 0 || chi > card)
      throw DataError(
          fmt::format("categorical field {} has code {}, outside [0, {}] (0 = missing)", i, clo < 0 ? clo : chi, card));
  }
}

// What each position attends to, [B, 1, 1, L]: the real tokens. A row without a real token attends
// to its first position, so no softmax row is empty (NaN).
at::Tensor attention_of(const at::Tensor& real) {
  auto empty_row = real.any(1).logical_not();
  auto first = torch::zeros_like(real);
  first.select(1, 0).fill_(true);
  return (real | (first & empty_row.unsqueeze(1))).view({real.size(0), 1, 1, real.size(1)});
}

// One vector per row: the first real token's ("cls") or the mean of the real tokens'.
at::Tensor pool(TextPooling pooling, const at::Tensor& x, const at::Tensor& real) {
  if (pooling == TextPooling::kCls) {
    // The first real token (position 0 with right padding); argmax returns the first maximum.
    auto index = real.to(torch::kInt).argmax(1);
    return x.index({torch::arange(x.size(0), index.options()), index});
  }
  auto weights = real.unsqueeze(-1).to(x.scalar_type());
  return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0);
}

}  // namespace

at::Tensor TextEncoderNet::forward(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                   const at::Tensor& categorical, const at::Tensor& numeric) {
  check_shapes(spec_, input_ids, attention_mask, categorical, numeric);
  const auto ids = input_ids.to(torch::kLong);
  const auto codes = spec_.categorical_cardinalities.empty() ? at::Tensor() : categorical.to(torch::kLong);
  check_ranges(spec_, ids, codes);

  const auto real = attention_mask.scalar_type() == torch::kBool ? attention_mask : attention_mask.ne(0);
  const auto attend = attention_of(real);
  auto x = embed_->forward(ids);
  at::Tensor bias;
  if (!fused_)
    bias = torch::zeros(attend.sizes(), x.options())
               .masked_fill_(attend.logical_not(), -std::numeric_limits<double>::infinity());
  for (auto& layer : layers_) x = layer->forward(x, attend, bias);
  x = norm_->forward(x);

  at::Tensor pooled = pool(spec_.pooling, x, real);
  if (meta_->out_features() > 0) pooled = torch::cat({pooled, meta_->forward(codes, numeric, pooled.scalar_type())}, 1);
  return head_->forward(pooled);
}

namespace {

using onnx::attr;
using onnx::DataType;

// The attention bias [B, 1, 1, L] (0 where a key may be attended, -inf elsewhere) from the float
// mask `real` [B, L], with forward()'s rule: a row without a real token attends to position 0.
std::string emit_attention_bias(detail::OnnxEmitter& e, const std::string& real) {
  auto& g = e.g;
  const auto count = g.node("ReduceSum", {real, g.int64s({1})}, {attr("keepdims", 1)});  // [B, 1]
  const auto empty = g.node("Cast", {g.node("Equal", {count, g.scalar(0.0f)})}, {attr("to", 1)});
  const auto first = g.node("Slice", {real, g.int64s({0}), g.int64s({1}), g.int64s({1})});
  const auto rest =
      g.node("Slice", {real, g.int64s({1}), g.int64s({std::numeric_limits<std::int64_t>::max()}), g.int64s({1})});
  const auto attend = g.node("Concat", {g.node("Max", {first, empty}), rest}, {attr("axis", 1)});
  const auto attend_bool = g.node("Cast", {attend}, {attr("to", static_cast<int>(DataType::kBool))});
  const auto bias = g.node("Where", {attend_bool, g.scalar(0.0f), g.scalar(-std::numeric_limits<float>::infinity())});
  return g.node("Unsqueeze", {bias, g.int64s({1, 2})});
}

// [B, L, D] -> [B, D]: the masked mean over real tokens, or the first real token (cls).
std::string emit_pooling(detail::OnnxEmitter& e, const std::string& x, const std::string& real, TextPooling pooling,
                         std::int64_t dim) {
  auto& g = e.g;
  if (pooling == TextPooling::kCls) {
    const auto index = g.node("ArgMax", {real}, {attr("axis", 1), attr("keepdims", 1)});  // first maximum: [B, 1]
    const auto index3 = g.node("Expand", {g.node("Unsqueeze", {index, g.int64s({2})}), g.int64s({1, 1, dim})});
    return g.node("Squeeze", {g.node("GatherElements", {x, index3}, {attr("axis", 1)}), g.int64s({1})});
  }
  const auto weights = g.node("Unsqueeze", {real, g.int64s({-1})});  // [B, L, 1]
  const auto sum = g.node("ReduceSum", {g.node("Mul", {x, weights}), g.int64s({1})}, {attr("keepdims", 0)});
  const auto count = g.node("ReduceSum", {weights, g.int64s({1})}, {attr("keepdims", 0)});
  return g.node("Div", {sum, g.node("Max", {count, g.scalar(1.0f)})});
}

std::string emit_head_mlp(detail::OnnxEmitter& e, const std::string& x, detail::TextHead& head) {
  return e.linear_2d(e.gelu(e.linear_2d(x, *head.fc1, "encoder.head.fc1")), *head.fc2, "encoder.head.fc2");
}

}  // namespace

void TextEncoderNet::emit_onnx(onnx::Graph& g) {
  detail::OnnxEmitter e(g);
  const auto batch = onnx::symbolic("batch"), length = onnx::symbolic("length");
  g.add_input("input_ids", DataType::kInt64, {batch, length});
  g.add_input("attention_mask", DataType::kInt64, {batch, length});
  const auto real =
      g.node("Cast", {g.node("Cast", {"attention_mask"}, {attr("to", static_cast<int>(DataType::kBool))})},
             {attr("to", 1)});  // 1.0 for every nonzero mask entry
  const auto bias = emit_attention_bias(e, real);
  // Token embeddings plus the first L rows of the position table.
  auto x = g.node("Gather", {e.weight("encoder.embed.token.weight", embed_->token->weight), "input_ids"});
  const auto positions = g.node("Slice", {e.weight("encoder.embed.position.weight", embed_->position->weight),
                                          g.int64s({0}), e.dim_of("input_ids", 1), g.int64s({0})});
  x = g.node("Add", {x, positions});
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    auto& layer = *layers_[i];
    const std::string name = "encoder.layers." + std::to_string(i);
    const auto attended = e.self_attention(e.layer_norm(x, *layer.norm1, name + ".norm1"), *layer.attn->qkv,
                                           *layer.attn->proj, spec_.heads, bias, name + ".attn");
    x = g.node("Add", {x, attended});
    const auto hidden =
        e.gelu(e.linear(e.layer_norm(x, *layer.norm2, name + ".norm2"), *layer.mlp->fc1, name + ".mlp.fc1"));
    x = g.node("Add", {x, e.linear(hidden, *layer.mlp->fc2, name + ".mlp.fc2")});
  }
  x = emit_pooling(e, e.layer_norm(x, *norm_, "encoder.norm"), real, spec_.pooling, spec_.dim);
  x = emit_metadata(e, x);
  e.logits_output(emit_head_mlp(e, x, *head_), spec_.num_classes);
}

// Concatenates the metadata features to `pooled`, as TextMetadata::forward: one embedding per
// categorical field, then the numeric values (NaN/inf -> 0) and their missing indicators.
std::string TextEncoderNet::emit_metadata(detail::OnnxEmitter& e, const std::string& pooled) {
  auto& g = e.g;
  const auto batch = onnx::symbolic("batch");
  std::vector<std::string> parts = {pooled};
  const auto fields = static_cast<std::int64_t>(spec_.categorical_cardinalities.size());
  if (fields > 0) g.add_input("categorical", DataType::kInt64, {batch, onnx::fixed(fields)});
  for (std::int64_t i = 0; i < fields; ++i) {
    const auto codes = g.node("Gather", {"categorical", g.add_int64s("field", {}, {i})}, {attr("axis", 1)});
    const auto table = meta_->categorical[static_cast<std::size_t>(i)]->as<torch::nn::Embedding>()->weight;
    parts.push_back(
        g.node("Gather", {e.weight("encoder.meta.categorical." + std::to_string(i) + ".weight", table), codes}));
  }
  if (spec_.numeric_fields > 0) {
    g.add_input("numeric", DataType::kFloat, {batch, onnx::fixed(spec_.numeric_fields)});
    const auto missing = g.node("Or", {g.node("IsNaN", {"numeric"}), g.node("IsInf", {"numeric"})});
    parts.push_back(g.node("Where", {missing, g.scalar(0.0f), "numeric"}));
    parts.push_back(g.node("Cast", {missing}, {attr("to", 1)}));
  }
  return parts.size() == 1 ? pooled : g.node("Concat", parts, {attr("axis", 1)});
}

std::vector<std::string> TextEncoderNet::stage_prefixes() const {
  std::vector<std::string> stages = {"embed."};
  for (int i = 0; i < spec_.depth; ++i) stages.push_back("layers." + std::to_string(i) + ".");
  stages.push_back("norm.");
  return stages;
}

void TextEncoderNet::reset_head(int num_classes) {
  if (num_classes < 1) throw ConfigError(fmt::format("num_classes must be >= 1, got {}", num_classes));
  auto head =
      std::make_shared<detail::TextHead>(head_->fc1->options.in_features(), spec_.dim, num_classes, spec_.dropout);
  const auto& like = head_->fc1->weight;
  head->to(like.device(), like.scalar_type());
  if (!is_training()) head->eval();
  head_ = replace_module("head", head);
  spec_.num_classes = num_classes;
}

}  // namespace shoplens
