#include "shoplens/train/optimizer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "multi_tensor_optim.h"
#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace {

// auto: fused where this LibTorch build and the parameters' device and dtype have the kernels,
// else foreach. An explicit fused choice that cannot run is refused, naming the key and why.
OptimizerImpl resolve_implementation(OptimizerImpl wanted, const std::vector<std::vector<at::Tensor>>& params) {
  if (wanted != OptimizerImpl::kAuto && wanted != OptimizerImpl::kFused) return wanted;
  std::string why;
  for (const auto& group : params)
    for (const auto& p : group)
      if (!fused_optimizer_available(p.device(), p.scalar_type(), &why)) {
        if (wanted == OptimizerImpl::kAuto) return OptimizerImpl::kForeach;
        throw ConfigError("optim.implementation=fused cannot run: " + why + "; choose auto, foreach or reference");
      }
  return OptimizerImpl::kFused;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind, OptimizerImpl impl,
                                                        std::vector<torch::optim::OptimizerParamGroup> groups,
                                                        double lr) {
  const StepKernel kernel = impl == OptimizerImpl::kFused ? StepKernel::kFused : StepKernel::kForeach;
  if (kind == OptimizerKind::kAdamW) {
    torch::optim::AdamWOptions defaults(lr);
    if (impl == OptimizerImpl::kReference) return std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
    return std::make_unique<MultiTensorAdamW>(std::move(groups), defaults, kernel);
  }
  torch::optim::SGDOptions defaults(lr);
  if (impl == OptimizerImpl::kReference) return std::make_unique<torch::optim::SGD>(std::move(groups), defaults);
  return std::make_unique<MultiTensorSgd>(std::move(groups), defaults, kernel);
}

}  // namespace

bool exempt_from_weight_decay(const std::string& name, long dims) {
  if (dims <= 1) return true;  // biases and norm scales
  auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return ends_with("cls_token") || ends_with("pos_embed");
}

OptimizerSetup::OptimizerSetup(Classifier& model, const OptimConfig& config) {
  const std::string head = model.head_prefix();
  std::vector<std::vector<at::Tensor>> params(4);
  groups_ = {{"backbone", config.lr * config.backbone_lr_scale, config.weight_decay, {}},
             {"backbone_no_decay", config.lr * config.backbone_lr_scale, 0.0, {}},
             {"head", config.lr, config.weight_decay, {}},
             {"head_no_decay", config.lr, 0.0, {}}};
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const bool is_head = item.key().rfind(head, 0) == 0;
    const bool no_decay = exempt_from_weight_decay(item.key(), item.value().dim());
    const int g = (is_head ? 2 : 0) + (no_decay ? 1 : 0);
    params[g].push_back(item.value());
    groups_[g].parameter_names.push_back(item.key());
  }

  // Empty groups are dropped: LibTorch's optimizers reject them.
  std::vector<torch::optim::OptimizerParamGroup> torch_groups;
  std::vector<ParamGroupInfo> kept;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (params[g].empty()) continue;
    std::unique_ptr<torch::optim::OptimizerOptions> options;
    if (config.name == OptimizerKind::kAdamW) {
      auto o = std::make_unique<torch::optim::AdamWOptions>(groups_[g].base_lr);
      o->betas({config.betas.at(0), config.betas.at(1)}).eps(config.eps).weight_decay(groups_[g].weight_decay);
      options = std::move(o);
    } else {
      auto o = std::make_unique<torch::optim::SGDOptions>(groups_[g].base_lr);
      o->momentum(config.momentum).nesterov(config.nesterov).weight_decay(groups_[g].weight_decay);
      if (config.nesterov && config.momentum <= 0) throw ConfigError("optim.nesterov=true needs optim.momentum > 0");
      options = std::move(o);
    }
    torch_groups.emplace_back(params[g], std::move(options));
    kept.push_back(groups_[g]);
  }
  groups_ = std::move(kept);
  if (torch_groups.empty()) throw ConfigError("model '" + model.spec().name + "' has no parameters to train");
  kind_ = config.name;
  implementation_ = resolve_implementation(config.implementation, params);
  optimizer_ = make_optimizer(kind_, implementation_, std::move(torch_groups), config.lr);
}

std::string OptimizerSetup::description() const {
  return fmt::format("{}, {} step over {} parameter group{}", name_in(kOptimizerKindNames, kind_),
                     name_in(kOptimizerImplNames, implementation_), groups_.size(), groups_.size() == 1 ? "" : "s");
}

OptimizerSetup::~OptimizerSetup() = default;

std::function<void(const at::Tensor&)> device_skip_for(OptimizerSetup& optim, bool cuda, bool ema) {
  if (!cuda || ema) return {};
  return optim.device_skip_step();
}

std::function<void(const at::Tensor&)> OptimizerSetup::device_skip_step() {
  if (implementation_ != OptimizerImpl::kFused) return {};
  if (auto* adamw = dynamic_cast<MultiTensorAdamW*>(optimizer_.get()))
    return [adamw](const at::Tensor& found_inf) { adamw->step_unless(found_inf); };
  auto* sgd = dynamic_cast<MultiTensorSgd*>(optimizer_.get());
  if (sgd == nullptr) return {};
  return [sgd](const at::Tensor& found_inf) { sgd->step_unless(found_inf); };
}

void OptimizerSetup::set_lr_factor(double factor) {
  auto& torch_groups = optimizer_->param_groups();
  for (std::size_t g = 0; g < torch_groups.size(); ++g) torch_groups[g].options().set_lr(groups_[g].base_lr * factor);
}

double OptimizerSetup::head_lr() const {
  const auto& torch_groups = optimizer_->param_groups();
  for (std::size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].name.rfind("head", 0) == 0) return torch_groups[g].options().get_lr();
  return torch_groups.empty() ? 0.0 : torch_groups.front().options().get_lr();
}

}  // namespace shoplens
