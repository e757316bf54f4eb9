#include "shoplens/train/ema.h"

#include <algorithm>

#include <torch/torch.h>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace {

// The model's parameters then buffers, in the order WeightsEma keeps them.
std::vector<at::Tensor> model_tensors(const Classifier& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.named_parameters(true)) out.push_back(p.value());
  for (const auto& b : model.named_buffers(true)) out.push_back(b.value());
  return out;
}

}  // namespace

WeightsEma::WeightsEma(const Classifier& model, double decay) : decay_(decay) {
  if (!(decay >= 0.0 && decay < 1.0))
    throw ConfigError("train.ema_decay must be in [0, 1), got " + std::to_string(decay));
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters(true)) {
    names_.push_back(p.key());
    tensors_.push_back(p.value().detach().clone());
  }
  parameter_count_ = names_.size();
  for (const auto& b : model.named_buffers(true)) {
    names_.push_back(b.key());
    tensors_.push_back(b.value().detach().clone());
  }
}

double WeightsEma::decay_at(std::int64_t steps_before) const {
  const auto n = static_cast<double>(std::max<std::int64_t>(0, steps_before));
  return std::min(decay_, (1.0 + n) / (10.0 + n));
}

void WeightsEma::update(const Classifier& model, std::int64_t steps_before) {
  torch::NoGradGuard no_grad;
  const double decay = decay_at(steps_before);
  // The model's parameters and buffers keep their tensor objects for the whole run (moves and
  // restores write into them): look them up by name once, not at every step.
  if (source_ != &model) {
    source_tensors_ = model_tensors(model);
    source_ = &model;
  }
  const auto& current = source_tensors_;
  if (current.size() != tensors_.size())
    throw Error("ema: the model has " + std::to_string(current.size()) + " tensors, the average " +
                std::to_string(tensors_.size()));
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    // Integer buffers (BatchNorm's batch counter) cannot be averaged: like every buffer, copied.
    if (i < parameter_count_ && tensors_[i].is_floating_point()) {
      tensors_[i].mul_(decay).add_(current[i].detach(), 1.0 - decay);
    } else {
      tensors_[i].copy_(current[i]);
    }
  }
}

void WeightsEma::swap_with(Classifier& model) {
  torch::NoGradGuard no_grad;
  const auto current = model_tensors(model);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    at::Tensor held = current[i].detach().clone();
    current[i].detach().copy_(tensors_[i]);
    tensors_[i] = std::move(held);
  }
}

EmaInModel::EmaInModel(WeightsEma* ema, Classifier& model) : ema_(ema), model_(model) {
  if (ema_) ema_->swap_with(model_);
}

EmaInModel::~EmaInModel() {
  if (ema_) ema_->swap_with(model_);
}

}  // namespace shoplens
