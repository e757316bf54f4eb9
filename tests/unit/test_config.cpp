#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "shoplens/core/byte_size.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using nlohmann::json;

std::string config_error(const json& doc) {
  try {
    config_from_json(doc, "test.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsRoundTripThroughJson) {
  Config defaults;
  Config back = config_from_json(config_to_json(defaults), "defaults");
  EXPECT_EQ(config_to_json(back), config_to_json(defaults));
  EXPECT_EQ(back.loader.batch_size, 32);
  EXPECT_EQ(back.augment.image_size, 224);
}

TEST(Config, UnknownKeyNamesNearestValidKey) {
  std::string msg = config_error(json{{"data", {{"storag_size", 128}}}});
  EXPECT_NE(msg.find("data.storag_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'storage_size'"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionNamesNearestSection) {
  std::string msg = config_error(json{{"loadr", {{"batch_size", 8}}}});
  EXPECT_NE(msg.find("did you mean 'loader'"), std::string::npos) << msg;
}

TEST(Config, WrongTypeNamesPathAndExpectedType) {
  std::string msg = config_error(json{{"loader", {{"workers", "big"}}}});
  EXPECT_NE(msg.find("test.json: loader.workers: expected integer, got string"), std::string::npos) << msg;
  msg = config_error(json{{"loader", {{"batch_size", "big"}}}});
  EXPECT_NE(msg.find("test.json: loader.batch_size: expected integer or \"auto\", got string"), std::string::npos)
      << msg;
  msg = config_error(json{{"augment", {{"mean", {0.1, "x", 0.3}}}}});
  EXPECT_NE(msg.find("augment.mean[1]: expected number"), std::string::npos) << msg;
  msg = config_error(json{{"loader", {{"shuffle", 1}}}});
  EXPECT_NE(msg.find("expected boolean"), std::string::npos) << msg;
  msg = config_error(json{{"loader", {{"batch_size", 2.5}}}});
  EXPECT_NE(msg.find("expected integer"), std::string::npos) << msg;
}

TEST(Config, RangeAndChoiceChecks) {
  EXPECT_NE(config_error(json{{"loader", {{"batch_size", 0}}}}).find("must be in"), std::string::npos);
  std::string msg = config_error(json{{"data", {{"encoding", "jpg"}}}});
  EXPECT_NE(msg.find("did you mean 'jpeg'"), std::string::npos) << msg;
  EXPECT_NE(config_error(json{{"augment", {{"crop_scale", {0.9, 0.1}}}}}).find("crop_scale"), std::string::npos);
  EXPECT_NE(config_error(json{{"data", {{"val_fraction", 0.6}, {"test_fraction", 0.5}}}}).find("must be < 1"),
            std::string::npos);
}

// Enum-like values and sizes are typed at load: the layers receive enums and bytes, and the JSON
// written back (run directory, checkpoints) spells them as a file would.
TEST(Config, ChoicesAndSizesAreTypedAtLoad) {
  const Config c = config_from_json(
      json{{"train",
            {{"precision", "bf16"}, {"device", "cpu"}, {"memory_budget", "512MiB"}, {"class_balance", "sampler"}}},
           {"find_batch", {{"strategy", "binsearch"}, {"lr_scaling", "linear"}}},
           {"optim", {{"name", "sgd"}}},
           {"text", {{"attention", "math"}}},
           {"run", {{"log_level", "warn"}}}},
      "test.json");
  EXPECT_EQ(c.train.precision, Precision::kBf16);
  EXPECT_EQ(c.train.device, DeviceChoice::kCpu);
  EXPECT_EQ(c.train.memory_budget.bytes, 512u << 20);
  EXPECT_EQ(c.train.class_balance, ClassBalance::kSampler);
  EXPECT_EQ(c.find_batch.strategy, SearchStrategy::kBinsearch);
  EXPECT_EQ(c.find_batch.lr_scaling, LrScaling::kLinear);
  EXPECT_EQ(c.optim.name, OptimizerKind::kSgd);
  EXPECT_EQ(c.text.attention, AttentionKernel::kMath);
  EXPECT_EQ(c.run.log_level, LogLevel::kWarn);
  const json back = config_to_json(c);
  EXPECT_EQ(back["train"]["precision"], "bf16");
  EXPECT_EQ(back["train"]["memory_budget"], "512MiB");
  EXPECT_EQ(back["find_batch"]["strategy"], "binsearch");
  EXPECT_EQ(config_to_json(config_from_json(back, "back")), back);
  EXPECT_EQ(config_to_json(Config{})["train"]["memory_budget"], "");  // unset: no cap, as before

  std::string msg = config_error(json{{"train", {{"memory_budget", "lots"}}}});
  EXPECT_NE(msg.find("train.memory_budget: expected a size"), std::string::npos) << msg;
  EXPECT_NE(config_error(json{{"train", {{"memory_budget", "0GiB"}}}}).find("train.memory_budget"), std::string::npos);
  msg = config_error(json{{"train", {{"precision", "bf61"}}}});
  EXPECT_NE(msg.find("test.json: train.precision: 'bf61' is not one of fp32, bf16, fp16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'bf16'"), std::string::npos) << msg;
  msg = config_error(json{{"train", {{"precision", 16}}}});
  EXPECT_NE(msg.find("train.precision: expected string"), std::string::npos) << msg;
}

TEST(Config, ByteSizesReadBackExactly) {
  EXPECT_EQ(byte_size_text(parse_byte_size("24GiB", "x")), "24GiB");
  EXPECT_EQ(byte_size_text(parse_byte_size("1.5GiB", "x")), "1536MiB");
  EXPECT_EQ(byte_size_text(parse_byte_size("2TiB", "x")), "2TiB");
  EXPECT_EQ(byte_size_text(parse_byte_size("1000", "x")), "1000");
  EXPECT_EQ(byte_size_text(parse_byte_size("", "x")), "");
  for (const char* text : {"3GB", "1536MiB", "7", "100KiB"}) {
    const ByteSize size = parse_byte_size(text, "x");
    EXPECT_EQ(parse_byte_size(byte_size_text(size), "x"), size) << text;
  }
}

TEST(Config, OverridesParseByFieldType) {
  json doc = json::object();
  apply_override(doc, "loader.batch_size=64");
  apply_override(doc, "data.input=/tmp/some file.csv");
  apply_override(doc, "augment.crop_scale=0.5,1");
  apply_override(doc, "augment.mean=[0.5,0.5,0.5]");
  apply_override(doc, "loader.shuffle=false");
  apply_override(doc, R"(data.columns={"path": "file"})");
  Config c = config_from_json(doc, "--set");
  EXPECT_EQ(c.loader.batch_size, 64);
  EXPECT_EQ(c.data.input, "/tmp/some file.csv");
  EXPECT_EQ(c.augment.crop_scale, (std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(c.augment.mean, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_FALSE(c.loader.shuffle);
  EXPECT_EQ(c.data.columns.at("path"), "file");
}

TEST(Config, BadOverridesNameTheFlag) {
  json doc = json::object();
  EXPECT_THAT([&] { apply_override(doc, "loader.batch_size=lots"); },
              ThrowsMessage<ConfigError>(HasSubstr("--set loader.batch_size=lots")));
  EXPECT_THROW(apply_override(doc, "loader.batchsize=3"), ConfigError);
  EXPECT_THROW(apply_override(doc, "nosection=3"), ConfigError);
  EXPECT_THROW(apply_override(doc, "loader.batch_size"), ConfigError);
  EXPECT_THROW(apply_override(doc, R"(data.columns={"pth": "file"})"), ConfigError);
}

TEST(Config, FileThenOverridesInOrder) {
  testing::ScratchDir dir("config");
  testing::write_text(dir / "c.json", R"({"loader": {"batch_size": 16, "workers": 3}, "run": {"seed": 7}})");
  Config c = load_config((dir / "c.json").string(), {"loader.batch_size=8"});
  EXPECT_EQ(c.loader.batch_size, 8);  // the override wins
  EXPECT_EQ(c.loader.workers, 3);     // the file's value stays
  EXPECT_EQ(c.run.seed, 7);
}

TEST(Config, InvalidJsonNamesLineAndColumn) {
  testing::ScratchDir dir("config");
  testing::write_text(dir / "bad.json", "{\n  \"loader\": {\n    \"batch_size\": 16,\n  }\n}\n");
  EXPECT_THAT([&] { load_config((dir / "bad.json").string(), {}); },
              ThrowsMessage<ConfigError>(HasSubstr("bad.json:4:")));
}

// A value nested 100,000 deep crashed `shoplens config` (SIGSEGV while printing it in the error).
TEST(Config, DeeplyNestedFileOrOverrideIsAConfigError) {
  testing::ScratchDir dir("config");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  testing::write_text(dir / "deep.json", R"({"run": {"seed": )" + deep + "}}");
  EXPECT_THAT([&] { load_config((dir / "deep.json").string(), {}); },
              ThrowsMessage<ConfigError>(AllOf(HasSubstr("deep.json"), HasSubstr("nests deeper"))));
  json doc = json::object();
  EXPECT_THROW(apply_override(doc, "run.seed=" + deep), ConfigError);
}

TEST(JsonLimits, CountsBracketsOutsideStringsOnly) {
  EXPECT_FALSE(json_nesting_exceeds(R"({"a": [1, {"b": 2}]})", 3));
  EXPECT_TRUE(json_nesting_exceeds(R"({"a": [1, {"b": [2]}]})", 3));
  // Brackets inside strings, escaped quotes included, are text.
  EXPECT_FALSE(json_nesting_exceeds(R"({"a": "[[[[\"[[[["})", 1));
  EXPECT_FALSE(json_nesting_exceeds(std::string(64, '[') + std::string(64, ']')));
  EXPECT_TRUE(json_nesting_exceeds(std::string(65, '[') + std::string(65, ']')));
}

TEST(Config, SchemaListsEveryFieldWithDefault) {
  auto fields = config_fields();
  ASSERT_GT(fields.size(), 20u);
  bool found = false;
  for (const auto& f : fields)
    if (f.path == "augment.image_size") {
      found = true;
      EXPECT_EQ(f.default_json, "224");
      EXPECT_EQ(f.type, "integer");
    }
  EXPECT_TRUE(found);
}

TEST(Config, ShippedConfigsValidate) {
  for (const char* name : {"default.json", "demo.json"}) {
    std::string path = testing::source_dir() + "/configs/" + name;
    EXPECT_NO_THROW(load_config(path, {})) << path;
  }
}

// configs/default.json is documented as the defaults written out: every key, every value, so a
// user copying it starts from exactly what the binary does (it once said lr_scaling "linear").
TEST(Config, ShippedDefaultsAreTheBuiltInDefaults) {
  const std::string path = testing::source_dir() + "/configs/default.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const nlohmann::json shipped = nlohmann::json::parse(in);
  EXPECT_EQ(shipped, config_to_json(Config{}))
      << "regenerate with: shoplens train --print-config > configs/default.json";
}

TEST(Strings, NearestNameAndSizes) {
  EXPECT_EQ(nearest_name("mak-data", {"make-data", "prepare"}).value_or(""), "make-data");
  EXPECT_FALSE(nearest_name("zzzzzz", {"make-data", "prepare"}).has_value());
  EXPECT_EQ(parse_bytes("24GiB", "--memory-budget"), 24ull << 30);
  EXPECT_EQ(parse_bytes("512MB", "x"), 512000000ull);
  EXPECT_THROW(parse_bytes("lots", "--memory-budget"), UsageError);
}

TEST(Strings, CountsTakeTheirNounInTheRightNumber) {
  EXPECT_EQ(count_of(1, "chunk"), "1 chunk");
  EXPECT_EQ(count_of(0, "chunk"), "0 chunks");
  EXPECT_EQ(count_of(3, "file"), "3 files");
  EXPECT_EQ(count_of(1, "batch", "batches"), "1 batch");
  EXPECT_EQ(count_of(2, "batch", "batches"), "2 batches");
  EXPECT_EQ(noun_for(1, "step"), "step");
  EXPECT_EQ(noun_for(4, "step"), "steps");
}

TEST(Strings, NumberedNamesCountFromZero) {
  EXPECT_EQ(numbered_names(3), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(numbered_names(0).empty());
  EXPECT_TRUE(numbered_names(-1).empty());
}

}  // namespace
}  // namespace shoplens
