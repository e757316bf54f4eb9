// Which LibTorch release a build runs on. Its headers' TORCH_VERSION is not always the release:
// Debian's libtorch 1.13.1 packages say 1.13.0 (a source build takes its version from
// version.txt, "1.13.0a0" in the 1.13.1 release, unless PYTORCH_BUILD_VERSION is set, and only
// upstream's release builds set it). Where a dpkg package installed the library, its version is
// the accurate one (cmake/TorchSetup.cmake finds it when the build is configured).
#pragma once

#include <string>
#include <string_view>

namespace shoplens {

// The release: the package's upstream version ("1.13.1" of "1.13.1+dfsg-4", an epoch "2:" dropped)
// when `package` ("NAME VERSION") is of the same major.minor as the headers, else the headers'.
std::string torch_release(std::string_view header_version, std::string_view package);

// For `--version`: "1.13.1 (package libtorch1.13 1.13.1+dfsg-4; its headers say 1.13.0)",
// or the headers' version alone when they agree or no package is known.
std::string describe_torch_release(std::string_view header_version, std::string_view package);

// This build's: torch_release(TORCH_VERSION, the package the build found).
std::string torch_release_description();

}  // namespace shoplens
