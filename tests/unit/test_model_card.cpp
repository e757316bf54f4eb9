// parse_model_card: every field that loading a model folder reads is range-checked, and a card
// outside the ranges is refused naming the card file and the key (docs/DEPLOYING.md).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/infer/model_card.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

// A card as export writes it, for a 3-class resnet18 at 32 pixels.
json good_card() {
  return {{"format", "shoplens-model"},
          {"format_version", 1},
          {"architecture",
           {{"name", "resnet18"}, {"num_classes", 3}, {"image_size", 32}, {"dropout", 0.0}, {"channels_last", false}}},
          {"class_names", {"bag", "hat", "shoe"}},
          {"preprocessing",
           {{"resize_short_side", 36},
            {"center_crop", 32},
            {"mean", {0.485, 0.456, 0.406}},
            {"std", {0.229, 0.224, 0.225}}}},
          {"fingerprint", {{"weights_crc32", 1234}}},
          {"files",
           {{"model.safetensors", {{"bytes", 100}, {"crc32", 1234}, {"dtype", "float32"}}},
            {"model.bf16.safetensors", {{"bytes", 50}, {"crc32", 99}, {"dtype", "bfloat16"}}}}},
          {"verification", {{"logits", {{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}}}, {"tolerance", 1e-4}}}};
}

// The DataError a card with `damage` done to it gets ("<no error>" when it loads).
std::string error_of(const std::function<void(json&)>& damage) {
  json card = good_card();
  damage(card);
  try {
    parse_model_card(card, "m/model_card.json");
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no error>";
}

// The error names the card file and the key, and says what is wrong.
void expect_refused(const std::function<void(json&)>& damage, const std::string& key, const std::string& why = "") {
  const std::string error = error_of(damage);
  EXPECT_EQ(error.rfind("m/model_card.json: ", 0), 0u) << error;
  EXPECT_NE(error.find(key), std::string::npos) << "should name " << key << ": " << error;
  if (!why.empty()) {
    EXPECT_NE(error.find(why), std::string::npos) << error;
  }
}

TEST(ModelCard, ReadsAWellFormedCard) {
  const ModelCard card = parse_model_card(good_card(), "m/model_card.json");
  EXPECT_EQ(card.architecture, "resnet18");
  EXPECT_EQ(card.num_classes, 3);
  EXPECT_EQ(card.image_size, 32);
  EXPECT_EQ(card.class_names, (std::vector<std::string>{"bag", "hat", "shoe"}));
  EXPECT_EQ(card.resize_short_side, 36);
  EXPECT_EQ(card.variants, (std::vector<std::string>{"fp32", "bf16"}));
  EXPECT_EQ(card.verification_logits.size(), 2u);
  EXPECT_EQ(card.files.at("model.safetensors").crc32, 1234u);
  EXPECT_DOUBLE_EQ(card.tolerance, 1e-4);
}

TEST(ModelCard, SizesOutsideTheModelsRangeAreRefusedByKey) {
  expect_refused([](json& c) { c["architecture"]["image_size"] = 1e18; }, "architecture.image_size", "8 to 4096");
  expect_refused([](json& c) { c["architecture"]["image_size"] = 4; }, "architecture.image_size");
  expect_refused([](json& c) { c["architecture"]["image_size"] = "32"; }, "architecture.image_size");
  expect_refused([](json& c) { c["architecture"]["num_classes"] = 9223372036854775808ULL; }, "architecture.num_classes",
                 "1 to 100000");
  expect_refused([](json& c) { c["architecture"]["num_classes"] = 0; }, "architecture.num_classes");
  expect_refused([](json& c) { c["architecture"]["num_classes"] = 4; }, "class_names", "4");
  expect_refused([](json& c) { c["preprocessing"]["center_crop"] = 0; }, "preprocessing.center_crop");
  expect_refused([](json& c) { c["preprocessing"]["center_crop"] = 64; }, "preprocessing.center_crop",
                 "architecture.image_size");
  expect_refused([](json& c) { c["preprocessing"]["resize_short_side"] = 1e308; }, "preprocessing.resize_short_side");
  expect_refused([](json& c) { c["preprocessing"]["resize_short_side"] = 16; }, "preprocessing.resize_short_side",
                 "32 to 16384");
  expect_refused([](json& c) { c["preprocessing"]["std"] = {0.2, 0, 0.2}; }, "preprocessing.std");
  expect_refused([](json& c) { c["preprocessing"]["mean"] = {0.5, 0.5}; }, "preprocessing.mean");
  expect_refused([](json& c) { c["architecture"]["dropout"] = 1.5; }, "architecture.dropout");
  expect_refused(
      [](json& c) {
        c["architecture"]["name"] = "vit_tiny";
        c["architecture"]["image_size"] = c["preprocessing"]["center_crop"] = 40;
      },
      "architecture.image_size", "patch size 16");
}

TEST(ModelCard, ClassNamesAreUniqueNonEmptyStrings) {
  expect_refused([](json& c) { c["class_names"] = {"bag", "hat", "bag"}; }, "class_names[2]", "twice");
  expect_refused([](json& c) { c["class_names"] = {"bag", "", "shoe"}; }, "class_names[1]", "empty");
  expect_refused([](json& c) { c["class_names"] = {"bag", 7, "shoe"}; }, "class_names[1]");
  expect_refused([](json& c) { c["class_names"] = {"bag", std::string(300, 'x'), "shoe"}; }, "class_names[1]");
  expect_refused([](json& c) { c["class_names"] = json::array(); }, "class_names");
}

TEST(ModelCard, VerificationLogitsMustHaveTheHeadsShape) {
  expect_refused([](json& c) { c["verification"]["logits"] = json::array(); }, "verification.logits");
  expect_refused([](json& c) { c["verification"]["logits"] = {{0.1, 0.2, 0.3}}; }, "verification.logits");
  expect_refused([](json& c) { c["verification"]["logits"][1] = {0.1, 0.2}; }, "verification.logits[1]", "3 logits");
  expect_refused([](json& c) { c["verification"]["logits"][0][2] = "x"; }, "verification.logits[0]");
  expect_refused([](json& c) { c["verification"]["tolerance"] = 1e9; }, "verification.tolerance");
  expect_refused([](json& c) { c.erase("verification"); }, "verification", "missing");
}

TEST(ModelCard, FilesAndVariantsAreKnownAndInsideTheFolder) {
  expect_refused([](json& c) { c["files"]["../../etc/passwd"] = c["files"]["model.safetensors"]; },
                 "files.../../etc/passwd", "not a file name");
  expect_refused([](json& c) { c["files"]["model.bf16.safetensors"]["dtype"] = "int8"; },
                 "files.model.bf16.safetensors.dtype");
  expect_refused([](json& c) { c["files"]["model.int8.safetensors"] = c["files"]["model.safetensors"]; },
                 "files.model.int8.safetensors", "not the weights file of any variant");
  expect_refused([](json& c) { c["files"]["model.safetensors"]["crc32"] = 1LL << 40; },
                 "files.model.safetensors.crc32");
  expect_refused([](json& c) { c["files"]["model.safetensors"]["bytes"] = -1; }, "files.model.safetensors.bytes");
  expect_refused([](json& c) { c["files"].erase("model.safetensors"); }, "files.model.safetensors", "missing");
  expect_refused([](json& c) { c["fingerprint"]["weights_crc32"] = 5; }, "fingerprint.weights_crc32");
  expect_refused([](json& c) { c["format_version"] = 2; }, "format_version");
  expect_refused([](json& c) { c["architecture"]["name"] = "text_tiny"; }, "architecture.name");
  expect_refused([](json& c) { c["architecture"] = 3; }, "architecture", "object");
  EXPECT_THROW(parse_model_card(json::array(), "m/model_card.json"), DataError);
}

}  // namespace
}  // namespace shoplens
