// `shoplens launch`: runs the workers of a data-parallel job on this node (docs/DISTRIBUTED.md).
#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/dist/launcher.h"

namespace shoplens::cli {
namespace {

class LaunchCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.footer(
        "Example: shoplens launch --nproc-per-node 2 --max-restarts 3 -- shoplens train --config C --out RUN\n"
        "Workers get torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
        "MASTER_PORT, TORCHELASTIC_RESTART_COUNT) and OMP_NUM_THREADS = cores / nproc-per-node unless set.\n"
        "Exit codes: 0 all workers succeeded, 1 a worker failed and the restarts are used up, 2 usage or a\n"
        "worker's config error (not restarted), 130 interrupted (workers checkpointed).");
    app.add_option("--nproc-per-node", o_.nproc_per_node, "worker processes on this node")
        ->check(CLI::Range(1, kMaxThreads));
    app.add_option("--nnodes", o_.nnodes, "nodes in the job")->check(CLI::Range(1, 1 << 16));
    app.add_option("--node-rank", o_.node_rank, "this node's index, 0..nnodes-1")->check(CLI::Range(0, (1 << 16) - 1));
    app.add_option("--master-addr", o_.master_addr, "address of the node running rank 0 (it hosts the TCPStore)");
    app.add_option("--master-port", o_.master_port, "rendezvous port on the master (0: a free port, one node only)")
        ->check(CLI::Range(0, 65535));
    app.add_option("--max-restarts", o_.max_restarts, "times the group is restarted after a worker dies")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--restart-delay", o_.restart_delay_seconds,
                   "seconds before the first restart, doubling with each one up to 30 (0: at once)")
        ->check(CLI::Range(0.0, kLargestRestartDelaySeconds))
        ->capture_default_str();
    app.add_option("--grace-seconds", o_.grace_seconds, "after SIGTERM, seconds before the workers are killed")
        ->check(non_negative());
    app.add_option("--log-dir", o_.log_dir, "also write each worker's output to LOG_DIR/attempt-K/rank-R.log");
    app.add_flag_callback(
        "--no-prefix", [this] { o_.prefix_output = false; },
        "relay worker output without the [rank R] prefix (default: each line prefixed)");
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
    // After '--' everything is positional: the worker command keeps its own flags.
    app.add_option("command", o_.command, "the worker command, after '--'")->expected(-1);
  }

  int run() override {
    set_log_level(log_level_);
    return launch(o_);
  }

 private:
  LaunchOptions o_;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace shoplens::cli
