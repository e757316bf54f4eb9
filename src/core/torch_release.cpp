// Which LibTorch release a build runs on (torch_release.h).
#include "shoplens/core/torch_release.h"

#include <fmt/format.h>

namespace shoplens {
namespace {

// "1.13.1" of a dpkg version "[epoch:]upstream[-revision]", the upstream part without "+dfsg"-like
// repack suffixes or "~" pre-release marks.
std::string upstream_version(std::string_view version) {
  if (const auto colon = version.find(':'); colon != std::string_view::npos) version.remove_prefix(colon + 1);
  return std::string(version.substr(0, version.find_first_of("+-~")));
}

// "1.13" of "1.13.0" or "1.13.1+cpu".
std::string_view major_minor(std::string_view version) {
  const auto first = version.find('.');
  if (first == std::string_view::npos) return version;
  return version.substr(0, version.find_first_not_of("0123456789", first + 1));
}

std::string package_version(std::string_view package) {
  const auto space = package.rfind(' ');
  return space == std::string_view::npos ? std::string() : std::string(package.substr(space + 1));
}

}  // namespace

std::string torch_release(std::string_view header_version, std::string_view package) {
  std::string upstream = upstream_version(package_version(package));
  if (upstream.empty() || major_minor(upstream) != major_minor(header_version)) return std::string(header_version);
  return upstream;
}

std::string describe_torch_release(std::string_view header_version, std::string_view package) {
  std::string release = torch_release(header_version, package);
  if (release == header_version) return release;
  return fmt::format("{} (package {}; its headers say {})", release, package, header_version);
}

}  // namespace shoplens
