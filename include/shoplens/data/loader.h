// The training loader: worker threads build batches (images: decode and augment straight into
// batch tensors; text: see text_batches.h) a bounded number of batches ahead of the consumer. The sample order of an
// epoch is a function of (seed, epoch, dataset size) only, and every sample's augmentation of (seed, epoch, position),
// so a run is reproducible whatever the thread count.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/batch.h"
#include "shoplens/data/image_source.h"

namespace shoplens {

// Samples rank r reads of a split of n under strided sharding (r, r + world, r + 2 world, ...).
inline std::size_t strided_share_size(std::size_t n, int rank, int world_size) {
  const auto r = static_cast<std::size_t>(rank), w = static_cast<std::size_t>(world_size);
  return n > r ? (n - r + w - 1) / w : 0;
}

// The global order of one epoch: a seeded permutation (or identity without shuffle).
std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed, std::int64_t epoch, bool shuffle);

struct LoaderOptions {
  int batch_size = 32;
  int workers = 1;
  int prefetch_batches = 4;
  bool shuffle = true;
  bool drop_last = true;
  bool train = true;  // training augmentation (else the eval transform)
  std::uint64_t seed = 1234;
  // Replaces the shuffled order (e.g. a class-balanced sampler). Must be a function of the epoch
  // only, so resuming mid-epoch sees the same order.
  std::function<std::vector<std::uint32_t>(std::int64_t epoch)> epoch_order;
  // Step-wise sharding for data parallelism (docs/DISTRIBUTED.md). Each optimizer step takes the
  // next `global_batch` positions of the epoch's global order; rank r reads its contiguous share
  // (global_batch / world_size), in micro-batches of batch_size. Augmentation is seeded by the
  // global position, so a sample is transformed alike whatever the world size. Only whole global
  // steps are read; the order's last (size mod global_batch) positions wait for a later epoch's
  // shuffle. 0: no sharding (the whole order in batches, drop_last as set).
  std::int64_t global_batch = 0;
  int rank = 0;
  int world_size = 1;
  // Evaluation sharding: read only the samples rank, rank + world_size, rank + 2 world_size, ...
  // (every sample in exactly one rank's share, none padded in twice). Not with global_batch.
  bool strided_share = false;
  // Batch images in page-locked host memory, for a step that copies them to a CUDA device: the copy
  // is then one DMA the host need not wait for, not a staged copy of pageable pages. Needs CUDA.
  bool pin_memory = false;
};

LoaderOptions loader_options_from_config(const Config& config, bool train);

struct LoaderStats {
  std::uint64_t batches = 0;
  std::uint64_t samples = 0;
  std::uint64_t padded_tokens = 0;  // text: token slots delivered (rows x padded length)
  std::uint64_t real_tokens = 0;    // text: real tokens among them
  double seconds = 0;               // since the epoch started
  double wait_seconds = 0;          // time the consumer spent blocked in next()
  double samples_per_second() const { return seconds > 0 ? samples / seconds : 0.0; }
  double padding_fraction() const {
    return padded_tokens ? 1.0 - static_cast<double>(real_tokens) / padded_tokens : 0.0;
  }
};

// The kind-specific half of the loader: turns a list of samples into a Batch. Called from several
// worker threads at once.
class BatchBuilder {
 public:
  virtual ~BatchBuilder() = default;
  // `indices` index the source; `positions` are the samples' places in the epoch's global order
  // (per-sample randomness is seeded by them, so it does not depend on the world size).
  virtual Batch build(const std::vector<std::uint32_t>& indices, const std::vector<std::uint64_t>& positions,
                      std::int64_t epoch, std::int64_t batch_index) = 0;
  // May permute the epoch's order before it is read, within consecutive groups of `unit` positions
  // and never across the last whole unit (the tail stays where it is). A function of its arguments
  // only, so every rank and every resume sees the same order.
  virtual void arrange(std::vector<std::uint32_t>& order, std::int64_t epoch, std::int64_t unit) const {}
};

// Images: decode, augment (mixup/cutmix on the batch), normalise.
class ImageBatchBuilder : public BatchBuilder {
 public:
  ImageBatchBuilder(std::shared_ptr<const ImageSource> source, const AugmentConfig& augment,
                    const LoaderOptions& options);
  Batch build(const std::vector<std::uint32_t>& indices, const std::vector<std::uint64_t>& positions,
              std::int64_t epoch, std::int64_t batch_index) override;

 private:
  at::Tensor acquire_images(std::int64_t batch_size);
  std::shared_ptr<const ImageSource> source_;
  Augmenter augmenter_;
  LoaderOptions options_;
  bool soft_targets_;
  std::mutex pool_mutex_;
  std::vector<at::Tensor> image_pool_;  // reused when the consumer has let go of them
};

class Loader {
 public:
  Loader(std::shared_ptr<const SampleSource> source, std::shared_ptr<BatchBuilder> builder, LoaderOptions options);
  // The image loader.
  Loader(const std::shared_ptr<const ImageSource>& source, const AugmentConfig& augment, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts an epoch; `skip_batches` resumes mid-epoch without re-reading what was consumed.
  void start_epoch(std::int64_t epoch, std::int64_t skip_batches = 0);
  // The next batch of the epoch in order, or nullopt at its end. Rethrows worker errors.
  std::optional<Batch> next();

  std::int64_t batches_per_epoch() const;
  // With sharding: the sample ids of the current epoch's order that no step reads (the tail).
  std::vector<std::uint64_t> unread_sample_ids() const;
  // Samples this loader reads from (its rank's share with strided_share).
  std::size_t dataset_size() const;
  const LoaderStats& stats() const { return stats_; }

 private:
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  void stop_workers();
  void worker_loop();
  Batch build_batch(std::int64_t index);

  std::shared_ptr<const SampleSource> source_;
  std::shared_ptr<BatchBuilder> builder_;
  LoaderOptions options_;

  std::vector<std::uint32_t> order_;
  std::vector<std::uint32_t> positions_;  // with sharding: this rank's positions in order_, in reading order
  std::int64_t epoch_ = 0;
  std::int64_t num_batches_ = 0;
  std::int64_t next_to_build_ = 0;
  std::int64_t next_to_deliver_ = 0;
  std::vector<Slot> slots_;  // ring of prefetch_batches
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable ready_cv_;
  std::vector<std::thread> workers_;
  LoaderStats stats_;
  std::chrono::steady_clock::time_point epoch_start_;
};

}  // namespace shoplens
