// CUDA only (ctest label gpu; run on a lent GPU machine): the captured training step
// (CapturedStep, train.cuda_graph) trains the same weights as the eager step it replaces.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/train/captured_step.h"
#include "shoplens/train/train_step.h"
#include "shoplens/train/trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace shoplens {
namespace {

using testing::make_batch;
using testing::sgd_skipping_on_device;
using testing::TinyLinear;

TrainStepOptions bf16_options(Classifier& model) {
  TrainStepOptions options;
  options.cuda = true;
  options.precision = Precision::kBf16;
  options.clip_grad_norm = 5.0;
  options.defer_host_reads = true;
  options.device_skip = sgd_skipping_on_device(model, 0.05);
  return options;
}

std::vector<Batch> batches(int n) {
  torch::manual_seed(7);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i)
    out.push_back(make_batch(torch::randn({16, 3, 8, 8}), torch::randint(0, 4, {16}, torch::kLong)));
  out[n / 2].images[3][0][0][0] = std::numeric_limits<float>::quiet_NaN();  // one step to skip
  return out;
}

at::Tensor flat_parameters(Classifier& model) {
  std::vector<at::Tensor> flat;
  for (const auto& p : model.parameters()) flat.push_back(p.detach().flatten().to(torch::kCPU, torch::kFloat));
  return torch::cat(flat);
}

TEST(GpuCudaGraph, CapturedStepTrainsTheEagerStepsWeights) {
  if (!cuda_graphs_compiled()) GTEST_SKIP() << "this build cannot capture (LibTorch 2.x with CUDA)";
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto data = batches(12);
  torch::manual_seed(5);
  TinyLinear eager_model(4, 8);
  torch::manual_seed(5);
  TinyLinear graph_model(4, 8);  // the same initial weights
  eager_model.to(torch::kCUDA);
  graph_model.to(torch::kCUDA);
  torch::optim::SGD unused_optimizer(eager_model.parameters(), torch::optim::SGDOptions(0.0));
  TrainStep eager(eager_model, unused_optimizer, bf16_options(eager_model));
  CapturedStep captured(graph_model, bf16_options(graph_model), 3);
  std::vector<double> eager_losses, graph_losses;
  int skipped = 0;
  for (const auto& batch : data) {
    const auto e = eager.run({batch});
    const auto g = captured.run(batch);
    EXPECT_EQ(e.found_inf.item<bool>(), g.found_inf.item<bool>());
    skipped += g.found_inf.item<bool>() ? 1 : 0;
    eager_losses.push_back(e.loss_value.item<double>());
    graph_losses.push_back(g.loss_value.item<double>());
  }
  EXPECT_TRUE(captured.captured());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(eager.host_reads().total(), 0);
  for (std::size_t i = 0; i < eager_losses.size(); ++i) {
    if (std::isfinite(eager_losses[i])) {
      EXPECT_NEAR(graph_losses[i], eager_losses[i], 2e-2) << "step " << i;
    }
  }
  // bf16 autocast: the two runs may round differently kernel by kernel; the weights agree to bf16.
  const auto a = flat_parameters(eager_model), b = flat_parameters(graph_model);
  EXPECT_TRUE(torch::allclose(a, b, 2e-2, 2e-3)) << (a - b).abs().max().item<double>();
  // A batch of another shape is refused, not replayed on the wrong buffers.
  EXPECT_THROW(captured.run(make_batch(torch::randn({8, 3, 8, 8}), torch::zeros({8}, torch::kLong))), Error);
}

// The trainer with train.cuda_graph=on: its steps are replayed from a graph (the summary says so),
// a quiet step reads nothing, and it ends on the weights of the same run with eager steps.
TEST(GpuCudaGraph, TheTrainerReplaysItsStepsAndEndsWhereTheEagerRunEnds) {
  if (!cuda_graphs_compiled()) GTEST_SKIP() << "this build cannot capture (LibTorch 2.x with CUDA)";
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  testing::ScratchDir dir("gpu-cuda-graph-trainer");
  auto train = [&](CudaGraphMode mode, const char* name) {
    Config config = testing::tiny_config(dir / name);
    config.train.device = DeviceChoice::kCuda;
    config.train.precision = Precision::kBf16;
    config.train.oom_recovery = false;  // a retry would change the captured shape
    config.train.cuda_graph = mode;
    config.train.log_every_steps = 6;
    config.train.checkpoint_every_steps = 0;
    config.train.deterministic = false;
    config.train.class_balance = ClassBalance::kWeightedLoss;  // the weights must be on the card to capture
    auto model = testing::tiny_model(config);
    const auto summary = Trainer(config, model, testing::tiny_data(), dir / name).fit();
    return std::make_pair(summary, flat_parameters(*model));
  };
  const auto [graph_summary, graph_weights] = train(CudaGraphMode::kOn, "graph");
  const auto [eager_summary, eager_weights] = train(CudaGraphMode::kOff, "eager");
  EXPECT_TRUE(graph_summary.at("cuda_graph").at("captured").get<bool>()) << graph_summary.dump();
  EXPECT_FALSE(eager_summary.at("cuda_graph").at("captured").get<bool>());
  EXPECT_GT(graph_summary.at("host_reads").at("quiet_steps").get<int>(), 0);
  EXPECT_EQ(graph_summary.at("host_reads").at("reads_in_quiet_steps").get<int>(), 0);
  EXPECT_TRUE(torch::allclose(graph_weights, eager_weights, 2e-2, 2e-3))
      << (graph_weights - eager_weights).abs().max().item<double>();
}

}  // namespace
}  // namespace shoplens
