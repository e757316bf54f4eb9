// The train layer's sections of the run configuration (docs/CONFIG.md): the optimizer (optim),
// the learning-rate schedule (schedule) and the loop (train). Schema rows: src/core/config.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "shoplens/core/byte_size.h"
#include "shoplens/core/enum_names.h"
#include "shoplens/core/precision.h"

namespace shoplens {

enum class OptimizerKind { kAdamW, kSgd };
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {{OptimizerKind::kAdamW, "adamw"},
                                                                  {OptimizerKind::kSgd, "sgd"}};

// How the optimizer steps (docs/TRAINING.md): fused = one kernel per group (LibTorch 2.x),
// foreach = multi-tensor ops, reference = LibTorch's own per-parameter loop; auto = fused where
// the build and device have it, else foreach. All keep LibTorch's state layout (checkpoints).
enum class OptimizerImpl { kAuto, kFused, kForeach, kReference };
inline constexpr EnumName<OptimizerImpl> kOptimizerImplNames[] = {{OptimizerImpl::kAuto, "auto"},
                                                                  {OptimizerImpl::kFused, "fused"},
                                                                  {OptimizerImpl::kForeach, "foreach"},
                                                                  {OptimizerImpl::kReference, "reference"}};

struct OptimConfig {
  OptimizerKind name = OptimizerKind::kAdamW;
  double lr = 1e-3;                       // for the global batch (after any scaling)
  double weight_decay = 0.05;             // never applied to norms and biases
  double momentum = 0.9;                  // sgd
  bool nesterov = false;                  // sgd
  std::vector<double> betas{0.9, 0.999};  // adamw
  double eps = 1e-8;                      // adamw
  double backbone_lr_scale = 1.0;         // backbone lr = lr x this (head keeps lr)
  double clip_grad_norm = 0.0;            // 0 disables
  OptimizerImpl implementation = OptimizerImpl::kAuto;
};

// one_cycle: cosine rise over pct_start of the steps, then cosine fall.
enum class ScheduleKind { kCosine, kStep, kConstant, kOneCycle };
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {{ScheduleKind::kCosine, "cosine"},
                                                                {ScheduleKind::kStep, "step"},
                                                                {ScheduleKind::kConstant, "constant"},
                                                                {ScheduleKind::kOneCycle, "one_cycle"}};

struct ScheduleConfig {
  ScheduleKind name = ScheduleKind::kCosine;
  double warmup_epochs = 1.0;  // linear warm-up from warmup_start_factor
  double warmup_start_factor = 0.01;
  double min_lr_ratio = 0.0;  // cosine floor as a fraction of lr
  double step_epochs = 30.0;  // step: decay every this many epochs
  double gamma = 0.1;         // step: decay factor
  double pct_start = 0.3;     // one_cycle: fraction of the steps spent rising
};

// weighted_loss: class weights N/(K*N_c); sampler: class-balanced sampling.
enum class ClassBalance { kNone, kWeightedLoss, kSampler };
inline constexpr EnumName<ClassBalance> kClassBalanceNames[] = {
    {ClassBalance::kNone, "none"}, {ClassBalance::kWeightedLoss, "weighted_loss"}, {ClassBalance::kSampler, "sampler"}};

// The validation metric that picks the best checkpoint; its name is the metric's key in the
// evaluation results.
enum class ValidationMetric { kMacroF1, kAccuracy, kLoss, kWeightedF1, kMacroPrecision, kMacroRecall, kRocAuc, kPrAuc };
inline constexpr EnumName<ValidationMetric> kValidationMetricNames[] = {
    {ValidationMetric::kMacroF1, "macro_f1"},
    {ValidationMetric::kAccuracy, "accuracy"},
    {ValidationMetric::kLoss, "loss"},
    {ValidationMetric::kWeightedF1, "weighted_f1"},
    {ValidationMetric::kMacroPrecision, "macro_precision"},
    {ValidationMetric::kMacroRecall, "macro_recall"},
    {ValidationMetric::kRocAuc, "roc_auc"},
    {ValidationMetric::kPrAuc, "pr_auc"}};
inline const char* metric_name(ValidationMetric metric) { return name_in(kValidationMetricNames, metric, "macro_f1"); }

struct TrainConfig {
  int epochs = 10;
  std::int64_t max_steps = 0;              // 0 = epochs decide
  int accumulation_steps = 1;              // global batch = loader.batch_size x this x world size
  Precision precision = Precision::kFp32;  // fp16 needs CUDA
  DeviceChoice device = DeviceChoice::kAuto;
  double label_smoothing = 0.0;
  double ema_decay = 0.0;  // EMA of the weights (0 disables), evaluated and saved when on
  ClassBalance class_balance = ClassBalance::kNone;
  double freeze_backbone_epochs = 0.0;  // only the head trains at first
  double unfreeze_every_epochs = 0.0;   // then stages unfreeze one by one, output first (0: all at once)
  std::int64_t eval_every_steps = 0;    // 0 = at the end of every epoch
  int eval_batch_size = 0;              // 0 = loader.batch_size
  ValidationMetric early_stopping_metric = ValidationMetric::kMacroF1;
  int patience = 0;                         // evaluations without improvement before stopping; 0 = never stop early
  int keep_last = 2;                        // checkpoints kept besides the best
  std::int64_t checkpoint_every_steps = 0;  // 0 = at every evaluation
  int max_bad_steps = 5;                    // consecutive non-finite losses before giving up
  double init_loss_scale = 65536.0;         // fp16 dynamic loss scaling
  int loss_scale_growth_interval = 2000;
  std::int64_t log_every_steps = 10;
  bool tensorboard = true;
  bool deterministic = false;  // deterministic CPU kernels where LibTorch offers them
  ByteSize memory_budget;      // caps the device allocator (unset: no cap)
  bool oom_recovery = true;    // on OOM: halve the micro-batch, double accumulation, retry
  double threshold = 0.5;      // two classes: predict class 1 when its probability >= this
};

}  // namespace shoplens
