#include <gtest/gtest.h>

#include <cstdint>
#include <array>
#include <functional>
#include <map>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"

namespace shoplens {
namespace {

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no DataError>";
}

TEST(JsonFields, ReadsCheckedFieldsAndNamesWhereAndTheKeyWhenOneIsWrong) {
  const nlohmann::json j = {{"name", "  a  "}, {"blank", " "}, {"n", 3},      {"half", 2.5},
                            {"none", nullptr}, {"zero", 0},    {"word", "x"}, {"huge", 3e9}};
  const JsonFields<DataError> read(j, "f.jsonl:7");
  EXPECT_EQ(read.text("name", true), "a");
  EXPECT_EQ(read.text("none", false), "");  // null reads as absent
  EXPECT_EQ(read.whole_number("n", 1, 0), 3);
  EXPECT_EQ(read.whole_number("missing", 1, 9), 9);
  EXPECT_DOUBLE_EQ(read.positive("half"), 2.5);
  EXPECT_FALSE(read.number("none"));
  EXPECT_EQ(error_of([&] { read.text("missing", true); }), "f.jsonl:7: missing \"missing\"");
  EXPECT_EQ(error_of([&] { read.text("blank", true); }),
            "f.jsonl:7: blank: expected a non-empty string, got string \" \"");
  EXPECT_EQ(error_of([&] { read.text("n", false); }), "f.jsonl:7: n: expected string, got number 3");
  EXPECT_EQ(error_of([&] { read.number("word"); }), "f.jsonl:7: word: expected number, got string \"x\"");
  EXPECT_EQ(error_of([&] { read.positive("zero"); }), "f.jsonl:7: zero: expected a number > 0, got number 0");
  EXPECT_EQ(error_of([&] { read.positive("none"); }), "f.jsonl:7: missing \"none\"");
  EXPECT_EQ(error_of([&] { read.whole_number("half", 0, 0); }),
            "f.jsonl:7: half: expected a whole number from 0 to 1000000000, got number 2.5");
  EXPECT_EQ(error_of([&] { read.whole_number("zero", 1, 0); }),
            "f.jsonl:7: zero: expected a whole number from 1 to 1000000000, got number 0");
  EXPECT_EQ(error_of([&] { read.whole_number("huge", 1, 0); }),
            "f.jsonl:7: huge: expected a whole number from 1 to 1000000000, got number 3000000000.0");
}

// Exact integers over int64, bounded numbers, flags, arrays and sections named by their dotted path.
TEST(JsonFields, BoundedReadsAndSectionsNameTheDottedKey) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"big": 9223372036854775807, "over": 9223372036854775808, "exp": 1e18, "neg": -3, "flag": true,
          "list": [1, 2], "arch": {"size": 32, "inner": {"x": 1.5}}, "ratio": 0.5})");
  const JsonFields<DataError> read(j, "card");
  EXPECT_EQ(read.integer("big", 0, INT64_MAX), INT64_MAX);
  EXPECT_EQ(read.integer("neg", -5, 5), -3);
  EXPECT_EQ(error_of([&] { read.integer("over", 0, INT64_MAX); }),
            "card: over: expected a whole number from 0 to 9223372036854775807, got number 9223372036854775808");
  EXPECT_EQ(error_of([&] { read.integer("exp", 8, 4096); }),
            "card: exp: expected a whole number from 8 to 4096, got number 1e+18");
  EXPECT_EQ(error_of([&] { read.integer("neg", 0, 5); }),
            "card: neg: expected a whole number from 0 to 5, got number -3");
  EXPECT_EQ(error_of([&] { read.integer("absent", 0, 5); }), "card: missing \"absent\"");
  EXPECT_DOUBLE_EQ(read.number_in("ratio", 0, 1), 0.5);
  EXPECT_EQ(error_of([&] { read.number_in("exp", 0, 1); }),
            "card: exp: expected a number from 0 to 1, got number 1e+18");
  EXPECT_TRUE(read.flag("flag", false));
  EXPECT_FALSE(read.flag("absent", false));
  EXPECT_EQ(error_of([&] { read.flag("neg", false); }), "card: neg: expected boolean, got number -3");
  EXPECT_EQ(read.array("list", 2, 2).size(), 2u);
  EXPECT_EQ(error_of([&] { read.array("list", 3, 3); }),
            "card: list: expected an array of 3 to 3 elements, got array [1,2]");
  const auto arch = read.section("arch");
  EXPECT_EQ(arch.integer("size", 8, 64), 32);
  EXPECT_EQ(error_of([&] { arch.section("inner").integer("x", 0, 9); }),
            "card: arch.inner.x: expected a whole number from 0 to 9, got number 1.5");
  EXPECT_EQ(error_of([&] { arch.integer("gone", 0, 1); }), "card: missing \"arch.gone\"");
  EXPECT_EQ(error_of([&] { read.section("list"); }), "card: list: expected object, got array [1,2]");
}

// The typed reads the schema-driven readers use (config.cpp's fields, bench configs' keys): the
// config's wording "SOURCE: PATH: expected TYPE, got TYPE VALUE", element paths inside lists.
TEST(JsonFields, TypedReadsSayWhatWasExpectedAndWhatWasThere) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"workers": "x", "n": 3.0, "big": 9007199254740993, "mean": [0.5, "a", 1], "cols": {"path": 3},
          "names": ["a", "b"], "ids": [1, 2], "three": [1, 2, 3], "id": -1, "crc": 4294967296})");
  const JsonFields<DataError> read(j, "test.json");
  EXPECT_EQ(read.get<int>("n"), 3);
  EXPECT_EQ(read.get<std::int64_t>("big"), 9007199254740993LL);  // exact, not through a double
  EXPECT_EQ(read.get<std::vector<std::string>>("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(read.get<std::vector<std::uint64_t>>("ids"), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ((read.get<std::array<double, 3>>("three")), (std::array<double, 3>{1, 2, 3}));
  EXPECT_EQ(read.get_or<std::string>("absent", "d"), "d");
  EXPECT_EQ(error_of([&] { read.get<int>("workers"); }), "test.json: workers: expected integer, got string \"x\"");
  EXPECT_EQ(error_of([&] { read.get<std::vector<double>>("mean"); }),
            "test.json: mean[1]: expected number, got string \"a\"");
  EXPECT_EQ(error_of([&] { (read.get<std::map<std::string, std::string>>("cols")); }),
            "test.json: cols.path: expected string, got number 3");
  EXPECT_EQ(error_of([&] { (read.get<std::array<double, 3>>("names")); }),
            "test.json: names: expected list of 3 numbers, got array [\"a\",\"b\"]");
  EXPECT_EQ(error_of([&] { read.get<std::uint64_t>("id"); }),
            "test.json: id: expected a whole number >= 0, got number -1");
  EXPECT_EQ(error_of([&] { read.get<std::uint32_t>("crc"); }),
            "test.json: crc: expected a whole number from 0 to 4294967295, got number 4294967296");
  EXPECT_EQ(error_of([&] { read.get<bool>("absent"); }), "test.json: missing \"absent\"");
  // A value read at a path, as config.cpp's fields are; long values are cut.
  bool flag = false;
  EXPECT_EQ(error_of([&] { JsonValue<DataError>::read(nlohmann::json(std::string(100, 'x')), flag, "run.on", "c"); }),
            "c: run.on: expected boolean, got string \"" + std::string(59, 'x') + "...");
}

TEST(JsonFields, ChoicesAndUnknownKeysNameTheNearest) {
  const nlohmann::json j = nlohmann::json::parse(R"({"precision": "fp17", "devce": "cpu", "sub": {"nme": 1}})");
  const JsonFields<DataError> read(j, "b.json");
  EXPECT_EQ(error_of([&] {
              read.choice("precision", {"fp32", "bf16", "fp16"});
            }),
            "b.json: precision: 'fp17' is not one of fp32, bf16, fp16 (did you mean 'fp16'?)");
  EXPECT_EQ(error_of([&] {
              read.check_keys({"precision", "device", "sub"});
            }),
            "b.json: unknown key 'devce' (did you mean 'device'?)");
  EXPECT_EQ(error_of([&] { read.section("sub").check_keys({"name"}); }),
            "b.json: unknown key 'sub.nme' (did you mean 'name'?)");
  EXPECT_EQ(error_of([&] { JsonFields<DataError>(nlohmann::json::array(), "b.json").check_keys({}); }),
            "b.json: expected object, got array []");
  EXPECT_EQ(read.choice("devce", {"cpu", "cuda"}), "cpu");
}

TEST(JsonFields, ThrowsTheCallersErrorType) {
  const nlohmann::json j = nlohmann::json::object();
  EXPECT_THROW(JsonFields<ConfigError>(j, "row").text("k", true), ConfigError);
}

}  // namespace
}  // namespace shoplens
