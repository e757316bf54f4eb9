// Runs another program without a shell: the arguments reach it exactly as given (no quoting, no
// word splitting, no globbing), so a path with spaces or quotes cannot change the command.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

struct ProcessExit {
  bool signalled = false;  // killed by a signal (code is the signal number)
  int code = 0;            // exit status, or the signal
  bool ok() const { return !signalled && code == 0; }
  // The user (or a scheduler) stopped it: SIGINT or SIGTERM, or the 130 our programs exit with then.
  // A crash (SIGABRT, SIGSEGV, ...) is a failure, not an interruption.
  bool interrupted() const;
  // "exit 1", "killed by signal 6 (Aborted)".
  std::string describe() const;
};

// Starts argv[0] (a path; PATH is searched when it has no '/') with argv, stdout and stderr
// written to `log_file` (truncated), and waits for it. IoError when the log cannot be opened or
// the program cannot be started (the message names it).
ProcessExit run_process(const std::vector<std::string>& argv, const std::filesystem::path& log_file);

}  // namespace shoplens
