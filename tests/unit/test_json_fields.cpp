#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
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
  EXPECT_EQ(error_of([&] { read.text("blank", true); }), "f.jsonl:7: \"blank\" is empty");
  EXPECT_EQ(error_of([&] { read.text("n", false); }), "f.jsonl:7: \"n\" must be a string");
  EXPECT_EQ(error_of([&] { read.number("word"); }), "f.jsonl:7: \"word\" must be a number");
  EXPECT_EQ(error_of([&] { read.positive("zero"); }), "f.jsonl:7: zero 0 must be > 0");
  EXPECT_EQ(error_of([&] { read.positive("none"); }), "f.jsonl:7: missing \"none\"");
  EXPECT_EQ(error_of([&] { read.whole_number("half", 0, 0); }), "f.jsonl:7: \"half\" must be a whole number >= 0");
  EXPECT_EQ(error_of([&] { read.whole_number("zero", 1, 0); }), "f.jsonl:7: \"zero\" must be a whole number >= 1");
  EXPECT_EQ(error_of([&] { read.whole_number("huge", 1, 0); }),
            "f.jsonl:7: \"huge\" must be a whole number from 1 to 1000000000");
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
            "card: \"over\" must be a whole number from 0 to 9223372036854775807, got 9223372036854775808");
  EXPECT_EQ(error_of([&] { read.integer("exp", 8, 4096); }),
            "card: \"exp\" must be a whole number from 8 to 4096, got 1e+18");
  EXPECT_EQ(error_of([&] { read.integer("neg", 0, 5); }), "card: \"neg\" must be a whole number from 0 to 5, got -3");
  EXPECT_EQ(error_of([&] { read.integer("absent", 0, 5); }), "card: missing \"absent\"");
  EXPECT_DOUBLE_EQ(read.number_in("ratio", 0, 1), 0.5);
  EXPECT_EQ(error_of([&] { read.number_in("exp", 0, 1); }), "card: \"exp\" must be a number from 0 to 1, got 1e+18");
  EXPECT_TRUE(read.flag("flag", false));
  EXPECT_FALSE(read.flag("absent", false));
  EXPECT_EQ(error_of([&] { read.flag("neg", false); }), "card: \"neg\" must be true or false");
  EXPECT_EQ(read.array("list", 2, 2).size(), 2u);
  EXPECT_EQ(error_of([&] { read.array("list", 3, 3); }),
            "card: \"list\" must be an array of 3 to 3 elements, got an array of 2");
  const auto arch = read.section("arch");
  EXPECT_EQ(arch.integer("size", 8, 64), 32);
  EXPECT_EQ(error_of([&] { arch.section("inner").integer("x", 0, 9); }),
            "card: \"arch.inner.x\" must be a whole number from 0 to 9, got 1.5");
  EXPECT_EQ(error_of([&] { arch.integer("gone", 0, 1); }), "card: missing \"arch.gone\"");
  EXPECT_EQ(error_of([&] { read.section("list"); }), "card: \"list\" must be an object, got an array of 2");
}

TEST(JsonFields, ThrowsTheCallersErrorType) {
  const nlohmann::json j = nlohmann::json::object();
  EXPECT_THROW(JsonFields<ConfigError>(j, "row").text("k", true), ConfigError);
}

}  // namespace
}  // namespace shoplens
