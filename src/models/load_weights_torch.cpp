// Loading a state dict into a model by name, the way PyTorch's load_state_dict(strict=False)
// does, plus what fine-tuning needs on top: a new head when the class count differs, DDP/wrapper
// prefixes, dtype conversion, and timm's position-embedding resampling for ViTs.
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "models_internal.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

// Wrappers that prefix every name: DistributedDataParallel ("module."), Lightning-style
// modules and EMA copies ("model."), torch.compile ("_orig_mod.").
constexpr const char* kWrapperPrefixes[] = {"module.", "model.", "_orig_mod."};

void collect(const torch::nn::Module& module, const std::string& prefix, StateDict& out) {
  for (const auto& p : module.named_parameters(/*recurse=*/false))
    if (p.value().defined()) out.emplace_back(prefix + p.key(), p.value().detach());
  for (const auto& b : module.named_buffers(/*recurse=*/false))
    if (b.value().defined()) out.emplace_back(prefix + b.key(), b.value().detach());
  for (const auto& child : module.named_children()) collect(*child.value(), prefix + child.key() + ".", out);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return c10::str(c10::IntArrayRef(shape)); }

// "a, b, c, ... 5 more": the first few items, for a log line or an error.
template <typename T>
std::string first_names(const std::vector<T>& items, std::string (*show)(const T&)) {
  constexpr std::size_t kShown = 8;
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) shown.push_back(show(items[i]));
  if (items.size() > kShown) shown.push_back("... " + std::to_string(items.size() - kShown) + " more");
  return join(shown, ", ");
}

template <typename T>
void add_names(std::vector<std::string>& lines, const std::string& title, const std::vector<T>& items,
               std::string (*show)(const T&)) {
  if (!items.empty()) lines.push_back(title + " (" + std::to_string(items.size()) + "): " + first_names(items, show));
}

std::string show_name(const std::string& s) { return s; }
std::string show_mismatch(const ShapeMismatch& m) {
  return m.name + " " + shape_text(m.expected) + " <- " + shape_text(m.found);
}

}  // namespace

StateDict model_state_dict(const torch::nn::Module& module) {
  StateDict out;
  collect(module, "", out);
  return out;
}

bool WeightLoadReport::complete() const {
  return missing.empty() && shape_mismatched.empty() && !head_reset && resampled.empty();
}

std::string WeightLoadReport::summary() const {
  std::vector<std::string> lines;
  lines.push_back("weights" + (source.empty() ? std::string() : " " + source) + ": loaded " +
                  std::to_string(loaded.size()) + " of " + std::to_string(model_tensors) + " model tensors" +
                  (unexpected.empty() ? "" : ", ignored " + std::to_string(unexpected.size())) +
                  (complete() ? " (complete)" : ""));
  if (head_reset)
    lines.push_back((weights_num_classes != model_num_classes
                         ? "new head: the weights have " + std::to_string(weights_num_classes) +
                               " classes, the model " + std::to_string(model_num_classes)
                         : std::string("new head: the head's shape differs from the weights'")) +
                    "; the head was re-initialised");
  add_names(lines, "missing, kept their initial values", missing, show_name);
  add_names(lines, "shape mismatch, not loaded (model <- weights)", shape_mismatched, show_mismatch);
  add_names(lines, "resampled (bicubic, model <- weights)", resampled, show_mismatch);
  add_names(lines, "unexpected, ignored", unexpected, show_name);
  add_names(lines, "stripped name prefixes", stripped_prefixes, show_name);
  add_names(lines, "converted dtypes", converted_dtypes, show_name);
  if (untracked_batchnorm > 0)
    lines.push_back(std::to_string(untracked_batchnorm) +
                    " BatchNorm num_batches_tracked counters absent (older checkpoint): kept at 0, as PyTorch does");
  return join(lines, "\n");
}

nlohmann::json WeightLoadReport::to_json() const {
  auto mismatches = [](const std::vector<ShapeMismatch>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : list) out.push_back({{"name", m.name}, {"expected", m.expected}, {"found", m.found}});
    return out;
  };
  return {{"source", source},
          {"complete", complete()},
          {"loaded", loaded.size()},
          {"model_tensors", model_tensors},
          {"missing", missing},
          {"unexpected", unexpected},
          {"shape_mismatched", mismatches(shape_mismatched)},
          {"resampled", mismatches(resampled)},
          {"stripped_prefixes", stripped_prefixes},
          {"converted_dtypes", converted_dtypes},
          {"untracked_batchnorm", untracked_batchnorm},
          {"head_reset", head_reset},
          {"weights_num_classes", weights_num_classes},
          {"model_num_classes", model_num_classes}};
}

namespace {

// File names mapped to model names: a wrapper prefix is stripped only where that yields a model name.
struct MappedWeights {
  std::map<std::string, at::Tensor> source;
  std::vector<std::string> names;  // file order, for the report
};

MappedWeights map_to_model_names(const StateDict& weights, const std::map<std::string, at::Tensor>& wanted,
                                 WeightLoadReport& report) {
  MappedWeights mapped;
  std::set<std::string> stripped;
  for (const auto& [name, tensor] : weights) {
    std::string n = name;
    std::set<std::string> used;
    while (!wanted.count(n)) {
      const char* hit = nullptr;
      for (const char* p : kWrapperPrefixes)
        if (starts_with(n, p)) hit = p;
      if (!hit) break;
      n = n.substr(std::strlen(hit));
      used.insert(hit);
    }
    if (!wanted.count(n)) {
      n = name;
      used.clear();
    }
    if (!mapped.source.emplace(n, tensor).second) {
      report.unexpected.push_back(name);  // a second tensor for the same model name
      continue;
    }
    mapped.names.push_back(n);
    stripped.insert(used.begin(), used.end());
  }
  report.stripped_prefixes.assign(stripped.begin(), stripped.end());
  return mapped;
}

// The head first: a different class count is either a new head (allowed) or a config mistake.
// Returns the head tensors whose shapes differ.
std::vector<ShapeMismatch> check_head(const StateDict& target, const std::map<std::string, at::Tensor>& source,
                                      const std::string& head, bool new_head_on_mismatch, WeightLoadReport& report) {
  if (auto it = source.find(head + "weight"); it != source.end() && it->second.dim() >= 1)
    report.weights_num_classes = static_cast<int>(it->second.size(0));
  std::vector<ShapeMismatch> head_mismatch;
  for (const auto& [name, dst] : target) {
    auto it = source.find(name);
    if (starts_with(name, head) && it != source.end() && it->second.sizes() != dst.sizes())
      head_mismatch.push_back({name, dst.sizes().vec(), it->second.sizes().vec()});
  }
  if (head_mismatch.empty() || new_head_on_mismatch) return head_mismatch;
  if (report.weights_num_classes != report.model_num_classes)
    throw ConfigError("the weights have " + std::to_string(report.weights_num_classes) +
                      " classes and the config has " + std::to_string(report.model_num_classes) +
                      " (model.num_classes); allow a new head to fine-tune on these classes");
  throw ConfigError("the weights' head does not fit the model: " + show_mismatch(head_mismatch.front()) +
                    " (weights of another architecture?)");
}

// Copies every tensor that fits (a ViT's position embedding is resampled to the model's grid);
// records what was missing, mismatched or converted. A mismatched head is skipped whole.
void copy_matching(const StateDict& target, const std::map<std::string, at::Tensor>& source, const std::string& head,
                   bool skip_head, WeightLoadReport& report) {
  torch::NoGradGuard no_grad;
  std::map<std::string, int> conversions;
  for (const auto& [name, dst] : target) {
    auto it = source.find(name);
    if (it == source.end()) {
      // PyTorch fills num_batches_tracked in for checkpoints older than the counter.
      if (ends_with(name, ".num_batches_tracked"))
        ++report.untracked_batchnorm;
      else
        report.missing.push_back(name);
      continue;
    }
    const at::Tensor& src = it->second;
    if (skip_head && starts_with(name, head)) continue;  // the whole head starts afresh
    at::Tensor value = src;
    if (src.sizes() != dst.sizes()) {
      auto resampled = name == "pos_embed" ? detail::resample_pos_embed(src, dst.sizes()) : std::nullopt;
      if (!resampled) {
        report.shape_mismatched.push_back({name, dst.sizes().vec(), src.sizes().vec()});
        continue;
      }
      report.resampled.push_back({name, dst.sizes().vec(), src.sizes().vec()});
      value = *resampled;
    }
    if (value.scalar_type() != dst.scalar_type())
      ++conversions[std::string(c10::toString(value.scalar_type())) + " -> " + c10::toString(dst.scalar_type())];
    at::Tensor(dst).copy_(value);
    report.loaded.push_back(name);
  }
  for (const auto& [what, count] : conversions)
    report.converted_dtypes.push_back(what + " (" + std::to_string(count) + " tensors)");
}

}  // namespace

WeightLoadReport load_weights(Classifier& model, const StateDict& weights, bool new_head_on_mismatch) {
  WeightLoadReport report;
  report.model_num_classes = model.num_classes();
  const StateDict target = model_state_dict(model);
  report.model_tensors = target.size();
  const std::map<std::string, at::Tensor> wanted(target.begin(), target.end());
  const MappedWeights mapped = map_to_model_names(weights, wanted, report);
  const std::string head = model.head_prefix();
  const auto head_mismatch = check_head(target, mapped.source, head, new_head_on_mismatch, report);
  copy_matching(target, mapped.source, head, !head_mismatch.empty(), report);
  for (const auto& name : mapped.names)
    if (!wanted.count(name)) report.unexpected.push_back(name);
  if (!head_mismatch.empty()) {
    model.reset_head(model.num_classes());
    report.head_reset = true;
  }
  return report;
}

namespace {

// Weights that leave part of the model at its random init, beyond what was asked for (a new head,
// a resampled position embedding), are a mistake more often than a choice: a file of another
// architecture once matched no tensor at all and training silently started from scratch.
void require_full_load(const WeightLoadReport& report, const std::string& path) {
  if (report.missing.empty() && report.shape_mismatched.empty() && !report.loaded.empty()) return;
  std::vector<std::string> problems;
  if (report.loaded.empty()) problems.push_back("no model tensor matched");
  if (!report.missing.empty())
    problems.push_back(std::to_string(report.missing.size()) + " model tensors have no weights (" +
                       first_names(report.missing, show_name) + ")");
  if (!report.shape_mismatched.empty())
    problems.push_back(std::to_string(report.shape_mismatched.size()) + " have another shape (" +
                       first_names(report.shape_mismatched, show_mismatch) + ")");
  if (!report.unexpected.empty())
    problems.push_back("the file's unmatched names include " + first_names(report.unexpected, show_name));
  throw ConfigError(path + ": loaded " + std::to_string(report.loaded.size()) + " of " +
                    std::to_string(report.model_tensors) + " model tensors: " + join(problems, "; ") +
                    ". Weights of another model? Set model.partial_load=true to start from part of them");
}

}  // namespace

WeightLoadReport load_weights_file(Classifier& model, const std::string& path, bool new_head_on_mismatch,
                                   bool allow_partial) {
  const StateDict weights = read_weights(path);
  WeightLoadReport report;
  try {
    report = load_weights(model, weights, new_head_on_mismatch);
  } catch (const ConfigError& e) {
    throw ConfigError(path + ": " + e.what());
  }
  report.source = path;
  if (!allow_partial) require_full_load(report, path);
  std::vector<std::string> lines = split(report.summary(), '\n');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i == 0 || report.complete())
      spdlog::info("{}", lines[i]);
    else
      spdlog::warn("{}", lines[i]);
  }
  return report;
}

}  // namespace shoplens
