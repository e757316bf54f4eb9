// `shoplens launch`: starts the workers of one node of a data-parallel job with torchrun's
// environment, relays their output with a rank prefix, and supervises them: when one dies the
// others are stopped and the whole group restarts (up to max_restarts), the workers resuming
// from the latest checkpoint; SIGINT/SIGTERM are forwarded once so workers checkpoint and exit.
#pragma once

#include <string>
#include <vector>

namespace shoplens {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: a free port (single node only)
  int max_restarts = 0;
  // Seconds before the first restart; each later one waits twice the one before, up to
  // kMaxRestartDelaySeconds (or this first delay, when larger). 0: restart at once.
  double restart_delay_seconds = 1;
  double grace_seconds = 60;  // after SIGTERM, before SIGKILL
  std::string log_dir;        // also write each worker's output to LOG_DIR/attempt-K/rank-R.log
  bool prefix_output = true;  // "[rank R] " before each relayed line
  std::vector<std::string> command;
};

constexpr double kMaxRestartDelaySeconds = 30;
constexpr double kLargestRestartDelaySeconds = 3600;  // --restart-delay's upper bound

// The wait before restart `restart` (1 for the first): first * 2^(restart - 1), capped.
double restart_delay(double first_delay_seconds, int restart);

// How the job ended, as the launcher's exit code: 0 every worker succeeded; 1 a worker failed
// and the restarts are used up; 2 a usage error, or a worker's usage/config error (exit 2, never
// restarted: it would fail again); 130 interrupted (the workers checkpointed and exited).
int launch(const LaunchOptions& options);

// Checks the options (UsageError naming the flag) and resolves port 0 to a free port.
LaunchOptions validate_launch_options(LaunchOptions options);

}  // namespace shoplens
