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

double measure_input_rate(const TrainData& data, const Config& config, double seconds) {
  if (!data.train || data.train->size() == 0) return 0;
  LoaderOptions options = loader_options_from_config(config, /*train=*/true);
  auto loader = make_split_loader(data, data.train, config, options);
  loader->start_epoch(0);
  using Clock = std::chrono::steady_clock;
  // The first batch pays for starting the workers and opening shards, and the prefetch ring fills
  // meanwhile: timing starts once those batches are consumed.
  for (int i = 0; i <= options.prefetch_batches; ++i)
    if (!loader->next()) return 0;  // an epoch too short to measure: no ceiling
  const auto start = Clock::now();
  std::uint64_t samples = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    auto batch = loader->next();
    if (!batch) break;  // one epoch at most
    samples += static_cast<std::uint64_t>(batch->size());
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed > 0 && samples > 0 ? samples / elapsed : 0;
}

}  // namespace shoplens
