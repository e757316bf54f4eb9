// The small CNN of scripts/bench/difficulty.py, layer for layer and name for name, so weights
// trained by that script load here and the two produce the same logits.
#include <torch/torch.h>

#include "models_internal.h"
#include "onnx_emit.h"

namespace shoplens::detail {
namespace {

class SmallCnn : public Classifier {
 public:
  explicit SmallCnn(const ModelSpec& spec) : Classifier(spec) {
    torch::nn::Sequential features;
    int cin = 3;
    for (int cout : {32, 64, 128, 256}) {
      // Conv, BN, ReLU, MaxPool each take a Sequential index, as in nn.Sequential: features.0,
      // features.1, ... so the parameter names match the Python model's.
      features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(cin, cout, 3).padding(1).bias(false)));
      features->push_back(torch::nn::BatchNorm2d(cout));
      features->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
      features->push_back(torch::nn::MaxPool2d(2));
      cin = cout;
    }
    features_ = register_module("features", features);
    dropout_ = register_module("dropout", torch::nn::Dropout(spec.dropout));
    head_ = register_module("head", torch::nn::Linear(cin, spec.num_classes));
    if (spec.channels_last) to_channels_last(*this);
  }

  at::Tensor forward(const at::Tensor& images) override {
    auto x = spec_.channels_last ? images.contiguous(at::MemoryFormat::ChannelsLast) : images;
    x = features_->forward(x).mean({2, 3});
    return head_->forward(dropout_->forward(x));
  }

  void emit_onnx(onnx::Graph& graph) override {
    OnnxEmitter e(graph);
    auto x = e.image_input(spec_.image_size);
    for (std::size_t i = 0; i < features_->size(); i += 4) {  // Conv, BN, ReLU, MaxPool
      const std::string at = "features." + std::to_string(i);
      x = e.conv(x, *features_->ptr(i)->as<torch::nn::Conv2d>(), at, 1, 1);
      x = e.batch_norm(x, *features_->ptr(i + 1)->as<torch::nn::BatchNorm2d>(), "features." + std::to_string(i + 1));
      x = e.max_pool(e.relu(x), 2, 2, 0);
    }
    e.logits_output(e.linear_2d(e.global_avg_pool(x), *head_, "head"), num_classes());
  }

  std::string head_prefix() const override { return "head."; }

  std::vector<std::string> stage_prefixes() const override {
    // One stage per conv block: conv, BN (ReLU and pool have no parameters).
    return {"features.0.", "features.1.", "features.4.",  "features.5.",
            "features.8.", "features.9.", "features.12.", "features.13."};
  }

  void reset_head(int num_classes) override {
    check_num_classes(num_classes);
    head_ = replace_module("head", fresh_head(head_, num_classes));
    spec_.num_classes = num_classes;
  }

  int num_classes() const override { return static_cast<int>(head_->options.out_features()); }

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_small_cnn(const ModelSpec& spec) { return std::make_shared<SmallCnn>(spec); }

}  // namespace shoplens::detail
