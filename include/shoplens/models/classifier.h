// Classifiers chosen by name in the config: image models, whose parameter names follow
// torchvision (ResNet) and timm (ViT) so users' pretrained weights load by name (see weights.h,
// docs/MODELS.md), and text encoders over token shards (docs/TEXT.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "shoplens/core/config.h"
#include "shoplens/data/batch.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {

namespace onnx {
class Graph;
}  // namespace onnx

struct ModelSpec {
  std::string name = "small_cnn";  // small_cnn | resnet18 | resnet34 | resnet50 | vit_tiny | vit_small | vit_base
  int num_classes = 12;
  int image_size = 224;        // ViT position embeddings are sized for it
  double dropout = 0.0;        // before the head
  bool channels_last = false;  // memory format of parameters and inputs (CNNs)
  double drop_path = 0.0;      // stochastic depth of the last residual block (models whose facts allow it)
  // Text models: the dataset's shape (text_dataset.json) and the encoder's options (text.*).
  int vocab_size = 0;
  int max_length = 512;  // longest sequence the model reads (position embeddings)
  std::vector<int>
      categorical_cardinalities;  // vocabulary size per categorical metadata field (code 0 = missing on top)
  int numeric_fields = 0;
  TextPooling pooling = TextPooling::kMean;
  AttentionKernel attention = AttentionKernel::kAuto;
};

class Classifier : public torch::nn::Module {
 public:
  // images: float [B, 3, H, W] normalised; returns logits [B, num_classes]. Text models throw:
  // their input is a whole batch (forward_batch).
  virtual at::Tensor forward(const at::Tensor& images) = 0;
  // Logits [B, num_classes] of a loader batch, its inputs moved to `device` first.
  virtual at::Tensor forward_batch(const Batch& batch, const c10::Device& device);
  // The largest input a training step of `batch_size` can see (images at the spec's size; text at
  // max_length, every token real), with random labels: the batch finder and the benchmarks step on it.
  virtual Batch example_batch(int batch_size) const;
  bool is_text() const { return spec_.vocab_size > 0; }
  // Prefix of the classification head's parameters ("fc." for ResNet, "head." otherwise).
  virtual std::string head_prefix() const = 0;
  // Parameter-name prefixes of the backbone stages from input to output ("conv1.", "bn1.",
  // "layer1.", ...), for gradual unfreezing: stage k unfreezes after the stages above it.
  virtual std::vector<std::string> stage_prefixes() const = 0;
  // Adds this model's eval-mode forward to `graph` as ONNX nodes (shoplens/models/onnx_graph.h):
  // its inputs, its weights as initializers and the output "logits" [batch, classes]. Each model
  // emits itself next to its forward(); one without an emitter throws UsageError.
  virtual void emit_onnx(onnx::Graph& graph);
  // Replaces the head with a freshly initialised one for `num_classes` classes.
  virtual void reset_head(int num_classes) = 0;
  virtual int num_classes() const = 0;
  const ModelSpec& spec() const { return spec_; }

 protected:
  explicit Classifier(ModelSpec spec) : spec_(std::move(spec)) {}
  ModelSpec spec_;
};

// The names in the factory table (tests check it against model_facts.h's table).
std::vector<std::string> registered_model_factories();
// The spec of the configured model (model.*, augment.image_size) for `num_classes` classes.
ModelSpec model_spec_from_config(const Config& config, int num_classes);

// Builds a model with fresh (seeded by the global torch generator) weights. ConfigError for an
// unknown name (with the nearest name) or an invalid spec.
std::shared_ptr<Classifier> make_model(const ModelSpec& spec);

// Bytes the tensors hold (numel x element size, summed): model.parameters(), model.buffers().
std::int64_t tensor_bytes(const std::vector<at::Tensor>& tensors);

}  // namespace shoplens
