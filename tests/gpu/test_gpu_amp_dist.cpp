// CUDA only (ctest label gpu; run on a lent GPU machine): what exists only on CUDA: the fused
// loss-scaling kernel, fp16 autocast, and the NCCL process group. Each is checked against the
// CPU path it stands in for, so a divergence shows as a failure, not as a slower loss curve.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "shoplens/core/runtime.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/train/amp.h"

namespace shoplens {
namespace {

std::vector<at::Tensor> sample_grads(const torch::Device& device, bool with_inf) {
  torch::manual_seed(3);
  std::vector<at::Tensor> grads{torch::randn({64, 32}), torch::randn({7}), torch::randn({3, 3, 3, 3})};
  if (with_inf) grads[1][4] = std::numeric_limits<float>::infinity();
  for (auto& g : grads) g = g.to(device);
  return grads;
}

TEST(GpuLossScaler, FusedUnscaleEqualsTheCpuOps) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LossScalerOptions options;
  options.enabled = true;
  options.init_scale = 1024.0;
  for (bool with_inf : {false, true}) {
    LossScaler scaler(options);
    auto on_gpu = sample_grads(torch::kCUDA, with_inf);
    auto on_cpu = sample_grads(torch::kCPU, with_inf);
    EXPECT_EQ(scaler.unscale_and_check(on_gpu), with_inf);
    EXPECT_EQ(scaler.unscale_and_check(on_cpu), with_inf);
    for (std::size_t i = 0; i < on_cpu.size(); ++i) {
      const auto finite = on_cpu[i].isfinite();
      EXPECT_TRUE(torch::allclose(on_gpu[i].cpu().masked_select(finite), on_cpu[i].masked_select(finite), 1e-6, 1e-7));
    }
    scaler.update(with_inf);
    EXPECT_EQ(scaler.scale(), with_inf ? 512.0 : 1024.0);
  }
}

TEST(GpuAutocast, Fp16AndBf16RegionsCastMatmulsAndRestoreOnExit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto a = torch::randn({16, 16}, torch::kCUDA), b = torch::randn({16, 16}, torch::kCUDA);
  for (auto [precision, dtype] :
       {std::pair{Precision::kFp16, torch::kHalf}, std::pair{Precision::kBf16, torch::kBFloat16}}) {
    {
      AutocastScope scope(true, precision);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), dtype);
    }
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  }
}

// A loopback port the kernel just handed out and nobody holds, for the store to bind. A number
// derived from the pid collided when two test processes' pids agreed modulo the range; an
// ephemeral port is not handed out again at once.
int unused_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("no loopback port to bind");
  return ntohs(sa.sin_port);
}

TEST(GpuProcessGroup, NcclAllReduceAndBroadcastOnOneRank) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  DistEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = unused_loopback_port();
  GroupOptions options;
  options.backend = "nccl";
  options.timeout = std::chrono::milliseconds(60000);
  auto group = join_process_group(env, options);
  EXPECT_EQ(group->backend(), "nccl");
  std::vector<at::Tensor> tensors{torch::full({1000}, 2.5f, torch::kCUDA)};
  group->allreduce_sum(tensors);
  EXPECT_FLOAT_EQ(tensors[0].sum().item<float>(), 2500.0f);
  at::Tensor bucket = torch::ones({256}, torch::kCUDA);
  group->allreduce_sum_async(bucket)->wait();
  EXPECT_FLOAT_EQ(bucket.sum().item<float>(), 256.0f);
  group->broadcast(tensors, 0);
  group->barrier();
}

}  // namespace
}  // namespace shoplens
