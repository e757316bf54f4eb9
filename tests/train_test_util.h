// A whole trainer in miniature: in-memory images, a small config and model (the trainer tests).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/image_source.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/trainer.h"
#include "model_test_util.h"

namespace shoplens::testing {

// `n` 12x12 images of `classes` classes, each class a brighter channel.
inline std::shared_ptr<InMemoryImageSource> tiny_source(int n, int classes, int seed) {
  auto src = std::make_shared<InMemoryImageSource>(classes);
  for (int i = 0; i < n; ++i) {
    const int label = (i * 7 + seed) % classes;
    std::vector<std::uint8_t> px(12 * 12 * 3);
    for (std::size_t k = 0; k < px.size(); ++k)
      px[k] = static_cast<std::uint8_t>((k % 3 == static_cast<std::size_t>(label) ? 200 : 40) + (k * 13 + i * 5) % 30);
    src->add(std::move(px), 12, 12, PayloadEncoding::kRaw, label);
  }
  return src;
}

// Three epochs of a small CNN on 16-pixel images, a line in the metric log at every step.
inline Config tiny_config(const std::filesystem::path& run_dir) {
  Config c;
  c.run.dir = run_dir.string();
  c.run.seed = 5;
  c.augment.image_size = 16;
  c.loader.batch_size = 4;
  c.loader.workers = 2;
  c.model.name = "small_cnn";
  c.train.epochs = 3;
  c.train.log_every_steps = 1;
  c.train.keep_last = 100;
  c.train.checkpoint_every_steps = 3;
  c.train.deterministic = true;
  c.train.tensorboard = false;
  c.optim.lr = 0.01;
  return c;
}

// 24 train, 9 val and 9 test images of three classes.
inline TrainData tiny_data() {
  TrainData d;
  d.train = tiny_source(24, 3, 0);
  d.val = tiny_source(9, 3, 1);
  d.test = tiny_source(9, 3, 2);
  d.class_names = {"a", "b", "c"};
  return d;
}

// The config's model with its seed's initial weights.
inline std::shared_ptr<Classifier> tiny_model(const Config& c) {
  torch::manual_seed(static_cast<std::uint64_t>(c.run.seed));
  return make_model(testing::spec(c.model.name, 3, c.augment.image_size));
}

}  // namespace shoplens::testing
