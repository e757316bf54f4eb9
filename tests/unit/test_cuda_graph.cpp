#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/train/cuda_graph.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A run that can be captured: bf16 image classification on CUDA with an optimizer that skips
// non-finite steps on the device.
CudaGraphFacts capturable() {
  CudaGraphFacts f;
  f.cuda = true;
  f.torch_major = 2;
  f.device_skip = true;
  return f;
}

TEST(CudaGraphDecision, CapturesOnlyWhatKeepsItsShapesAndNeverReadsTheHost) {
  EXPECT_TRUE(cuda_graph_decision(capturable()).capture);
  EXPECT_TRUE(cuda_graph_decision(capturable()).reason.empty());
  const std::vector<std::pair<void (*)(CudaGraphFacts&), const char*>> refusals{
      {[](CudaGraphFacts& f) { f.cuda = false; }, "not on CUDA"},
      {[](CudaGraphFacts& f) { f.torch_major = 1; }, "LibTorch 1.13"},
      {[](CudaGraphFacts& f) { f.text_model = true; }, "length buckets"},
      {[](CudaGraphFacts& f) { f.token_budget = true; }, "loader.token_budget"},
      {[](CudaGraphFacts& f) { f.accumulation = true; }, "train.accumulation_steps"},
      {[](CudaGraphFacts& f) { f.mix_some_batches = true; }, "augment.mix_prob"},
      {[](CudaGraphFacts& f) { f.oom_recovery = true; }, "train.oom_recovery"},
      {[](CudaGraphFacts& f) { f.distributed = true; }, "data-parallel"},
      {[](CudaGraphFacts& f) { f.fp16 = true; }, "fp16"},
      {[](CudaGraphFacts& f) { f.ema = true; }, "train.ema_decay"},
      {[](CudaGraphFacts& f) { f.freeze_plan = true; }, "train.freeze_backbone_epochs"},
      {[](CudaGraphFacts& f) { f.device_skip = false; }, "skip a non-finite step on the device"},
  };
  for (const auto& [change, reason] : refusals) {
    CudaGraphFacts f = capturable();
    change(f);
    const auto decision = cuda_graph_decision(f);
    EXPECT_FALSE(decision.capture) << reason;
    EXPECT_THAT(decision.reason, HasSubstr(reason));
  }
}

TEST(CudaGraphDecision, OnRefusesWithTheReasonAutoFallsBackOffNeverCaptures) {
  CudaGraphFacts cpu = capturable();
  cpu.cuda = false;
  EXPECT_THAT([&] { resolve_cuda_graph(CudaGraphMode::kOn, cpu); },
              ThrowsMessage<ConfigError>(AllOf(HasSubstr("train.cuda_graph"), HasSubstr("not on CUDA"))));
  const auto fallback = resolve_cuda_graph(CudaGraphMode::kAuto, cpu);
  EXPECT_FALSE(fallback.capture);
  EXPECT_THAT(fallback.reason, HasSubstr("not on CUDA"));
  EXPECT_TRUE(resolve_cuda_graph(CudaGraphMode::kOn, capturable()).capture);
  EXPECT_TRUE(resolve_cuda_graph(CudaGraphMode::kAuto, capturable()).capture);
  EXPECT_FALSE(resolve_cuda_graph(CudaGraphMode::kOff, capturable()).capture);
}

TEST(CudaGraphDecision, FactsOfAConfiguredRun) {
  Config config;
  config.train.oom_recovery = false;
  config.train.precision = Precision::kBf16;
  EXPECT_TRUE(cuda_graph_decision(cuda_graph_facts(config, true, false, false, true, 2)).capture);
  EXPECT_FALSE(cuda_graph_decision(cuda_graph_facts(config, true, true, false, true, 2)).capture);  // text
  config.augment.mixup_alpha = 0.2;
  config.augment.mix_prob = 1.0;  // every batch mixed: one shape
  EXPECT_TRUE(cuda_graph_decision(cuda_graph_facts(config, true, false, false, true, 2)).capture);
  config.augment.mix_prob = 0.5;
  EXPECT_THAT(cuda_graph_decision(cuda_graph_facts(config, true, false, false, true, 2)).reason, HasSubstr("mix_prob"));
  config.augment.mix_prob = 1.0;
  config.train.accumulation_steps = 2;
  EXPECT_THAT(cuda_graph_decision(cuda_graph_facts(config, true, false, false, true, 2)).reason,
              HasSubstr("accumulation_steps"));
  Config defaults;  // out-of-memory recovery is on by default
  EXPECT_THAT(cuda_graph_decision(cuda_graph_facts(defaults, true, false, false, true, 2)).reason,
              HasSubstr("oom_recovery"));
  EXPECT_FALSE(cuda_graph_decision(cuda_graph_facts(defaults, true, false, false, true, 1)).capture);
}

TEST(CudaGraphDecision, TheConfigKeyTakesItsThreeValues) {
  EXPECT_EQ(load_config(std::nullopt, {"train.cuda_graph=off"}).train.cuda_graph, CudaGraphMode::kOff);
  EXPECT_EQ(load_config(std::nullopt, {"train.cuda_graph=on"}).train.cuda_graph, CudaGraphMode::kOn);
  EXPECT_EQ(Config{}.train.cuda_graph, CudaGraphMode::kAuto);
  EXPECT_THAT([] { load_config(std::nullopt, {"train.cuda_graph=always"}); },
              ThrowsMessage<ConfigError>(HasSubstr("cuda_graph")));
}

}  // namespace
}  // namespace shoplens
