// Transformer encoder for the text workload: tokenized examples (input_ids + attention_mask) plus
// metadata fields, a binary (or k-class) label. See docs/TEXT_MODEL.md.
//
// Architecture: token + learned position embeddings -> `depth` pre-norm encoder layers
// (x + Attn(LN(x)) with the key padding mask, x + MLP(LN(x)) with GELU) -> final LayerNorm ->
// pooling (masked mean over real tokens, or the first real token) -> concatenated with the
// metadata features -> head MLP (Linear, GELU, dropout, Linear) -> logits.
//
// Masking: padded positions never act as keys, so what sits at them (any token id) cannot change
// the output, and neither can extra padding. A row with no real token at all attends to its first
// position only (softmax over an empty set would be NaN) and pools to zeros (mean) or to its first
// position (cls); its logits then come from the metadata alone, up to that fixed vector.
//
// Metadata: categorical field i has codes 0..categorical_cardinalities[i], 0 meaning missing, and
// an embedding of cardinality + 1 rows (the missing code has its own learned row). Numeric fields
// are taken as given (the caller scales them, e.g. log1p of a length, standardised); a NaN or
// infinite value is missing: it becomes 0 and sets that field's missing indicator (1.0), so the
// head sees 2 * numeric_fields numeric features.
//
// Parameter-name prefixes (stable: checkpoints and gradual unfreezing rely on them): "embed."
// (embed.token, embed.position), "layers.<i>." (norm1, attn.qkv, attn.proj, norm2, mlp.fc1,
// mlp.fc2), "norm.", "meta." (meta.categorical.<i>), "head." (head.fc1, head.fc2).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "shoplens/models/model_options.h"

namespace torch::nn {
class LayerNormImpl;
}  // namespace torch::nn

namespace shoplens {

namespace onnx {
class Graph;
}  // namespace onnx

struct TextEncoderSpec {
  int vocab_size = 8192;
  int max_length = 512;  // position embeddings; longer inputs are a ConfigError
  int dim = 128;
  int depth = 2;
  int heads = 4;  // dim must be a multiple of heads
  double mlp_ratio = 4;
  double dropout = 0.0;                        // attention-output and MLP dropout (and in the head), training only
  TextPooling pooling = TextPooling::kMean;    // masked mean over real tokens, or the first real token
  std::vector<int> categorical_cardinalities;  // one per categorical metadata field, code 0 = missing
  int numeric_fields = 0;                      // numeric metadata, NaN = missing
  int num_classes = 2;
  AttentionKernel attention = AttentionKernel::kAuto;  // see text_attention_uses_fused()
  int meta_embed_dim = 16;                             // width of each categorical field's embedding
};

// Whether `attention` runs LibTorch's scaled-dot-product-attention entry
// point rather than the explicit softmax(QK^T / sqrt(d) + mask) V. On LibTorch 1.13 `auto` is the
// explicit path: 1.13's at::_scaled_dot_product_attention only reaches a fused kernel (flash, CUDA,
// fp16/bf16) with no mask and no input requiring grad; otherwise, and always on CPU, it runs the
// same composite math. From LibTorch 2.0 `auto` is the public at::scaled_dot_product_attention.
bool text_attention_uses_fused(AttentionKernel attention);

// ConfigError naming the field for an invalid spec (also thrown by the constructor).
void validate_text_encoder_spec(const TextEncoderSpec& spec);

namespace detail {
class OnnxEmitter;
class TextEmbedding;
class TextEncoderLayer;
class TextMetadata;
class TextHead;
}  // namespace detail

class TextEncoderNet : public torch::nn::Module {
 public:
  // Fresh weights (trunc normal 0.02 for Linear and Embedding weights, zero biases, LayerNorm 1/0),
  // seeded by the global torch generator.
  explicit TextEncoderNet(TextEncoderSpec spec);

  // input_ids int64 [B, L] (L <= max_length), attention_mask bool [B, L] (true = real token;
  // another dtype counts nonzero as real), categorical int64 [B, C] codes (0 = missing) or
  // undefined when C = 0, numeric float [B, N] with NaN = missing, or undefined when N = 0.
  // Returns logits [B, num_classes]. ConfigError when L > max_length, DataError on shapes, token
  // ids or categorical codes out of range (naming the field).
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& categorical,
                     const at::Tensor& numeric);

  // The eval-mode forward as ONNX nodes: inputs input_ids and attention_mask (int64 [batch,
  // length]), categorical / numeric when the model has such fields, output "logits".
  void emit_onnx(onnx::Graph& graph);

  // Input side first: "embed.", "layers.0.", ..., "norm.". "meta." and "head." are not stages:
  // they train with the head.
  std::vector<std::string> stage_prefixes() const;
  std::string head_prefix() const { return "head."; }
  // A freshly initialised head (both of its layers) for `num_classes` outputs.
  void reset_head(int num_classes);
  int num_classes() const { return spec_.num_classes; }
  const TextEncoderSpec& spec() const { return spec_; }
  bool uses_fused_attention() const { return fused_; }

 private:
  std::string emit_metadata(detail::OnnxEmitter& emitter, const std::string& pooled);
  TextEncoderSpec spec_;
  bool fused_ = false;
  std::shared_ptr<detail::TextEmbedding> embed_;
  std::vector<std::shared_ptr<detail::TextEncoderLayer>> layers_;
  std::shared_ptr<torch::nn::LayerNormImpl> norm_;
  std::shared_ptr<detail::TextMetadata> meta_;
  std::shared_ptr<detail::TextHead> head_;
};

}  // namespace shoplens
