#include "shoplens/core/path_overlap.h"

#include <algorithm>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace fs = std::filesystem;

namespace {

// The components of `p`, without the empty one a trailing separator adds.
std::vector<fs::path> components(const fs::path& p) {
  std::vector<fs::path> parts;
  for (const auto& part : p)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// Absolute, with every symlink of the part that exists resolved: two spellings of one place
// compare equal. A path the file system cannot resolve (a symlink loop) is compared as spelled.
fs::path canonical_form(const fs::path& p) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(p, ec);
  if (ec) return p.lexically_normal();
  const fs::path resolved = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal() : resolved;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

const char* relation_words(PathOverlap overlap) {
  switch (overlap) {
    case PathOverlap::kSame:
      return "is the same as";
    case PathOverlap::kOutputInsideInput:
      return "lies inside";
    case PathOverlap::kOutputContainsInput:
      return "contains";
    case PathOverlap::kApart:
      break;
  }
  return "is apart from";
}

}  // namespace

bool path_inside(const fs::path& outer, const fs::path& inner) {
  const auto o = components(outer), i = components(inner);
  return i.size() > o.size() && std::equal(o.begin(), o.end(), i.begin());
}

PathOverlap path_overlap(const fs::path& output, const fs::path& input) {
  const fs::path out = canonical_form(output), in = canonical_form(input);
  if (components(out) == components(in) || same_file(output, input)) return PathOverlap::kSame;
  if (path_inside(in, out)) return PathOverlap::kOutputInsideInput;
  if (path_inside(out, in)) return PathOverlap::kOutputContainsInput;
  return PathOverlap::kApart;
}

void require_output_apart(const FlagPath& output, const std::vector<FlagPath>& inputs) {
  if (output.path.empty()) return;
  for (const auto& input : inputs) {
    if (input.path.empty()) continue;
    const PathOverlap overlap = path_overlap(output.path, input.path);
    if (overlap == PathOverlap::kApart) continue;
    throw UsageError(output.flag + " '" + output.path.string() + "' " + relation_words(overlap) + " " + input.flag +
                     " '" + input.path.string() +
                     "': an output may never be, contain, or lie inside an input (writing it would overwrite or "
                     "delete what is read); choose another " +
                     output.flag);
  }
}

}  // namespace shoplens
