// Where an inference model comes from: an exported folder, a run, a checkpoint, or a weights file
// with an architecture name (inference_session.h).
#include <torch/torch.h>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/augment.h"
#include "shoplens/infer/inference_session.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/model_facts.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace fs = std::filesystem;

namespace {

bool has_extension(const fs::path& p, std::initializer_list<const char*> extensions) {
  const std::string ext = p.extension().string();
  for (const char* e : extensions)
    if (ext == e) return true;
  return false;
}

std::shared_ptr<Classifier> model_for(const ModelSource& s, int num_classes) {
  ModelSpec spec;
  spec.name = s.arch;
  spec.num_classes = num_classes;
  spec.image_size = s.image_size;
  return make_model(spec);
}

// The class count the weights' head was trained for: a throwaway one-class model's load report
// reads it from the head tensor's shape.
int head_size_of(const ModelSource& s, const StateDict& weights) {
  auto probe = model_for(s, 1);
  const WeightLoadReport report = load_weights(*probe, weights, /*new_head_on_mismatch=*/true);
  if (report.weights_num_classes < 1)
    throw DataError(s.path.string() + " has no " + probe->head_prefix() + " head tensors for " + s.arch +
                    "; pass --classes to say what its outputs are");
  return report.weights_num_classes;
}

LoadedModel load_weights_file_model(const ModelSource& s) {
  if (s.arch.empty())
    throw UsageError(s.path.string() + " is a weights file: name its architecture with --model (e.g. resnet18)");
  if (model_facts(s.arch).input != ModelInput::image)
    throw UsageError("--model " + s.arch + " is a text model; predict and evaluate take image models");
  const StateDict weights = read_weights(s.path);
  const int classes = s.class_names.empty() ? head_size_of(s, weights) : static_cast<int>(s.class_names.size());
  LoadedModel loaded;
  loaded.model = model_for(s, classes);
  const WeightLoadReport report = load_weights(*loaded.model, weights, /*new_head_on_mismatch=*/false);
  if (!report.complete())
    throw DataError(s.path.string() + " does not fit " + s.arch + " with " + std::to_string(classes) +
                    " classes; every tensor must load for predictions to mean anything:\n" + report.summary());
  loaded.model->eval();
  loaded.class_names = s.class_names.empty() ? numbered_names(classes) : s.class_names;
  loaded.preprocessing.image_size = s.image_size;
  loaded.preprocessing.mean = s.mean;
  loaded.preprocessing.std = s.std;
  loaded.preprocessing.eval_crop_pct = s.crop_pct;
  loaded.variant = "fp32";
  loaded.card = {{"source", {{"weights", fs::absolute(s.path).string()}}},
                 {"architecture", {{"name", s.arch}, {"num_classes", classes}, {"image_size", s.image_size}}}};
  return loaded;
}

}  // namespace

ModelSourceKind model_source_kind(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "model_card.json", ec)) return ModelSourceKind::kModelFolder;
    if (fs::is_directory(path / "checkpoints", ec)) return ModelSourceKind::kRun;
    throw UsageError(path.string() + " is a folder with neither model_card.json (an export) nor checkpoints/ (a run)");
  }
  if (!fs::exists(path, ec)) throw UsageError("model " + path.string() + " does not exist");
  const fs::file_status status = fs::status(path, ec);
  if (!fs::is_regular_file(status))  // a FIFO would block the weights reader's open for ever
    throw UsageError("model " + path.string() + " is " + file_type_name(status.type()) +
                     ", not a model folder, run, checkpoint or weights file");
  if (has_extension(path, {".ckpt"})) return ModelSourceKind::kCheckpoint;
  if (has_extension(path, {".safetensors", ".pth", ".pt", ".bin"})) return ModelSourceKind::kWeightsFile;
  throw UsageError(path.string() +
                   ": not a model folder, run, checkpoint (.ckpt) or weights file (.safetensors, .pth, .pt)");
}

LoadedModel load_model_source(const ModelSource& s) {
  switch (model_source_kind(s.path)) {
    case ModelSourceKind::kModelFolder:
      return load_exported_model(s.path, s.variant, /*verify=*/true);
    case ModelSourceKind::kRun:
      return load_run_model(s.path, s.checkpoint);
    case ModelSourceKind::kCheckpoint:  // RUN/checkpoints/NAME.ckpt: the run holds its config
      return load_run_model(fs::absolute(s.path).parent_path().parent_path(), s.path.string());
    case ModelSourceKind::kWeightsFile:
      return load_weights_file_model(s);
  }
  throw Error("unreachable model source kind");
}

}  // namespace shoplens
