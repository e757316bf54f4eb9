// spdlog setup: a console sink on stderr, and a file sink in the run directory once it exists.
#pragma once

#include <filesystem>
#include <string>

#include "shoplens/core/enum_names.h"

namespace shoplens {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };
inline constexpr EnumName<LogLevel> kLogLevelNames[] = {{LogLevel::kTrace, "trace"},
                                                        {LogLevel::kDebug, "debug"},
                                                        {LogLevel::kInfo, "info"},
                                                        {LogLevel::kWarn, "warn"},
                                                        {LogLevel::kError, "error"}};

void init_logging(const std::string& level);
void set_log_level(const std::string& level);
inline void set_log_level(LogLevel level) { set_log_level(name_in(kLogLevelNames, level, "info")); }
// Adds a file sink; every later message goes to both the console and this file.
void add_log_file(const std::filesystem::path& file);
// Raises the console's threshold only (files keep everything): ranks other than 0 of a
// data-parallel job print warnings and errors, their full logs go to their own files.
void set_console_level(const std::string& level);
// A progress bar on the terminal leaves its line open (no newline, so it can be redrawn). While
// it is open, the console sink clears that line before a message, so every message starts on a
// line of its own; the bar is drawn again at its next update.
void set_terminal_line_open(bool open);
// For the few files that must not include spdlog (the c10d file of a pip-torch build sees
// torch's own fmt, which Debian's spdlog was not built against).
void log_info(const std::string& message);

}  // namespace shoplens
