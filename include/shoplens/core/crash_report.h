// A process that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) first writes
// the signal, its pid and thread, and a backtrace to stderr, then dies of the same signal (the
// exit status and any core dump are unchanged). A crash on a fleet, or in a CI run, then leaves a
// stack in the log instead of "killed by signal 11" alone.
#pragma once

namespace shoplens {

// Returns false, installing nothing, in a build with AddressSanitizer: its own report is better.
bool install_crash_report();

}  // namespace shoplens
