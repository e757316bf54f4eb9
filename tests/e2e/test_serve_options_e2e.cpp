// `shoplens serve` (and export's Triton batching) refuses numeric options that are not numbers,
// negative or absurd before it loads anything: a usage error (exit 2) that names the flag. No model
// is needed.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace shoplens {
namespace {

using testing::run_shoplens;

TEST(E2eServeOptions, BadNumericOptionsAreUsageErrorsNamingTheFlag) {
  for (const char* flag : {"--header-timeout-ms", "--body-timeout-ms", "--idle-timeout-ms"})
    for (const char* value : {"nan", "inf", "-1", "0", "1e12", "abc"}) {
      const auto r = run_shoplens(std::string("serve --weights /nonexistent ") + flag + " " + value);
      EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.output;
      EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " " << value << ": " << r.output;
      EXPECT_NE(r.output.find("between 1 and 3600000"), std::string::npos) << flag << " " << value << ": " << r.output;
    }
}

// Every numeric flag has a range the machine can honour (issue 45): --max-batch 1000000000 aborted
// the server at 9.4 GB (std::system_error, exit 134), export's grew past 2.5 GB.
TEST(E2eServeOptions, NumericOptionsOutOfRangeAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"--max-batch", "1000000000"},
                                                                  {"--max-batch", "0"},
                                                                  {"--max-batch", "1025"},
                                                                  {"--max-queue", "1000000000"},
                                                                  {"--max-queue", "4097"},
                                                                  {"--max-queue-delay-ms", "1e300"},
                                                                  {"--p95-target-ms", "1e300"},
                                                                  {"--p95-target-ms", "nan"},
                                                                  {"--request-timeout-ms", "1e300"},
                                                                  {"--request-timeout-ms", "0"},
                                                                  {"--max-body-bytes", "0"},
                                                                  {"--max-body-bytes", "18446744073709551615"},
                                                                  {"--warmup-reps", "1000000000"},
                                                                  {"--warmup-reps", "0"},
                                                                  {"--decode-budget-mb", "-1"},
                                                                  {"--decode-budget-mb", "1e30"},
                                                                  {"--max-waiting-connections", "0"},
                                                                  {"--port", "70000"},
                                                                  {"--http-threads", "1000000"}};
  for (const auto& [flag, value] : cases) {
    const auto r = run_shoplens("serve --weights /nonexistent " + flag + " " + value);
    EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " " << value << ": " << r.output;
  }
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--max-batch", "1000000000"}, {"--max-batch", "0"}, {"--warmup-reps", "1000000000"}}) {
    const auto r =
        run_shoplens("export --run /nonexistent --out /nonexistent-out --format triton " + flag + " " + value);
    EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " " << value << ": " << r.output;
  }
}

// Help says each range in words; it shows no validator's text ("INT:a finite number > 0").
TEST(E2eServeOptions, HelpSaysTheRangesWithoutValidatorText) {
  const auto r = run_shoplens("serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* leak : {"finite number", "thread count from", " in [", "INT:", "FLOAT:", "UINT:"})
    EXPECT_EQ(r.output.find(leak), std::string::npos) << leak << "\n" << r.output;
  for (const char* range : {"1 to 1024", "1 to 4096", "--decode-budget-mb"})
    EXPECT_NE(r.output.find(range), std::string::npos) << range << "\n" << r.output;
}

TEST(E2eServeOptions, HelpShowsTheReadDeadlinesWithTheirDefaults) {
  const auto r = run_shoplens("serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"--header-timeout-ms", "10000", "--body-timeout-ms", "60000", "--idle-timeout-ms", "5000"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
}

}  // namespace
}  // namespace shoplens
