# Registers the unit tests with ctest one GoogleTest suite per ctest test (tests/CMakeLists.txt).
#
# Why not one ctest test per GoogleTest test, as gtest_discover_tests does: each ctest test is a
# process, and starting the test binary (loading LibTorch) takes about 0.35 s while a typical unit
# test takes milliseconds; per test, 550 unit tests spent most of their ctest time starting up.
# A suite's tests run in one process, the order they run in when the binary runs alone.
#
# Run by ctest (the TEST_INCLUDE_FILES of this folder), not by cmake: the binary's list of tests is
# read again whenever the binary is newer than the list written from it, like gtest_discover_tests'
# PRE_TEST mode.
#   binary     the test binary
#   exclude    a regular expression of suites that are not unit tests (registered elsewhere)
#   listing    the file the ctest commands are written to
#   timeout    seconds a suite may take
function(shoplens_register_unit_suites binary exclude listing timeout)
  if(NOT EXISTS "${listing}" OR NOT "${listing}" IS_NEWER_THAN "${binary}")
    execute_process(COMMAND "${binary}" --gtest_list_tests OUTPUT_VARIABLE tests ERROR_VARIABLE errors
                    RESULT_VARIABLE result TIMEOUT 60)
    if(NOT result EQUAL 0)
      # A test that fails and says why, so a broken binary is not a run of zero unit tests.
      file(WRITE "${listing}" "add_test(UnitSuites.Listing \"${binary}\" --gtest_list_tests)\n"
                              "set_tests_properties(UnitSuites.Listing PROPERTIES LABELS unit)\n")
      message(WARNING "${binary} --gtest_list_tests failed (${result}): ${errors}")
    else()
      string(REPLACE "\n" ";" lines "${tests}")
      set(commands "")
      foreach(line IN LISTS lines)
        # Suite lines start in the first column and end with a dot, before any "# TypeParam" note.
        if(line MATCHES "^([A-Za-z0-9_/]+)\\.")
          set(suite "${CMAKE_MATCH_1}")
          if(NOT suite MATCHES "${exclude}" AND NOT suite MATCHES "^DISABLED_")
            string(APPEND commands "add_test([==[${suite}]==] \"${binary}\" [==[--gtest_filter=${suite}.*]==])\n"
                                   "set_tests_properties([==[${suite}]==] PROPERTIES LABELS unit TIMEOUT ${timeout})\n")
          endif()
        endif()
      endforeach()
      file(WRITE "${listing}" "${commands}")
    endif()
  endif()
  include("${listing}")
endfunction()
