#include "shoplens/core/config.h"

#include <cmath>
#include <functional>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "shoplens/core/byte_size.h"
#include "shoplens/core/enum_names.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

// ---- typed JSON readers: each names the path and the expected type on mismatch ----

using JsonValueReader = JsonValue<ConfigError>;  // the project's one checked reader (json_fields.h)

[[noreturn]] void type_error(const std::string& path, const char* expected, const json& value,
                             const std::string& source) {
  JsonValueReader::type_error(source, path, expected, value);
}

template <class T>
void read_value(const json& v, T& out, const std::string& path, const std::string& source) {
  JsonValueReader::read(v, out, path, source);
}

void read_value(const json& v, ByteSize& out, const std::string& path, const std::string& source) {
  if (!v.is_string()) type_error(path, "string", v, source);
  const std::string text = v.get<std::string>();
  try {
    out = parse_byte_size(text, path);
    if (!trim(text).empty() && !out.is_set()) throw UsageError("zero");
  } catch (const Error&) {
    throw ConfigError(source + ": " + path + ": expected a size such as \"2GiB\" or \"512MiB\", got \"" + text + "\"");
  }
}

// An enum-like value: its name in the enum's table, or an error listing the names and the nearest.
template <class E, std::size_t N>
E read_choice(const json& v, const EnumName<E> (&table)[N], const std::string& path, const std::string& source) {
  if (!v.is_string()) type_error(path, "string", v, source);
  return parse_enum(table, v.get<std::string>(), source + ": " + path);
}

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "boolean";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "number";
  else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, ByteSize>)
    return "string";
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return "list of numbers";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return "list of strings";
  else {
    static_assert(std::is_same_v<T, std::map<std::string, std::string>>, "a config field of an unknown type");
    return "object of strings";
  }
}

// ---- the schema: one row per field, bound to its struct member ----

struct Field {
  std::string section;
  std::string key;
  std::string type;
  std::string help;
  std::function<json(const Config&)> get;
  std::function<void(Config&, const json&, const std::string& source)> set;
  bool is_string = false;
  bool is_list = false;
  bool accepts_word = false;  // a number that may also be a word ("auto")
};

template <class T>
using Check = std::function<void(const T&, const std::string& path, const std::string& source)>;

template <class T>
json field_json(const T& value) {
  if constexpr (std::is_same_v<T, ByteSize>)
    return byte_size_text(value);
  else
    return json(value);
}

template <class S, class E, std::size_t N>
Field choice_field(S Config::*section_member, const char* section, E S::*member, const char* key, const char* help,
                   const EnumName<E> (&table)[N]) {
  Field f;
  f.section = section;
  f.key = key;
  f.type = "string";
  f.help = help;
  f.get = [section_member, member, &table](const Config& c) {
    return json(name_in(table, (c.*section_member).*member));
  };
  std::string path = std::string(section) + "." + key;
  f.set = [section_member, member, path, &table](Config& c, const json& v, const std::string& source) {
    (c.*section_member).*member = read_choice(v, table, path, source);
  };
  f.is_string = true;
  return f;
}

template <class S, class T>
Field field(S Config::*section_member, const char* section, T S::*member, const char* key, const char* help,
            Check<T> check = {}) {
  Field f;
  f.section = section;
  f.key = key;
  f.type = type_name<T>();
  f.help = help;
  f.get = [section_member, member](const Config& c) { return field_json((c.*section_member).*member); };
  std::string path = std::string(section) + "." + key;
  f.set = [section_member, member, path, check](Config& c, const json& v, const std::string& source) {
    T value{};
    read_value(v, value, path, source);
    if (check) check(value, path, source);
    (c.*section_member).*member = value;
  };
  f.is_string = std::is_same_v<T, std::string> || std::is_same_v<T, ByteSize>;
  f.is_list = std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<std::string>>;
  return f;
}

// The keys of one section, which is named once: s.add(&RunConfig::seed, "seed", help, check).
template <class S>
class SectionFields {
 public:
  SectionFields(std::vector<Field>& fields, S Config::*section_member, const char* section)
      : fields_(fields), section_member_(section_member), section_(section) {}
  template <class T>
  void add(T S::*member, const char* key, const char* help, Check<T> check = {}) {
    fields_.push_back(field(section_member_, section_, member, key, help, std::move(check)));
  }
  // An enum member: the file names one of `table`'s names (the help lists them).
  template <class E, std::size_t N>
  void add_choice(E S::*member, const char* key, const char* help, const EnumName<E> (&table)[N]) {
    fields_.push_back(choice_field(section_member_, section_, member, key, help, table));
  }

 private:
  std::vector<Field>& fields_;
  S Config::*section_member_;
  const char* section_;
};

template <class T>
Check<T> at_least(T lo) {
  return [lo](const T& v, const std::string& path, const std::string& source) {
    if (v < lo) {
      std::ostringstream os;
      os << source << ": " << path << ": must be >= " << lo << ", got " << v;
      throw ConfigError(os.str());
    }
  };
}

template <class T>
Check<T> in_range(T lo, T hi) {
  return [lo, hi](const T& v, const std::string& path, const std::string& source) {
    if (v < lo || v > hi) {
      std::ostringstream os;
      os << source << ": " << path << ": must be in [" << lo << ", " << hi << "], got " << v;
      throw ConfigError(os.str());
    }
  };
}

Check<std::vector<double>> pair_in(double lo, double hi) {
  return [lo, hi](const std::vector<double>& v, const std::string& path, const std::string& source) {
    if (v.size() != 2 || v[0] < lo || v[1] > hi || v[0] > v[1])
      throw ConfigError(source + ": " + path + ": expected [low, high] with " + std::to_string(lo) +
                        " <= low <= high <= " + std::to_string(hi) + ", got " + json(v).dump());
  };
}

Check<std::vector<double>> three_numbers(bool positive) {
  return [positive](const std::vector<double>& v, const std::string& path, const std::string& source) {
    bool ok = v.size() == 3;
    for (double x : v) ok = ok && (!positive || x > 0);
    if (!ok)
      throw ConfigError(source + ": " + path + ": expected 3 " + (positive ? "positive " : "") +
                        "numbers (one per RGB channel), got " + json(v).dump());
  };
}

// loader.batch_size takes a number or "auto" (the largest micro-batch that fits, found first).
Field batch_size_field() {
  Field f;
  f.section = "loader";
  f.key = "batch_size";
  f.type = "integer or \"auto\"";
  f.help = "samples per micro-batch, or \"auto\": the largest that fits the memory budget (docs/FIND_BATCH.md)";
  f.get = [](const Config& c) { return c.loader.auto_batch ? json("auto") : json(c.loader.batch_size); };
  f.set = [](Config& c, const json& v, const std::string& source) {
    const std::string path = "loader.batch_size";
    if (v.is_string() && v.get<std::string>() == "auto") {
      c.loader.auto_batch = true;
      return;
    }
    if (!v.is_number()) type_error(path, "integer or \"auto\"", v, source);
    int value = 0;
    read_value(v, value, path, source);
    in_range(1, 1 << 20)(value, path, source);
    c.loader.batch_size = value;
    c.loader.auto_batch = false;
  };
  f.accepts_word = true;
  return f;
}

// The schema, one function per section, in the order --print-config and `config --schema` show.
namespace {

void add_run_fields(std::vector<Field>& f) {
  SectionFields<RunConfig> s(f, &Config::run, "run");
  s.add(&RunConfig::dir, "dir", "run directory (empty: runs/<command>-<time>)");
  s.add(&RunConfig::seed, "seed", "seed for every random choice", at_least<std::int64_t>(0));
  s.add(&RunConfig::threads, "threads", "CPU threads (0: all usable cores)", in_range(0, 4096));
  s.add_choice(&RunConfig::log_level, "log_level", "trace|debug|info|warn|error", kLogLevelNames);
}

void add_data_fields(std::vector<Field>& f) {
  SectionFields<DataConfig> s(f, &Config::data, "data");
  s.add(&DataConfig::input, "input", "CSV manifest or ImageFolder root");
  s.add(&DataConfig::root, "root", "base folder for relative manifest paths (empty: the manifest's folder)");
  s.add(&DataConfig::columns, "columns", "CSV column mapping, e.g. {\"path\": \"file\", \"label\": \"class\"}",
        Check<std::map<std::string, std::string>>(
            [](const std::map<std::string, std::string>& m, const std::string& path, const std::string& source) {
              const std::vector<std::string> known{"path", "label", "split", "id"};
              for (const auto& [k, v] : m)
                if (std::find(known.begin(), known.end(), k) == known.end())
                  throw ConfigError(source + ": " + path + "." + k + ": unknown column role" + did_you_mean(k, known) +
                                    "; roles are " + join(known, ", "));
            }));
  s.add(&DataConfig::metadata_fields, "metadata_fields", "metadata columns to keep (empty: all other columns)");
  s.add(&DataConfig::classes, "classes", "class names in label order (empty: discovered, sorted)");
  s.add(&DataConfig::shards, "shards", "folder of prepared shards");
  s.add(&DataConfig::val_fraction, "val_fraction",
        "validation share when the input has no split column, and share of each class's train rows made val "
        "when the input's splits have no val (0: none carved)",
        in_range(0.0, 0.9));
  s.add(&DataConfig::test_fraction, "test_fraction", "test share when the input has no split column",
        in_range(0.0, 0.9));
  s.add(&DataConfig::storage_size, "storage_size", "short side of stored images, pixels", in_range(16, 4096));
  s.add_choice(&DataConfig::encoding, "encoding", "shard payload: jpeg | raw", kPayloadEncodingNames);
  s.add(&DataConfig::jpeg_quality, "jpeg_quality", "JPEG quality of stored images", in_range(1, 100));
  s.add(&DataConfig::records_per_shard, "records_per_shard", "images per shard", in_range(1, 1 << 24));
  s.add(&DataConfig::max_megapixels, "max_megapixels", "originals above this are quarantined",
        in_range(0.001, 10000.0));
  s.add(&DataConfig::max_file_mb, "max_file_mb",
        "image files larger than this many MiB are quarantined without being read", in_range(1, 1 << 20));
  s.add(&DataConfig::scaled_decode, "scaled_decode", "decode JPEG originals at reduced scale when larger than needed");
}

void add_augment_fields(std::vector<Field>& f) {
  SectionFields<AugmentConfig> s(f, &Config::augment, "augment");
  s.add(&AugmentConfig::image_size, "image_size", "output side, pixels", in_range(8, 4096));
  s.add(&AugmentConfig::crop_scale, "crop_scale", "RandomResizedCrop area range", pair_in(0.0, 1.0));
  s.add(&AugmentConfig::crop_ratio, "crop_ratio", "RandomResizedCrop aspect range", pair_in(0.01, 100.0));
  s.add(&AugmentConfig::hflip, "hflip", "horizontal flip probability", in_range(0.0, 1.0));
  s.add(&AugmentConfig::brightness, "brightness", "color jitter brightness", in_range(0.0, 1.0));
  s.add(&AugmentConfig::contrast, "contrast", "color jitter contrast", in_range(0.0, 1.0));
  s.add(&AugmentConfig::saturation, "saturation", "color jitter saturation", in_range(0.0, 1.0));
  s.add(&AugmentConfig::hue, "hue", "color jitter hue", in_range(0.0, 0.5));
  s.add(&AugmentConfig::mixup_alpha, "mixup_alpha", "mixup Beta alpha (0: off)", in_range(0.0, 100.0));
  s.add(&AugmentConfig::cutmix_alpha, "cutmix_alpha", "cutmix Beta alpha (0: off)", in_range(0.0, 100.0));
  s.add(&AugmentConfig::mix_prob, "mix_prob", "probability a batch is mixed", in_range(0.0, 1.0));
  s.add(&AugmentConfig::pad_crop, "pad_crop",
        "CIFAR-style crop: reflect-pad by this many pixels and crop image_size at random, instead of "
        "RandomResizedCrop (0: off)",
        in_range(0, 1024));
  s.add_choice(&AugmentConfig::auto_augment, "auto_augment",
               "none | trivial (TrivialAugmentWide: one random op of 14 per image, random magnitude)",
               kAutoAugmentNames);
  s.add(&AugmentConfig::random_erasing, "random_erasing",
        "probability of erasing a random box to 0 after normalisation (torchvision's RandomErasing; 0: off)",
        in_range(0.0, 1.0));
  s.add(&AugmentConfig::mean, "mean", "normalisation mean per channel", three_numbers(false));
  s.add(&AugmentConfig::std, "std", "normalisation std per channel", three_numbers(true));
  s.add(&AugmentConfig::eval_crop_pct, "eval_crop_pct",
        "evaluation: resize the short side to floor(image_size / eval_crop_pct), then center crop",
        in_range(0.05, 1.0));
  s.add(&AugmentConfig::eval_resize_short_side, "eval_resize_short_side",
        "evaluation: this resized short side instead (0: from eval_crop_pct)", in_range(0, 16384));
  s.add(&AugmentConfig::worst_case, "worst_case", "largest-footprint augmentation (every op on, mixed soft targets)");
}

void add_loader_fields(std::vector<Field>& f) {
  SectionFields<LoaderConfig> s(f, &Config::loader, "loader");
  f.push_back(batch_size_field());  // a number or "auto": not a plain field
  s.add(&LoaderConfig::workers, "workers", "decode threads (0: run.threads)", in_range(0, 1024));
  s.add(&LoaderConfig::prefetch_batches, "prefetch_batches", "batches prepared ahead", in_range(1, 1024));
  s.add(&LoaderConfig::shuffle, "shuffle", "shuffle each epoch");
  s.add(&LoaderConfig::drop_last, "drop_last", "drop the last partial batch");
  s.add(&LoaderConfig::token_budget, "token_budget",
        "text: cut each micro-batch so that rows x longest row <= this many tokens (0: no cap)",
        at_least<std::int64_t>(0));
  s.add(&LoaderConfig::pin_memory, "pin_memory",
        "CUDA jobs: batches in page-locked memory, copied to the device without staging");
}

void add_model_fields(std::vector<Field>& f) {
  SectionFields<ModelConfig> s(f, &Config::model, "model");
  s.add(&ModelConfig::name, "name", "the model (`shoplens train --help` and docs/MODELS.md list them)");
  s.add(&ModelConfig::pretrained, "pretrained",
        "weights to start from: .safetensors or torch.save state dict (empty: from scratch)");
  s.add(&ModelConfig::new_head, "new_head",
        "new classification head when the weights' class count differs (else an error)");
  s.add(&ModelConfig::partial_load, "partial_load",
        "start from weights that leave some model tensors at their init (else an error naming them)");
  s.add(&ModelConfig::dropout, "dropout", "dropout before the head", in_range(0.0, 0.99));
  s.add(&ModelConfig::channels_last, "channels_last", "channels-last memory format (CNNs)");
  s.add(&ModelConfig::drop_path, "drop_path",
        "stochastic depth: drop rate of the last residual block, rising linearly from 0 at the first "
        "(ViTs only; 0: off)",
        in_range(0.0, 1.0));
}

void add_optim_fields(std::vector<Field>& f) {
  SectionFields<OptimConfig> s(f, &Config::optim, "optim");
  s.add_choice(&OptimConfig::name, "name", "adamw | sgd", kOptimizerKindNames);
  s.add(&OptimConfig::lr, "lr", "peak learning rate for the global batch",
        Check<double>([](const double& v, const std::string& path, const std::string& source) {
          if (!(v > 0) || v > 100)
            throw ConfigError(source + ": " + path + ": must be > 0 (and <= 100), got " + json(v).dump());
        }));
  s.add(&OptimConfig::weight_decay, "weight_decay", "decoupled (adamw) or L2 (sgd) decay; never on norms and biases",
        in_range(0.0, 10.0));
  s.add(&OptimConfig::momentum, "momentum", "sgd momentum", in_range(0.0, 0.9999));
  s.add(&OptimConfig::nesterov, "nesterov", "sgd Nesterov momentum");
  s.add(&OptimConfig::betas, "betas", "adamw betas", pair_in(0.0, 0.999999));
  s.add(&OptimConfig::eps, "eps", "adamw epsilon", in_range(1e-12, 1.0));
  s.add(&OptimConfig::backbone_lr_scale, "backbone_lr_scale", "backbone learning rate as a fraction of the head's",
        in_range(0.0, 10.0));
  s.add_choice(&OptimConfig::implementation, "implementation",
               "auto | fused | foreach | reference: how the step runs (auto: fused where LibTorch 2.x and the "
               "device have it, else foreach; reference: LibTorch's per-parameter loop)",
               kOptimizerImplNames);
  s.add(&OptimConfig::clip_grad_norm, "clip_grad_norm", "max global gradient norm (0: off)", in_range(0.0, 1e9));
}

void add_schedule_fields(std::vector<Field>& f) {
  SectionFields<ScheduleConfig> s(f, &Config::schedule, "schedule");
  s.add_choice(&ScheduleConfig::name, "name",
               "cosine | step | constant | one_cycle (cosine rise over pct_start of the steps, then cosine fall)",
               kScheduleKindNames);
  s.add(&ScheduleConfig::warmup_epochs, "warmup_epochs", "linear warm-up length", in_range(0.0, 1e6));
  s.add(&ScheduleConfig::warmup_start_factor, "warmup_start_factor", "lr factor at step 0 of the warm-up",
        in_range(0.0, 1.0));
  s.add(&ScheduleConfig::min_lr_ratio, "min_lr_ratio", "cosine floor, fraction of lr", in_range(0.0, 1.0));
  s.add(&ScheduleConfig::step_epochs, "step_epochs", "step: epochs between decays", in_range(1e-6, 1e6));
  s.add(&ScheduleConfig::gamma, "gamma", "step: decay factor", in_range(0.0, 1.0));
  s.add(&ScheduleConfig::pct_start, "pct_start",
        "one_cycle: fraction of the steps spent rising from warmup_start_factor to lr (replaces warmup_epochs)",
        in_range(0.0, 1.0));
}

void add_train_fields(std::vector<Field>& f) {
  SectionFields<TrainConfig> s(f, &Config::train, "train");
  s.add(&TrainConfig::epochs, "epochs", "epochs to train", in_range(1, 1000000));
  s.add(&TrainConfig::max_steps, "max_steps", "stop after this many optimizer steps (0: no limit)",
        at_least<std::int64_t>(0));
  s.add(&TrainConfig::accumulation_steps, "accumulation_steps", "micro-batches per optimizer step", in_range(1, 65536));
  s.add_choice(&TrainConfig::precision, "precision", "fp32 | bf16 | fp16 (fp16: CUDA only)", kPrecisionNames);
  s.add_choice(&TrainConfig::device, "device", "auto | cpu | cuda", kDeviceChoiceNames);
  s.add(&TrainConfig::label_smoothing, "label_smoothing", "label smoothing epsilon", in_range(0.0, 0.99));
  s.add(&TrainConfig::ema_decay, "ema_decay",
        "EMA of the weights, updated every step (e.g. 0.999); validation, best checkpoint and test use "
        "it (0: off)",
        in_range(0.0, 0.999999));
  s.add_choice(&TrainConfig::class_balance, "class_balance",
               "none | weighted_loss (weights N/(K*N_c)) | sampler (class-balanced sampling)", kClassBalanceNames);
  s.add(&TrainConfig::freeze_backbone_epochs, "freeze_backbone_epochs", "epochs that train only the head",
        in_range(0.0, 1e6));
  s.add(&TrainConfig::unfreeze_every_epochs, "unfreeze_every_epochs",
        "after the freeze, unfreeze one backbone stage (output first) every this many epochs (0: all at once)",
        in_range(0.0, 1e6));
  s.add(&TrainConfig::eval_every_steps, "eval_every_steps", "evaluate every this many steps (0: every epoch)",
        at_least<std::int64_t>(0));
  s.add(&TrainConfig::eval_batch_size, "eval_batch_size", "evaluation batch (0: loader.batch_size)",
        in_range(0, 1 << 20));
  s.add_choice(&TrainConfig::early_stopping_metric, "early_stopping_metric",
               "validation metric that picks the best checkpoint", kValidationMetricNames);
  s.add(&TrainConfig::patience, "patience", "evaluations without improvement before stopping (0: never)",
        in_range(0, 1000000));
  s.add(&TrainConfig::keep_last, "keep_last", "recent checkpoints kept besides the best", in_range(1, 1000));
  s.add(&TrainConfig::checkpoint_every_steps, "checkpoint_every_steps",
        "checkpoint every this many steps (0: at every evaluation)", at_least<std::int64_t>(0));
  s.add(&TrainConfig::max_bad_steps, "max_bad_steps",
        "consecutive non-finite losses before the run stops with a diagnostic", in_range(1, 1000000));
  s.add(&TrainConfig::init_loss_scale, "init_loss_scale", "fp16 initial loss scale", in_range(1.0, 1e38));
  s.add(&TrainConfig::loss_scale_growth_interval, "loss_scale_growth_interval",
        "fp16: steps without overflow before the scale doubles", in_range(1, 1000000000));
  s.add(&TrainConfig::log_every_steps, "log_every_steps", "train metrics every this many steps",
        at_least<std::int64_t>(1));
  s.add(&TrainConfig::tensorboard, "tensorboard", "write TensorBoard event files");
  s.add(&TrainConfig::deterministic, "deterministic", "deterministic kernels (resumed runs reproduce the loss curve)");
  s.add(&TrainConfig::memory_budget, "memory_budget",
        "device memory the job may use, e.g. \"24GiB\": caps LibTorch's allocator (CPU: a budget allocator; "
        "CUDA: memory fraction); find-batch fits within it (empty: no cap)");
  s.add(&TrainConfig::oom_recovery, "oom_recovery",
        "on out-of-memory: halve the micro-batch, double accumulation (same global batch), retry the step");
  s.add(&TrainConfig::threshold, "threshold",
        "two-class tasks: predict class 1 when its probability is at least this (F1, confusion)", in_range(0.0, 1.0));
  s.add_choice(&TrainConfig::cuda_graph, "cuda_graph",
               "capture the step into a CUDA graph and replay it: auto (where the run allows it, else eager "
               "with the reason logged once) | on (refuse a run that cannot be captured) | off",
               kCudaGraphModeNames);
}

void add_find_batch_fields(std::vector<Field>& f) {
  using FB = FindBatchConfig;
  SectionFields<FB> s(f, &Config::find_batch, "find_batch");
  s.add_choice(&FB::strategy, "strategy",
               "fit (memory model + verification) | binsearch (Lightning's) | exact (benchmark truth, slow)",
               kSearchStrategyNames);
  s.add(&FB::headroom, "headroom", "fraction of the budget always left free", in_range(0.0, 0.5));
  s.add(&FB::probe_steps, "probe_steps", "training steps per probe", in_range(1, 100));
  s.add(&FB::verify_steps, "verify_steps", "steps the answer must run within the budget", in_range(1, 1000));
  s.add(&FB::first_batch, "first_batch", "batch of the first probe", in_range(1, 1 << 20));
  s.add(&FB::max_batch, "max_batch", "largest micro-batch considered", in_range(1, 1 << 20));
  s.add(&FB::round_to, "round_to",
        "round the micro-batch down to a multiple of this (0: 8 on CUDA with bf16/fp16, else 1)", in_range(0, 4096));
  s.add(&FB::target_global_batch, "target_global_batch",
        "global batch to reach with accumulation (0: one micro-batch per step)", at_least<std::int64_t>(0));
  s.add_choice(
      &FB::lr_scaling, "lr_scaling",
      "learning-rate rule for the new global batch: auto (sqrt for adamw, linear for sgd) | linear | sqrt | none",
      kLrScalingNames);
  s.add_choice(&FB::objective, "objective",
               "what the plan's micro-batch is: throughput (from the reference batch, double while images/s "
               "rises by min_throughput_gain, up to the largest that fits) | memory (the largest that fits)",
               kBatchObjectiveNames);
  s.add(&FB::min_throughput_gain, "min_throughput_gain",
        "objective throughput: the fraction of images/s a doubling of the batch must add to be taken "
        "(a larger batch costs optimizer steps)",
        in_range(0.0, 10.0));
  s.add_choice(&FB::train_budget, "train_budget",
               "what a run at the planned batch keeps from the recipe: time (train.epochs x the measured "
               "images/s speed-up over the reference batch: about the same wall time, more epochs) | epochs "
               "(train.epochs as given: faster, fewer optimizer steps)",
               kTrainBudgetNames);
  s.add(&FB::reference_batch, "reference_batch",
        "global batch optim.lr was tuned for (0: loader.batch_size x train.accumulation_steps)",
        at_least<std::int64_t>(0));
  s.add(&FB::cache, "cache", "reuse a result with the same fingerprint");
  s.add(&FB::cache_dir, "cache_dir", "where results are cached (empty: $XDG_CACHE_HOME/shoplens or ~/.cache/shoplens)");
  s.add(&FB::input_rate_share, "input_rate_share",
        "objective throughput: share of the loader's samples/s, timed alone before training, that the "
        "plan counts on while the training process shares the machine's cores",
        in_range(0.05, 1.0));
  s.add(&FB::process_check, "process_check",
        "CPU with train.memory_budget: probe the answer again in a fresh process and lower it until the "
        "whole process fits the budget, not only its tensors");
  s.add(&FB::process_steps, "process_steps",
        "training steps of each fresh-process probe (the allocator's free blocks settle over steps)",
        in_range(1, 1000));
  s.add(&FB::process_headroom, "process_headroom",
        "fraction of the budget the process check keeps free beyond the tensors' headroom, for what a "
        "real epoch adds to a probe (data loading, evaluation, checkpoints)",
        in_range(0.0, 0.5));
}

void add_dist_fields(std::vector<Field>& f) {
  SectionFields<DistConfig> s(f, &Config::dist, "dist");
  s.add_choice(&DistConfig::backend, "backend", "collective backend: auto (nccl on CUDA, else gloo) | gloo | nccl",
               kDistBackendNames);
  s.add(&DistConfig::timeout_seconds, "timeout_seconds",
        "rendezvous and collective timeout: a missing or dead rank is an error after this", in_range(1.0, 86400.0));
  s.add(&DistConfig::bucket_mb, "bucket_mb",
        "gradient all-reduce bucket size in MB (smaller: earlier overlap, more calls)", in_range(0.001, 4096.0));
  s.add(&DistConfig::broadcast_buffers, "broadcast_buffers",
        "broadcast model buffers (BatchNorm statistics) from rank 0 before every step");
  s.add(&DistConfig::ledger, "ledger",
        "record the sample ids of every committed step per rank in RUN/ledger (shoplens verify-ledger)");
}

void add_text_fields(std::vector<Field>& f) {
  SectionFields<TextConfig> s(f, &Config::text, "text");
  s.add(&TextConfig::max_length, "max_length",
        "tokens read per example; longer examples are truncated (sizes the position embeddings)", in_range(1, 1 << 16));
  s.add(&TextConfig::bucket_by_length, "bucket_by_length",
        "sort each window of global batches by length so a step pads little");
  s.add(&TextConfig::bucket_window, "bucket_window",
        "global batches sorted by length together (larger: less padding, less randomness)", in_range(1, 1 << 20));
  s.add_choice(&TextConfig::pooling, "pooling", "mean (over real tokens) | cls (first token)", kTextPoolingNames);
  s.add_choice(&TextConfig::attention, "attention", "auto | fused (LibTorch's scaled-dot-product kernel) | math",
               kAttentionKernelNames);
  s.add(&TextConfig::vocab_size, "vocab_size", "resolved from text_dataset.json (0: not yet)", at_least(0));
  s.add(&TextConfig::categorical_cardinalities, "categorical_cardinalities",
        "resolved: vocabulary size per categorical metadata field (code 0, missing, comes on top)");
  s.add(&TextConfig::numeric_fields, "numeric_fields", "resolved: numeric metadata fields", at_least(0));
}

}  // namespace

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> f;
    add_run_fields(f);
    add_data_fields(f);
    add_augment_fields(f);
    add_loader_fields(f);
    add_model_fields(f);
    add_optim_fields(f);
    add_schedule_fields(f);
    add_train_fields(f);
    add_find_batch_fields(f);
    add_dist_fields(f);
    add_text_fields(f);
    return f;
  }();
  return fields;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& f : schema())
    if (std::find(names.begin(), names.end(), f.section) == names.end()) names.push_back(f.section);
  return names;
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& f : schema())
    if (f.section == section) keys.push_back(f.key);
  return keys;
}

const Field* find_field(const std::string& section, const std::string& key) {
  for (const auto& f : schema())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

void check_cross_field(const Config& c, const std::string& source) {
  if (c.data.val_fraction + c.data.test_fraction >= 1.0)
    throw ConfigError(source + ": data.val_fraction + data.test_fraction must be < 1, got " +
                      std::to_string(c.data.val_fraction + c.data.test_fraction));
}

}  // namespace

std::vector<ConfigFieldInfo> config_fields() {
  std::vector<ConfigFieldInfo> out;
  Config defaults;
  for (const auto& f : schema()) out.push_back({f.section + "." + f.key, f.type, f.get(defaults).dump(), f.help});
  return out;
}

nlohmann::json config_to_json(const Config& config) {
  json doc = json::object();
  for (const auto& f : schema()) doc[f.section][f.key] = f.get(config);
  return doc;
}

Config config_from_json(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object())
    throw ConfigError(source + ": the config must be a JSON object, got " + std::string(doc.type_name()));
  const auto sections = section_names();
  Config config;
  for (auto sec = doc.begin(); sec != doc.end(); ++sec) {
    if (std::find(sections.begin(), sections.end(), sec.key()) == sections.end())
      throw ConfigError(source + ": unknown section '" + sec.key() + "'" + did_you_mean(sec.key(), sections) +
                        "; sections are " + join(sections, ", "));
    if (!sec.value().is_object()) type_error(sec.key(), "object", sec.value(), source);
    for (auto kv = sec.value().begin(); kv != sec.value().end(); ++kv) {
      const Field* f = find_field(sec.key(), kv.key());
      if (!f) JsonValueReader::unknown_key(source, sec.key() + "." + kv.key(), kv.key(), keys_of(sec.key()));
      f->set(config, kv.value(), source);
    }
  }
  check_cross_field(config, source);
  return config;
}

void apply_override(nlohmann::json& doc, const std::string& assignment) {
  const std::string source = "--set " + assignment;
  auto eq = assignment.find('=');
  if (eq == std::string::npos) throw ConfigError(source + ": expected section.key=value");
  std::string name(trim(std::string_view(assignment).substr(0, eq)));
  std::string text(trim(std::string_view(assignment).substr(eq + 1)));
  if (json_nesting_exceeds(text))
    throw ConfigError(source + ": the value nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  auto dot = name.find('.');
  if (dot == std::string::npos)
    throw ConfigError(source + ": expected section.key=value, got no '.' in '" + name + "'");
  std::string section = name.substr(0, dot), key = name.substr(dot + 1);
  const auto sections = section_names();
  if (std::find(sections.begin(), sections.end(), section) == sections.end())
    throw ConfigError(source + ": unknown section '" + section + "'" + did_you_mean(section, sections));
  const Field* f = find_field(section, key);
  if (!f) JsonValueReader::unknown_key(source, name, key, keys_of(section));

  json value;
  if (f->is_string) {
    value = text;  // strings are taken as written; quoting is optional
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') value = json::parse(text, nullptr, false);
  } else if (f->is_list && !text.empty() && text.front() != '[') {
    value = json::array();
    for (const auto& part : split(text, ',')) {
      std::string item(trim(part));
      json parsed = json::parse(item, nullptr, false);
      value.push_back(parsed.is_discarded() ? json(item) : parsed);
    }
  } else {
    value = json::parse(text, nullptr, false);
    if (value.is_discarded() && f->accepts_word) value = text;
    if (value.is_discarded()) throw ConfigError(source + ": '" + text + "' is not a valid " + f->type + " for " + name);
  }
  Config probe;
  f->set(probe, value, source);  // type and range check now, so the error names the flag
  doc[section][key] = value;
}

nlohmann::json read_json_file(const std::string& path) {
  // Regular files only (regular_file.h): a FIFO given as --config would block the open for ever.
  const RegularFile file = open_regular_file(path);
  if (!file.problem.empty()) throw ConfigError("cannot open config file '" + path + "': " + file.problem);
  const std::string text = read_to_end(file.fd.get(), file.size);
  if (json_nesting_exceeds(text))
    throw ConfigError(path + ": nests deeper than " + std::to_string(kMaxJsonNesting) +
                      " levels; not a ShopLens config");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is a byte offset; turn it into line:column for people.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw ConfigError(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": invalid JSON: " + e.what());
  }
}

Config load_config(const nlohmann::json& base, const std::optional<std::string>& path,
                   const std::vector<std::string>& overrides) {
  json doc = base.is_null() ? json::object() : base;
  if (!base.is_null()) config_from_json(doc, "the saved config");
  if (path) {
    json file = read_json_file(*path);
    config_from_json(file, *path);  // validate the file on its own so errors name it
    for (auto sec = file.begin(); sec != file.end(); ++sec)
      for (auto kv = sec.value().begin(); kv != sec.value().end(); ++kv) doc[sec.key()][kv.key()] = kv.value();
  }
  for (const auto& assignment : overrides) apply_override(doc, assignment);
  return config_from_json(doc, path ? *path + " with --set overrides" : std::string("--set overrides"));
}

Config load_config(const std::optional<std::string>& path, const std::vector<std::string>& overrides) {
  return load_config(json(), path, overrides);
}

}  // namespace shoplens
