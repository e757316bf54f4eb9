#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "model_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

using testing::spec;

std::int64_t parameter_count(torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

std::set<std::string> names_of(const torch::nn::Module& m) {
  std::set<std::string> out;
  for (const auto& [name, t] : model_state_dict(m)) out.insert(name);
  return out;
}

TEST(Models, NamesInHelpOrder) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"small_cnn", "resnet18", "resnet34", "resnet50", "vit_tiny",
                                                     "vit_small", "vit_base", "text_tiny", "text_small", "text_base"}));
}

TEST(Models, UnknownNameIsConfigErrorWithNearestName) {
  try {
    make_model(spec("resnet81"));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'resnet18'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model(spec("vgg16")), ConfigError);
}

TEST(Models, InvalidSpecIsConfigError) {
  EXPECT_THROW(make_model(spec("resnet18", 0)), ConfigError);
  EXPECT_THROW(make_model(spec("vit_tiny", 5, 100)), ConfigError);  // not a multiple of 16
  auto s = spec("small_cnn");
  s.dropout = 1.0;
  EXPECT_THROW(make_model(s), ConfigError);
}

TEST(Models, OutputShapesForEveryModel) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  for (const auto& name : model_names()) {
    auto model = make_model(spec(name, 7, 64));
    model->eval();
    // Every model reads the batch its example_batch() describes (text: tokens at max_length).
    auto out = model->forward_batch(model->example_batch(2), torch::kCPU);
    if (is_text_model(name))
      EXPECT_THROW(model->forward(torch::randn({2, 3, 64, 64})), Error) << name;
    else
      EXPECT_EQ(model->forward(torch::randn({2, 3, 64, 64})).sizes(), out.sizes()) << name;
    EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{2, 7})) << name;
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>()) << name;
    EXPECT_EQ(model->num_classes(), 7) << name;
    EXPECT_EQ(model->spec().name, name);
  }
}

TEST(Models, ParameterCountsMatchTorchvisionAndTimm) {
  // torchvision resnet*(num_classes=1000) and timm vit_*_patch16_224, sum(p.numel()).
  EXPECT_EQ(parameter_count(*make_model(spec("resnet18", 1000))), 11689512);
  EXPECT_EQ(parameter_count(*make_model(spec("resnet34", 1000))), 21797672);
  EXPECT_EQ(parameter_count(*make_model(spec("resnet50", 1000))), 25557032);
  EXPECT_EQ(parameter_count(*make_model(spec("vit_tiny", 1000, 224))), 5717416);
  EXPECT_EQ(parameter_count(*make_model(spec("vit_small", 1000, 224))), 22050664);
  // vit_base at 224 is 86,567,656; at 32 px its pos_embed holds 196 - 4 fewer tokens of 768.
  EXPECT_EQ(parameter_count(*make_model(spec("vit_base", 1000, 32))), 86567656 - (196 - 4) * 768);
}

TEST(Models, SmallCnnMatchesDifficultyScriptParameterCount) {
  // 4 conv3x3 (no bias) + BN blocks of widths 32..256 and a linear head, as SmallCNN(5).
  const std::int64_t convs = 3 * 32 * 9 + 32 * 64 * 9 + 64 * 128 * 9 + 128 * 256 * 9;
  const std::int64_t bns = 2 * (32 + 64 + 128 + 256);
  EXPECT_EQ(parameter_count(*make_model(spec("small_cnn", 5))), convs + bns + 256 * 5 + 5);
}

TEST(Models, ParameterNamesFollowTorchvisionAndTimm) {
  auto r18 = names_of(*make_model(spec("resnet18")));
  for (const char* n : {"conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked", "layer1.0.conv1.weight",
                        "layer1.1.bn2.running_var", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.bias",
                        "layer4.1.conv2.weight", "fc.weight", "fc.bias"})
    EXPECT_TRUE(r18.count(n)) << n;
  EXPECT_FALSE(r18.count("layer1.0.downsample.0.weight"));  // same width and stride: no shortcut conv
  EXPECT_FALSE(r18.count("conv1.bias"));
  EXPECT_EQ(r18.size(), 122u);  // len(torchvision.models.resnet18().state_dict())

  auto r50 = names_of(*make_model(spec("resnet50")));
  for (const char* n : {"layer1.0.conv3.weight", "layer1.0.downsample.0.weight", "layer3.5.bn3.num_batches_tracked"})
    EXPECT_TRUE(r50.count(n)) << n;
  EXPECT_EQ(r50.size(), 320u);

  auto vit = names_of(*make_model(spec("vit_tiny")));
  for (const char* n :
       {"cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias", "blocks.0.norm1.weight",
        "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight", "blocks.11.norm2.bias",
        "blocks.11.mlp.fc1.weight", "blocks.11.mlp.fc2.bias", "norm.weight", "head.weight", "head.bias"})
    EXPECT_TRUE(vit.count(n)) << n;
  EXPECT_EQ(vit.size(), 4u + 12u * 12u + 2u + 2u);

  auto cnn = names_of(*make_model(spec("small_cnn")));
  for (const char* n :
       {"features.0.weight", "features.1.running_mean", "features.13.num_batches_tracked", "head.weight"})
    EXPECT_TRUE(cnn.count(n)) << n;
}

TEST(Models, StateDictOrderFollowsPyTorch) {
  auto sd = model_state_dict(*make_model(spec("resnet18")));
  std::vector<std::string> first;
  for (std::size_t i = 0; i < 7; ++i) first.push_back(sd[i].first);
  EXPECT_EQ(first, (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                             "bn1.running_var", "bn1.num_batches_tracked", "layer1.0.conv1.weight"}));
  EXPECT_EQ(sd.back().first, "fc.bias");
  auto vit = model_state_dict(*make_model(spec("vit_tiny")));
  EXPECT_EQ(vit[0].first, "cls_token");
  EXPECT_EQ(vit[1].first, "pos_embed");
  EXPECT_EQ(vit[1].second.sizes(), (std::vector<std::int64_t>{1, 1 + 16, 192}));  // 64 px: 4x4 patches
}

TEST(Models, StagesAndHeadCoverEveryParameter) {
  for (const auto& name : model_names()) {
    if (name == "vit_base" || name == "text_base") continue;  // the same code as the smaller ones, slower to init
    auto model = make_model(spec(name));
    auto stages = model->stage_prefixes();
    stages.push_back(model->head_prefix());
    for (const auto& p : model->named_parameters()) {
      bool covered = false;
      for (const auto& s : stages) covered = covered || p.key().rfind(s, 0) == 0;
      EXPECT_TRUE(covered) << name << ": " << p.key();
    }
  }
  EXPECT_EQ(make_model(spec("resnet34"))->stage_prefixes(),
            (std::vector<std::string>{"conv1.", "bn1.", "layer1.", "layer2.", "layer3.", "layer4."}));
  EXPECT_EQ(make_model(spec("resnet18"))->head_prefix(), "fc.");
  auto vit = make_model(spec("vit_small"))->stage_prefixes();
  ASSERT_EQ(vit.size(), 16u);
  EXPECT_EQ(vit[0], "patch_embed.");
  EXPECT_EQ(vit[3], "blocks.0.");
  EXPECT_EQ(vit.back(), "norm.");
}

TEST(Models, ResetHeadChangesClassCountOnly) {
  torch::manual_seed(1);
  for (const auto& name : {"small_cnn", "resnet18", "vit_tiny"}) {
    auto model = make_model(spec(name, 5));
    model->eval();
    model->reset_head(3);
    EXPECT_EQ(model->num_classes(), 3);
    EXPECT_EQ(model->spec().num_classes, 3);
    std::size_t heads = 0;
    for (const auto& p : model->named_parameters())
      if (p.key().rfind(model->head_prefix(), 0) == 0) ++heads;
    EXPECT_EQ(heads, 2u) << name;
    EXPECT_FALSE(model->is_training()) << name;  // the new head follows the model's mode
    torch::NoGradGuard no_grad;
    EXPECT_EQ(model->forward(torch::randn({1, 3, 64, 64})).sizes(), (std::vector<std::int64_t>{1, 3}));
    EXPECT_THROW(model->reset_head(0), ConfigError);
  }
}

TEST(Models, ResnetInitFollowsTorchvision) {
  torch::manual_seed(2);
  auto model = make_model(spec("resnet50"));
  for (const auto& p : model->named_parameters()) {
    const auto& n = p.key();
    if (n.find(".bn") != std::string::npos || n.rfind("bn1.", 0) == 0) {
      const double expected = n.size() > 7 && n.substr(n.size() - 7) == ".weight" ? 1.0 : 0.0;
      EXPECT_TRUE(torch::all(p.value() == expected).item<bool>()) << n;
    }
  }
  // Kaiming normal, fan_out, ReLU gain: std = sqrt(2 / (out_channels * k * k)).
  auto w = model->named_parameters()["layer4.0.conv2.weight"];
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (512 * 9)), 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.001);
}

TEST(Models, VitInitFollowsTimm) {
  torch::manual_seed(3);
  auto model = make_model(spec("vit_small"));
  auto params = model->named_parameters();
  EXPECT_NEAR(params["blocks.3.mlp.fc1.weight"].std().item<double>(), 0.02, 0.001);
  EXPECT_TRUE(torch::all(params["blocks.3.mlp.fc1.bias"] == 0).item<bool>());
  EXPECT_NEAR(params["pos_embed"].std().item<double>(), 0.02, 0.003);
  EXPECT_LT(params["cls_token"].abs().max().item<double>(), 1e-4);
  EXPECT_TRUE(torch::all(params["blocks.0.norm1.weight"] == 1).item<bool>());
}

TEST(Models, VitRejectsInputOfAnotherSize) {
  auto model = make_model(spec("vit_tiny", 5, 32));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::randn({1, 3, 32, 32})).sizes(), (std::vector<std::int64_t>{1, 5}));
  EXPECT_THROW(model->forward(torch::randn({1, 3, 64, 64})), ConfigError);
}

TEST(Models, ChannelsLastGivesTheSameLogits) {
  torch::manual_seed(4);
  for (const auto& name : {"small_cnn", "resnet18"}) {
    auto plain = make_model(spec(name));
    auto s = spec(name);
    s.channels_last = true;
    auto nhwc = make_model(s);
    auto conv = nhwc->named_parameters()[std::string(name) == "small_cnn" ? "features.0.weight" : "conv1.weight"];
    EXPECT_TRUE(conv.is_contiguous(at::MemoryFormat::ChannelsLast)) << name;
    load_weights(*nhwc, model_state_dict(*plain), false);
    EXPECT_TRUE(conv.is_contiguous(at::MemoryFormat::ChannelsLast)) << name;  // loading keeps the format
    plain->eval();
    nhwc->eval();
    torch::NoGradGuard no_grad;
    auto x = torch::randn({2, 3, 64, 64});
    EXPECT_TRUE(torch::allclose(plain->forward(x), nhwc->forward(x), 1e-4, 1e-4)) << name;
  }
}

TEST(Models, DropoutOnlyActsInTraining) {
  torch::manual_seed(5);
  auto s = spec("small_cnn");
  s.dropout = 0.5;
  auto model = make_model(s);
  auto x = torch::randn({2, 3, 32, 32});
  torch::NoGradGuard no_grad;
  model->eval();
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
  model->train();
  EXPECT_FALSE(torch::equal(model->forward(x), model->forward(x)));
}

}  // namespace
}  // namespace shoplens
