#include "shoplens/train/cuda_graph.h"

#include <utility>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"

namespace shoplens {

CudaGraphFacts cuda_graph_facts(const Config& config, bool cuda, bool text_model, bool distributed, bool device_skip,
                                int torch_major) {
  CudaGraphFacts f;
  f.cuda = cuda;
  f.torch_major = torch_major;
  f.text_model = text_model;
  f.token_budget = config.loader.token_budget > 0;
  f.accumulation = config.train.accumulation_steps > 1;
  const bool mixing = config.augment.mixup_alpha > 0 || config.augment.cutmix_alpha > 0;
  f.mix_some_batches = mixing && config.augment.mix_prob < 1.0;
  f.oom_recovery = config.train.oom_recovery;
  f.distributed = distributed;
  f.fp16 = config.train.precision == Precision::kFp16;
  f.ema = config.train.ema_decay > 0;
  f.freeze_plan = config.train.freeze_backbone_epochs > 0;
  f.device_skip = device_skip;
  return f;
}

CudaGraphDecision cuda_graph_decision(const CudaGraphFacts& f) {
  const std::vector<std::pair<bool, const char*>> refusals{
      {!f.cuda, "the run is not on CUDA"},
      {f.torch_major < 2, "LibTorch 1.13 has no graph-safe optimizer step or capture-safe allocator (LibTorch 2.x)"},
      {f.text_model, "a text model's batches change shape with their longest text (length buckets)"},
      {f.token_budget, "loader.token_budget cuts micro-batches of varying size"},
      {f.accumulation, "train.accumulation_steps > 1 runs several micro-batches per step (a graph holds one)"},
      {f.mix_some_batches, "augment.mix_prob < 1 mixes some batches only (soft and hard targets alternate)"},
      {f.oom_recovery, "train.oom_recovery may halve the micro-batch after running out of memory (set it false)"},
      {f.distributed, "data-parallel steps agree on their outcome on the host"},
      {f.fp16, "fp16's loss scale and overflow check are read on the host every step (use bf16)"},
      {f.ema, "the weights' EMA follows each step's outcome, read on the host (train.ema_decay)"},
      {f.freeze_plan, "the freeze plan changes which parameters train (train.freeze_backbone_epochs)"},
      {!f.device_skip,
       "the optimizer cannot skip a non-finite step on the device, so every step reads its outcome on the host"},
  };
  for (const auto& [refused, reason] : refusals)
    if (refused) return {false, reason};
  return {true, ""};
}

CudaGraphDecision resolve_cuda_graph(CudaGraphMode mode, const CudaGraphFacts& facts) {
  if (mode == CudaGraphMode::kOff) return {false, "train.cuda_graph is off"};
  CudaGraphDecision decision = cuda_graph_decision(facts);
  if (mode == CudaGraphMode::kOn && !decision.capture)
    throw ConfigError("train.cuda_graph=on: the training step cannot be captured: " + decision.reason +
                      " (set train.cuda_graph to auto or off)");
  return decision;
}

}  // namespace shoplens
