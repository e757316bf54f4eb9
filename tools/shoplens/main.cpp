// `shoplens`: the process's set-up and the one place errors are caught; the command line itself
// (the table of verbs, the parse) is program.cpp.
#include <algorithm>

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "program.h"
#include "shoplens/core/crash_report.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"

int main(int argc, char** argv) {
  using namespace shoplens;
  tune_host_allocator();
  remember_command_line(argc, argv);
  install_interrupt_handlers();
  install_crash_report();
  init_logging("info");
  try {
    cli::Program program({argv + std::min(argc, 1), argv + argc});
    return program.run(argc, argv);
  } catch (const Error& e) {
    if (e.exit_code() == ExitCode::kInterrupted)
      spdlog::warn("interrupted; stopped at a safe point");
    else
      spdlog::error("{}", e.what());
    return static_cast<int>(e.exit_code());
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a C++ backtrace that helps nobody running the tool.
    spdlog::error("{}", e.what_without_backtrace());
    return static_cast<int>(ExitCode::kFailure);
  } catch (const std::bad_alloc&) {
    spdlog::error("out of memory");
    return static_cast<int>(ExitCode::kFailure);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(ExitCode::kFailure);
  }
}
