// optim.implementation: the fused and foreach (multi-tensor) optimizers step exactly as LibTorch's
// reference loop (AdamW; SGD with momentum, Nesterov, weight decay; two learning rates; a frozen
// parameter; a parameter that skips steps; the learning rate changing every step), checkpoints move
// between implementations both ways, and a choice that cannot run is refused naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <torch/torch.h>
#include <torch/version.h>

#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/train/amp.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_state.h"
#include "shoplens/train/train_step.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr bool kFusedBuild = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4);

// Three backbone layers and a head: several parameters per group, so the multi-tensor path has
// lists to batch and buckets of different step counts.
class Stack : public Classifier {
 public:
  Stack() : Classifier(testing::spec("tiny_linear", 3, 2)) {
    for (int i = 0; i < 3; ++i) stem.push_back(register_module("stem" + std::to_string(i), torch::nn::Linear(6, 6)));
    fc = register_module("fc", torch::nn::Linear(6, 3));
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = x.flatten(1);
    for (auto& layer : stem) h = torch::relu(layer->forward(h));
    return fc->forward(h);
  }
  std::string head_prefix() const override { return "fc."; }
  std::vector<std::string> stage_prefixes() const override { return {"stem0.", "stem1.", "stem2."}; }
  void reset_head(int) override {}
  int num_classes() const override { return 3; }
  std::vector<torch::nn::Linear> stem;
  torch::nn::Linear fc{nullptr};
};

std::shared_ptr<Stack> seeded_stack() {
  torch::manual_seed(7);
  return std::make_shared<Stack>();
}

// Steps [from, to) of a scripted run: seeded gradients; stem1.bias frozen (never a gradient);
// stem2.weight without one every third step (its step count falls behind its group's); the
// learning rate changing every step.
void seed_gradients(Stack& model, int step) {
  torch::manual_seed(1000 + step);
  for (auto& item : model.named_parameters()) {
    const bool none = item.key() == "stem1.bias" || (item.key() == "stem2.weight" && step % 3 == 0);
    item.value().mutable_grad() = none ? at::Tensor() : torch::randn_like(item.value()) * (1 + step % 4);
  }
}

void train_steps(Stack& model, OptimizerSetup& optim, int from, int to) {
  for (int step = from; step < to; ++step) {
    seed_gradients(model, step);
    optim.set_lr_factor(1.0 - step / 40.0);
    optim.optimizer().step();
  }
}

// The same steps through the step that skips itself on the device; before each step in `skipped`,
// a step of non-finite gradients with found_inf set, which must leave no trace.
void train_steps_skipping(Stack& model, OptimizerSetup& optim, int from, int to, const std::set<int>& skipped) {
  const auto step_unless = optim.device_skip_step();
  ASSERT_TRUE(step_unless) << "no device-skipping step under " << optim.description();
  for (int step = from; step < to; ++step) {
    if (skipped.count(step) > 0) {
      for (auto& item : model.named_parameters())
        item.value().mutable_grad() = torch::full_like(item.value(), std::numeric_limits<float>::quiet_NaN());
      step_unless(torch::ones({}, torch::kBool));
    }
    seed_gradients(model, step);
    optim.set_lr_factor(1.0 - step / 40.0);
    step_unless(torch::zeros({}, torch::kBool));
  }
}

void expect_same_weights(Stack& a, Stack& b, double tolerance, const std::string& what) {
  const auto theirs = b.named_parameters();
  for (const auto& item : a.named_parameters()) {
    const at::Tensor& mine = item.value();
    const at::Tensor& ref = theirs[item.key()];
    const double scale = std::max(ref.abs().max().item<double>(), 1e-3);
    const double diff = (mine - ref).abs().max().item<double>();
    EXPECT_LE(diff, tolerance * scale) << what << ": " << item.key() << " differs by " << diff;
  }
}

struct Case {
  std::string name;
  OptimConfig config;
};

std::vector<Case> optimizer_cases() {
  OptimConfig adamw;
  adamw.lr = 0.01;
  adamw.weight_decay = 0.05;
  adamw.betas = {0.8, 0.99};
  adamw.backbone_lr_scale = 0.3;
  OptimConfig sgd;
  sgd.name = OptimizerKind::kSgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  sgd.backbone_lr_scale = 0.3;
  OptimConfig nesterov = sgd;
  nesterov.nesterov = true;
  OptimConfig plain = sgd;
  plain.momentum = 0;
  return {{"adamw", adamw}, {"sgd_momentum", sgd}, {"sgd_nesterov", nesterov}, {"sgd_plain", plain}};
}

OptimConfig with_impl(OptimConfig c, OptimizerImpl impl) {
  c.implementation = impl;
  return c;
}

// 20 steps under `impl` against 20 under LibTorch's loop: same weights, same number of states
// (none for the frozen parameter).
void expect_matches_reference(OptimizerImpl impl, double tolerance) {
  for (const auto& c : optimizer_cases()) {
    auto ref_model = seeded_stack();
    auto model = seeded_stack();
    const at::Tensor frozen_before = model->stem[1]->bias.clone();
    OptimizerSetup ref(*ref_model, with_impl(c.config, OptimizerImpl::kReference));
    OptimizerSetup optim(*model, with_impl(c.config, impl));
    ASSERT_EQ(optim.implementation(), impl);
    train_steps(*ref_model, ref, 0, 20);
    train_steps(*model, optim, 0, 20);
    const std::string what = c.name + " " + name_in(kOptimizerImplNames, impl);
    expect_same_weights(*model, *ref_model, tolerance, what);
    EXPECT_TRUE(torch::equal(model->stem[1]->bias, frozen_before)) << what;
    EXPECT_EQ(optim.optimizer().state().size(), ref.optimizer().state().size()) << what;
    EXPECT_FALSE(torch::allclose(model->fc->weight, seeded_stack()->fc->weight)) << what << ": nothing stepped";
  }
}

TEST(OptimizerImpl, ForeachStepsAsTheReference) { expect_matches_reference(OptimizerImpl::kForeach, 1e-6); }

TEST(OptimizerImpl, FusedStepsAsTheReference) {
  if (!kFusedBuild) GTEST_SKIP() << "LibTorch " TORCH_VERSION " has no fused optimizer kernels (2.4 and later have)";
  expect_matches_reference(OptimizerImpl::kFused, 1e-5);
}

TEST(OptimizerImpl, AutoIsFusedWhereTheBuildHasIt) {
  auto model = seeded_stack();
  OptimizerSetup optim(*model, OptimConfig{});
  EXPECT_EQ(optim.implementation(), kFusedBuild ? OptimizerImpl::kFused : OptimizerImpl::kForeach);
  EXPECT_THAT(optim.description(), HasSubstr(kFusedBuild ? "adamw, fused step" : "adamw, foreach step"));
  EXPECT_THAT(optim.description(), HasSubstr("4 parameter groups"));
}

TEST(OptimizerImpl, FusedWithoutKernelsIsRefusedNamingTheKey) {
  if (kFusedBuild) GTEST_SKIP() << "LibTorch " TORCH_VERSION " has the fused kernels: nothing to refuse";
  auto model = seeded_stack();
  EXPECT_THAT([&] { OptimizerSetup setup(*model, with_impl(OptimConfig{}, OptimizerImpl::kFused)); },
              ::testing::ThrowsMessage<ConfigError>(
                  AllOf(HasSubstr("optim.implementation=fused"), HasSubstr("no fused optimizer kernels"))));
}

TEST(OptimizerImpl, UnknownChoiceIsRefusedNamingTheKey) {
  nlohmann::json doc = config_to_json(Config{});
  EXPECT_EQ(doc["optim"]["implementation"], "auto");
  doc["optim"]["implementation"] = "turbo";
  EXPECT_THAT([&] { config_from_json(doc, "run.json"); },
              ::testing::ThrowsMessage<ConfigError>(AllOf(HasSubstr("optim.implementation"), HasSubstr("turbo"))));
  doc["optim"]["implementation"] = "foreach";
  EXPECT_EQ(config_from_json(doc, "run.json").optim.implementation, OptimizerImpl::kForeach);
}

// A checkpoint after 10 steps under `writer`, resumed under `reader` for 10 more through the
// trainer's own save/restore, ends where 20 uninterrupted reference steps end.
void expect_resumes(const OptimConfig& config, OptimizerImpl writer, OptimizerImpl reader) {
  const std::string what = std::string(name_in(kOptimizerImplNames, writer)) + " -> " +
                           name_in(kOptimizerImplNames, reader) + " (" + name_in(kOptimizerKindNames, config.name) +
                           ")";
  const std::vector<std::string> classes{"a", "b", "c"};
  testing::ScratchDir dir("optim-impl");
  {
    auto model = seeded_stack();
    OptimizerSetup optim(*model, with_impl(config, writer));
    train_steps(*model, optim, 0, 10);
    TrainState state;
    state.step = 10;
    const LossScaler scaler;
    write_checkpoint(dir / "step.ckpt", state_to_json(state, Config{}, *model, classes, scaler),
                     serialize_tensors(*model, optim.optimizer()));
  }
  auto resumed = std::make_shared<Stack>();  // other weights until restored
  OptimizerSetup optim(*resumed, with_impl(config, reader));
  LossScaler scaler;
  TrainState state;
  restore_state(read_checkpoint(dir / "step.ckpt"), Config{}, *resumed, classes, optim.optimizer(), scaler, state);
  EXPECT_EQ(state.step, 10) << what;
  train_steps(*resumed, optim, 10, 20);

  auto straight = seeded_stack();
  OptimizerSetup ref(*straight, with_impl(config, OptimizerImpl::kReference));
  train_steps(*straight, ref, 0, 20);
  expect_same_weights(*resumed, *straight, 1e-5, what);
}

TEST(OptimizerImpl, CheckpointsResumeUnderAnotherImplementation) {
  std::vector<OptimizerImpl> impls{OptimizerImpl::kReference, OptimizerImpl::kForeach};
  if (kFusedBuild) impls.push_back(OptimizerImpl::kFused);
  for (const auto& c : optimizer_cases()) {
    if (c.name == "sgd_plain") continue;  // no state to carry
    for (auto writer : impls)
      for (auto reader : impls)
        if (writer != reader) expect_resumes(c.config, writer, reader);
  }
}

// Fused steps skipped on the device (found_inf set, non-finite gradients) leave no trace: not in
// the weights, the moments or SGD's first momentum buffers, and not in AdamW's step counts, which
// the checkpoint carries to LibTorch's own loop, which then ends where 20 plain steps end.
TEST(OptimizerImpl, FusedStepsSkippedOnTheDeviceLeaveNoTrace) {
  if (!kFusedBuild) GTEST_SKIP() << "LibTorch " TORCH_VERSION " has no fused optimizer kernels (2.4 and later have)";
  for (const auto& c : optimizer_cases()) {
    auto ref_model = seeded_stack();
    OptimizerSetup ref(*ref_model, with_impl(c.config, OptimizerImpl::kReference));
    train_steps(*ref_model, ref, 0, 20);

    auto model = seeded_stack();
    std::stringstream saved;
    {
      OptimizerSetup fused(*model, with_impl(c.config, OptimizerImpl::kFused));
      train_steps_skipping(*model, fused, 0, 10, {0, 4, 9});  // the first step makes SGD's buffers
      torch::serialize::OutputArchive archive;
      fused.optimizer().save(archive);
      archive.save_to(saved);
    }
    OptimizerSetup resumed(*model, with_impl(c.config, OptimizerImpl::kReference));
    torch::serialize::InputArchive archive;
    archive.load_from(saved);
    resumed.optimizer().load(archive);
    train_steps(*model, resumed, 10, 20);
    expect_same_weights(*model, *ref_model, 1e-5, c.name + " with skipped fused steps");
  }
}

// The trainer's step with the fused optimizer's device skip reads nothing back, and a non-finite
// loss still leaves the weights untouched.
TEST(OptimizerImpl, AFusedTrainingStepReadsNothingAndStillSkipsANonFiniteLoss) {
  if (!kFusedBuild) GTEST_SKIP() << "LibTorch " TORCH_VERSION " has no fused optimizer kernels (2.4 and later have)";
  for (const auto kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    torch::manual_seed(2);
    testing::TinyLinear model(3, 2);
    OptimConfig config;
    config.name = kind;
    EXPECT_FALSE(OptimizerSetup(model, with_impl(config, OptimizerImpl::kForeach)).device_skip_step());
    OptimizerSetup optim(model, with_impl(config, OptimizerImpl::kFused));
    TrainStepOptions options;
    options.defer_host_reads = true;
    options.device_skip = optim.device_skip_step();
    TrainStep step(model, optim.optimizer(), options);
    ASSERT_TRUE(step.reads_nothing());
    const auto labels = torch::tensor({0, 1}, torch::kLong);
    const auto before = model.fc->weight.clone();
    step.run({testing::make_batch(torch::full({2, 3, 2, 2}, std::numeric_limits<float>::quiet_NaN()), labels)});
    EXPECT_TRUE(torch::equal(before, model.fc->weight)) << "the non-finite step was applied";
    step.run({testing::make_batch(torch::randn({2, 3, 2, 2}), labels)});
    EXPECT_TRUE(torch::isfinite(model.fc->weight).all().item<bool>());
    EXPECT_FALSE(torch::equal(before, model.fc->weight)) << "the finite step was not applied";
    EXPECT_EQ(step.host_reads().total(), 0);
  }
}

}  // namespace
}  // namespace shoplens
