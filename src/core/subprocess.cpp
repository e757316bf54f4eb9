#include "shoplens/core/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <csignal>
#include <cerrno>
#include <cstring>

#include "shoplens/core/errors.h"

extern char** environ;

namespace shoplens {
namespace {

// posix_spawn's file actions, released on every path out.
class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

ProcessExit wait_for(pid_t pid, const std::string& program) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw IoError("cannot wait for '" + program + "': " + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace

bool ProcessExit::interrupted() const { return signalled ? (code == SIGINT || code == SIGTERM) : code == 130; }

std::string ProcessExit::describe() const {
  if (!signalled) return "exit " + std::to_string(code);
  return "killed by signal " + std::to_string(code) + " (" + strsignal(code) + ")";
}

ProcessExit run_process(const std::vector<std::string>& argv, const std::filesystem::path& log_file) {
  if (argv.empty()) throw UsageError("run_process: no program given");
  SpawnActions actions;
  // The child opens the log itself (O_CLOEXEC does not apply to the descriptors it is given).
  int rc = posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, log_file.c_str(),
                                            O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  if (rc != 0) throw IoError("cannot prepare the log " + log_file.string() + ": " + std::strerror(rc));
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  rc = posix_spawnp(&pid, argv[0].c_str(), actions.get(), nullptr, args.data(), environ);
  if (rc != 0) throw IoError("cannot start '" + argv[0] + "': " + std::strerror(rc));
  // glibc reports a log that cannot be opened, or a program that cannot run, from posix_spawn itself.
  return wait_for(pid, argv[0]);
}

}  // namespace shoplens
