// The ONNX and Triton outputs of `shoplens export` (docs/DEPLOYING.md). Private to src/infer and
// the tests: the command reaches them through export_model's --format.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/models/onnx_graph.h"

namespace shoplens {

class Classifier;

// The metadata_props of an image model's ONNX file: its preprocessing (`preprocessing` is the
// model card's object: resize_short_side, center_crop, mean, std, color, layout) and classes.
std::map<std::string, std::string> onnx_image_metadata(const std::string& model_name,
                                                       const nlohmann::json& preprocessing,
                                                       const std::vector<std::string>& class_names);
// The metadata_props of a text model's ONNX file: the spec's vocabulary, length and fields.
std::map<std::string, std::string> onnx_text_metadata(const Classifier& model,
                                                      const std::vector<std::string>& class_names);

// The model's ONNX graph (eval-mode forward): input "images" [batch, 3, S, S] (or the text
// inputs), output "logits" [batch, classes], the weights as initializers.
onnx::Graph onnx_graph(Classifier& model);
// The graph as an ONNX ModelProto (opset 17) with `metadata` as its metadata_props.
std::string onnx_model_bytes(const onnx::Graph& graph, const std::map<std::string, std::string>& metadata);

struct TritonOptions {
  std::string name;           // the model's folder in the repository
  int max_batch = 16;         // max_batch_size, and the largest batch measured
  double p95_target_ms = 50;  // latency budget the preferred batch must fit
  int warmup_reps = 5;        // timed passes per batch size
};

// The batching Triton should use: chosen, as `serve --p95-target-ms` chooses, from the model's
// measured batch -> latency curve (infer/latency_curve.h, as serve uses it).
// NOLINTNEXTLINE(bugprone-exception-escape): its implicit moves move a json, which does not throw
struct TritonBatching {
  int preferred_batch = 1;
  long max_queue_delay_us = 0;
  nlohmann::json curve;  // [{batch, p50_ms, p95_ms}] as measured here
};
TritonBatching choose_triton_batching(Classifier& model, const TritonOptions& options);

// config.pbtxt: platform onnxruntime_onnx, the graph's inputs and outputs (dims without the
// batch), max_batch_size and the dynamic batching.
std::string triton_config(const onnx::Graph& graph, const TritonOptions& options, const TritonBatching& batching);

// Writes REPO/<name>/1/model.onnx, REPO/<name>/config.pbtxt and REPO/<name>/labels.txt (one class
// per line, Triton's classification labels), measuring the batching on `model`.
void write_triton_repository(const std::filesystem::path& repo, Classifier& model,
                             const std::map<std::string, std::string>& metadata,
                             const std::vector<std::string>& class_names, const TritonOptions& options);

}  // namespace shoplens
