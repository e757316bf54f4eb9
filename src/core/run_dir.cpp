#include "shoplens/core/run_dir.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/utf8.h"

namespace shoplens {

std::filesystem::path open_run_dir(const Config& config, const std::string& command,
                                   const std::filesystem::path& explicit_dir) {
  std::filesystem::path dir = explicit_dir;
  if (dir.empty() && !config.run.dir.empty()) dir = config.run.dir;
  if (dir.empty()) {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    dir = std::filesystem::path("runs") / (command + "-" + stamp);
    // A folder the user did not name appears in the working directory: say so before writing.
    spdlog::info("{}: writing its results to {} (no --out given; run.dir or --out chooses the folder)", command,
                 dir.string());
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create run directory '" + dir.string() + "': " + ec.message());

  nlohmann::json doc = config_to_json(config);
  doc["_run"] = {{"command", command}, {"version", shoplens_version()}, {"commit", build_commit()}};
  // Paths from the command line may not be UTF-8: escaped, so config.json never fails the run.
  write_file_atomic(dir / "config.json", dump_json_escaped(doc, 2) + "\n");
  add_log_file(dir / (command + ".log"));
  spdlog::debug("run directory {}", dir.string());
  return dir;
}

}  // namespace shoplens
