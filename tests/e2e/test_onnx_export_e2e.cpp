// End-to-end: ONNX and Triton export (docs/DEPLOYING.md). Every registered model, with random
// weights (and BatchNorm statistics measured on calibration images, so a wrong BN emission
// cannot hide behind the fresh 0/1 ones), is written as ONNX and held against the ONNX checker (full_check) and ONNX
// Runtime on the export's verification input and on real decoded images, at batch sizes 1 and 3 (the dynamic axis). The
// CLI's --format onnx and --format triton are checked on a trained run. The Python side is the pinned venv of
// scripts/venv.sh onnx; without it the tests skip.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "image_test_util.h"
#include "infer/onnx_export.h"
#include "model_test_util.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/image_io.h"
#include "shoplens/infer/model_export.h"
#include "shoplens/models/model_facts.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr double kTolerance = 1e-4;
constexpr int kImageSize = 64;  // ResNet-50 reaches 2x2 in its last stage (1x1 at 32: BN statistics over few values)

// The onnx venv's python (created once per machine, cached), or "" with the reason in `why`.
std::string onnx_python(std::string& why) {
  auto r = testing::run_shell("flock /tmp/shoplens-onnx-venv.lock bash " + testing::source_dir() +
                              "/scripts/venv.sh onnx 2>&1 | tail -n 1");
  std::string venv = r.output;
  while (!venv.empty() && (venv.back() == '\n' || venv.back() == '\r')) venv.pop_back();
  const std::string py = venv + "/bin/python";
  if (r.exit_code != 0 || !fs::exists(py)) {
    why = "the onnx venv (scripts/venv.sh onnx: onnx, onnxruntime from PyPI) is unavailable: " + r.output;
    return "";
  }
  return py;
}

json write_array(const at::Tensor& t, const fs::path& file) {
  const at::Tensor c = t.contiguous();
  std::ofstream out(file, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
  return {{"file", file.string()},
          {"dtype", c.scalar_type() == at::kLong ? "int64" : "float32"},
          {"shape", c.sizes().vec()}};
}

// Real images at the model's size: photo-like pictures, PNG-encoded, decoded and put through the
// evaluation transform as `score` does.
at::Tensor real_images(int count, int seed) {
  AugmentConfig config;
  config.image_size = kImageSize;
  const Augmenter eval(config, /*train=*/false);
  auto out = torch::empty({count, 3, kImageSize, kImageSize});
  for (int i = 0; i < count; ++i) {
    const auto png = testing::png_bytes(testing::test_picture(48 + 7 * i, 40 + 5 * i, seed + i));
    eval.apply(decode_image(png.data(), png.size()).rgb, 0, out[i].data_ptr<float>());
  }
  return out;
}

// Token batches with padding, a row without any real token, every metadata code and a NaN.
Batch text_batch(const ModelSpec& spec, int n, int seed) {
  torch::manual_seed(seed);
  Batch b;
  const std::int64_t length = 9;
  b.input_ids = torch::randint(0, spec.vocab_size, {n, length}, torch::kLong);
  b.attention_mask = torch::ones({n, length}, torch::kLong);
  for (int i = 0; i < n; ++i) b.attention_mask[i].slice(0, length - 2 * i, length).zero_();
  if (n >= 3) b.attention_mask[n - 1].zero_();
  b.meta_categorical = torch::randint(0, spec.categorical_cardinalities[0] + 1, {n, 1}, torch::kLong);
  b.meta_numeric = torch::randn({n, spec.numeric_fields});
  if (n >= 3) b.meta_numeric[1][0] = std::numeric_limits<float>::quiet_NaN();
  return b;
}

// BatchNorm statistics as a trained model has them: measured on the inputs (one train-mode pass
// with momentum 1), neither the fresh 0/1 (which would hide a wrong BN emission) nor random ones
// (which leave ResNet-50's activations unnormalised, logits in the thousands, where two fp32
// convolution implementations differ by more than the tolerance through rounding alone).
void calibrate_batch_norm(Classifier& model, const at::Tensor& images) {
  bool has_bn = false;
  for (auto& m : model.modules())
    if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
      bn->options.momentum(1.0);
      has_bn = true;
    }
  if (!has_bn) return;
  torch::NoGradGuard no_grad;
  model.train();
  model.forward(images);
  model.eval();
}

// One case of check_onnx.py: the model's ONNX file and its LibTorch logits at batch 1 and 3.
json export_case(const std::string& name, const std::string& pooling, const fs::path& dir) {
  ModelSpec spec = testing::spec(name, 5, kImageSize);
  if (!pooling.empty()) spec.pooling = parse_enum(kTextPoolingNames, pooling, "text.pooling");
  torch::manual_seed(7);
  auto model = make_model(spec);
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<Batch> batches;
  if (model->is_text()) {
    batches = {text_batch(spec, 1, 1), text_batch(spec, 3, 2)};
  } else {
    const at::Tensor verification = verification_input(kImageSize);
    batches = {testing::make_batch(verification.slice(0, 0, 1), {}), testing::make_batch(real_images(3, 11), {}),
               testing::make_batch(verification, {})};
  }
  if (!model->is_text())
    calibrate_batch_norm(*model, torch::cat({real_images(16, 30), batches[1].images, batches[2].images}));
  const std::string tag = name + pooling;
  testing::write_text(dir / (tag + ".onnx"), onnx_model_bytes(onnx_graph(*model), {{"shoplens.model", name}}));
  json c = {{"model", tag},
            {"onnx", (dir / (tag + ".onnx")).string()},
            {"tolerance", kTolerance},
            {"runs", json::array()},
            {"metadata", {{"shoplens.model", name}}}};
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    const std::string stem = (dir / (tag + "_" + std::to_string(i))).string();
    json inputs;
    if (model->is_text()) {
      inputs = {{"input_ids", write_array(b.input_ids, stem + "_ids.bin")},
                {"attention_mask", write_array(b.attention_mask, stem + "_mask.bin")},
                {"categorical", write_array(b.meta_categorical, stem + "_cat.bin")},
                {"numeric", write_array(b.meta_numeric, stem + "_num.bin")}};
    } else {
      inputs = {{"images", write_array(b.images, stem + "_images.bin")}};
    }
    const at::Tensor logits = model->forward_batch(b, torch::kCPU);
    c["runs"].push_back({{"inputs", inputs}, {"logits", write_array(logits, stem + "_logits.bin")}});
  }
  return c;
}

// Runs check_onnx.py on `cases`; one result object per case, in order.
std::vector<json> check_with_onnx_runtime(const std::string& py, const json& cases, const fs::path& dir,
                                          int& exit_code) {
  testing::write_text(dir / "cases.json", cases.dump());
  auto r = testing::run_shell(py + " " + testing::source_dir() + "/scripts/python/check_onnx.py " +
                              (dir / "cases.json").string() + " 2>&1");
  exit_code = r.exit_code;
  std::vector<json> results;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') results.push_back(json::parse(line));
  if (results.empty()) ADD_FAILURE() << "check_onnx.py printed no result:\n" << r.output;
  return results;
}

TEST(E2eOnnxExport, EveryModelMatchesOnnxRuntimeAtBatchOneAndThree) {
  std::string why;
  const std::string py = onnx_python(why);
  if (py.empty()) GTEST_SKIP() << why;
  testing::ScratchDir dir("e2e-onnx-models");
  json cases = json::array();
  for (const auto& name : model_names()) cases.push_back(export_case(name, "", dir.path()));
  cases.push_back(export_case("text_tiny", "cls", dir.path()));  // the other pooling
  int exit_code = -1;
  const auto results = check_with_onnx_runtime(py, {{"cases", cases}}, dir.path(), exit_code);
  ASSERT_EQ(results.size(), cases.size());
  for (const auto& r : results) {
    EXPECT_FALSE(r.contains("error")) << r.dump();
    if (r.contains("error")) continue;
    EXPECT_EQ(r["checker"], "ok") << r.dump();
    for (double diff : r["max_abs_diff"].get<std::vector<double>>()) EXPECT_LE(diff, kTolerance) << r.dump();
    EXPECT_EQ(r["batches"][0], 1) << r.dump();
    EXPECT_EQ(r["batches"][1], 3) << r.dump();
    std::cout << r.dump() << std::endl;  // the per-model differences docs/DEPLOYING.md quotes
  }
  EXPECT_EQ(exit_code, 0);
}

// The CLI on a trained run: --format onnx adds model.onnx to the verified folder (listed in the
// card, so --check covers it), with the card's preprocessing and classes as metadata and the card's
// verification logits reproduced; --format triton writes a repository whose config.pbtxt agrees
// with its model.onnx.
TEST(E2eOnnxExport, CliWritesOnnxIntoTheFolderAndATritonRepository) {
  std::string why;
  const std::string py = onnx_python(why);
  if (py.empty()) GTEST_SKIP() << why;
  testing::ScratchDir dir("e2e-onnx-cli");
  ASSERT_EQ(testing::make_exported_model(dir.path(), 60, 5), "");
  const fs::path model = dir / "onnx_model", repo = dir / "repo";
  auto r =
      testing::run_shoplens("export --run " + (dir / "run").string() + " --out " + model.string() + " --format onnx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(testing::run_shoplens("export --check --out " + model.string()).exit_code, 0);
  const json card = testing::read_json(model / "model_card.json");
  ASSERT_TRUE(card["files"].contains("model.onnx")) << card["files"];
  EXPECT_EQ(card["onnx"]["opset"], 17);

  r = testing::run_shoplens("export --run " + (dir / "run").string() + " --out " + repo.string() +
                            " --format triton --triton-name shop --max-batch 4 --warmup-reps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"shop/1/model.onnx", "shop/config.pbtxt", "shop/labels.txt"})
    EXPECT_TRUE(fs::exists(repo / f)) << f;
  r = testing::run_shoplens("export --run " + (dir / "run").string() + " --out " + repo.string() +
                            " --format triton --triton-name shop");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // an existing model folder needs --force

  const auto& pre = card["preprocessing"];
  const json reference = card["verification"]["logits"];
  json run = {{"inputs", {{"images", write_array(verification_input(pre["center_crop"].get<int>()), dir / "v.bin")}}}};
  std::vector<double> flat;
  for (const auto& row : reference)
    for (double v : row) flat.push_back(v);
  run["logits"] = write_array(torch::tensor(flat, torch::kFloat).view({2, -1}), dir / "v_logits.bin");
  const json metadata = {{"class_names", card["class_names"].dump()},
                         {"image_size", pre["center_crop"].dump()},
                         {"mean", pre["mean"].dump()},
                         {"std", pre["std"].dump()},
                         {"resize_short_side", pre["resize_short_side"].dump()},
                         {"shoplens.model", "small_cnn"}};
  json cases = json::array();
  cases.push_back(
      {{"model", "cli-onnx"}, {"onnx", (model / "model.onnx").string()}, {"runs", {run}}, {"metadata", metadata}});
  cases.push_back({{"model", "cli-triton"},
                   {"onnx", (repo / "shop/1/model.onnx").string()},
                   {"runs", {run}},
                   {"metadata", metadata},
                   {"triton_config", (repo / "shop/config.pbtxt").string()}});
  int exit_code = -1;
  const auto results = check_with_onnx_runtime(py, {{"cases", cases}}, dir.path(), exit_code);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& res : results) EXPECT_FALSE(res.contains("error")) << res.dump();
  EXPECT_EQ(results[1]["triton"]["max_batch_size"], 4) << results[1].dump();
  EXPECT_EQ(exit_code, 0);
}

// A text run exports to ONNX (model.onnx alone) and to Triton (a variable-length input); the
// model folder refuses it and says where to go.
TEST(E2eOnnxExport, CliExportsATextRunAsOnnxAndTriton) {
  std::string why;
  const std::string py = onnx_python(why);
  if (py.empty()) GTEST_SKIP() << why;
  testing::ScratchDir dir("e2e-onnx-text");
  const std::string data = (dir / "data").string(), run = (dir / "run").string();
  auto r =
      testing::run_shoplens("make-data --task text --out " + data +
                            " --num-examples 120 --max-length 32 --vocab-size 1024 --records-per-shard 100 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_shoplens("train --shards " + data + " --out " + run +
                            " --model text_tiny --max-steps 2 --threads 2 --set text.max_length=32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_shoplens("export --run " + run + " --out " + (dir / "folder").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--format onnx"), std::string::npos) << r.output;
  r = testing::run_shoplens("export --run " + run + " --out " + (dir / "onnx").string() + " --format onnx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_shoplens("export --run " + run + " --out " + (dir / "repo").string() +
                            " --format triton --max-batch 2 --warmup-reps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json cases = json::array();
  const json metadata = {{"shoplens.model", "text_tiny"}, {"max_length", "32"}};
  cases.push_back({{"model", "cli-text-onnx"},
                   {"onnx", (dir / "onnx/model.onnx").string()},
                   {"runs", json::array()},
                   {"metadata", metadata}});
  cases.push_back({{"model", "cli-text-triton"},
                   {"onnx", (dir / "repo/text_tiny/1/model.onnx").string()},
                   {"runs", json::array()},
                   {"metadata", metadata},
                   {"triton_config", (dir / "repo/text_tiny/config.pbtxt").string()}});
  int exit_code = -1;
  const auto results = check_with_onnx_runtime(py, {{"cases", cases}}, dir.path(), exit_code);
  for (const auto& res : results) EXPECT_FALSE(res.contains("error")) << res.dump();
  EXPECT_EQ(exit_code, 0);
}

}  // namespace
}  // namespace shoplens
