#include "shoplens/data/open_dataset.h"

#include "shoplens/data/shards.h"
#include "shoplens/data/text_batches.h"
#include "shoplens/data/text_shards.h"
#include "shoplens/data/text_task.h"

namespace shoplens {
namespace {

struct Opened {
  OpenedSplit split;
  std::shared_ptr<const TextSource> text;
  std::shared_ptr<const ShardDataset> images;
};

Opened open_either(const std::filesystem::path& shards, Split split, bool verify) {
  Opened o;
  o.split.text = is_text_dataset(shards);
  if (o.split.text) {
    if (verify) verify_text_shards(shards);
    o.text = open_text_split(shards, split);
    o.split.source = o.text;
    o.split.class_names = text_class_names();
  } else {
    o.images = ShardDataset::open(shards, split, verify);
    o.split.source = o.images;
    o.split.class_names = o.images->info().classes;
  }
  return o;
}

}  // namespace

OpenedSplit open_split(const std::filesystem::path& shards, Split split, bool verify) {
  return std::move(open_either(shards, split, verify).split);
}

OpenedSplit open_split_loader(const Config& config, Split split, bool verify, const LoaderOptions& options) {
  Opened o = open_either(config.data.shards, split, verify);
  if (o.text) {
    const TextDatasetInfo info = read_text_dataset_info(config.data.shards);
    o.split.loader = std::make_unique<Loader>(
        o.split.source, std::make_shared<TextBatchBuilder>(o.text, text_batch_options(config, info)), options);
  } else {
    o.split.loader = std::make_unique<Loader>(o.images, config.augment, options);
  }
  return std::move(o.split);
}

}  // namespace shoplens
