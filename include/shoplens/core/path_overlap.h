// Where a verb writes, against what it reads. An output may never be, contain, or lie inside an
// input: writing it would overwrite or delete what is being read (`export --force` replacing the
// run it exports from, `predict --input x.csv --out x.csv`). Every verb that writes (predict,
// evaluate, score, prepare, export, bench) calls require_output_apart from its library entry
// point before it reads or writes anything.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

// True when `inner` lies strictly inside `outer`, comparing the paths' components as they are
// spelled (no file system access; a trailing separator does not count as a component).
bool path_inside(const std::filesystem::path& outer, const std::filesystem::path& inner);

enum class PathOverlap { kApart, kSame, kOutputInsideInput, kOutputContainsInput };

// How `output` relates to `input`, both made absolute and canonical as far as they exist
// (symlinks resolved, "." and ".." removed; the part that does not exist yet compared as spelled).
// An existing output that is the input's file under another name (a hard link) is kSame.
PathOverlap path_overlap(const std::filesystem::path& output, const std::filesystem::path& input);

// A path as the user gave it, with the flag (or config key) that named it.
struct FlagPath {
  std::string flag;
  std::filesystem::path path;
};

// UsageError naming both flags and both paths when `output` is, contains, or lies inside one of
// `inputs`. Empty paths (a flag not given) are skipped.
void require_output_apart(const FlagPath& output, const std::vector<FlagPath>& inputs);

}  // namespace shoplens
