// The optimizer of a run: AdamW or SGD over four parameter groups (backbone/head x decay/no
// decay). Norm weights, biases and ViT's cls_token/pos_embed never get weight decay; the
// backbone's learning rate is lr x backbone_lr_scale (discriminative fine-tuning).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "shoplens/core/config.h"

namespace torch::optim {
class Optimizer;
}

namespace shoplens {

class Classifier;

struct ParamGroupInfo {
  std::string name;  // "backbone", "backbone_no_decay", "head", "head_no_decay"
  double base_lr = 0;
  double weight_decay = 0;
  std::vector<std::string> parameter_names;
};

class OptimizerSetup {
 public:
  OptimizerSetup(Classifier& model, const OptimConfig& config);
  ~OptimizerSetup();
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const std::vector<ParamGroupInfo>& groups() const { return groups_; }
  // Sets every group's learning rate to its base x factor (the schedule's value for this step).
  void set_lr_factor(double factor);
  double head_lr() const;  // the current head learning rate, for logs

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<ParamGroupInfo> groups_;
};

// True for parameters that must not be decayed (biases, norm weights, ViT tokens).
bool exempt_from_weight_decay(const std::string& name, long dims);

}  // namespace shoplens
