#include "shoplens/dist/gradient_reducer.h"

#include <torch/torch.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <chrono>
#include <mutex>

#include "shoplens/core/errors.h"
#include "shoplens/dist/process_group.h"

namespace shoplens {

struct GradientReducer::Impl {
  struct Bucket {
    std::vector<std::size_t> members;   // parameter indices
    std::vector<std::int64_t> offsets;  // element offsets in the flat buffer
    at::Tensor flat;
    int pending = 0;
    bool launched = false;
    std::unique_ptr<PendingCollective> work;
  };

  std::shared_ptr<ProcessGroup> group;
  std::vector<at::Tensor> params;
  std::vector<std::size_t> bucket_of;
  std::vector<Bucket> buckets;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // hooks live on these
  std::vector<std::uintptr_t> hook_keys;
  std::mutex mutex;  // hooks run on the autograd engine's threads on CUDA
  bool is_armed = false;
  bool overlap = true;
  bool in_backward = false;
  std::size_t next_launch = 0;
  std::int64_t launched_in_hooks = 0;
  ReducerStats stats;

  void assign_buckets(std::int64_t bucket_bytes) {
    // Reverse order: backward produces the last layers' gradients first. A bucket holds one
    // dtype and device, as the collective needs one flat tensor.
    for (std::size_t k = params.size(); k-- > 0;) {
      const auto& p = params[k];
      const std::int64_t bytes = p.numel() * static_cast<std::int64_t>(p.element_size());
      bool fits = !buckets.empty();
      if (fits) {
        const auto& b = buckets.back();
        const auto& first = params[b.members.front()];
        std::int64_t used = 0;
        for (auto m : b.members) used += params[m].numel() * static_cast<std::int64_t>(params[m].element_size());
        fits = first.scalar_type() == p.scalar_type() && first.device() == p.device() && used + bytes <= bucket_bytes;
      }
      if (!fits) buckets.emplace_back();
      buckets.back().members.push_back(k);
      bucket_of[k] = buckets.size() - 1;
    }
    for (auto& b : buckets) {
      std::int64_t total = 0;
      for (auto m : b.members) {
        b.offsets.push_back(total);
        total += params[m].numel();
      }
      const auto& first = params[b.members.front()];
      b.flat = torch::zeros({total}, first.options().requires_grad(false));
      stats.bytes_per_step += total * static_cast<std::int64_t>(first.element_size());
    }
    stats.buckets = static_cast<std::int64_t>(buckets.size());
  }

  void reset_for_step() {
    for (auto& b : buckets) {
      b.pending = static_cast<int>(b.members.size());
      b.launched = false;
      b.work.reset();
    }
    next_launch = 0;
    launched_in_hooks = 0;
  }

  void launch(std::size_t index) {
    Bucket& b = buckets[index];
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const auto& p = params[b.members[j]];
      auto slice = b.flat.narrow(0, b.offsets[j], p.numel());
      const auto& g = p.grad();
      if (g.defined())
        slice.copy_(g.reshape({-1}));
      else
        slice.zero_();
    }
    b.work = group->allreduce_sum_async(b.flat);
    b.launched = true;
  }

  // Launches every consecutive ready bucket from the next one in index order.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      launch(next_launch++);
      if (in_backward) launched_in_hooks++;
    }
  }

  void on_gradient_ready(std::size_t k) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!is_armed) return;  // accumulation micro-steps stay local
    Bucket& b = buckets[bucket_of[k]];
    if (b.pending > 0) b.pending--;
    if (overlap) launch_ready();
  }
};

GradientReducer::GradientReducer(std::shared_ptr<ProcessGroup> group, std::vector<at::Tensor> parameters,
                                 std::int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.group = std::move(group);
  s.params = std::move(parameters);
  s.bucket_of.assign(s.params.size(), 0);
  if (s.params.empty()) return;
  s.assign_buckets(std::max<std::int64_t>(bucket_bytes, 1));
  s.reset_for_step();
  for (std::size_t k = 0; k < s.params.size(); ++k) {
    auto accumulator = torch::autograd::impl::grad_accumulator(s.params[k]);
    if (!accumulator) throw Error("GradientReducer: parameter " + std::to_string(k) + " does not require a gradient");
    Impl* impl = impl_.get();
    s.hook_keys.push_back(accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [impl, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          impl->on_gradient_ready(k);
          return outputs;
        })));
    s.accumulators.push_back(std::move(accumulator));
  }
}

GradientReducer::~GradientReducer() {
  auto& s = *impl_;
  for (std::size_t k = 0; k < s.accumulators.size(); ++k) s.accumulators[k]->del_post_hook(s.hook_keys[k]);
}

void GradientReducer::arm() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->reset_for_step();
  impl_->is_armed = true;
  impl_->in_backward = true;
}

void GradientReducer::set_overlap(bool overlap) { impl_->overlap = overlap; }

void GradientReducer::finish() {
  auto& s = *impl_;
  if (s.params.empty()) return;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.is_armed) s.reset_for_step();  // a rank that failed before arming still joins every collective
    s.in_backward = false;
    s.is_armed = false;
    // Parameters backward did not reach (or a failed step) leave their buckets incomplete.
    for (auto& b : s.buckets) b.pending = 0;
    s.launch_ready();
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto& b : s.buckets) b.work->wait();
  s.stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double world = static_cast<double>(s.group->world_size());
  for (auto& b : s.buckets) {
    b.flat.div_(world);
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      auto& p = s.params[b.members[j]];
      auto mean = b.flat.narrow(0, b.offsets[j], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(mean);
      else
        p.mutable_grad() = mean.clone();
    }
    b.work.reset();
  }
  s.stats.steps++;
  const double fraction = static_cast<double>(s.launched_in_hooks) / static_cast<double>(s.buckets.size());
  s.stats.launched_during_backward +=
      (fraction - s.stats.launched_during_backward) / static_cast<double>(s.stats.steps);
}

const ReducerStats& GradientReducer::stats() const { return impl_->stats; }
std::int64_t GradientReducer::num_buckets() const { return static_cast<std::int64_t>(impl_->buckets.size()); }

}  // namespace shoplens
