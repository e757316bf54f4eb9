#include "shoplens/data/load_check.h"

#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/progress.h"
#include "shoplens/data/augment_preview.h"
#include "shoplens/data/loader.h"
#include "shoplens/data/open_dataset.h"

namespace shoplens {
namespace {

struct EpochReader {
  const Config& config;
  const LoadCheckOptions& options;
  const OpenedSplit& opened;
  std::vector<std::uint64_t> label_counts;

  // One epoch: every sample at most once (a duplicate is an error), the labels counted, the first
  // batch's images written as a preview when asked.
  LoadEpoch read(int epoch) {
    Loader& loader = *opened.loader;
    loader.start_epoch(epoch);
    std::set<std::uint64_t> seen;
    std::uint64_t duplicates = 0;
    Progress progress("load epoch " + std::to_string(epoch), loader.batches_per_epoch(), "batch");
    while (auto batch = loader.next()) {
      throw_if_interrupted();
      if (epoch == 0 && batch->index == 0 && !options.preview.empty())
        write_augment_preview(*batch, config.augment, !options.eval, opened.class_names, options.preview);
      for (auto id : batch->sample_ids) duplicates += !seen.insert(id).second;
      const auto* labels = batch->labels.data_ptr<std::int64_t>();
      for (std::int64_t k = 0; k < batch->labels.size(0); ++k) label_counts[labels[k]]++;
      progress.advance();
    }
    progress.finish();
    if (duplicates)
      throw Error("load: " + std::to_string(duplicates) + " samples delivered twice in epoch " + std::to_string(epoch));
    return record(epoch, opened.source->size() - seen.size());
  }

  LoadEpoch record(int epoch, std::uint64_t unseen) const {
    const auto& st = opened.loader->stats();
    LoadEpoch r;
    r.epoch = epoch;
    r.batches = static_cast<std::int64_t>(st.batches);
    r.samples = static_cast<std::int64_t>(st.samples);
    r.seconds = st.seconds;
    r.samples_per_second = st.samples_per_second();
    r.wait_seconds = st.wait_seconds;
    r.not_delivered = unseen;
    if (opened.text) {
      r.padding_fraction = st.padding_fraction();
      r.real_tokens = static_cast<std::int64_t>(st.real_tokens);
      spdlog::info("load: epoch {}: {:.1f}% of the token slots are padding", epoch, 100.0 * st.padding_fraction());
    }
    spdlog::info(
        "load: epoch {}: {} samples in {:.2f} s = {:.1f} samples/s; consumer waited {:.2f} s; {} not delivered{}",
        epoch, st.samples, st.seconds, st.samples_per_second(), st.wait_seconds, unseen,
        unseen && config.loader.drop_last ? " (the last partial batch, loader.drop_last=true)" : "");
    return r;
  }
};

void log_start(const Config& config, const OpenedSplit& opened, const std::string& split) {
  const Loader& loader = *opened.loader;
  if (opened.text)
    spdlog::info("load: {} in split {}, batch {}, {} batches/epoch, text.max_length {}, bucketing {}",
                 count_of(static_cast<std::int64_t>(opened.source->size()), "example"), split, config.loader.batch_size,
                 loader.batches_per_epoch(), config.text.max_length, config.text.bucket_by_length ? "on" : "off");
  else
    spdlog::info("load: {} in split {}, batch {}, {} batches/epoch, image {}px",
                 count_of(static_cast<std::int64_t>(opened.source->size()), "sample"), split, config.loader.batch_size,
                 loader.batches_per_epoch(), config.augment.image_size);
}

}  // namespace

nlohmann::json LoadReport::to_json() const {
  nlohmann::json epoch_records = nlohmann::json::array();
  for (const auto& e : epochs) {
    nlohmann::json r = {{"epoch", e.epoch},
                        {"batches", e.batches},
                        {"samples", e.samples},
                        {"seconds", e.seconds},
                        {"samples_per_second", e.samples_per_second},
                        {"wait_seconds", e.wait_seconds},
                        {"not_delivered", e.not_delivered}};
    if (e.padding_fraction) r["padding_fraction"] = *e.padding_fraction;
    if (e.real_tokens) r["real_tokens"] = *e.real_tokens;
    epoch_records.push_back(std::move(r));
  }
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [name, count] : labels_delivered) labels[name] = count;
  return {{"shards", shards},
          {"split", split_name(split)},
          {"samples_in_split", samples_in_split},
          {"epochs", epoch_records},
          {"labels_delivered", labels},
          {"workers", workers},
          {"kind", text ? "text" : "image"}};
}

LoadReport run_load_check(const Config& config, const LoadCheckOptions& options) {
  if (config.data.shards.empty()) throw UsageError("load: --shards (or data.shards) is required");
  const LoaderOptions loader_options = loader_options_from_config(config, !options.eval);
  const OpenedSplit opened = open_split_loader(config, options.split, options.verify, loader_options);
  if (opened.text && !options.preview.empty())
    throw UsageError("load: --preview shows augmented images; " + config.data.shards + " holds text");
  log_start(config, opened, split_name(options.split));
  EpochReader reader{config, options, opened, std::vector<std::uint64_t>(opened.source->num_classes(), 0)};
  LoadReport report;
  report.shards = config.data.shards;
  report.split = options.split;
  report.samples_in_split = opened.source->size();
  for (int epoch = 0; epoch < options.epochs; ++epoch) report.epochs.push_back(reader.read(epoch));
  for (std::size_t c = 0; c < reader.label_counts.size(); ++c)
    report.labels_delivered.emplace_back(opened.class_names[c], reader.label_counts[c]);
  report.workers = loader_options.workers;
  report.text = opened.text;
  return report;
}

}  // namespace shoplens
