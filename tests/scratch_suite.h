// The base of a test suite whose tests share one scratch folder (testing::ScratchDir): made on
// first use, named after the suite, removed after the suite's last test. A suite derives from
// ScratchSuite<Itself>, so each suite has its own folder.
#pragma once

#include <gtest/gtest.h>

#include "test_util.h"

namespace shoplens::testing {

template <class Suite>
class ScratchSuite : public ::testing::Test {
 public:
  static void TearDownTestSuite() {
    delete folder();
    folder() = nullptr;
  }

 protected:
  static const ScratchDir& scratch() {
    if (!folder()) folder() = new ScratchDir(::testing::UnitTest::GetInstance()->current_test_suite()->name());
    return *folder();
  }

 private:
  // A plain pointer, never destroyed at exit: a forked child that exits must not remove the folder.
  static ScratchDir*& folder() {
    static ScratchDir* made = nullptr;
    return made;
  }
};

}  // namespace shoplens::testing
