#include "shoplens/core/interrupt.h"

#include <atomic>
#include <csignal>
#include <unistd.h>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

std::atomic<int> g_signal_count{0};

extern "C" void on_signal(int sig) {
  if (g_signal_count.fetch_add(1) >= 1) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // Past a file-size limit (ulimit -f) the kernel's default is to kill the process with SIGXFSZ
  // (exit 153, temporary files left behind); ignored, the write fails with EFBIG instead, which
  // every writer reports as an IoError (exit 1) and cleans up after.
  std::signal(SIGXFSZ, SIG_IGN);
}

bool interrupt_requested() { return g_signal_count.load(std::memory_order_relaxed) > 0; }

void throw_if_interrupted() {
  if (interrupt_requested()) throw InterruptedError();
}

void request_interrupt() { g_signal_count.fetch_add(1); }
void clear_interrupt() { g_signal_count.store(0); }

}  // namespace shoplens
