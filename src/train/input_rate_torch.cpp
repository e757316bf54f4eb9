// The training loader of a split, and how fast it delivers batches on its own (find-batch's
// ceiling on any step's images/s).
#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/data/image_source.h"
#include "shoplens/data/loader.h"
#include "shoplens/train/trainer.h"

namespace shoplens {

std::unique_ptr<Loader> make_split_loader(const TrainData& data, const std::shared_ptr<const SampleSource>& split,
                                          const Config& config, const LoaderOptions& options) {
  if (data.make_builder) return std::make_unique<Loader>(split, data.make_builder(split, options), options);
  auto images = std::dynamic_pointer_cast<const ImageSource>(split);
  if (!images) throw Error("trainer: a split that is not an ImageSource needs TrainData::make_builder");
  return std::make_unique<Loader>(images, config.augment, options);
}

InputRate measure_input_rate(const TrainData& data, const Config& config, double seconds) {
  InputRate rate;
  if (!data.train || data.train->size() == 0) return rate;
  LoaderOptions options = loader_options_from_config(config, /*train=*/true);
  auto loader = make_split_loader(data, data.train, config, options);
  loader->start_epoch(0);
  using Clock = std::chrono::steady_clock;
  // The first batch pays for starting the workers and opening shards, and the prefetch ring fills
  // meanwhile: timing starts once those batches are consumed.
  for (int i = 0; i <= options.prefetch_batches; ++i)
    if (!loader->next()) return rate;  // an epoch too short to measure: no ceiling
  // The whole window, over as many epochs as it takes: a split that a fast loader reads in under a
  // second gave a figure as noisy as its epoch was short (an H100's loader read 5,200 to 7,200
  // samples/s of the same shards in one-epoch windows and kept 5,400 beside training). Each new
  // epoch's start (a fresh shuffle, workers refilling the ring) is timed, as training pays it too.
  const auto start = Clock::now();
  std::uint64_t samples = 0;
  int epoch = 0;  // the epoch being read
  while (rate.seconds < seconds) {
    auto batch = loader->next();
    if (!batch) {
      if (epoch + 1 >= kMaxInputRateEpochs) break;
      loader->start_epoch(++epoch);
      continue;
    }
    samples += static_cast<std::uint64_t>(batch->size());
    rate.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (rate.seconds > 0 && samples > 0) rate.samples_per_second = static_cast<double>(samples) / rate.seconds;
  rate.epochs = epoch + 1;
  return rate;
}

}  // namespace shoplens
