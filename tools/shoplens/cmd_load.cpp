// `shoplens load`: runs the training loader over prepared shards (image or text), checks that
// every sample of the split is delivered once per epoch, and reports throughput, time spent
// waiting and, for text, the padding fraction.
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/augment_preview.h"
#include "shoplens/data/open_dataset.h"
#include "shoplens/data/loader.h"

namespace shoplens::cli {
namespace {

class LoadCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-s,--shards", "data.shards", "prepared dataset folder (image or text shards)");
    options_.add_flag_for(app, "-b,--batch-size", "loader.batch_size", "samples per batch");
    options_.add_flag_for(app, "--workers", "loader.workers", "decode threads (0: run.threads)");
    options_.add_flag_for(app, "--out", "run.dir", "run directory for load.json and the log");
    app.add_option("--split", split_, "split to read: train, val or test");
    app.add_option("--epochs", epochs_, "epochs to run")->check(positive());
    app.add_flag("--eval", eval_, "use the evaluation transform instead of training augmentation");
    app.add_flag("--verify", verify_, "check every shard's data checksum before loading");
    app.add_option("--preview", preview_, "write a PNG grid of the first batch's augmented images");
  }

  int run() override {
    auto config = begin(options_);
    if (!config) return 0;
    if (config->data.shards.empty()) throw UsageError("load: --shards (or data.shards) is required");
    auto split = parse_split(split_);
    if (!split) throw UsageError("load: --split '" + split_ + "' is not train, val or test");
    const auto run_dir = open_run_dir(*config, "load");

    const bool train = !eval_;
    const LoaderOptions options = loader_options_from_config(*config, train);
    OpenedSplit opened = open_split_loader(*config, *split, verify_, options);
    if (opened.text && !preview_.empty())
      throw UsageError("load: --preview shows augmented images; " + config->data.shards + " holds text");
    const bool text = opened.text;
    const auto& dataset = opened.source;
    const auto& class_names = opened.class_names;
    Loader& loader = *opened.loader;
    if (text)
      spdlog::info("load: {} examples in split {}, batch {}, {} batches/epoch, text.max_length {}, bucketing {}",
                   dataset->size(), split_, config->loader.batch_size, loader.batches_per_epoch(),
                   config->text.max_length, config->text.bucket_by_length ? "on" : "off");
    else
      spdlog::info("load: {} samples in split {}, batch {}, {} batches/epoch, image {}px", dataset->size(), split_,
                   config->loader.batch_size, loader.batches_per_epoch(), config->augment.image_size);

    nlohmann::json epochs = nlohmann::json::array();
    std::vector<std::uint64_t> label_counts(dataset->num_classes(), 0);
    preview_classes_ = class_names;
    for (int epoch = 0; epoch < epochs_; ++epoch)
      epochs.push_back(read_epoch(loader, *config, epoch, dataset->size(), text, label_counts));
    nlohmann::json labels = nlohmann::json::object();
    for (std::size_t c = 0; c < label_counts.size(); ++c) labels[class_names[c]] = label_counts[c];
    nlohmann::json result = {{"shards", config->data.shards},       {"split", split_},
                             {"samples_in_split", dataset->size()}, {"epochs", epochs},
                             {"labels_delivered", labels},          {"workers", options.workers},
                             {"kind", text ? "text" : "image"}};
    write_file_atomic(run_dir / "load.json", result.dump(2) + "\n");
    std::cout << result.dump(2) << std::endl;
    return 0;
  }

  // One epoch through the loader: every sample at most once (a duplicate is an error), the labels
  // counted, the first batch's images written as a preview when asked.
  nlohmann::json read_epoch(Loader& loader, const Config& config, int epoch, std::size_t split_size, bool text,
                            std::vector<std::uint64_t>& label_counts) const {
    loader.start_epoch(epoch);
    std::set<std::uint64_t> seen;
    std::uint64_t duplicates = 0;
    Progress progress("load epoch " + std::to_string(epoch), loader.batches_per_epoch(), "batch");
    while (auto batch = loader.next()) {
      throw_if_interrupted();
      if (epoch == 0 && batch->index == 0 && !preview_.empty())
        write_augment_preview(*batch, config.augment, !eval_, preview_classes_, preview_);
      for (auto id : batch->sample_ids) duplicates += !seen.insert(id).second;
      const auto* labels = batch->labels.data_ptr<std::int64_t>();
      for (std::int64_t k = 0; k < batch->labels.size(0); ++k) label_counts[labels[k]]++;
      progress.advance();
    }
    progress.finish();
    if (duplicates)
      throw Error("load: " + std::to_string(duplicates) + " samples delivered twice in epoch " + std::to_string(epoch));
    const auto& st = loader.stats();
    const std::uint64_t unseen = split_size - seen.size();
    nlohmann::json record = {{"epoch", epoch},
                             {"batches", st.batches},
                             {"samples", st.samples},
                             {"seconds", st.seconds},
                             {"samples_per_second", st.samples_per_second()},
                             {"wait_seconds", st.wait_seconds},
                             {"not_delivered", unseen}};
    if (text) {
      record["padding_fraction"] = st.padding_fraction();
      record["real_tokens"] = st.real_tokens;
      spdlog::info("load: epoch {}: {:.1f}% of the token slots are padding", epoch, 100.0 * st.padding_fraction());
    }
    spdlog::info(
        "load: epoch {}: {} samples in {:.2f} s = {:.1f} samples/s; consumer waited {:.2f} s; {} not delivered{}",
        epoch, st.samples, st.seconds, st.samples_per_second(), st.wait_seconds, unseen,
        unseen && config.loader.drop_last ? " (the last partial batch, loader.drop_last=true)" : "");
    return record;
  }

 private:
  ConfigOptions options_;
  std::string split_ = "train";
  int epochs_ = 1;
  bool eval_ = false;
  bool verify_ = false;
  std::string preview_;
  std::vector<std::string> preview_classes_;  // the split's class names, for the preview's captions
};

}  // namespace

std::unique_ptr<Command> make_load_command() { return std::make_unique<LoadCommand>(); }

}  // namespace shoplens::cli
