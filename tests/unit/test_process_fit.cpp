// find_batch.process_check's step (batch/process_fit.h) on fake processes: the whole process must
// fit, the tensors' answer is lowered in few fresh-process probes, and what cannot fit says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "shoplens/batch/process_fit.h"
#include "shoplens/core/errors.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr double kMiB = 1024.0 * 1024.0;

// A process whose memory beside the tensors grows with the batch too: tensors 178 MiB + 4.6 MiB a
// sample (resnet18 at 96 px), and beside them `fixed` MiB + `extra_per_sample` MiB a sample.
struct FakeProcess {
  double fixed = 60, extra_per_sample = 2.0;
  std::vector<int> probed;

  ProcessProbe operator()(int batch) {
    probed.push_back(batch);
    ProcessProbe p;
    p.batch = batch;
    p.ran = true;
    p.tensors_peak_bytes = static_cast<std::int64_t>((178 + 4.6 * batch) * kMiB);
    p.process_peak_bytes = p.tensors_peak_bytes + static_cast<std::int64_t>((fixed + extra_per_sample * batch) * kMiB);
    return p;
  }
  double process_mib(int batch) const { return 178 + 4.6 * batch + fixed + extra_per_sample * batch; }
};

TEST(ProcessFit, AProcessThatFitsCostsOneProbe) {
  FakeProcess process;
  const auto fit = fit_process(60, static_cast<std::int64_t>(676 * kMiB), 1, std::ref(process));
  EXPECT_EQ(fit.batch, 60);  // 178 + 276 + 60 + 120 = 634 MiB
  EXPECT_EQ(process.probed, std::vector<int>{60});
  EXPECT_TRUE(fit.note.empty());
}

TEST(ProcessFit, TheTensorsAnswerIsLoweredUntilTheWholeProcessFitsNearTheEdge) {
  FakeProcess process;
  const auto usable = static_cast<std::int64_t>(676 * kMiB);
  const auto fit = fit_process(125, usable, 1, std::ref(process));
  EXPECT_LE(process.probed.size(), 4u);
  EXPECT_LE(process.process_mib(fit.batch), 676);
  // The edge is 66 (60 + 178 + 6.6 x 66 = 673.6 MiB): the line through two probes finds it.
  EXPECT_GE(fit.batch, 64);
  EXPECT_NE(fit.note.find("batch 125's tensors fit"), std::string::npos) << fit.note;
  EXPECT_EQ(process_fit_to_json(fit, usable)["probes"].size(), process.probed.size());
}

TEST(ProcessFit, RoundsToTheMultipleTheTensorsAnswerUses) {
  FakeProcess process;
  const auto fit = fit_process(120, static_cast<std::int64_t>(676 * kMiB), 8, std::ref(process));
  EXPECT_EQ(fit.batch % 8, 0);
  EXPECT_LE(process.process_mib(fit.batch), 676);
}

TEST(ProcessFit, AProcessThatNeverFitsIsAnErrorNamingWhatItHeld) {
  FakeProcess process;
  process.fixed = 2000;  // beside the tensors alone, more than the budget
  EXPECT_THAT(
      [&] { fit_process(40, static_cast<std::int64_t>(676 * kMiB), 1, std::ref(process)); },
      ThrowsMessage<Error>(AllOf(HasSubstr("does not fit the budget"), HasSubstr("find_batch.process_check=false"))));
  EXPECT_LE(process.probed.size(), 4u);
}

// The fresh process runs more steps than the search's verification: should its tensors run out of
// their budget there, the batch is halved (an out-of-memory probe has no process figure to scale).
TEST(ProcessFit, AFreshProcessWhoseTensorsRunOutOfMemoryHalvesTheBatch) {
  FakeProcess process;
  auto probe = [&process](int batch) {
    ProcessProbe p = process(batch);
    if (batch > 60) {
      p.ran = false;
      p.process_peak_bytes = 0;
    }
    return p;
  };
  const auto fit = fit_process(100, static_cast<std::int64_t>(676 * kMiB), 1, probe);
  EXPECT_EQ(process.probed.front(), 100);
  EXPECT_EQ(process.probed.at(1), 50);
  EXPECT_LE(fit.batch, 60);
  EXPECT_LE(process.process_mib(fit.batch), 676);
}

TEST(ProcessFit, AMachineThatCannotMeasureAProcessKeepsTheTensorsAnswer) {
  auto unmeasured = [](int batch) {
    ProcessProbe p;
    p.batch = batch;
    p.ran = true;
    p.tensors_peak_bytes = 100;
    return p;  // process_peak_bytes 0: no /proc/self/clear_refs
  };
  const auto fit = fit_process(50, 1000, 1, unmeasured);
  EXPECT_EQ(fit.batch, 50);
  EXPECT_FALSE(fit.measured);
  EXPECT_NE(fit.note.find("clear_refs"), std::string::npos);
}

TEST(ProcessFit, TheChildsJsonRoundTrips) {
  ProcessProbe p;
  p.batch = 71;
  p.ran = true;
  p.tensors_peak_bytes = 520000000;
  p.process_peak_bytes = 661000000;
  p.seconds = 5.5;
  const ProcessProbe back = process_probe_from_json(process_probe_to_json(p));
  EXPECT_EQ(back.batch, 71);
  EXPECT_EQ(back.tensors_peak_bytes, p.tensors_peak_bytes);
  EXPECT_EQ(back.process_peak_bytes, p.process_peak_bytes);
  EXPECT_DOUBLE_EQ(back.seconds, 5.5);
}

// A search that runs no fresh-process probe (CUDA, no budget) leaves nothing behind and makes nothing.
TEST(ProbeFolder, IsMadeOnFirstUseAndRemovedWithIt) {
  namespace fs = std::filesystem;
  const testing::ScratchDir tmp("probe-folder");
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string restore = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.path().c_str(), 1);  // temp_directory_path() reads it: a folder no other test uses
  fs::path made;
  {
    ProbeFolder unused;
    ProbeFolder used;
    EXPECT_TRUE(fs::is_empty(tmp.path()));
    made = used.path();
    EXPECT_TRUE(fs::is_directory(made));
    EXPECT_EQ(made.parent_path(), tmp.path());
    EXPECT_EQ(used.path(), made);  // one folder however often it is asked
  }
  EXPECT_FALSE(fs::exists(made));
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  if (old_tmpdir)
    ::setenv("TMPDIR", restore.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

}  // namespace
}  // namespace shoplens
