#include "shoplens/core/crash_report.h"

#include <execinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#define SHOPLENS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHOPLENS_ASAN 1
#endif
#endif

namespace shoplens {
namespace {

constexpr std::array<int, 5> kFatalSignals = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kMaxFrames = 64;
// A stack overflow faults on the thread's own stack: the handler runs on this one (main thread).
constexpr std::size_t kAltStackBytes = 64 * 1024;
alignas(16) char g_alt_stack[kAltStackBytes];

// Only async-signal-safe calls below: write(2), backtrace_symbols_fd, raise.
void write_text(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void write_number(long long value) {
  char text[24];  // filled from its end: a sign and up to 20 digits, then the terminator
  char* start = text + sizeof(text) - 1;
  *start = '\0';
  unsigned long long v = value < 0 ? 0ULL - static_cast<unsigned long long>(value) : value;
  do {
    *--start = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  if (value < 0) *--start = '-';
  write_text(start);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGILL:
      return "SIGILL";
    case SIGFPE:
      return "SIGFPE";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "a fatal signal";
  }
}

extern "C" void report_crash(int sig) {
  write_text("\nshoplens: fatal ");
  write_text(signal_name(sig));
  write_text(" in pid ");
  write_number(::getpid());
  write_text(", thread ");
  write_number(static_cast<long long>(::syscall(SYS_gettid)));
  write_text("; backtrace (innermost first):\n");
  void* frames[kMaxFrames];
  const int count = ::backtrace(frames, kMaxFrames);
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
  // SA_RESETHAND restored the default action: the process dies of the same signal (a fault
  // re-faults on return; a raised one is delivered when the handler returns).
  std::raise(sig);
}

}  // namespace

bool install_crash_report() {
#ifdef SHOPLENS_ASAN
  return false;
#else
  // backtrace() loads libgcc on its first call, which allocates: do that now, not in the handler.
  void* warm_up[1];
  ::backtrace(warm_up, 1);
  stack_t alt{};
  alt.ss_sp = g_alt_stack;
  alt.ss_size = kAltStackBytes;
  ::sigaltstack(&alt, nullptr);
  struct sigaction action {};
  action.sa_handler = report_crash;
  action.sa_flags = SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
  return true;
#endif
}

}  // namespace shoplens
