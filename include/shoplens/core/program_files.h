// The running program, and the files shipped with it (configs/prices.json, the benchmarks' Python
// peers), found wherever the binary runs: installed (PREFIX/bin/shoplens beside
// PREFIX/share/shoplens, `cmake --install`), or in a build tree inside the checkout
// (build/<preset>/bin/shoplens). A default that names a shipped file must not depend on the
// working directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

// The running binary (/proc/self/exe), so that child processes run this very build.
std::filesystem::path running_program();

// The folders searched for shipped files, in order: $SHOPLENS_DATA_DIR when set, then for the
// binary's folder and each of its next three parents P: P/share/shoplens and P itself.
std::vector<std::filesystem::path> shipped_file_folders(const std::filesystem::path& program);

// `relative` (e.g. "configs/prices.json") under the first of those folders that holds it.
// UsageError naming every folder searched when none does.
std::filesystem::path shipped_file(const std::string& relative);

}  // namespace shoplens
