// A stable 64-bit fingerprint (FNV-1a over length-delimited fields), for cache keys: the same
// inputs give the same hex string on every machine and run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace shoplens {

class Fingerprint {
 public:
  // Each field is followed by a separator, so ("ab","c") and ("a","bc") differ.
  Fingerprint& add(std::string_view s) {
    for (unsigned char c : s) mix(c);
    mix(0xff);
    return *this;
  }
  Fingerprint& add(std::uint64_t v) { return add(std::string_view(std::to_string(v))); }
  std::uint64_t value() const { return h_; }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  void mix(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ULL;
  }
  std::uint64_t h_ = 1469598103934665603ULL;
};

}  // namespace shoplens
