// core/subprocess.h: programs run without a shell, output to a log, exit status and signals.
#include <gtest/gtest.h>

#include <string>

#include "shoplens/core/errors.h"
#include "shoplens/core/subprocess.h"
#include "test_util.h"

namespace shoplens {
namespace {

TEST(Subprocess, ArgumentsReachTheProgramExactlyAsGiven) {
  testing::ScratchDir dir;
  // A shell would expand $HOME, split on spaces, strip the quotes and run the second command.
  const std::string tricky = "a 'b' \"c\" $HOME; touch " + (dir / "pwned").string();
  const ProcessExit exit = run_process({"printf", "%s|", tricky, "two words"}, dir / "log");
  EXPECT_TRUE(exit.ok());
  EXPECT_EQ(testing::read_text(dir / "log"), tricky + "|two words|");
  EXPECT_FALSE(std::filesystem::exists(dir / "pwned"));
}

TEST(Subprocess, ExitCodesSignalsAndStderrAreReported) {
  testing::ScratchDir dir;
  const ProcessExit failed = run_process({"/bin/sh", "-c", "echo to-stderr >&2; exit 3"}, dir / "log");
  EXPECT_FALSE(failed.ok());
  EXPECT_FALSE(failed.signalled);
  EXPECT_EQ(failed.code, 3);
  EXPECT_EQ(testing::read_text(dir / "log"), "to-stderr\n");
  const ProcessExit killed = run_process({"/bin/sh", "-c", "kill -TERM $$"}, dir / "log2");
  EXPECT_TRUE(killed.signalled);
  EXPECT_EQ(killed.code, 15);
}

// A child that crashes (the GPU machine's study saw SIGABRT from an uncaught c10::Error) is a
// failure the caller reports with the signal, not an interruption by the user.
TEST(Subprocess, ACrashIsAFailureAndOnlySigintSigtermOr130AreInterruptions) {
  testing::ScratchDir dir;
  const ProcessExit aborted = run_process({"/bin/sh", "-c", "kill -ABRT $$"}, dir / "log");
  EXPECT_TRUE(aborted.signalled);
  EXPECT_FALSE(aborted.interrupted());
  EXPECT_NE(aborted.describe().find("signal 6"), std::string::npos) << aborted.describe();
  EXPECT_TRUE(run_process({"/bin/sh", "-c", "kill -INT $$"}, dir / "log").interrupted());
  EXPECT_TRUE(run_process({"/bin/sh", "-c", "kill -TERM $$"}, dir / "log").interrupted());
  EXPECT_TRUE(run_process({"/bin/sh", "-c", "exit 130"}, dir / "log").interrupted());
  const ProcessExit failed = run_process({"/bin/sh", "-c", "exit 1"}, dir / "log");
  EXPECT_FALSE(failed.interrupted());
  EXPECT_EQ(failed.describe(), "exit 1");
}

TEST(Subprocess, AMissingProgramOrAnUnwritableLogIsAnErrorNamingIt) {
  testing::ScratchDir dir;
  try {
    run_process({"/nonexistent/shoplens-nothing"}, dir / "log");
    FAIL() << "a missing program ran";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/shoplens-nothing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_process({"true"}, dir / "no-such-folder" / "log"), IoError);
}

}  // namespace
}  // namespace shoplens
