#include <gtest/gtest.h>

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

TEST(JsonFields, ThrowsTheCallersErrorType) {
  const nlohmann::json j = nlohmann::json::object();
  EXPECT_THROW(JsonFields<ConfigError>(j, "row").text("k", true), ConfigError);
}

}  // namespace
}  // namespace shoplens
