// A ModelSpec with the small defaults the model and weight tests use.
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "shoplens/data/loader.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"
#include "shoplens/train/train_step.h"

namespace shoplens::testing {

inline ModelSpec spec(const std::string& name, int classes = 5, int image_size = 64) {
  ModelSpec s;
  s.name = name;
  s.num_classes = classes;
  s.image_size = image_size;
  if (is_text_model(name)) {  // a small vocabulary and one field of each metadata kind
    s.vocab_size = 100;
    s.max_length = 32;
    s.categorical_cardinalities = {3};
    s.numeric_fields = 1;
  }
  return s;
}

// A model without batch statistics, so accumulation and data parallelism must match one big
// batch exactly.
class TinyLinear : public Classifier {
 public:
  TinyLinear(int classes, int size) : Classifier(testing::spec("tiny_linear", classes, size)) {
    fc = register_module("fc", torch::nn::Linear(3 * size * size, classes));
    stem = register_module("stem", torch::nn::Linear(3 * size * size, 3 * size * size));
  }
  at::Tensor forward(const at::Tensor& x) override { return fc->forward(torch::relu(stem->forward(x.flatten(1)))); }
  std::string head_prefix() const override { return "fc."; }
  std::vector<std::string> stage_prefixes() const override { return {"stem."}; }
  void reset_head(int) override {}
  int num_classes() const override { return static_cast<int>(fc->options.out_features()); }
  torch::nn::Linear fc{nullptr}, stem{nullptr};
};

// A loader-less batch of hard labels for TrainStep tests.
inline Batch make_batch(const at::Tensor& images, const at::Tensor& labels) {
  Batch b;
  b.images = images;
  b.labels = labels;
  return b;
}

// A plain SGD step (no momentum, no decay) that skips itself on the device when found_inf is set:
// the kind of optimizer step TrainStepOptions::device_skip stands for (fused AdamW/SGD's found_inf).
inline DeviceSkipStep sgd_skipping_on_device(Classifier& model, double lr) {
  return [&model, lr](const at::Tensor& found_inf) {
    torch::NoGradGuard no_grad;
    for (auto& p : model.parameters())
      if (p.grad().defined()) p.sub_(torch::where(found_inf, torch::zeros_like(p.grad()), p.grad()) * lr);
  };
}

// a and b equal within 1e-5 of b's largest magnitude (parameters of runs that must agree).
inline void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.numel(), b.numel()) << what;
  const double scale = b.abs().max().item<double>();
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * scale) << what << ": max difference " << diff << " (scale " << scale << ")";
}

// The parameters of a run's newest valid checkpoint as one flat vector, the model rebuilt through
// the config the checkpoint saved (no dataset needed): what "the same training" compares.
inline at::Tensor final_parameters(const std::filesystem::path& run, int num_classes) {
  auto found = CheckpointStore(run / "checkpoints", 100).newest_valid();
  EXPECT_TRUE(found.has_value()) << run;
  if (!found) return at::Tensor();
  const Config config = config_from_json(found->state.at("config"), "checkpoint");
  auto model = make_model(model_spec_from_config(config, num_classes));
  restore_model_weights(*model, found->tensors);
  std::vector<at::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().flatten());
  return torch::cat(flat);
}

}  // namespace shoplens::testing
