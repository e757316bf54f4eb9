#include "shoplens/core/logging.h"

#include <atomic>
#include <cstdio>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

std::atomic<bool> terminal_line_open{false};

// stderr with colours where it is a terminal; ends an open progress-bar line first.
class ConsoleSink final : public spdlog::sinks::stderr_color_sink_mt {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    if (terminal_line_open.exchange(false)) std::fputs("\r\x1b[K", stderr);
    spdlog::sinks::stderr_color_sink_mt::log(msg);
  }
};

}  // namespace

void set_terminal_line_open(bool open) { terminal_line_open = open; }

void init_logging(const std::string& level) {
  auto console = std::make_shared<ConsoleSink>();
  console->set_pattern("%^%L%$ %H:%M:%S %v");
  auto logger = std::make_shared<spdlog::logger>("shoplens", console);
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") throw UsageError("unknown log level '" + level + "'");
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::warn);
}

void add_log_file(const std::filesystem::path& file) {
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), false);
    sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l [%t] %v");
    spdlog::default_logger()->sinks().push_back(sink);
  } catch (const spdlog::spdlog_ex& e) {
    throw IoError("cannot open log file '" + file.string() + "': " + e.what());
  }
}

void set_console_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") throw UsageError("unknown log level '" + level + "'");
  spdlog::default_logger()->sinks().front()->set_level(parsed);
}

void log_info(const std::string& message) { spdlog::info("{}", message); }

}  // namespace shoplens
