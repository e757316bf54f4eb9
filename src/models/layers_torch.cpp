#include <torch/torch.h>

#include "models_internal.h"
#include "shoplens/core/errors.h"

namespace shoplens::detail {

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters())
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  for (auto& b : module.buffers())
    if (b.dim() == 4) b.set_data(b.contiguous(at::MemoryFormat::ChannelsLast));
}

torch::nn::Linear fresh_head(const torch::nn::Linear& like, int out_features) {
  torch::nn::Linear head(like->options.in_features(), out_features);
  head->to(like->weight.device(), like->weight.scalar_type());
  head->train(like->is_training());
  return head;
}

void check_num_classes(int num_classes) {
  if (num_classes < 1) throw ConfigError("model.num_classes must be >= 1, got " + std::to_string(num_classes));
}

}  // namespace shoplens::detail
