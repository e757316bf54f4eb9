// The text encoder behind the Classifier interface: what the trainer, the batch finder and the
// benchmarks call, so they train text exactly as they train images.
#include <torch/torch.h>

#include "models_internal.h"
#include "shoplens/core/errors.h"
#include "shoplens/models/text_encoder.h"

namespace shoplens::detail {
namespace {

class TextClassifier : public Classifier {
 public:
  TextClassifier(const ModelSpec& spec, int dim, int depth, int heads) : Classifier(spec) {
    TextEncoderSpec t;
    t.vocab_size = spec.vocab_size;
    t.max_length = spec.max_length;
    t.dim = dim;
    t.depth = depth;
    t.heads = heads;
    t.dropout = spec.dropout;
    t.pooling = spec.pooling;
    t.categorical_cardinalities = spec.categorical_cardinalities;
    t.numeric_fields = spec.numeric_fields;
    t.num_classes = spec.num_classes;
    t.attention = spec.attention;
    net_ = register_module("encoder", std::make_shared<TextEncoderNet>(t));
  }

  at::Tensor forward(const at::Tensor&) override {
    throw Error(spec_.name + " is a text model: it reads token batches (input_ids, attention_mask), not images");
  }

  at::Tensor forward_batch(const Batch& b, const c10::Device& device) override {
    if (!b.input_ids.defined())
      throw DataError(spec_.name + " is a text model but the batch holds no tokens (an image dataset?)");
    auto move = [&](const at::Tensor& t) { return t.defined() ? t.to(device, /*non_blocking=*/true) : t; };
    return net_->forward(move(b.input_ids), move(b.attention_mask), move(b.meta_categorical), move(b.meta_numeric));
  }

  Batch example_batch(int batch_size) const override {
    Batch b;
    const std::int64_t n = batch_size, length = spec_.max_length;
    b.input_ids = torch::randint(2, std::max(3, spec_.vocab_size), {n, length}, torch::kLong);
    b.attention_mask = torch::ones({n, length}, torch::kBool);
    b.lengths = torch::full({n}, length, torch::kLong);
    const auto fields = static_cast<std::int64_t>(spec_.categorical_cardinalities.size());
    if (fields > 0) {
      b.meta_categorical = torch::empty({n, fields}, torch::kLong);
      for (std::int64_t f = 0; f < fields; ++f)
        b.meta_categorical.select(1, f).random_(0, spec_.categorical_cardinalities[f] + 1);  // 0 = missing
    }
    if (spec_.numeric_fields > 0) b.meta_numeric = torch::randn({n, spec_.numeric_fields});
    b.labels = torch::randint(0, spec_.num_classes, {n}, torch::kLong);
    return b;
  }

  void emit_onnx(onnx::Graph& graph) override { net_->emit_onnx(graph); }

  std::string head_prefix() const override { return "encoder." + net_->head_prefix(); }
  std::vector<std::string> stage_prefixes() const override {
    std::vector<std::string> out;
    for (const auto& p : net_->stage_prefixes()) out.push_back("encoder." + p);
    // The metadata embeddings feed the head directly: the stage nearest the output.
    out.push_back("encoder.meta.");
    return out;
  }
  void reset_head(int num_classes) override {
    check_num_classes(num_classes);
    net_->reset_head(num_classes);
    spec_.num_classes = num_classes;
  }
  int num_classes() const override { return spec_.num_classes; }

 private:
  std::shared_ptr<TextEncoderNet> net_;
};

}  // namespace

std::shared_ptr<Classifier> make_text_encoder(const ModelSpec& spec, int dim, int depth, int heads) {
  if (spec.vocab_size < 3)
    throw ConfigError(spec.name +
                      " needs the dataset's vocabulary (text.vocab_size, resolved from text_dataset.json); got " +
                      std::to_string(spec.vocab_size));
  return std::make_shared<TextClassifier>(spec, dim, depth, heads);
}

}  // namespace shoplens::detail
