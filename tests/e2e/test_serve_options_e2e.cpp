// `shoplens serve` refuses numeric options that are not numbers, negative or absurd before it
// loads anything: a usage error (exit 2) that names the flag. No model is needed.
#include <gtest/gtest.h>

#include "test_util.h"

namespace shoplens {
namespace {

using testing::run_shoplens;

TEST(E2eServeOptions, BadNumericOptionsAreUsageErrorsNamingTheFlag) {
  for (const char* flag : {"--header-timeout-ms", "--body-timeout-ms", "--idle-timeout-ms"})
    for (const char* value : {"nan", "inf", "-1", "0", "1e12", "abc"}) {
      const auto r = run_shoplens(std::string("serve --model /nonexistent ") + flag + " " + value);
      EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.output;
      EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " " << value << ": " << r.output;
      EXPECT_NE(r.output.find("between 1 and 3600000"), std::string::npos) << flag << " " << value << ": " << r.output;
    }
}

TEST(E2eServeOptions, HelpShowsTheReadDeadlinesWithTheirDefaults) {
  const auto r = run_shoplens("serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"--header-timeout-ms", "10000", "--body-timeout-ms", "60000", "--idle-timeout-ms", "5000"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
}

}  // namespace
}  // namespace shoplens
