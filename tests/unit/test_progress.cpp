#include <gtest/gtest.h>

#include "shoplens/core/progress.h"

namespace shoplens {
namespace {

// A resumed run once reported "8120300.8 step/s": the steps of the earlier process counted as
// this one's work.
TEST(Progress, WorkDoneBeforeAResumeIsNotThisRunsRate) {
  Progress progress("train", 100, "step", 3600.0);
  progress.resume_at(1000000);
  EXPECT_EQ(progress.rate(), 0.0);  // nothing done in this process yet
  progress.finish();                // renders 100/100, not 1000000/100
}

}  // namespace
}  // namespace shoplens
