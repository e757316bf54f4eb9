#include "shoplens/core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "shoplens/core/logging.h"
#include "shoplens/core/strings.h"

namespace shoplens {

Progress::Progress(std::string label, std::uint64_t total, std::string unit, double interval_seconds)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_render_(start_),
      interval_(interval_seconds),
      tty_(::isatty(STDERR_FILENO) == 1) {
  if (tty_) interval_ = 0.1;
}

Progress::~Progress() {
  if (!finished_) finish();
}

void Progress::advance(std::uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_render_).count() < interval_) return;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (std::chrono::duration<double>(now - last_render_).count() < interval_) return;
  last_render_ = now;
  render(false);
}

void Progress::resume_at(std::uint64_t done) {
  done_before_ = done;
  done_ = done;
}

double Progress::rate() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::uint64_t done = done_.load(), before = done_before_.load();
  return elapsed > 0 && done > before ? static_cast<double>(done - before) / elapsed : 0.0;
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  render(true);
}

void Progress::render(bool final_line) {
  const std::uint64_t done = std::min(done_.load(), total_ ? total_ : done_.load());
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double r = rate();
  const double eta = (r > 0 && total_ > done) ? (total_ - done) / r : 0.0;
  const double fraction = total_ ? std::min(1.0, static_cast<double>(done) / total_) : 1.0;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%llu/%llu %s  %.1f %s/s  elapsed %s  eta %s",
                static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_), unit_.c_str(), r,
                unit_.c_str(), format_duration(elapsed).c_str(), format_duration(eta).c_str());
  std::string suffix;
  {
    std::lock_guard<std::mutex> lock(suffix_mutex_);
    suffix = suffix_.empty() ? "" : "  " + suffix_;
  }
  if (tty_) {
    constexpr int kWidth = 28;
    int filled = static_cast<int>(fraction * kWidth);
    std::string bar(filled, '#');
    bar += std::string(kWidth - filled, '.');
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %s%s\x1b[K", label_.c_str(), bar.c_str(), fraction * 100, stats,
                 suffix.c_str());
    if (final_line) std::fputc('\n', stderr);
    std::fflush(stderr);
    set_terminal_line_open(!final_line);
  } else {
    spdlog::info("{}: {:.0f}% {}{}", label_, fraction * 100, stats, suffix);
  }
}

}  // namespace shoplens

namespace shoplens {
void Progress::set_suffix(std::string suffix) {
  std::lock_guard<std::mutex> lock(suffix_mutex_);
  suffix_ = std::move(suffix);
}
}  // namespace shoplens
