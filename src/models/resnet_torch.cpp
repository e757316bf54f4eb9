// ResNet-18/34/50 as torchvision builds them (v1.5: the stride sits in the bottleneck's 3x3),
// with torchvision's module names and initialisation, so its state dicts load unchanged.
#include <torch/torch.h>

#include "models_internal.h"
#include "onnx_emit.h"

namespace shoplens::detail {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int in, int out, int kernel, int stride, int padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// conv1x1 + BN on the shortcut when the block changes resolution or width (downsample.0/1).
nn::Sequential downsample(int in, int out, int stride) {
  if (stride == 1 && in == out) return nn::Sequential(nullptr);
  return nn::Sequential(conv(in, out, 1, stride, 0), nn::BatchNorm2d(out));
}

// The shortcut's ONNX nodes: x itself, or downsample's 1x1 conv and BN.
std::string emit_shortcut(OnnxEmitter& e, const nn::Sequential& down, const std::string& x, const std::string& name,
                          int stride) {
  if (!down) return x;
  const auto conv_out = e.conv(x, *down->ptr(0)->as<nn::Conv2d>(), name + ".downsample.0", stride, 0);
  return e.batch_norm(conv_out, *down->ptr(1)->as<nn::BatchNorm2d>(), name + ".downsample.1");
}

class BasicBlock : public nn::Module {
 public:
  static constexpr int kExpansion = 1;
  BasicBlock(int in, int planes, int stride) : stride_(stride) {
    conv1 = register_module("conv1", conv(in, planes, 3, stride, 1));
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    down = downsample(in, planes, stride);
    if (down) register_module("downsample", down);
  }
  at::Tensor forward(const at::Tensor& x) {
    auto out = torch::relu(bn1->forward(conv1->forward(x)));
    out = bn2->forward(conv2->forward(out));
    return torch::relu(out + (down ? down->forward(x) : x));
  }
  std::string emit_onnx(OnnxEmitter& e, const std::string& x, const std::string& name) {
    auto out = e.relu(e.batch_norm(e.conv(x, *conv1, name + ".conv1", stride_, 1), *bn1, name + ".bn1"));
    out = e.batch_norm(e.conv(out, *conv2, name + ".conv2", 1, 1), *bn2, name + ".bn2");
    return e.relu(e.g.node("Add", {out, emit_shortcut(e, down, x, name, stride_)}));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential down{nullptr};

 private:
  int stride_ = 1;
};

class Bottleneck : public nn::Module {
 public:
  static constexpr int kExpansion = 4;
  Bottleneck(int in, int planes, int stride) : stride_(stride) {
    conv1 = register_module("conv1", conv(in, planes, 1, 1, 0));
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, 0));
    bn3 = register_module("bn3", nn::BatchNorm2d(planes * kExpansion));
    down = downsample(in, planes * kExpansion, stride);
    if (down) register_module("downsample", down);
  }
  at::Tensor forward(const at::Tensor& x) {
    auto out = torch::relu(bn1->forward(conv1->forward(x)));
    out = torch::relu(bn2->forward(conv2->forward(out)));
    out = bn3->forward(conv3->forward(out));
    return torch::relu(out + (down ? down->forward(x) : x));
  }
  std::string emit_onnx(OnnxEmitter& e, const std::string& x, const std::string& name) {
    auto out = e.relu(e.batch_norm(e.conv(x, *conv1, name + ".conv1", 1, 0), *bn1, name + ".bn1"));
    out = e.relu(e.batch_norm(e.conv(out, *conv2, name + ".conv2", stride_, 1), *bn2, name + ".bn2"));
    out = e.batch_norm(e.conv(out, *conv3, name + ".conv3", 1, 0), *bn3, name + ".bn3");
    return e.relu(e.g.node("Add", {out, emit_shortcut(e, down, x, name, stride_)}));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential down{nullptr};

 private:
  int stride_ = 1;
};

// A stage: `blocks` blocks, the first one strided. Stored in a ModuleList so the names are
// layerN.<i>.conv1 like torchvision's nn.Sequential; forward walks it with the block's type.
template <typename Block>
nn::ModuleList make_layer(int& in, int planes, int blocks, int stride) {
  nn::ModuleList layer;
  for (int i = 0; i < blocks; ++i) {
    layer->push_back(std::make_shared<Block>(in, planes, i == 0 ? stride : 1));
    in = planes * Block::kExpansion;
  }
  return layer;
}

template <typename Block>
class ResNet : public Classifier {
 public:
  ResNet(const ModelSpec& spec, std::array<int, 4> blocks) : Classifier(spec) {
    conv1_ = register_module("conv1", conv(3, 64, 7, 2, 3));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    int in = 64;
    const int planes[4] = {64, 128, 256, 512};
    for (int i = 0; i < 4; ++i)
      layers_[i] =
          register_module("layer" + std::to_string(i + 1), make_layer<Block>(in, planes[i], blocks[i], i == 0 ? 1 : 2));
    dropout_ = register_module("dropout", nn::Dropout(spec.dropout));
    fc_ = register_module("fc", nn::Linear(in, spec.num_classes));
    init_weights();
    if (spec.channels_last) to_channels_last(*this);
  }

  at::Tensor forward(const at::Tensor& images) override {
    auto x = spec_.channels_last ? images.contiguous(at::MemoryFormat::ChannelsLast) : images;
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    x = torch::max_pool2d(x, 3, 2, 1);
    for (auto& layer : layers_)
      for (auto& block : *layer) x = block->as<Block>()->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(dropout_->forward(x));
  }

  void emit_onnx(onnx::Graph& graph) override {
    OnnxEmitter e(graph);
    auto x = e.image_input(spec_.image_size);
    x = e.max_pool(e.relu(e.batch_norm(e.conv(x, *conv1_, "conv1", 2, 3), *bn1_, "bn1")), 3, 2, 1);
    for (std::size_t l = 0; l < layers_.size(); ++l)
      for (std::size_t i = 0; i < layers_[l]->size(); ++i)
        x = layers_[l]->ptr(i)->as<Block>()->emit_onnx(e, x, "layer" + std::to_string(l + 1) + "." + std::to_string(i));
    e.logits_output(e.linear_2d(e.global_avg_pool(x), *fc_, "fc"), num_classes());
  }

  std::string head_prefix() const override { return "fc."; }
  std::vector<std::string> stage_prefixes() const override {
    return {"conv1.", "bn1.", "layer1.", "layer2.", "layer3.", "layer4."};
  }

  void reset_head(int num_classes) override {
    check_num_classes(num_classes);
    fc_ = replace_module("fc", fresh_head(fc_, num_classes));
    spec_.num_classes = num_classes;
  }

  int num_classes() const override { return static_cast<int>(fc_->options.out_features()); }

 private:
  // torchvision: Kaiming normal (fan_out, ReLU) for convolutions, BN weight 1 and bias 0; the
  // fc keeps nn.Linear's default init.
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->template as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* b = m->template as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      }
    }
  }

  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::array<nn::ModuleList, 4> layers_{nn::ModuleList(nullptr), nn::ModuleList(nullptr), nn::ModuleList(nullptr),
                                        nn::ModuleList(nullptr)};
  nn::Dropout dropout_{nullptr};
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_resnet(const ModelSpec& spec, int depth) {
  switch (depth) {
    case 18:
      return std::make_shared<ResNet<BasicBlock>>(spec, std::array<int, 4>{2, 2, 2, 2});
    case 34:
      return std::make_shared<ResNet<BasicBlock>>(spec, std::array<int, 4>{3, 4, 6, 3});
    case 50:
      return std::make_shared<ResNet<Bottleneck>>(spec, std::array<int, 4>{3, 4, 6, 3});
    default:
      throw std::invalid_argument("make_resnet: unsupported depth " + std::to_string(depth));
  }
}

}  // namespace shoplens::detail
