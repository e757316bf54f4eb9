// The recipe's training options: the one-cycle schedule, the EMA of the weights (closed form,
// checkpoints, resume) and stochastic depth (docs/TRAINING.md).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>

#include "model_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/model_facts.h"
#include "shoplens/train/ema.h"
#include "shoplens/train/schedule.h"
#include "shoplens/train/train_state.h"
#include "test_util.h"

namespace shoplens {
namespace {

TEST(RecipeSchedule, OneCycleRisesOverPctStartThenFallsToTheFloor) {
  ScheduleConfig c;
  c.name = ScheduleKind::kOneCycle;
  c.pct_start = 0.3;
  c.warmup_epochs = 5;  // ignored: the rise is pct_start of the run
  c.warmup_start_factor = 0.04;
  c.min_lr_ratio = 0.001;
  LrSchedule s(c, /*steps_per_epoch=*/10, /*total_steps=*/101);
  EXPECT_EQ(s.warmup_steps(), 30);
  EXPECT_NEAR(s.factor(0), 0.04, 1e-12);
  EXPECT_NEAR(s.factor(15), (0.04 + 1.0) / 2, 1e-12);  // cosine: half-way in time is half-way in value
  EXPECT_NEAR(s.factor(10), 1.0 + (0.04 - 1.0) * 0.5 * (1 + std::cos(M_PI / 3)), 1e-12);
  EXPECT_NEAR(s.factor(30), 1.0, 1e-12);
  EXPECT_NEAR(s.factor(65), (1.0 + 0.001) / 2, 1e-12);
  EXPECT_NEAR(s.factor(100), 0.001, 1e-12);
  for (int step = 1; step <= 30; ++step) EXPECT_GT(s.factor(step), s.factor(step - 1)) << step;
  for (int step = 31; step <= 100; ++step) EXPECT_LT(s.factor(step), s.factor(step - 1)) << step;
}

// A classifier with a parameter tensor and a buffer, each set by hand.
class WithBuffer : public Classifier {
 public:
  WithBuffer() : Classifier(testing::spec("small_cnn", 2, 4)) {
    fc = register_module("fc", torch::nn::Linear(3, 2));
    running = register_buffer("running", torch::zeros({2}));
  }
  at::Tensor forward(const at::Tensor& x) override { return fc->forward(x.flatten(1).narrow(1, 0, 3)); }
  std::string head_prefix() const override { return "fc."; }
  std::vector<std::string> stage_prefixes() const override { return {}; }
  void reset_head(int) override {}
  int num_classes() const override { return 2; }
  void set(double weights, double buffer) {
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.fill_(weights);
    running.fill_(buffer);
  }
  torch::nn::Linear fc{nullptr};
  at::Tensor running;
};

TEST(RecipeEma, AfterKStepsEqualsTheClosedForm) {
  WithBuffer model;
  model.set(1.0, 0.0);
  const double d = 0.9;
  WeightsEma ema(model, d);
  const int k = 7;
  double expected = std::pow(d, k) * 1.0;  // d^k w0 + (1 - d) sum_i d^(k - i) w_i, w_i = i + 1
  for (int i = 1; i <= k; ++i) {
    model.set(i + 1.0, 10.0 * i);
    ema.update(model, 1000 + i);  // past the warm-up: the decay is d
    expected += (1 - d) * std::pow(d, k - i) * (i + 1.0);
  }
  ASSERT_EQ(ema.names().size(), 3u);  // fc.weight, fc.bias, running
  for (std::size_t t = 0; t < ema.names().size(); ++t) {
    const double want = ema.is_buffer(t) ? 10.0 * k : expected;  // buffers are copied, not averaged
    EXPECT_NEAR(ema.tensors()[t].max().item<double>(), want, 1e-5) << ema.names()[t];
    EXPECT_NEAR(ema.tensors()[t].min().item<double>(), want, 1e-5) << ema.names()[t];
  }
  {
    EmaInModel in_model(&ema, model);
    EXPECT_NEAR(model.fc->weight.max().item<double>(), expected, 1e-5);
  }
  EXPECT_DOUBLE_EQ(model.fc->weight.max().item<double>(), k + 1.0);  // swapped back
}

// The decay warms up as min(decay, (1 + n) / (10 + n)): the first update keeps a tenth of the
// initial weights, not 99.9% of them, and the configured decay takes over once the ramp reaches it.
TEST(RecipeEma, TheDecayWarmsUpFromATenth) {
  WithBuffer model;
  model.set(1.0, 0.0);
  WeightsEma ema(model, 0.999);
  EXPECT_DOUBLE_EQ(ema.decay_at(0), 0.1);
  EXPECT_DOUBLE_EQ(ema.decay_at(90), 0.91);
  EXPECT_DOUBLE_EQ(ema.decay_at(1000000), 0.999);
  model.set(11.0, 0.0);
  ema.update(model, 0);
  EXPECT_NEAR(ema.tensors()[0].max().item<double>(), 0.1 * 1.0 + 0.9 * 11.0, 1e-5);
  WeightsEma no_ramp(model, 0.5);
  EXPECT_DOUBLE_EQ(no_ramp.decay_at(8), 0.5);  // (1 + 8) / 18 = 0.5: the ramp meets the decay there
  EXPECT_DOUBLE_EQ(no_ramp.decay_at(100), 0.5);
}

TEST(RecipeEma, CheckpointTensorsHoldBothWeightsAndExportChoosesByName) {
  WithBuffer model;
  model.set(1.0, 2.0);
  WeightsEma ema(model, 0.5);
  model.set(3.0, 4.0);
  ema.update(model, 100);  // past the warm-up: parameters 2, buffer 4
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1));
  const std::string with = serialize_tensors(model, sgd, &ema);
  const std::string without = serialize_tensors(model, sgd);
  WithBuffer loaded;
  EXPECT_TRUE(restore_model_weights(loaded, with, CheckpointWeights::kEmaIfPresent));
  EXPECT_DOUBLE_EQ(loaded.fc->weight.max().item<double>(), 2.0);
  EXPECT_FALSE(restore_model_weights(loaded, with, CheckpointWeights::kRaw));
  EXPECT_DOUBLE_EQ(loaded.fc->weight.max().item<double>(), 3.0);
  EXPECT_TRUE(restore_model_weights(loaded, with, CheckpointWeights::kEma));
  EXPECT_FALSE(restore_model_weights(loaded, without, CheckpointWeights::kEmaIfPresent));
  EXPECT_THROW(restore_model_weights(loaded, without, CheckpointWeights::kEma), DataError);
}

// A ViT with the weights of `from` and another drop_path.
std::shared_ptr<Classifier> vit_like(const std::shared_ptr<Classifier>& from, double drop_path) {
  ModelSpec s = testing::spec("vit_tiny", 3, 32);
  s.drop_path = drop_path;
  auto model = make_model(s);
  torch::NoGradGuard no_grad;
  const auto source = from->named_parameters(true);
  for (auto& p : model->named_parameters(true)) p.value().copy_(source[p.key()]);
  return model;
}

at::Tensor forward_seeded(Classifier& model, const at::Tensor& x) {
  torch::manual_seed(9);
  torch::NoGradGuard no_grad;
  return model.forward(x);
}

TEST(RecipeDropPath, EvalIsUnchangedAndTrainingSkipsTheLastBlockAtRateOne) {
  torch::manual_seed(1);
  const auto plain = make_model(testing::spec("vit_tiny", 3, 32));
  const auto dropping = vit_like(plain, 1.0);
  const at::Tensor x = torch::randn({4, 3, 32, 32});
  plain->eval();
  dropping->eval();
  EXPECT_TRUE(torch::equal(forward_seeded(*plain, x), forward_seeded(*dropping, x)));

  // In training, block 11 (rate 1.0) never contributes: changing its weights changes nothing,
  // while the same change moves the output of the model without stochastic depth.
  plain->train();
  dropping->train();
  const at::Tensor before = forward_seeded(*dropping, x), plain_before = forward_seeded(*plain, x);
  for (auto* m : {plain.get(), dropping.get()}) {
    torch::NoGradGuard no_grad;
    m->named_parameters(true)["blocks.11.mlp.fc2.weight"].add_(0.5);
    m->named_parameters(true)["blocks.11.attn.proj.weight"].add_(0.5);
  }
  EXPECT_TRUE(torch::equal(forward_seeded(*dropping, x), before));
  EXPECT_FALSE(torch::allclose(forward_seeded(*plain, x), plain_before));
  EXPECT_FALSE(torch::allclose(before, plain_before));  // earlier blocks drop at random in training
}

TEST(RecipeDropPath, ModelsWithoutItRejectTheKeyByName) {
  for (const char* name : {"small_cnn", "resnet18", "text_tiny"}) {
    ModelSpec s = testing::spec(name, 3, 32);
    s.drop_path = 0.1;
    try {
      make_model(s);
      ADD_FAILURE() << name << " accepted model.drop_path";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.drop_path"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(drop_path_model_names(), "vit_tiny, vit_small, vit_base");
}

}  // namespace
}  // namespace shoplens
