#include "safetensors_header.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"

namespace shoplens::detail {
namespace {

// Headers of real files are a few hundred KB; this bound only stops a corrupt length from
// allocating gigabytes before the JSON parser can complain.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeSize {
  const char* name;
  int bytes;
};

// U16/U32/U64 and the float8 types have no LibTorch 1.13 equivalent and are rejected by name.
constexpr DtypeSize kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  throw DataError(source + ": not a valid safetensors file: " + what);
}

std::uint64_t as_u64(const std::string& source, const std::string& what, const nlohmann::json& v) {
  if (!v.is_number_unsigned()) malformed(source, what + " is not a non-negative integer");
  return v.get<std::uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& source, const std::string& name, const nlohmann::json& j) {
  if (!j.is_object()) malformed(source, "entry '" + name + "' is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) malformed(source, "entry '" + name + "' has no '" + key + "'");
  if (!j["dtype"].is_string()) malformed(source, "entry '" + name + "': dtype is not a string");
  if (!j["shape"].is_array()) malformed(source, "entry '" + name + "': shape is not an array");
  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2) malformed(source, "entry '" + name + "': data_offsets is not [begin, end]");
  SafetensorsEntry e{name, j["dtype"].get<std::string>(), {}, 0, 0};
  const int element_bytes = safetensors_element_bytes(e.dtype);
  if (element_bytes == 0)
    throw DataError(source + ": tensor '" + name + "' has dtype " + e.dtype + ", which is not supported here (" +
                    "supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  std::uint64_t numel = 1;
  for (const auto& d : j["shape"]) {
    const auto dim = as_u64(source, "a dimension of '" + name + "'", d);
    // Overflow-safe product (times at most 8 bytes an element below): a huge shape must fail
    // here, not wrap around to a small size.
    if (dim != 0 && numel > (std::uint64_t{1} << 60) / dim) malformed(source, "entry '" + name + "': shape too large");
    numel *= dim;
    e.shape.push_back(static_cast<std::int64_t>(dim));
  }
  e.begin = as_u64(source, "data_offsets of '" + name + "'", off[0]);
  e.end = as_u64(source, "data_offsets of '" + name + "'", off[1]);
  const std::uint64_t bytes = numel * static_cast<std::uint64_t>(element_bytes);
  if (e.end < e.begin || e.end - e.begin != bytes)
    malformed(source, "entry '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                          "] do not hold " + std::to_string(bytes) + " bytes for its dtype and shape");
  return e;
}

nlohmann::json read_header_json(std::uint64_t file_size, const ReadAt& read_at, const std::string& source,
                                std::uint64_t& header_len) {
  if (file_size < 8)
    malformed(source, "only " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  const std::string len_bytes = read_at(0, 8);
  header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(len_bytes[i]);
  if (header_len > file_size - 8)
    malformed(source, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                          std::to_string(file_size) + " bytes)");
  if (header_len > kMaxHeaderBytes)
    malformed(source, "header length " + std::to_string(header_len) + " is implausibly large");
  const std::string header = read_at(8, static_cast<std::size_t>(header_len));
  if (json_nesting_exceeds(header))
    malformed(source, "header nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    malformed(source, std::string("header is not JSON: ") + e.what());
  }
  if (!j.is_object()) malformed(source, "header is not a JSON object");
  return j;
}

// The format requires the tensors to tile the data exactly: no gaps, no overlaps, no slack.
void check_tiling(std::vector<SafetensorsEntry>& entries, std::uint64_t data_size, const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.end > data_size)
      malformed(source, "tensor '" + e.name + "' ends at byte " + std::to_string(e.end) + " of a " +
                            std::to_string(data_size) + "-byte data section (truncated file?)");
    if (e.begin != expected)
      malformed(source, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + ", expected " +
                            std::to_string(expected) + " (overlapping or non-contiguous data_offsets)");
    expected = e.end;
  }
  if (expected != data_size) malformed(source, std::to_string(data_size - expected) + " bytes after the last tensor");
}

}  // namespace

int safetensors_element_bytes(const std::string& dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.name) return d.bytes;
  return 0;
}

SafetensorsHeader read_safetensors_header(std::uint64_t file_size, const ReadAt& read_at, const std::string& source) {
  std::uint64_t header_len = 0;
  const nlohmann::json j = read_header_json(file_size, read_at, source, header_len);
  SafetensorsHeader out;
  out.data_start = 8 + header_len;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) malformed(source, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) malformed(source, "__metadata__['" + k + "'] is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(source, name, value));
  }
  check_tiling(out.entries, file_size - out.data_start, source);
  return out;
}

}  // namespace shoplens::detail
