#include "shoplens/dist/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"

extern char** environ;

namespace shoplens {
namespace {

using Clock = std::chrono::steady_clock;

bool is_loopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0; }

// Binds `port` on `addr` (0: any free one) and returns the bound port, or -1 with errno set.
int try_bind(const std::string& addr, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as TCPStore does
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = is_loopback(addr) ? htonl(INADDR_LOOPBACK) : htonl(INADDR_ANY);
  int result = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 1) == 0) {
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    result = ntohs(sa.sin_port);
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return result;
}

struct Worker {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  std::thread relay;
  bool running = false;
  int status = 0;
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options) : o_(options) {}

  int run() {
    for (int attempt = 0;; ++attempt) {
      spawn_all(attempt);
      const Outcome outcome = supervise();
      join_relays();
      switch (outcome.kind) {
        case Outcome::kSuccess:
          spdlog::info("launch: all {} finished", count_of(o_.nproc_per_node, "worker"));
          return 0;
        case Outcome::kInterrupted:
          spdlog::warn("launch: interrupted; the workers stopped at a safe point");
          return static_cast<int>(ExitCode::kInterrupted);
        case Outcome::kUsage:
          spdlog::error("launch: {}; not restarting (it would fail the same way)", outcome.what);
          return static_cast<int>(ExitCode::kUsage);
        case Outcome::kFailure:
          if (attempt >= o_.max_restarts) {
            spdlog::error("launch: {}; {} used of {}: giving up", outcome.what, count_of(attempt, "restart"),
                          o_.max_restarts);
            return static_cast<int>(ExitCode::kFailure);
          }
          const double delay = restart_delay(o_.restart_delay_seconds, attempt + 1);
          spdlog::warn(
              "launch: {}; restarting the group in {:g} s (restart {} of {}), the workers resume from the latest "
              "checkpoint",
              outcome.what, delay, attempt + 1, o_.max_restarts);
          if (!wait_before_restart(delay)) {
            spdlog::warn("launch: interrupted before the restart");
            return static_cast<int>(ExitCode::kInterrupted);
          }
      }
    }
  }

 private:
  struct Outcome {
    enum Kind { kSuccess, kFailure, kUsage, kInterrupted } kind = kSuccess;
    std::string what;
  };

  // Sleeps `seconds` in short slices; false when SIGINT/SIGTERM arrived meanwhile (no worker runs).
  static bool wait_before_restart(double seconds) {
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (Clock::now() < until) {
      if (interrupt_requested()) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
    }
    return !interrupt_requested();
  }

  static std::string describe(const Worker& w) {
    if (WIFSIGNALED(w.status))
      return fmt::format("rank {} (pid {}) was killed by signal {} ({})", w.global_rank, w.pid, WTERMSIG(w.status),
                         strsignal(WTERMSIG(w.status)));
    return fmt::format("rank {} (pid {}) exited with code {}", w.global_rank, w.pid, WEXITSTATUS(w.status));
  }

  std::vector<std::string> worker_env(const Worker& w, int attempt) const {
    const int world = o_.nnodes * o_.nproc_per_node;
    const std::vector<std::pair<std::string, std::string>> ours = {
        {"RANK", std::to_string(w.global_rank)},
        {"LOCAL_RANK", std::to_string(w.local_rank)},
        {"GROUP_RANK", std::to_string(o_.node_rank)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc_per_node)},
        {"MASTER_ADDR", o_.master_addr},
        {"MASTER_PORT", std::to_string(o_.master_port)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o_.max_restarts)},
        {"TORCHELASTIC_RUN_ID", "shoplens"},
    };
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& [k, v] : ours) replaced = replaced || k == name;
      if (name == "TORCHELASTIC_USE_AGENT_STORE") continue;  // rank 0 hosts the store here
      if (!replaced) env.push_back(entry);
    }
    for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
    // Processes sharing a machine share its cores (torchrun sets the same variable).
    if (!std::getenv("OMP_NUM_THREADS"))
      env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, usable_cores() / o_.nproc_per_node)));
    return env;
  }

  void spawn_all(int attempt) {
    workers_.clear();
    workers_.resize(static_cast<std::size_t>(o_.nproc_per_node));
    if (!o_.log_dir.empty())
      std::filesystem::create_directories(std::filesystem::path(o_.log_dir) / fmt::format("attempt-{}", attempt));
    for (int r = 0; r < o_.nproc_per_node; ++r) {
      Worker& w = workers_[r];
      w.local_rank = r;
      w.global_rank = o_.node_rank * o_.nproc_per_node + r;
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("launch: pipe failed: ") + std::strerror(errno));
      const auto env = worker_env(w, attempt);
      std::vector<char*> envp, argv;
      for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      for (const auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      const pid_t launcher_pid = ::getpid();
      const pid_t pid = ::fork();
      if (pid < 0) throw Error(std::string("launch: fork failed: ") + std::strerror(errno));
      if (pid == 0) {
        // Own process group: a Ctrl-C reaches the launcher alone, which forwards one SIGTERM.
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive a launcher that was killed
        if (::getppid() != launcher_pid) ::_exit(1);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        ::dup2(fds[1], STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ::execve(resolve_program(argv[0]).c_str(), argv.data(), envp.data());
        const std::string msg = fmt::format("launch: cannot run '{}': {}\n", o_.command[0], std::strerror(errno));
        (void)!::write(STDERR_FILENO, msg.data(), msg.size());
        ::_exit(127);
      }
      ::close(fds[1]);
      w.pid = pid;
      w.out_fd = fds[0];
      w.running = true;
      std::string log_path;
      if (!o_.log_dir.empty())
        log_path = (std::filesystem::path(o_.log_dir) / fmt::format("attempt-{}", attempt) /
                    fmt::format("rank-{}.log", w.global_rank))
                       .string();
      w.relay = std::thread([this, fd = w.out_fd, rank = w.global_rank, log_path] { relay(fd, rank, log_path); });
    }
    spdlog::info("launch: started {} (ranks {}-{} of {}), master {}:{}{}", count_of(o_.nproc_per_node, "worker"),
                 workers_.front().global_rank, workers_.back().global_rank, o_.nnodes * o_.nproc_per_node,
                 o_.master_addr, o_.master_port, attempt > 0 ? fmt::format(", restart {}", attempt) : "");
  }

  // execve does not search PATH; resolve the program as execvp would.
  static std::string resolve_program(const std::string& program) {
    if (program.find('/') != std::string::npos) return program;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const auto end = dirs.find(':', start);
      const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
      std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return program;
  }

  void relay(int fd, int rank, const std::string& log_path) {
    std::ofstream log;
    if (!log_path.empty()) log.open(log_path, std::ios::app);
    std::string pending;
    char buf[4096];
    const std::string prefix = o_.prefix_output ? fmt::format("[rank {}] ", rank) : "";
    auto emit = [&](const std::string& line) {
      {
        std::lock_guard<std::mutex> lock(output_mutex_);
        std::cout << prefix << line << '\n' << std::flush;
      }
      if (log) log << line << '\n' << std::flush;
    };
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf, static_cast<std::size_t>(n));
      for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        std::string line = pending.substr(0, nl);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        emit(line);
        pending.erase(0, nl + 1);
      }
    }
    if (!pending.empty()) emit(pending);
    ::close(fd);
  }

  void join_relays() {
    for (auto& w : workers_)
      if (w.relay.joinable()) w.relay.join();
  }

  int running() const {
    int n = 0;
    for (const auto& w : workers_) n += w.running;
    return n;
  }

  // Each worker leads its own process group: signalling the group reaches what it started too,
  // so no orphan keeps a relay pipe open after the worker is gone.
  void signal_running(int sig) {
    for (auto& w : workers_)
      if (w.running) ::kill(-w.pid, sig);
  }

  // Reaps every exited worker; returns the first that failed, if any.
  Worker* reap() {
    Worker* failed = nullptr;
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == w.pid) {
        w.running = false;
        w.status = status;
        ::kill(-w.pid, SIGKILL);  // leftovers of the worker (its own children), if any
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && !failed) failed = &w;
      }
    }
    return failed;
  }

  // Stops the group: SIGTERM (workers checkpoint and exit), SIGKILL after the grace period.
  void stop_all() {
    signal_running(SIGTERM);
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.grace_seconds));
    while (running() > 0 && Clock::now() < deadline) {
      reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (running() > 0) {
      spdlog::warn("launch: {} still running {:.0f} s after SIGTERM: SIGKILL", count_of(running(), "worker"),
                   o_.grace_seconds);
      signal_running(SIGKILL);
      while (running() > 0) {
        reap();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  Outcome supervise() {
    bool forwarded = false;
    Clock::time_point forward_deadline;
    for (;;) {
      if (interrupt_requested() && !forwarded) {
        spdlog::warn("launch: signal received: forwarding SIGTERM to {}", count_of(running(), "worker"));
        signal_running(SIGTERM);
        forwarded = true;
        forward_deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.grace_seconds));
      }
      Worker* failed = reap();
      if (forwarded) {
        if (running() == 0) return {Outcome::kInterrupted, "interrupted"};
        if (Clock::now() >= forward_deadline) {
          signal_running(SIGKILL);
          forward_deadline = Clock::now() + std::chrono::hours(1);
        }
      } else if (failed) {
        Outcome outcome{Outcome::kFailure, describe(*failed)};
        if (WIFEXITED(failed->status) && WEXITSTATUS(failed->status) == static_cast<int>(ExitCode::kUsage))
          outcome.kind = Outcome::kUsage;
        if (WIFEXITED(failed->status) && WEXITSTATUS(failed->status) == static_cast<int>(ExitCode::kInterrupted)) {
          // A worker was signalled directly (e.g. the scheduler's preemption): stop, do not restart.
          outcome.kind = Outcome::kInterrupted;
        }
        if (running() > 0) {
          spdlog::warn("launch: {}: stopping the other {}", outcome.what, count_of(running(), "worker"));
          stop_all();
        }
        return outcome;
      } else if (running() == 0) {
        return {Outcome::kSuccess, ""};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  LaunchOptions o_;
  std::vector<Worker> workers_;
  std::mutex output_mutex_;
};

}  // namespace

LaunchOptions validate_launch_options(LaunchOptions o) {
  if (o.command.empty())
    throw UsageError(
        "launch: no worker command; put it after '--', e.g. shoplens launch --nproc-per-node 2 -- shoplens train ...");
  if (o.nproc_per_node < 1 || o.nproc_per_node > 1024) throw UsageError("launch: --nproc-per-node must be 1..1024");
  if (o.nnodes < 1) throw UsageError("launch: --nnodes must be >= 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw UsageError(
        fmt::format("launch: --node-rank {} is outside 0..{} (--nnodes {})", o.node_rank, o.nnodes - 1, o.nnodes));
  if (o.max_restarts < 0) throw UsageError("launch: --max-restarts must be >= 0");
  if (!(o.restart_delay_seconds >= 0 && o.restart_delay_seconds <= kLargestRestartDelaySeconds))
    throw UsageError(fmt::format("launch: --restart-delay must be 0..{:g} seconds", kLargestRestartDelaySeconds));
  if (o.grace_seconds < 0) throw UsageError("launch: --grace-seconds must be >= 0");
  if (o.master_port < 0 || o.master_port > 65535) throw UsageError("launch: --master-port must be 0..65535");
  if (o.master_port == 0) {
    if (o.nnodes > 1)
      throw UsageError(
          "launch: --master-port 0 (pick a free port) works on one node only; give every node the same port");
    o.master_port = try_bind(o.master_addr, 0);
    if (o.master_port < 0) throw Error(std::string("launch: cannot find a free port: ") + std::strerror(errno));
  } else if (o.node_rank == 0) {
    // Rank 0 will host the rendezvous store here: say so now if it cannot.
    if (try_bind(o.master_addr, o.master_port) < 0)
      throw UsageError(
          fmt::format("launch: port {} on {} is not free ({}): another job is using it; choose --master-port "
                      "(0 picks a free one)",
                      o.master_port, o.master_addr, std::strerror(errno)));
  }
  return o;
}

double restart_delay(double first_delay_seconds, int restart) {
  const double cap = std::max(kMaxRestartDelaySeconds, first_delay_seconds);
  double delay = first_delay_seconds;
  for (int k = 1; k < restart && delay < cap; ++k) delay *= 2;
  return std::min(delay, cap);
}

int launch(const LaunchOptions& options) { return Supervisor(validate_launch_options(options)).run(); }

}  // namespace shoplens
