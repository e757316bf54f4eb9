// The run directory: every command that produces results writes its resolved config
// (config.json) and its log (<command>.log) there.
#pragma once

#include <filesystem>
#include <string>

#include "shoplens/core/config.h"

namespace shoplens {

// Uses `explicit_dir` if given, else config.run.dir, else runs/<command>-<YYYYmmdd-HHMMSS>.
// Creates it, writes config.json atomically and adds the log file.
std::filesystem::path open_run_dir(const Config& config, const std::string& command,
                                   const std::filesystem::path& explicit_dir = {});

}  // namespace shoplens
