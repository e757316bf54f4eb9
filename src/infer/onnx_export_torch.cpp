#include "onnx_export.h"

#include <torch/torch.h>

#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/infer/latency_curve.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* triton_type(onnx::DataType type) {
  switch (type) {
    case onnx::DataType::kFloat:
      return "TYPE_FP32";
    case onnx::DataType::kInt32:
      return "TYPE_INT32";
    case onnx::DataType::kInt64:
      return "TYPE_INT64";
    case onnx::DataType::kBool:
      return "TYPE_BOOL";
  }
  return "TYPE_INVALID";
}

// "dims: [ 3, 224, 224 ]" without the leading batch dimension; a symbolic one is -1 (variable).
std::string triton_dims(const onnx::ValueInfo& value) {
  std::string out;
  for (std::size_t i = 1; i < value.dims.size(); ++i) {
    const auto& d = value.dims[i];
    out += (i > 1 ? ", " : "") + std::to_string(d.symbol.empty() ? d.value : -1);
  }
  return "[ " + out + " ]";
}

void append_tensors(std::ostringstream& out, const char* key, const std::vector<onnx::ValueInfo>& values, bool labels) {
  out << key << " [\n";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out << "  {\n    name: \"" << values[i].name << "\"\n    data_type: " << triton_type(values[i].type)
        << "\n    dims: " << triton_dims(values[i]) << "\n";
    if (labels) out << "    label_filename: \"labels.txt\"\n";
    out << "  }" << (i + 1 < values.size() ? "," : "") << "\n";
  }
  out << "]\n";
}

// One timed forward of `batch` inputs shaped as the model reads them (images at the spec's size,
// text at max_length, every token real), in inference mode on the CPU.
void forward_once(Classifier& model, const Batch& batch) {
  c10::InferenceMode inference;
  model.forward_batch(batch, torch::kCPU);
}

}  // namespace

std::map<std::string, std::string> onnx_image_metadata(const std::string& model_name, const json& preprocessing,
                                                       const std::vector<std::string>& class_names) {
  std::map<std::string, std::string> m = {{"shoplens.model", model_name},
                                          {"class_names", json(class_names).dump()},
                                          {"num_classes", std::to_string(class_names.size())}};
  for (const auto& [key, value] : preprocessing.items())
    m[key] = value.is_string() ? value.get<std::string>() : value.dump();
  m["image_size"] = preprocessing.at("center_crop").dump();
  m["input"] = "images: float32 [batch, 3, image_size, image_size], RGB, pixel / 255, then (x - mean) / std";
  m["output"] = "logits: float32 [batch, num_classes], softmax for probabilities";
  return m;
}

std::map<std::string, std::string> onnx_text_metadata(const Classifier& model,
                                                      const std::vector<std::string>& class_names) {
  const ModelSpec& s = model.spec();
  return {{"shoplens.model", s.name},
          {"class_names", json(class_names).dump()},
          {"num_classes", std::to_string(class_names.size())},
          {"vocab_size", std::to_string(s.vocab_size)},
          {"max_length", std::to_string(s.max_length)},
          {"pooling", name_in(kTextPoolingNames, s.pooling)},
          {"categorical_cardinalities", json(s.categorical_cardinalities).dump()},
          {"numeric_fields", std::to_string(s.numeric_fields)},
          {"input",
           "input_ids int64 [batch, length] (length <= max_length, ids < vocab_size); attention_mask int64 "
           "[batch, length] (nonzero = real token); categorical int64 [batch, fields] (0 = missing), numeric "
           "float32 [batch, fields] (NaN = missing), each only when the model has such fields"},
          {"output", "logits: float32 [batch, num_classes], softmax for probabilities"}};
}

onnx::Graph onnx_graph(Classifier& model) {
  torch::NoGradGuard no_grad;
  model.eval();
  onnx::Graph graph("shoplens_" + model.spec().name);
  model.emit_onnx(graph);
  return graph;
}

std::string onnx_model_bytes(const onnx::Graph& graph, const std::map<std::string, std::string>& metadata) {
  onnx::ModelInfo info;
  info.producer_version = shoplens_version();
  info.doc = "Exported by shoplens export --format onnx; see the metadata for preprocessing and classes.";
  info.metadata = metadata;
  return onnx::serialize(graph, info);
}

TritonBatching choose_triton_batching(Classifier& model, const TritonOptions& o) {
  if (o.max_batch < 1) throw UsageError("export: --max-batch must be >= 1, got " + std::to_string(o.max_batch));
  // The curve `serve` measures in its warm-up, on the model's own example batches.
  std::map<int, Batch> examples;
  auto run_batch = [&](int b) {
    if (!examples.count(b)) examples.emplace(b, model.example_batch(b));
    forward_once(model, examples.at(b));
  };
  // A signal ends the measurement after the batch in progress (a large --max-batch takes long).
  const LatencyCurve curve =
      measure_latency_curve(run_batch, o.max_batch, o.warmup_reps, {}, [] { return interrupt_requested(); });
  if (interrupt_requested()) throw InterruptedError();
  TritonBatching out;
  out.curve = json::array();
  for (const auto& p : curve.points())
    out.curve.push_back({{"batch", p.batch}, {"p50_ms", p.p50_ms}, {"p95_ms", p.p95_ms}});
  // serve's rule: the largest batch whose p95 fits the target; the rest of the budget is what a
  // request may wait in the queue for that batch to fill.
  out.preferred_batch = curve.largest_within(o.p95_target_ms, o.max_batch);
  out.max_queue_delay_us =
      std::max(0L, static_cast<long>((o.p95_target_ms - curve.p95_ms(out.preferred_batch)) * 1000));
  return out;
}

std::string triton_config(const onnx::Graph& graph, const TritonOptions& o, const TritonBatching& batching) {
  std::ostringstream out;
  out << "# Written by shoplens export --format triton (docs/DEPLOYING.md).\n"
      << "name: \"" << o.name << "\"\n"
      << "platform: \"onnxruntime_onnx\"\n"
      << "max_batch_size: " << o.max_batch << "\n";
  append_tensors(out, "input", graph.inputs(), false);
  append_tensors(out, "output", graph.outputs(), true);
  out << "# preferred batch: the largest whose measured p95 fits " << o.p95_target_ms
      << " ms on the exporting machine\n"
      << "dynamic_batching {\n"
      << "  preferred_batch_size: [ " << batching.preferred_batch << " ]\n"
      << "  max_queue_delay_microseconds: " << batching.max_queue_delay_us << "\n"
      << "}\n"
      << "instance_group [ { kind: KIND_CPU, count: 1 } ]\n";
  return out.str();
}

void write_triton_repository(const fs::path& repo, Classifier& model,
                             const std::map<std::string, std::string>& metadata,
                             const std::vector<std::string>& class_names, const TritonOptions& o) {
  if (o.name.empty() || o.name.find('/') != std::string::npos || o.name[0] == '.')
    throw UsageError("export: the Triton model name '" + o.name + "' must be a plain folder name");
  const onnx::Graph graph = onnx_graph(model);
  const TritonBatching batching = choose_triton_batching(model, o);
  spdlog::info("export: triton batching: preferred batch {}, max queue delay {} us (p95 target {} ms, curve {})",
               batching.preferred_batch, batching.max_queue_delay_us, o.p95_target_ms, batching.curve.dump());
  fs::create_directories(repo / o.name / "1");
  write_file_atomic(repo / o.name / "1" / "model.onnx", onnx_model_bytes(graph, metadata));
  write_file_atomic(repo / o.name / "config.pbtxt", triton_config(graph, o, batching));
  std::string labels;
  for (const auto& c : class_names) labels += c + "\n";
  write_file_atomic(repo / o.name / "labels.txt", labels);
}

}  // namespace shoplens
