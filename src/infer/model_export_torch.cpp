#include "shoplens/infer/model_export.h"

#include <torch/torch.h>

#include <unistd.h>

#include <cmath>

#include <spdlog/spdlog.h>

#include "onnx_export.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/shard_format.h"
#include "shoplens/core/checksum.h"
#include "shoplens/infer/model_card.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A weights variant's tensor type (its name and card dtype: model_card.h).
at::ScalarType variant_dtype(const std::string& variant) {
  check_weights_variant(variant);
  return variant == "bf16" ? at::kBFloat16 : variant == "fp16" ? at::kHalf : at::kFloat;
}

json file_entry(const fs::path& file, const std::string& dtype) {
  const std::string bytes = read_file(file);
  return {{"bytes", bytes.size()}, {"crc32", crc32_of(bytes.data(), bytes.size())}, {"dtype", dtype}};
}

json tensor_to_json(const at::Tensor& t) {
  const auto c = t.to(torch::kDouble).contiguous();
  json rows = json::array();
  for (std::int64_t i = 0; i < c.size(0); ++i) {
    json row = json::array();
    for (std::int64_t j = 0; j < c.size(1); ++j) row.push_back(c[i][j].item<double>());
    rows.push_back(row);
  }
  return rows;
}

// The card's reference logits, [rows, classes] (parse_model_card checked the shape).
at::Tensor logits_tensor(const std::vector<std::vector<double>>& rows) {
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const auto n = static_cast<std::int64_t>(rows.size());
  return torch::tensor(flat, torch::kDouble).view({n, static_cast<std::int64_t>(rows.front().size())});
}

at::Tensor logits_of(Classifier& model, int image_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  return model.forward(verification_input(image_size)).to(torch::kDouble);
}

// Compares logits with the reference: fp32 must match within the tolerance, reduced precision
// must keep every top-1 that its own error cannot explain. A row whose two best reference logits
// are closer than twice the largest logit difference is a near-tie that bf16 rounding may flip
// (a briefly trained model has such rows); a flip elsewhere means the weights are wrong.
json compare(const at::Tensor& logits, const at::Tensor& reference) {
  const double max_abs = (logits - reference).abs().max().item<double>();
  const double prob_diff = (torch::softmax(logits, 1) - torch::softmax(reference, 1)).abs().max().item<double>();
  const at::Tensor same = logits.argmax(1).eq(reference.argmax(1));
  const double agreement = same.to(torch::kDouble).mean().item<double>();
  std::int64_t unexplained = 0;
  if (reference.size(1) >= 2) {
    const at::Tensor top2 = std::get<0>(reference.topk(2, 1));
    const at::Tensor margin = top2.select(1, 0) - top2.select(1, 1);
    unexplained = (same.logical_not() & margin.gt(2 * max_abs)).sum().item<std::int64_t>();
  }
  return {{"max_abs_logit_diff", max_abs},
          {"max_prob_diff", prob_diff},
          {"top1_agreement", agreement},
          {"top1_flips_beyond_error", unexplained}};
}

ModelSpec spec_from_card(const ModelCard& card) {
  ModelSpec spec;
  spec.name = card.architecture;
  spec.num_classes = card.num_classes;
  spec.image_size = card.image_size;
  spec.dropout = card.dropout;
  spec.channels_last = card.channels_last;
  return spec;
}

fs::path pick_checkpoint(const ExportOptions& o) {
  const fs::path dir = o.run_dir / "checkpoints";
  if (o.checkpoint != "best" && o.checkpoint != "last") return o.checkpoint;
  if (!fs::is_directory(dir))
    throw UsageError("export: " + o.run_dir.string() +
                     " has no checkpoints/ folder; is it a `shoplens train` run directory?");
  if (o.checkpoint == "best" && fs::exists(dir / "best.ckpt")) return dir / "best.ckpt";
  auto newest = CheckpointStore(dir, 1 << 30).newest_valid();
  if (!newest) throw DataError("export: no valid checkpoint in " + dir.string());
  if (o.checkpoint == "best") spdlog::warn("export: no best.ckpt in {}; using the newest checkpoint", dir.string());
  return newest->path;
}

json training_summary(const fs::path& run_dir, const json& state) {
  json t = {{"step", state.value("step", 0)}, {"best", state.value("best", json())}};
  if (state.contains("history") && !state["history"].empty()) {
    const auto& last = state["history"].back();
    t["last_val"] = {{"macro_f1", last.value("macro_f1", json())},
                     {"accuracy", last.value("accuracy", json())},
                     {"step", last.value("step", json())}};
  }
  std::error_code ec;
  if (fs::exists(run_dir / "summary.json", ec)) {
    try {
      const json s = json::parse(read_file(run_dir / "summary.json"));
      for (const char* key : {"status", "steps", "epochs", "images_trained", "test_macro_f1", "global_batch",
                              "precision", "commit", "torch"})
        if (s.contains(key)) t[key] = s[key];
      if (s.contains("test") && s["test"].is_object())
        t["test"] = {{"accuracy", s["test"].value("accuracy", json())},
                     {"macro_f1", s["test"].value("macro_f1", json())},
                     {"samples", s["test"].value("samples", json())}};
    } catch (const std::exception& e) {
      spdlog::warn("export: ignoring unreadable {}: {}", (run_dir / "summary.json").string(), e.what());
    }
  }
  return t;
}

std::string data_fingerprint(const Config& config) {
  const fs::path info = fs::path(config.data.shards) / kImageShardFormat.dataset_file;
  std::error_code ec;
  if (config.data.shards.empty() || !fs::exists(info, ec)) return "";
  return Fingerprint().add(read_file(info)).hex();
}

// The checkpoint's model, config and classes, with the checkpoint's weights.
struct TrainedModel {
  fs::path checkpoint;
  json state;
  Config config;
  std::vector<std::string> classes;
  ModelSpec spec;
  std::shared_ptr<Classifier> model;
  bool ema = false;  // the model holds the checkpoint's EMA weights (else the raw ones)
};

CheckpointWeights checkpoint_weights(ExportWeights choice) {
  switch (choice) {
    case ExportWeights::kEma:
      return CheckpointWeights::kEma;
    case ExportWeights::kRaw:
      return CheckpointWeights::kRaw;
    case ExportWeights::kAuto:
      break;
  }
  return CheckpointWeights::kEmaIfPresent;
}

TrainedModel load_trained_model(const ExportOptions& o) {
  TrainedModel t;
  t.checkpoint = pick_checkpoint(o);
  Checkpoint ckpt = read_checkpoint(t.checkpoint);
  t.state = std::move(ckpt.state);
  try {
    t.config = config_from_json(t.state.at("config"), t.checkpoint.string() + " (saved config)");
    t.classes = t.state.at("classes").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw DataError("export: " + t.checkpoint.string() + " lacks its config or classes: " + e.what());
  }
  t.spec = model_spec_from_config(t.config, static_cast<int>(t.classes.size()));
  if (is_text_model(t.spec.name) && o.format == ExportFormat::kFolder)
    throw UsageError("export: " + t.checkpoint.string() + " holds the text model " + t.spec.name +
                     "; the model folder packages image models only: use --format onnx or triton for text "
                     "(docs/DEPLOYING.md)");
  t.model = make_model(t.spec);
  try {
    t.ema = restore_model_weights(*t.model, ckpt.tensors, checkpoint_weights(o.weights));
  } catch (const DataError& e) {
    if (o.weights != ExportWeights::kEma) throw;
    throw UsageError("export --ema on: " + t.checkpoint.string() + ": " + e.what());
  }
  return t;
}

// Writes the fp32 weights and each reduced-precision variant into `staging`, each read back into a
// fresh model that must reproduce `reference` (load-and-verify). Fills the card's files and results.
void write_verified_weights(const TrainedModel& t, const std::vector<std::string>& reduced_variants,
                            const fs::path& staging, const at::Tensor& reference, json& files, json& variants) {
  const StateDict weights = model_state_dict(*t.model);
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"shoplens.model", t.spec.name}, {"shoplens.classes", json(t.classes).dump()}};
  auto reload = [&](const std::string& variant) {
    auto fresh = make_model(t.spec);
    const auto report = load_weights(*fresh, read_safetensors(staging / weights_file(variant)), false);
    if (!report.complete())
      throw Error("export: the written " + weights_file(variant) + " did not load whole:\n" + report.summary());
    return compare(logits_of(*fresh, t.spec.image_size), reference);
  };
  write_safetensors(staging / weights_file("fp32"), weights, metadata);
  files[weights_file("fp32")] = file_entry(staging / weights_file("fp32"), weights_card_dtype("fp32"));
  const json fp32_check = reload("fp32");
  if (fp32_check["max_abs_logit_diff"].get<double>() > kFp32Tolerance)
    throw Error("export: the written weights give different logits (max diff " +
                fp32_check["max_abs_logit_diff"].dump() + ")");
  variants["fp32"] = fp32_check;
  for (const auto& v : reduced_variants) {
    StateDict reduced;
    for (const auto& [name, tensor] : weights)
      reduced.emplace_back(name, tensor.is_floating_point() ? tensor.to(variant_dtype(v)) : tensor);
    write_safetensors(staging / weights_file(v), reduced, metadata);
    files[weights_file(v)] = file_entry(staging / weights_file(v), weights_card_dtype(v));
    variants[v] = reload(v);
    spdlog::info(
        "export: {} variant: top-1 agreement {:.3f}, max probability difference {:.2e} on the verification input", v,
        variants[v]["top1_agreement"].get<double>(), variants[v]["max_prob_diff"].get<double>());
  }
}

// The card's preprocessing: the evaluation transform (resize the short side, centre crop, normalise).
json preprocessing_json(const TrainedModel& t) {
  const int resized = Augmenter(t.config.augment, /*train=*/false).eval_resize_short_side();
  return {{"color", "RGB"},
          {"layout", "NCHW float32, pixel / 255, then (x - mean) / std"},
          {"resize_short_side", resized},
          {"center_crop", t.spec.image_size},
          {"interpolation", "bilinear, antialiased (Pillow's resampler, as torchvision's Resize on PIL images)"},
          {"crop_offsets", "int(round((resized - crop) / 2)), as torchvision's CenterCrop"},
          {"mean", t.config.augment.mean},
          {"std", t.config.augment.std}};
}

std::map<std::string, std::string> onnx_metadata(const TrainedModel& t) {
  return is_text_model(t.spec.name) ? onnx_text_metadata(*t.model, t.classes)
                                    : onnx_image_metadata(t.spec.name, preprocessing_json(t), t.classes);
}

json model_card(const ExportOptions& o, const TrainedModel& t, const at::Tensor& reference, const json& files,
                const json& variants) {
  const ModelSpec& spec = t.spec;
  std::int64_t parameters = 0;
  for (const auto& p : t.model->parameters()) parameters += p.numel();
  return {
      {"format", "shoplens-model"},
      {"format_version", kModelCardVersion},
      {"architecture",
       {{"name", spec.name},
        {"num_classes", spec.num_classes},
        {"image_size", spec.image_size},
        {"dropout", spec.dropout},
        {"channels_last", spec.channels_last},
        {"parameters", parameters},
        {"parameter_names", parameter_naming_name(model_facts(spec.name).naming)}}},
      {"class_names", t.classes},
      {"preprocessing", preprocessing_json(t)},
      {"training", training_summary(o.run_dir, t.state)},
      {"source",
       {{"run_dir", fs::absolute(o.run_dir).string()},
        {"checkpoint", fs::absolute(t.checkpoint).string()},
        {"weights", t.ema ? "ema" : "raw"}}},
      {"fingerprint",
       {{"config", Fingerprint().add(t.state.at("config").dump()).hex()},
        {"data", data_fingerprint(t.config)},
        {"weights_crc32", files.at(weights_file("fp32")).at("crc32")}}},
      {"files", files},
      {"verification",
       {{"input",
         {{"shape", {2, 3, spec.image_size, spec.image_size}},
          {"formula", "x[i] = sin(0.007 * i + 0.3) over the flattened index, float32"}}},
        {"logits", tensor_to_json(reference)},
        {"tolerance", kFp32Tolerance},
        {"results", variants}}},
      {"exported_by",
       {{"version", shoplens_version()},
        {"commit", build_commit()},
        {"torch", torch_version()},
        {"date", today_date()}}},
  };
}

// What export reads: the run, and the checkpoint when it is named by its file.
std::vector<FlagPath> export_inputs(const ExportOptions& o) {
  std::vector<FlagPath> inputs{{"--run", o.run_dir}};
  if (o.checkpoint != "best" && o.checkpoint != "last") inputs.push_back({"--checkpoint", o.checkpoint});
  return inputs;
}

// Into place: a folder named `out` is only ever a complete, verified export.
void move_into_place(const fs::path& staging, const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(out, ec)) {
    fs::rename(staging, out);
    return;
  }
  const fs::path old = out.parent_path() / ("." + out.filename().string() + ".old-" + std::to_string(::getpid()));
  fs::rename(out, old);
  fs::rename(staging, out);
  fs::remove_all(old, ec);
}

// A text run as ONNX: MODEL_DIR/model.onnx alone (the model folder's card and loader are for images;
// the ONNX metadata carries the vocabulary, fields and classes).
ExportResult export_text_onnx(const TrainedModel& t, const fs::path& out, const fs::path& staging) {
  write_file_atomic(staging / "model.onnx", onnx_model_bytes(onnx_graph(*t.model), onnx_metadata(t)));
  move_into_place(staging, out);
  spdlog::info("export: text model {} ({} classes) from {} -> {}/model.onnx", t.spec.name, t.classes.size(),
               t.checkpoint.string(), out.string());
  ExportResult result{ExportedArtifact::kTextOnnx, out};
  result.onnx_file = out / "model.onnx";
  return result;
}

// REPO/NAME is written beside the repository's models under a temporary name and renamed into
// place whole, as the model folder is: Triton polling the repository never sees half a model.
ExportResult export_triton(const ExportOptions& o, const TrainedModel& t) {
  TritonOptions triton;
  triton.name = o.triton_name.empty() ? t.spec.name : o.triton_name;
  triton.max_batch = o.max_batch;
  triton.p95_target_ms = o.p95_target_ms;
  triton.warmup_reps = o.warmup_reps;
  const fs::path repo = fs::absolute(o.out_dir);
  // The repository may hold the run; the model's folder in it, which --force replaces, may not.
  require_output_apart({"--out", repo / triton.name}, export_inputs(o));
  std::error_code ec;
  if (fs::exists(repo / triton.name, ec) && !o.force)
    throw UsageError("export: " + (repo / triton.name).string() + " already exists; pass --force to replace it");
  const fs::path staging = repo / (".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  try {
    write_triton_repository(staging, *t.model, onnx_metadata(t), t.classes, triton);
    move_into_place(staging / triton.name, repo / triton.name);
    fs::remove_all(staging, ec);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  spdlog::info("export: Triton model {} ({}) -> {}", triton.name, t.spec.name, (repo / triton.name).string());
  ExportResult result{ExportedArtifact::kTritonModel, repo};
  result.triton_model = triton.name;
  result.onnx_file = repo / triton.name / "1" / "model.onnx";
  return result;
}

// The verified model folder (plus model.onnx with --format onnx) in `staging`, then into place.
ExportResult export_folder(const ExportOptions& o, const TrainedModel& trained, const fs::path& out,
                           const fs::path& staging) {
  const at::Tensor reference = logits_of(*trained.model, trained.spec.image_size);
  json files = json::object();
  json variants = json::object();
  write_verified_weights(trained, o.variants, staging, reference, files, variants);
  if (o.format == ExportFormat::kOnnx) {
    write_file_atomic(staging / "model.onnx", onnx_model_bytes(onnx_graph(*trained.model), onnx_metadata(trained)));
    files["model.onnx"] = file_entry(staging / "model.onnx", "float32");
  }
  json card = model_card(o, trained, reference, files, variants);
  if (o.format == ExportFormat::kOnnx)
    card["onnx"] = {
        {"file", "model.onnx"}, {"opset", onnx::kOpsetVersion}, {"inputs", {"images"}}, {"outputs", {"logits"}}};
  write_file_atomic(staging / "model_card.json", card.dump(2) + "\n");
  move_into_place(staging, out);
  spdlog::info("export: {} ({} classes, {} parameters) from {} -> {}", trained.spec.name, trained.classes.size(),
               card["architecture"]["parameters"].get<std::int64_t>(), trained.checkpoint.string(), out.string());
  ExportResult result{ExportedArtifact::kModelFolder, out};
  result.card_file = out / "model_card.json";
  if (o.format == ExportFormat::kOnnx) result.onnx_file = out / "model.onnx";
  return result;
}

}  // namespace

at::Tensor verification_input(int image_size) {
  const std::int64_t n = 2LL * 3 * image_size * image_size;
  return torch::sin(torch::arange(n, torch::kDouble) * 0.007 + 0.3)
      .to(torch::kFloat)
      .view({2, 3, image_size, image_size});
}

ExportResult export_model(const ExportOptions& o) {
  if (o.out_dir.empty()) throw UsageError("export: --out MODEL_DIR is required");
  const bool triton = o.format == ExportFormat::kTriton;
  if (!triton) require_output_apart({"--out", o.out_dir}, export_inputs(o));
  std::error_code ec;
  if (!triton && fs::exists(o.out_dir, ec) && !o.force)
    throw UsageError("export: " + o.out_dir.string() +
                     " already exists; choose another --out or pass --force to replace it");
  for (const auto& v : o.variants) variant_dtype(v);
  const TrainedModel trained = load_trained_model(o);
  if (triton) return export_triton(o, trained);

  const fs::path out = fs::absolute(o.out_dir);
  const fs::path staging = out.parent_path() / ("." + out.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  fs::create_directories(staging);
  try {
    return is_text_model(trained.spec.name) ? export_text_onnx(trained, out, staging)
                                            : export_folder(o, trained, out, staging);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

namespace {

json read_model_card(const fs::path& dir, const fs::path& card_file) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("model folder " + dir.string() + " does not exist (make one with shoplens export)");
  if (!fs::exists(card_file, ec)) throw DataError(dir.string() + " has no model_card.json: not a shoplens export");
  const std::string card_text = read_file(card_file);
  if (json_nesting_exceeds(card_text))
    throw DataError(card_file.string() + ": nests deeper than " + std::to_string(kMaxJsonNesting) +
                    " levels: not a model card");
  try {
    return json::parse(card_text);
  } catch (const json::exception& e) {
    throw DataError(card_file.string() + ": unreadable model card: " + e.what());
  }
}

// Every file the card lists is there with the size and CRC-32 the card recorded.
void check_card_files(const ModelCard& card, const fs::path& dir) {
  std::error_code ec;
  for (const auto& [name, entry] : card.files) {
    const fs::path file = dir / name;
    if (!fs::exists(file, ec)) throw DataError(file.string() + ": listed in the model card but missing");
    const std::string bytes = read_file(file);
    if (bytes.size() != entry.bytes || crc32_of(bytes.data(), bytes.size()) != entry.crc32)
      throw DataError(file.string() + ": size or checksum differs from the model card (damaged or replaced)");
  }
}

// The loaded weights reproduce the card's verification logits (fp32: within its tolerance; other
// variants: no top-1 flip beyond their rounding error).
void verify_card_logits(const LoadedModel& loaded, const ModelCard& card, const fs::path& dir) {
  const at::Tensor reference = logits_tensor(card.verification_logits);
  const json check = compare(logits_of(*loaded.model, card.image_size), reference);
  const bool ok = loaded.variant == "fp32" ? check["max_abs_logit_diff"].get<double>() <= card.tolerance
                                           : check["top1_flips_beyond_error"].get<std::int64_t>() == 0;
  if (!ok)
    throw DataError(dir.string() + ": the " + loaded.variant +
                    " weights do not reproduce the card's verification logits (" + check.dump() + ")");
}

}  // namespace

LoadedModel load_exported_model(const fs::path& dir, const std::string& variant, bool verify) {
  const fs::path card_file = dir / "model_card.json";
  LoadedModel loaded;
  check_weights_variant(variant);
  loaded.card = read_model_card(dir, card_file);
  const ModelCard card = parse_model_card(loaded.card, card_file.string());
  check_card_files(card, dir);
  const std::string file = weights_file(variant);
  if (!card.files.count(file))
    throw UsageError(dir.string() + " has no " + variant + " weights (" + file + "); export with --variants " +
                     variant);
  loaded.model = make_model(spec_from_card(card));
  const auto report = load_weights(*loaded.model, read_safetensors(dir / file), false);
  if (!report.complete()) throw DataError((dir / file).string() + " does not fit its model card:\n" + report.summary());
  loaded.model->eval();
  loaded.variant = variant;
  loaded.class_names = card.class_names;
  loaded.preprocessing.image_size = card.image_size;
  loaded.preprocessing.mean = card.mean;
  loaded.preprocessing.std = card.std;
  loaded.preprocessing.eval_resize_short_side = card.resize_short_side;
  if (verify) verify_card_logits(loaded, card, dir);
  return loaded;
}

ModelCard verify_exported_model(const fs::path& dir) {
  const LoadedModel loaded = load_exported_model(dir, "fp32", true);
  ModelCard card = parse_model_card(loaded.card, (dir / "model_card.json").string());
  for (const auto& variant : card.variants)
    if (variant != "fp32") load_exported_model(dir, variant, true);
  return card;
}

LoadedModel load_run_model(const fs::path& run_dir, const std::string& checkpoint) {
  ExportOptions o;
  o.run_dir = run_dir;
  o.checkpoint = checkpoint;
  TrainedModel trained = load_trained_model(o);
  LoadedModel loaded;
  loaded.model = trained.model;
  loaded.model->eval();
  loaded.class_names = trained.classes;
  loaded.preprocessing = trained.config.augment;
  loaded.preprocessing.worst_case = false;
  loaded.variant = "fp32";
  loaded.card = {{"source", {{"run_dir", fs::absolute(run_dir).string()}, {"checkpoint", trained.checkpoint.string()}}},
                 {"architecture", {{"name", trained.spec.name}, {"image_size", trained.spec.image_size}}}};
  return loaded;
}

}  // namespace shoplens
