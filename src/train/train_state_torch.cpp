#include "shoplens/train/train_state.h"

#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"
#include "shoplens/train/ema.h"

namespace shoplens {
using json = nlohmann::json;

namespace {

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double number_or_nan(const json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

void write_model(torch::serialize::OutputArchive& archive, const Classifier& model) {
  for (const auto& p : model.named_parameters(true)) archive.write("model." + p.key(), p.value().detach().cpu());
  for (const auto& b : model.named_buffers(true))
    archive.write("model." + b.key(), b.value().cpu(), /*is_buffer=*/true);
}

constexpr const char* kEmaPrefix = "ema.";

void write_ema(torch::serialize::OutputArchive& archive, const WeightsEma& ema) {
  for (std::size_t i = 0; i < ema.names().size(); ++i)
    archive.write(kEmaPrefix + ema.names()[i], ema.tensors()[i].cpu(), ema.is_buffer(i));
}

// Whether the archive holds EMA weights (its first tensor is enough: they are written together).
bool has_ema(torch::serialize::InputArchive& archive, const Classifier& model) {
  const auto params = model.named_parameters(true);
  if (params.is_empty()) return false;
  at::Tensor probe;
  return archive.try_read(kEmaPrefix + params.begin()->key(), probe);
}

void read_ema(torch::serialize::InputArchive& archive, WeightsEma& ema) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < ema.names().size(); ++i) {
    at::Tensor loaded;
    if (!archive.try_read(kEmaPrefix + ema.names()[i], loaded))
      throw DataError("checkpoint has no EMA tensor for '" + ema.names()[i] + "'");
    ema.mutable_tensors()[i].copy_(loaded);
  }
}

// `prefix` "model." reads the trained weights, "ema." the averaged ones.
void read_model(torch::serialize::InputArchive& archive, Classifier& model, const std::string& prefix = "model.") {
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, at::Tensor& target, bool buffer) {
    at::Tensor loaded;
    if (!archive.try_read(prefix + name, loaded, buffer))
      throw DataError("checkpoint has no tensor for '" + name + "' (made for another model?)");
    if (loaded.sizes() != target.sizes())
      throw ConfigError("checkpoint tensor '" + name + "' has shape " + c10::str(loaded.sizes()) + ", the model " +
                        c10::str(target.sizes()));
    target.copy_(loaded);
  };
  for (auto& p : model.named_parameters(true)) load(p.key(), p.value(), false);
  for (auto& b : model.named_buffers(true)) load(b.key(), b.value(), true);
}

}  // namespace

json state_to_json(const TrainState& s, const Config& config, const Classifier& model,
                   const std::vector<std::string>& class_names, const LossScaler& scaler) {
  return {{"format", kCheckpointFormat},
          {"step", s.step},
          {"position",
           {{"epoch", s.epoch},
            {"samples", s.epoch_samples},
            {"global_batch", s.global_batch},
            {"world_size", s.world_size}}},
          {"images_trained", s.images_trained},
          {"train_seconds", s.train_seconds},
          {"best",
           {{"metric", s.best_metric},
            {"value", finite_or_null(s.best_value)},
            {"step", s.best_step ? json(*s.best_step) : json(nullptr)}}},
          {"evals_without_improvement", s.evals_without_improvement},
          {"bad_steps", s.bad_steps},
          {"last_finite_loss", finite_or_null(s.last_finite_loss)},
          {"last_finite_step", s.last_finite_step},
          {"history", s.history},
          {"oom", {{"micro_split", s.micro_split}, {"retries", s.oom_retries}}},
          {"scaler", scaler.state()},
          {"model", model.spec().name},
          {"classes", class_names},
          {"config", config_to_json(config)}};
}

namespace {

// Weights, buffers, gradient-free optimizer state (AdamW: two moments per weight), the EMA copy,
// and room for the archive's own records.
std::size_t serialized_size_estimate(const Classifier& model, bool with_ema) {
  std::size_t bytes = std::size_t{1} << 20;
  for (const auto& p : model.parameters()) bytes += p.nbytes() * (with_ema ? 4 : 3);
  for (const auto& b : model.buffers()) bytes += b.nbytes() * (with_ema ? 2 : 1);
  return bytes;
}

}  // namespace

std::string serialize_tensors(const Classifier& model, const torch::optim::Optimizer& optimizer,
                              const WeightsEma* ema) {
  torch::serialize::OutputArchive archive;
  write_model(archive, model);
  if (ema) write_ema(archive, *ema);
  torch::serialize::OutputArchive optim_archive;
  optimizer.save(optim_archive);
  archive.write("optimizer", optim_archive);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng.cpu", gen.get_state());
  }
  // Reserved up front: grown by doubling, the buffer would be copied on the way and a CPU job's
  // resident peak would carry up to twice the checkpoint beside the training's own memory. Pages
  // reserved and never written are not resident, so a generous estimate costs nothing.
  std::string out;
  out.reserve(serialized_size_estimate(model, ema != nullptr));
  archive.save_to([&out](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  return out;
}

bool restore_model_weights(Classifier& model, const std::string& tensors, CheckpointWeights which) {
  torch::serialize::InputArchive archive;
  archive.load_from(tensors.data(), tensors.size());
  const bool ema = which != CheckpointWeights::kRaw && has_ema(archive, model);
  if (which == CheckpointWeights::kEma && !ema)
    throw DataError("the checkpoint has no EMA weights (its run had train.ema_decay=0)");
  read_model(archive, model, ema ? kEmaPrefix : "model.");
  return ema;
}

void restore_state(const Checkpoint& ckpt, const Config& config, Classifier& model,
                   const std::vector<std::string>& class_names, torch::optim::Optimizer& optimizer, LossScaler& scaler,
                   TrainState& s, WeightsEma* ema) {
  const json& j = ckpt.state;
  const std::string where = "checkpoint '" + ckpt.path.string() + "'";
  try {
    if (j.at("format").get<int>() != kCheckpointFormat)
      throw DataError(where + " has format " + j.at("format").dump() + ", this build reads " +
                      std::to_string(kCheckpointFormat));
    if (j.at("model").get<std::string>() != model.spec().name)
      throw ConfigError(where + " is for model '" + j.at("model").get<std::string>() + "', the config says '" +
                        model.spec().name + "'");
    if (j.at("classes").get<std::vector<std::string>>() != class_names)
      throw ConfigError(where + " was trained on classes " + j.at("classes").dump() + ", the data has " +
                        json(class_names).dump());
    s.step = j.at("step").get<std::int64_t>();
    s.epoch = j.at("position").at("epoch").get<std::int64_t>();
    s.epoch_samples = j.at("position").at("samples").get<std::int64_t>();
    s.global_batch = j.at("position").value("global_batch", std::int64_t{0});
    s.world_size = j.at("position").value("world_size", 1);
    s.images_trained = j.at("images_trained").get<std::int64_t>();
    s.train_seconds = s.train_seconds_at_save = j.at("train_seconds").get<double>();
    s.best_metric = j.at("best").at("metric").get<std::string>();
    s.best_value = number_or_nan(j.at("best").at("value"));
    s.best_step = j.at("best").at("step").is_null()
                      ? std::nullopt
                      : std::optional<std::int64_t>(j.at("best").at("step").get<std::int64_t>());
    s.evals_without_improvement = j.at("evals_without_improvement").get<int>();
    s.bad_steps = j.at("bad_steps").get<int>();
    s.last_finite_loss = number_or_nan(j.at("last_finite_loss"));
    s.last_finite_step = j.at("last_finite_step").get<std::int64_t>();
    s.history = j.at("history").get<std::vector<json>>();
    if (j.contains("oom")) {  // absent in checkpoints written before OOM recovery existed
      s.micro_split = j.at("oom").at("micro_split").get<int>();
      s.oom_retries = j.at("oom").at("retries").get<std::int64_t>();
    }
    scaler.load_state(j.at("scaler"));
  } catch (const json::exception& e) {
    throw DataError(where + ": missing or malformed state field: " + e.what());
  }
  if (s.best_metric != metric_name(config.train.early_stopping_metric)) {
    // A different selection metric makes the stored best incomparable: start that record afresh.
    s.best_metric = metric_name(config.train.early_stopping_metric);
    s.best_value = std::numeric_limits<double>::quiet_NaN();
    s.best_step.reset();
    s.evals_without_improvement = 0;
  }

  torch::serialize::InputArchive archive;
  try {
    archive.load_from(ckpt.tensors.data(), ckpt.tensors.size());
    read_model(archive, model);
    if (ema && has_ema(archive, model)) {
      read_ema(archive, *ema);
    } else if (ema) {
      // A run that turns EMA on when resumed: the average starts from the weights it resumes with.
      *ema = WeightsEma(model, ema->decay());
    }
    torch::serialize::InputArchive optim_archive;
    archive.read("optimizer", optim_archive);
    optimizer.load(optim_archive);
    at::Tensor rng;
    archive.read("rng.cpu", rng);
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  } catch (const c10::Error& e) {
    throw DataError(where + ": cannot restore its tensors: " + e.what_without_backtrace());
  }
}

}  // namespace shoplens
