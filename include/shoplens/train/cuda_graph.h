// Whether a run's training step can be captured once into a CUDA graph and replayed
// (train.cuda_graph, docs/TRAINING.md). A graph replays the same kernels on the same addresses: the
// step must keep its shapes, never read the host mid-step and never change which parameters train.
#pragma once

#include <string>

#include "shoplens/train/train_options.h"

namespace shoplens {

struct Config;

// The facts of a run that decide it, gathered from the configuration and the run's setup.
struct CudaGraphFacts {
  bool cuda = false;
  int torch_major = 2;            // the LibTorch the binary was built against
  bool text_model = false;        // padded length follows each batch's longest text
  bool token_budget = false;      // loader.token_budget cuts micro-batches by tokens
  bool accumulation = false;      // train.accumulation_steps > 1: several micro-batches per step
  bool mix_some_batches = false;  // mixup/cutmix on some batches only (mix_prob < 1): two shapes of targets
  bool oom_recovery = false;      // an out-of-memory retry halves the micro-batch
  bool distributed = false;       // a process group: the step's outcome is agreed on the host
  bool fp16 = false;              // the loss scale and its overflow check live on the host
  bool ema = false;               // the EMA update follows each step's outcome, read on the host
  bool freeze_plan = false;       // stages unfreeze during training: the trained parameters change
  bool device_skip = false;       // the optimizer skips a non-finite step on the device
};

struct CudaGraphDecision {
  bool capture = false;
  std::string reason;  // why not (empty when captured)
};

// The facts of a configured run; the rest comes from its setup (the model, the group, the
// optimizer's device skip, the LibTorch major version).
CudaGraphFacts cuda_graph_facts(const Config& config, bool cuda, bool text_model, bool distributed, bool device_skip,
                                int torch_major);

// The first reason, in the order above, that rules capture out; capture when there is none.
CudaGraphDecision cuda_graph_decision(const CudaGraphFacts& facts);

// train.cuda_graph applied to the decision: off never captures; on throws ConfigError naming
// train.cuda_graph and the reason when the run cannot be captured; auto returns the decision
// (the caller logs the reason once).
CudaGraphDecision resolve_cuda_graph(CudaGraphMode mode, const CudaGraphFacts& facts);

}  // namespace shoplens
