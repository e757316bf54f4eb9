#include "shoplens/data/loader.h"

#include <torch/torch.h>

#include <opencv2/core.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/image_io.h"

namespace shoplens {

std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed, std::int64_t epoch, bool shuffle) {
  std::vector<std::uint32_t> order(size);
  for (std::size_t i = 0; i < size; ++i) order[i] = static_cast<std::uint32_t>(i);
  if (!shuffle) return order;
  Rng(mix_seed(seed, 0x5EED0DE5ULL, static_cast<std::uint64_t>(epoch))).shuffle(order);
  return order;
}

LoaderOptions loader_options_from_config(const Config& config, bool train) {
  LoaderOptions o;
  o.batch_size = config.loader.batch_size;
  o.workers = config.loader.workers > 0 ? config.loader.workers : resolve_threads(config.run.threads);
  o.prefetch_batches = config.loader.prefetch_batches;
  o.shuffle = train && config.loader.shuffle;
  o.drop_last = train && config.loader.drop_last;
  o.train = train;
  o.seed = static_cast<std::uint64_t>(config.run.seed);
  o.pin_memory = config.loader.pin_memory && wants_cuda(config.train.device);
  return o;
}

ImageBatchBuilder::ImageBatchBuilder(std::shared_ptr<const ImageSource> source, const AugmentConfig& augment,
                                     const LoaderOptions& options)
    : source_(std::move(source)),
      augmenter_(augment, options.train),
      options_(options),
      soft_targets_(options.train && uses_soft_targets(augment)) {
  // Parallelism is per sample across the loader's workers; OpenCV's own pool would only oversubscribe.
  cv::setNumThreads(1);
}

Loader::Loader(const std::shared_ptr<const ImageSource>& source, const AugmentConfig& augment,
               const LoaderOptions& options)
    : Loader(source, std::make_shared<ImageBatchBuilder>(source, augment, options), options) {}

Loader::Loader(std::shared_ptr<const SampleSource> source, std::shared_ptr<BatchBuilder> builder, LoaderOptions options)
    : source_(std::move(source)), builder_(std::move(builder)), options_(std::move(options)) {
  if (!source_ || source_->size() == 0) throw DataError("the loader has no samples to read (empty split?)");
  if (options_.strided_share && options_.global_batch > 0)
    throw UsageError("loader: strided_share (evaluation) and global_batch (training) exclude each other");
  if (dataset_size() == 0) throw DataError("the loader's share of the split is empty");
  if (options_.batch_size < 1 || options_.workers < 1 || options_.prefetch_batches < 1)
    throw UsageError("loader needs batch_size, workers and prefetch_batches >= 1");
  if (options_.global_batch > 0) {
    const std::int64_t share = options_.global_batch / std::max(1, options_.world_size);
    if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size ||
        options_.global_batch % options_.world_size != 0 || share % options_.batch_size != 0)
      throw UsageError("loader: global batch " + std::to_string(options_.global_batch) + " does not split into " +
                       std::to_string(options_.world_size) + " ranks x micro-batches of " +
                       std::to_string(options_.batch_size));
  }
  slots_.resize(options_.prefetch_batches);
}

Loader::~Loader() { stop_workers(); }

std::size_t Loader::dataset_size() const {
  if (!options_.strided_share || options_.world_size <= 1) return source_->size();
  return strided_share_size(source_->size(), options_.rank, options_.world_size);
}

std::int64_t Loader::batches_per_epoch() const {
  const auto n = static_cast<std::int64_t>(dataset_size());
  const std::int64_t b = options_.batch_size;
  if (options_.global_batch > 0) return (n / options_.global_batch) * (options_.global_batch / options_.world_size / b);
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<std::uint64_t> Loader::unread_sample_ids() const {
  std::vector<std::uint64_t> ids;
  if (options_.global_batch <= 0) return ids;
  const std::size_t read = (order_.size() / options_.global_batch) * options_.global_batch;
  for (std::size_t p = read; p < order_.size(); ++p) ids.push_back(source_->sample_id(order_[p]));
  return ids;
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  stopping_ = false;
}

void Loader::start_epoch(std::int64_t epoch, std::int64_t skip_batches) {
  stop_workers();
  epoch_ = epoch;
  order_ = options_.epoch_order ? options_.epoch_order(epoch)
                                : epoch_order(dataset_size(), options_.seed, epoch, options_.shuffle);
  if (options_.strided_share && options_.world_size > 1)
    for (auto& index : order_)
      index = static_cast<std::uint32_t>(options_.rank + static_cast<std::size_t>(index) * options_.world_size);
  builder_->arrange(order_, epoch, options_.global_batch > 0 ? options_.global_batch : options_.batch_size);
  num_batches_ = batches_per_epoch();
  positions_.clear();
  if (options_.global_batch > 0) {
    const std::int64_t g = options_.global_batch, share = g / options_.world_size;
    const std::int64_t steps = static_cast<std::int64_t>(order_.size()) / g;
    positions_.reserve(static_cast<std::size_t>(steps * share));
    for (std::int64_t k = 0; k < steps; ++k)
      for (std::int64_t j = 0; j < share; ++j)
        positions_.push_back(static_cast<std::uint32_t>(k * g + options_.rank * share + j));
  }
  if (num_batches_ == 0 && options_.global_batch > 0)
    throw DataError("the dataset has " + std::to_string(source_->size()) + " samples, fewer than one global batch of " +
                    std::to_string(options_.global_batch) +
                    " (micro-batch x accumulation x world size): use a smaller batch");
  if (num_batches_ == 0)
    throw DataError("the dataset has " + std::to_string(dataset_size()) + " samples, fewer than one batch of " +
                    std::to_string(options_.batch_size) + " (set loader.drop_last=false or a smaller batch)");
  next_to_build_ = next_to_deliver_ = std::clamp<std::int64_t>(skip_batches, 0, num_batches_);
  for (auto& s : slots_) s = Slot{};
  stats_ = LoaderStats{};
  epoch_start_ = std::chrono::steady_clock::now();
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void Loader::worker_loop() {
  while (true) {
    std::int64_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] {
        return stopping_ ||
               (next_to_build_ < num_batches_ && next_to_build_ < next_to_deliver_ + options_.prefetch_batches);
      });
      if (stopping_) return;
      index = next_to_build_++;
    }
    Slot result;
    try {
      result.batch = build_batch(index);
    } catch (...) {
      result.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[index % options_.prefetch_batches] = std::move(result);
    }
    ready_cv_.notify_all();
  }
}

at::Tensor ImageBatchBuilder::acquire_images(std::int64_t batch_size) {
  const std::int64_t s = augmenter_.output_size();
  // Pinned batches are not pooled: a copy to the device may still be reading one after the step
  // let go of it, and torch's host allocator reuses a pinned block only once those copies are done.
  if (options_.pin_memory)
    return torch::empty({batch_size, 3, s, s}, torch::TensorOptions(torch::kFloat32).pinned_memory(true));
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    // A pooled tensor whose only owner is the pool is free to overwrite; reusing it avoids
    // faulting in fresh pages for every batch.
    for (auto& t : image_pool_)
      if (t.use_count() == 1 && t.size(0) == batch_size) return t;
    if (batch_size == options_.batch_size &&
        static_cast<int>(image_pool_.size()) < options_.prefetch_batches + options_.workers + 2) {
      image_pool_.push_back(torch::empty({batch_size, 3, s, s}, torch::kFloat32));
      return image_pool_.back();
    }
  }
  return torch::empty({batch_size, 3, s, s}, torch::kFloat32);
}

Batch Loader::build_batch(std::int64_t index) {
  const std::int64_t begin = index * options_.batch_size;
  const std::int64_t readable =
      positions_.empty() ? static_cast<std::int64_t>(order_.size()) : static_cast<std::int64_t>(positions_.size());
  const std::int64_t end = std::min<std::int64_t>(begin + options_.batch_size, readable);
  std::vector<std::uint32_t> indices;
  std::vector<std::uint64_t> positions;
  indices.reserve(static_cast<std::size_t>(end - begin));
  positions.reserve(static_cast<std::size_t>(end - begin));
  for (std::int64_t k = begin; k < end; ++k) {
    const std::uint64_t position = positions_.empty() ? static_cast<std::uint64_t>(k) : positions_[k];
    positions.push_back(position);
    indices.push_back(order_[position]);
  }
  Batch batch = builder_->build(indices, positions, epoch_, index);
  batch.index = index;
  return batch;
}

Batch ImageBatchBuilder::build(const std::vector<std::uint32_t>& indices, const std::vector<std::uint64_t>& positions,
                               std::int64_t epoch, std::int64_t batch_index) {
  const auto n = static_cast<std::int64_t>(indices.size());
  Batch batch;
  batch.index = batch_index;
  batch.images = acquire_images(n);
  batch.labels = torch::empty({n}, torch::kInt64);
  batch.sample_ids.resize(n);
  batch.sample_seeds.resize(n);
  float* images = batch.images.data_ptr<float>();
  auto* labels = batch.labels.data_ptr<std::int64_t>();
  thread_local cv::Mat decoded;
  for (std::int64_t k = 0; k < n; ++k) {
    const SampleRef s = source_->sample(indices[k]);
    cv::Mat rgb;
    if (s.encoding == PayloadEncoding::kRaw) {
      rgb = cv::Mat(s.height, s.width, CV_8UC3, const_cast<std::uint8_t*>(s.data));
    } else {
      try {
        decode_jpeg_into(s.data, s.size, decoded);
      } catch (const DataError& e) {
        throw DataError("sample " + std::to_string(s.sample_id) + ": " + e.what());
      }
      rgb = decoded;
    }
    const std::uint64_t sample_seed = mix_seed(options_.seed, static_cast<std::uint64_t>(epoch), positions[k]);
    augmenter_.apply(rgb, sample_seed, images + k * augmenter_.floats_per_sample());
    batch.sample_seeds[k] = sample_seed;
    labels[k] = s.label;
    batch.sample_ids[k] = s.sample_id;
  }
  if (soft_targets_) {
    batch.targets = torch::empty({n, source_->num_classes()}, torch::kFloat32);
    batch.mixed =
        augmenter_.mix_batch(images, static_cast<int>(n), labels, source_->num_classes(),
                             mix_seed(options_.seed, 0xB47C4ULL + static_cast<std::uint64_t>(epoch), batch_index),
                             batch.targets.data_ptr<float>());
  }
  return batch;
}

std::optional<Batch> Loader::next() {
  if (workers_.empty()) throw Error("Loader::next() called before start_epoch()");
  if (next_to_deliver_ >= num_batches_) return std::nullopt;
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& waiting = slots_[next_to_deliver_ % options_.prefetch_batches];
    const auto t0 = std::chrono::steady_clock::now();
    ready_cv_.wait(lock, [&] { return waiting.batch.has_value() || waiting.error; });
    stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slot = std::move(waiting);
    waiting = Slot{};
    ++next_to_deliver_;
  }
  work_cv_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  stats_.batches += 1;
  stats_.samples += static_cast<std::uint64_t>(slot.batch->size());
  if (slot.batch->is_text()) {
    stats_.padded_tokens += static_cast<std::uint64_t>(slot.batch->padded_tokens());
    stats_.real_tokens += static_cast<std::uint64_t>(slot.batch->real_tokens());
  }
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  return std::move(slot.batch);
}

}  // namespace shoplens
