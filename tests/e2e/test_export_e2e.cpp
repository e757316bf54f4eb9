// End-to-end: `shoplens export` from a trained run: a verified model folder that Python's
// torchvision loads by name with the same logits; damage is detected; nothing half-written.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/infer/model_export.h"
#include "shoplens/core/errors.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

class E2eExport : public testing::ScratchSuite<E2eExport> {
 protected:
  static void SetUpTestSuite() {
    shards_ = testing::shared_image_data({120, "40:60", 9, 36}) / "shards";
    // The trained run is shared too: export only reads it.
    run_ = testing::shared_fixture(
               "export-run",
               [](const fs::path& dir) {
                 auto trained = run_shoplens(
                     "train --shards " + shards_.string() + " --out " + (dir / "run").string() +
                     " --model resnet18 --epochs 1 --batch-size 16 --threads 2 --set augment.image_size=32");
                 return trained.exit_code == 0 ? std::string() : trained.output;
               }) /
           "run";
  }
  static fs::path run() { return run_; }
  static fs::path shards_, run_;
};
fs::path E2eExport::shards_, E2eExport::run_;

TEST_F(E2eExport, WritesAVerifiedModelFolderThatTorchvisionLoadsByName) {
  const fs::path model = scratch() / "model";
  auto r = run_shoplens("export --run " + run().string() + " --out " + model.string() + " --variants bf16,fp16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"model.safetensors", "model.bf16.safetensors", "model.fp16.safetensors", "model_card.json"})
    EXPECT_TRUE(fs::exists(model / f)) << f;
  const json card = json::parse(testing::read_text(model / "model_card.json"));
  EXPECT_EQ(card["architecture"]["name"], "resnet18");
  EXPECT_EQ(card["class_names"].size(), 12u);
  EXPECT_EQ(card["preprocessing"]["center_crop"], 32);
  EXPECT_EQ(card["verification"]["results"]["fp32"]["max_abs_logit_diff"], 0.0);
  // bf16 may flip a near-tie of this briefly trained model, never a decisive row.
  EXPECT_EQ(card["verification"]["results"]["bf16"]["top1_flips_beyond_error"], 0) << card["verification"];
  EXPECT_GE(card["verification"]["results"]["bf16"]["top1_agreement"].get<double>(), 0.5) << card["verification"];
  EXPECT_TRUE(card["training"]["test_macro_f1"].is_number());
  EXPECT_FALSE(card["fingerprint"]["data"].get<std::string>().empty());

  // Loading through the library: checksums, weights, verification logits.
  const auto loaded = load_exported_model(model, "fp16", true);
  EXPECT_EQ(loaded.class_names, card["class_names"].get<std::vector<std::string>>());

  auto probe = testing::run_shell(testing::python() + " -c 'import torchvision' 2>&1");
  if (probe.exit_code != 0) GTEST_SKIP() << "no torchvision for the Python side: " << probe.output;
  auto py = testing::run_shell(testing::python() + " " + testing::source_dir() +
                               "/scripts/python/load_shoplens_model.py " + model.string() + " 2>&1");
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("\"verified\": true"), std::string::npos) << py.output;
}

TEST_F(E2eExport, DamageAndMistakesAreCaughtAndNothingHalfWrittenIsLeft) {
  const fs::path model = scratch() / "model2";
  ASSERT_EQ(run_shoplens("export --run " + run().string() + " --out " + model.string()).exit_code, 0);
  EXPECT_EQ(run_shoplens("export --check --out " + model.string()).exit_code, 0);

  auto again = run_shoplens("export --run " + run().string() + " --out " + model.string());
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  EXPECT_EQ(run_shoplens("export --run " + run().string() + " --out " + model.string() + " --force").exit_code, 0);

  {  // one flipped byte in the weights
    std::fstream f(model / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    f.put('\x7f');
  }
  auto damaged = run_shoplens("export --check --out " + model.string());
  EXPECT_EQ(damaged.exit_code, 1) << damaged.output;
  EXPECT_NE(damaged.output.find("checksum differs"), std::string::npos) << damaged.output;
  EXPECT_THROW(load_exported_model(model), DataError);
  EXPECT_THROW(load_exported_model(model / "nope"), UsageError);

  auto no_run = run_shoplens("export --run " + shards_.string() + " --out " + (scratch() / "m3").string());
  EXPECT_EQ(no_run.exit_code, 2) << no_run.output;
  EXPECT_NE(no_run.output.find("no checkpoints"), std::string::npos) << no_run.output;
  EXPECT_FALSE(fs::exists(scratch() / "m3"));
  for (const auto& e : fs::directory_iterator(scratch().path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

// A card whose reduced-precision weights name another dtype than their file's variant is damage,
// named by its key: an unknown one, or fp32's (which would verify the fp32 weights twice and the
// bf16 file never).
TEST_F(E2eExport, CheckNamesACardEntryWhoseDtypeIsNotItsFilesVariant) {
  const fs::path model = scratch() / "model_dtype";
  ASSERT_EQ(run_shoplens("export --run " + run().string() + " --out " + model.string() + " --variants bf16").exit_code,
            0);
  const json card = json::parse(testing::read_text(model / "model_card.json"));
  for (const char* wrong : {"int8", "float32"}) {
    json damaged = card;
    damaged["files"]["model.bf16.safetensors"]["dtype"] = wrong;
    std::ofstream(model / "model_card.json") << damaged.dump(2);
    auto checked = run_shoplens("export --check --out " + model.string());
    EXPECT_EQ(checked.exit_code, 1) << wrong << ": " << checked.output;
    EXPECT_NE(checked.output.find("files.model.bf16.safetensors.dtype"), std::string::npos) << checked.output;
  }
}

// Card values a real export cannot have once reached LibTorch (image_size 1e18: a range message
// naming no file; verification.logits []: a tensor-size one), were misread (num_classes 2^63: "12
// class names for a 0-class head") or were taken (center_crop 0, resize_short_side 1e308, a class
// named twice). Each is refused at load, exit 1, naming the card file and the key.
TEST_F(E2eExport, CardValuesOutsideTheirRangesAreRefusedNamingTheFileAndKey) {
  const fs::path model = scratch() / "model_card_values";
  ASSERT_EQ(run_shoplens("export --run " + run().string() + " --out " + model.string()).exit_code, 0);
  const fs::path card_file = model / "model_card.json";
  const json card = json::parse(testing::read_text(card_file));
  const std::vector<std::pair<std::string, std::function<void(json&)>>> attacks = {
      {"architecture.image_size: expected a whole number from 8 to 4096",
       [](json& c) { c["architecture"]["image_size"] = 1e18; }},
      {"verification.logits: expected an array of 2 to 2 elements",
       [](json& c) { c["verification"]["logits"] = json::array(); }},
      {"architecture.num_classes: expected a whole number from 1 to 100000",
       [](json& c) { c["architecture"]["num_classes"] = 9223372036854775808ULL; }},
      {"preprocessing.center_crop", [](json& c) { c["preprocessing"]["center_crop"] = 0; }},
      {"preprocessing.resize_short_side", [](json& c) { c["preprocessing"]["resize_short_side"] = 1e308; }},
      {"appears twice", [](json& c) { c["class_names"][1] = c["class_names"][0]; }},
      {"verification.logits[0]: expected 12 logits", [](json& c) { c["verification"]["logits"][0].erase(0); }},
      {"files.model.safetensors.dtype", [](json& c) { c["files"]["model.safetensors"]["dtype"] = "int4"; }},
  };
  for (const auto& [expected, attack] : attacks) {
    json damaged = card;
    attack(damaged);
    testing::write_text(card_file, damaged.dump(2));
    auto checked = run_shoplens("export --check --out " + model.string());
    EXPECT_EQ(checked.exit_code, 1) << expected << ": " << checked.output;
    EXPECT_NE(checked.output.find(card_file.string() + ": "), std::string::npos) << checked.output;
    EXPECT_NE(checked.output.find(expected), std::string::npos) << checked.output;
  }
  // The verbs that load the folder say the same (predict here).
  auto predicted = run_shoplens("predict --weights " + model.string() + " --input " +
                                (shards_.parent_path() / "catalog" / "manifest.csv").string() + " --out " +
                                (scratch() / "card_predictions.csv").string());
  EXPECT_EQ(predicted.exit_code, 1) << predicted.output;
  EXPECT_NE(predicted.output.find(card_file.string() + ": files.model.safetensors.dtype: 'int4' is not float32"),
            std::string::npos)
      << predicted.output;
  testing::write_text(card_file, card.dump(2));
  EXPECT_EQ(run_shoplens("export --check --out " + model.string()).exit_code, 0);
}

// A run with train.ema_decay exports its EMA weights unless told otherwise; a run without one has
// none to give (usage error naming the flag).
TEST_F(E2eExport, ExportsTheEmaWeightsOfARunThatKeptThem) {
  const fs::path ema_run = scratch() / "ema_run";
  auto trained =
      run_shoplens("train --shards " + shards_.string() + " --out " + ema_run.string() +
                   " --epochs 2 --batch-size 16 --threads 2 --set augment.image_size=32 --set train.ema_decay=0.9");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("val (EMA weights)"), std::string::npos) << trained.output;
  for (const char* choice : {"auto", "on", "off"}) {
    const fs::path model = scratch() / (std::string("ema_model_") + choice);
    auto r = run_shoplens("export --run " + ema_run.string() + " --out " + model.string() + " --ema " + choice);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json card = json::parse(testing::read_text(model / "model_card.json"));
    EXPECT_EQ(card["source"]["weights"], std::string(choice) == "off" ? "raw" : "ema") << choice;
  }
  // The old spelling, --weights auto|ema|raw, still chooses, and warns.
  const fs::path old_model = scratch() / "ema_model_old_spelling";
  auto old = run_shoplens("export --run " + ema_run.string() + " --out " + old_model.string() + " --weights raw");
  ASSERT_EQ(old.exit_code, 0) << old.output;
  EXPECT_NE(old.output.find("--weights is deprecated: use --ema"), std::string::npos) << old.output;
  EXPECT_EQ(json::parse(testing::read_text(old_model / "model_card.json"))["source"]["weights"], "raw");
  const fs::path raw_model = scratch() / "no_ema_model";
  auto plain = run_shoplens("export --run " + run().string() + " --out " + raw_model.string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(json::parse(testing::read_text(raw_model / "model_card.json"))["source"]["weights"], "raw");
  auto none = run_shoplens("export --run " + run().string() + " --out " + (scratch() / "m4").string() + " --ema on");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--ema on"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace shoplens
