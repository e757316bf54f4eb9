// The resolved configuration of a run: typed sections, a schema that validates JSON config files
// (unknown keys get the nearest valid key, wrong types name the JSON path), `--set` overrides,
// and the JSON form written into every run directory. See docs/CONFIG.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shoplens {

struct RunConfig {
  std::string dir;  // run directory; empty = runs/<command>-<timestamp>
  std::int64_t seed = 1234;
  int threads = 0;  // 0 = every core this process may use
  std::string log_level = "info";
};

struct DataConfig {
  std::string input;                           // CSV manifest or ImageFolder root
  std::string root;                            // base for relative manifest paths; empty = manifest's folder
  std::map<std::string, std::string> columns;  // logical column -> CSV header (path, label, split, id)
  std::vector<std::string> metadata_fields;    // empty = every CSV column that is not path/label/split/id
  std::vector<std::string> classes;            // empty = discovered from the data, sorted
  std::string shards;                          // folder of prepared shards
  double val_fraction = 0.1;                   // no split column; or no val: carved from train
  double test_fraction = 0.1;
  int storage_size = 256;         // short side of stored images
  std::string encoding = "jpeg";  // jpeg | raw
  int jpeg_quality = 90;
  int records_per_shard = 1024;
  double max_megapixels = 100;  // larger originals are quarantined (decompression bombs)
  int max_file_mb = 512;        // larger files are quarantined without being read
  bool scaled_decode = true;    // JPEG DCT-domain downscaling while decoding
};

struct AugmentConfig {
  int image_size = 224;                       // output side, square
  std::vector<double> crop_scale{0.08, 1.0};  // RandomResizedCrop area fraction
  std::vector<double> crop_ratio{0.75, 4.0 / 3.0};
  double hflip = 0.5;
  double brightness = 0.4;
  double contrast = 0.4;
  double saturation = 0.4;
  double hue = 0.1;
  double mixup_alpha = 0.0;           // 0 disables
  double cutmix_alpha = 0.0;          // 0 disables
  double mix_prob = 1.0;              // chance a batch is mixed when mixup/cutmix is on
  int pad_crop = 0;                   // > 0: reflect-pad by this many px and crop back (instead of RandomResizedCrop)
  std::string auto_augment = "none";  // none | trivial (TrivialAugmentWide)
  double random_erasing = 0.0;        // probability of erasing a box (0 disables)
  std::vector<double> mean{0.485, 0.456, 0.406};
  std::vector<double> std{0.229, 0.224, 0.225};
  // Evaluation transform (torchvision's Resize then CenterCrop(image_size), Pillow's pixels):
  double eval_crop_pct = 0.875;    // resize the short side to floor(image_size / eval_crop_pct)
  int eval_resize_short_side = 0;  // > 0: that short side instead (a model card's value)
  bool worst_case = false;         // largest-footprint setting (the batch finder uses it)
};

struct LoaderConfig {
  int batch_size = 32;      // micro-batch
  bool auto_batch = false;  // batch_size "auto": `train` runs find-batch first
  int workers = 0;          // 0 = run.threads
  int prefetch_batches = 4;
  bool shuffle = true;
  bool drop_last = true;
  std::int64_t token_budget = 0;  // text: padded tokens per micro-batch at most (0: no cap)
  bool pin_memory = true;         // a CUDA job's batches in page-locked memory (no effect on CPU)
};

struct ModelConfig {
  std::string name = "small_cnn";  // see `shoplens train --help` / docs/MODELS.md
  std::string pretrained;          // .safetensors or torch.save state dict; empty = from scratch
  bool new_head = true;            // re-initialise the head when the weights' class count differs
  bool partial_load = false;       // accept weights that leave model tensors at their init
  double dropout = 0.0;            // before the head
  bool channels_last = false;
  double drop_path = 0.0;  // stochastic depth of the last block (ViTs; 0 disables)
};

struct OptimConfig {
  std::string name = "adamw";             // adamw | sgd
  double lr = 1e-3;                       // for the global batch (after any scaling)
  double weight_decay = 0.05;             // never applied to norms and biases
  double momentum = 0.9;                  // sgd
  bool nesterov = false;                  // sgd
  std::vector<double> betas{0.9, 0.999};  // adamw
  double eps = 1e-8;                      // adamw
  double backbone_lr_scale = 1.0;         // backbone lr = lr x this (head keeps lr)
  double clip_grad_norm = 0.0;            // 0 disables
};

struct ScheduleConfig {
  std::string name = "cosine";  // cosine | step | constant | one_cycle
  double warmup_epochs = 1.0;   // linear warm-up from warmup_start_factor
  double warmup_start_factor = 0.01;
  double min_lr_ratio = 0.0;  // cosine floor as a fraction of lr
  double step_epochs = 30.0;  // step: decay every this many epochs
  double gamma = 0.1;         // step: decay factor
  double pct_start = 0.3;     // one_cycle: fraction of the steps spent rising
};

struct TrainConfig {
  int epochs = 10;
  std::int64_t max_steps = 0;      // 0 = epochs decide
  int accumulation_steps = 1;      // global batch = loader.batch_size x this x world size
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (fp16 needs CUDA)
  std::string device = "auto";     // auto | cpu | cuda
  double label_smoothing = 0.0;
  double ema_decay = 0.0;               // EMA of the weights (0 disables), evaluated and saved when on
  std::string class_balance = "none";   // none | weighted_loss | sampler
  double freeze_backbone_epochs = 0.0;  // only the head trains at first
  double unfreeze_every_epochs = 0.0;   // then stages unfreeze one by one, output first (0: all at once)
  std::int64_t eval_every_steps = 0;    // 0 = at the end of every epoch
  int eval_batch_size = 0;              // 0 = loader.batch_size
  std::string early_stopping_metric = "macro_f1";
  int patience = 0;                         // evaluations without improvement before stopping; 0 = never stop early
  int keep_last = 2;                        // checkpoints kept besides the best
  std::int64_t checkpoint_every_steps = 0;  // 0 = at every evaluation
  int max_bad_steps = 5;                    // consecutive non-finite losses before giving up
  double init_loss_scale = 65536.0;         // fp16 dynamic loss scaling
  int loss_scale_growth_interval = 2000;
  std::int64_t log_every_steps = 10;
  bool tensorboard = true;
  bool deterministic = false;  // deterministic CPU kernels where LibTorch offers them
  std::string memory_budget;   // "24GiB": caps the device allocator (empty: no cap)
  bool oom_recovery = true;    // on OOM: halve the micro-batch, double accumulation, retry
  double threshold = 0.5;      // two classes: predict class 1 when its probability >= this
};

struct FindBatchConfig {
  std::string strategy = "fit";  // fit | binsearch (Lightning's) | exact (benchmark truth)
  double headroom = 0.02;        // fraction of the budget always left free (fit)
  int probe_steps = 3;           // training steps per probe (steady state)
  int verify_steps = 3;          // steps the answer must run within the budget
  int first_batch = 2;
  int max_batch = 4096;
  int round_to = 0;                      // multiple to round down to (0: 8 on CUDA with bf16/fp16, else 1)
  std::int64_t target_global_batch = 0;  // 0: one micro-batch per rank and step
  std::string lr_scaling = "auto";       // auto (sqrt for adamw, linear for sgd) | linear | sqrt | none
  std::string objective = "throughput";  // the plan's micro-batch: throughput (knee of images/s) | memory (largest)
  double min_throughput_gain = 0.2;      // objective throughput: images/s a batch doubling must add to be taken
  // objective throughput: the share of the loader's rate measured alone that the plan counts on
  // beside training (an H100 run kept 0.77-0.88 of it with as many workers as cores).
  double input_rate_share = 0.8;
  std::string train_budget =
      "time";  // time: epochs x the plan's measured speed-up (the reference batch's wall time) | epochs
  std::int64_t reference_batch = 0;  // global batch optim.lr was tuned for (0: loader.batch_size x accumulation)
  bool cache = true;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/shoplens, else ~/.cache/shoplens
  // CPU with train.memory_budget: the answer is probed again in a fresh process and lowered until
  // the whole process fits the budget, not only its tensors (docs/FIND_BATCH.md, "The process").
  bool process_check = true;
  int process_steps = 10;          // steps of each fresh-process probe (the heap's free blocks settle over steps)
  double process_headroom = 0.15;  // fraction of the budget kept for what a real epoch adds to a probe's process
};

// Data-parallel training (docs/DISTRIBUTED.md). The process group itself comes from the
// environment (torchrun's or Slurm's variables); these tune it.
struct DistConfig {
  std::string backend = "auto";   // auto (nccl on CUDA, else gloo) | gloo | nccl
  double timeout_seconds = 300;   // rendezvous and collectives: a dead peer is an error after this
  double bucket_mb = 25;          // gradient all-reduce bucket size
  bool broadcast_buffers = true;  // BatchNorm statistics from rank 0 before every step, as DDP does
  bool ledger = false;            // record the sample ids of every committed step (verify-ledger)
};

// Text tasks (docs/TEXT.md). The dataset's shape (vocabulary, metadata fields) is resolved from
// text_dataset.json by the commands and saved with the run, so a checkpoint rebuilds its model
// without the data.
struct TextConfig {
  int max_length = 512;            // tokens read per example (longer ones are truncated)
  bool bucket_by_length = true;    // group similar lengths into a step: less padding
  int bucket_window = 64;          // global batches sorted by length together
  std::string pooling = "mean";    // mean | cls
  std::string attention = "auto";  // auto | fused | math
  int vocab_size = 0;              // resolved from the dataset
  std::vector<double>
      categorical_cardinalities;  // resolved: vocabulary size per categorical field (0 = missing on top)
  int numeric_fields = 0;         // resolved
};

struct Config {
  RunConfig run;
  DataConfig data;
  AugmentConfig augment;
  LoaderConfig loader;
  ModelConfig model;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  FindBatchConfig find_batch;
  DistConfig dist;
  TextConfig text;
};

// Every field of every section: dotted name, type, default and help. Drives validation,
// `--set`, `--print-config` and docs/CONFIG.md.
struct ConfigFieldInfo {
  std::string path;  // "data.storage_size"
  std::string type;  // "integer", "number", "string", "boolean", "list of numbers", ...
  std::string default_json;
  std::string help;
};
std::vector<ConfigFieldInfo> config_fields();

nlohmann::json config_to_json(const Config& config);

// Validates `doc` against the schema and returns the typed config. `source` names the origin
// (a file path or "--set") in error messages. Missing keys keep their defaults.
Config config_from_json(const nlohmann::json& doc, const std::string& source);

// Applies "section.key=value" to `doc` (the JSON form of a config). The value is parsed as the
// field's type: numbers and booleans as JSON, strings raw, lists as "a,b,c" or JSON arrays.
void apply_override(nlohmann::json& doc, const std::string& assignment);

// Defaults <- config file (if any) <- overrides, in that order, validated at each step.
Config load_config(const std::optional<std::string>& path, const std::vector<std::string>& overrides);
// The same over a base document (a resumed run's saved config): base <- file <- overrides.
Config load_config(const nlohmann::json& base, const std::optional<std::string>& path,
                   const std::vector<std::string>& overrides);

// Reads a JSON file, throwing ConfigError with the file name and the parser's line/column.
nlohmann::json read_json_file(const std::string& path);

}  // namespace shoplens
