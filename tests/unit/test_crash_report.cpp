#include "shoplens/core/crash_report.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>

namespace shoplens {
namespace {

// The report's first line; the frames that follow depend on the build.
constexpr const char* kReportOf = "shoplens: fatal %s in pid [0-9]+, thread [0-9]+; backtrace";

std::string report_pattern(const char* signal) {
  char text[128];
  std::snprintf(text, sizeof text, kReportOf, signal);
  return text;
}

void fault_on_a_bad_address() {
  volatile std::uintptr_t address = 8;  // read at run time: the compiler cannot fold the fault away
  *reinterpret_cast<volatile int*>(address) = 1;
}

volatile bool g_keep_going = true;
int recurse_without_end(int depth) {
  volatile char frame[4096];
  frame[0] = static_cast<char>(depth);
  if (!g_keep_going) return frame[0];
  return recurse_without_end(depth + 1) + frame[0];  // not a tail call: every frame stays
}

class CrashReport : public ::testing::Test {
 protected:
  void SetUp() override {
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // a fresh process, not a fork of threads
    if (!install_crash_report()) GTEST_SKIP() << "an AddressSanitizer build reports crashes itself";
  }
};

TEST_F(CrashReport, AFaultPrintsABacktraceAndStillDiesOfTheSignal) {
  EXPECT_EXIT(
      {
        install_crash_report();
        fault_on_a_bad_address();
      },
      ::testing::KilledBySignal(SIGSEGV), report_pattern("SIGSEGV"));
}

TEST_F(CrashReport, AnAbortIsReportedAsSIGABRT) {
  EXPECT_EXIT(
      {
        install_crash_report();
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), report_pattern("SIGABRT"));
}

// The fault lands on the exhausted stack itself: the report runs on its own stack.
TEST_F(CrashReport, AStackOverflowIsReported) {
  EXPECT_EXIT(
      {
        install_crash_report();
        recurse_without_end(0);
      },
      ::testing::KilledBySignal(SIGSEGV), report_pattern("SIGSEGV"));
}

}  // namespace
}  // namespace shoplens
