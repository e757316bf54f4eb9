// Helpers shared by the tests: scratch folders and running the real `shoplens` binary.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shoplens::testing {

// A fresh folder under the system temp dir, removed when the object goes away.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "t");
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `shoplens <args>` (the binary built with this test) through the shell.
CommandResult run_shoplens(const std::string& args);
CommandResult run_shell(const std::string& command);

void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

}  // namespace shoplens::testing
