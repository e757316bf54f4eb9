// The header of a safetensors file (https://github.com/huggingface/safetensors): an 8-byte
// little-endian length N, then N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}}; the tensor bytes follow, offsets relative to the end of the header.
// Read and checked before any tensor is allocated: every size and offset against the file, and
// the tensors must tile the data section exactly. Torch-free, so the fuzz target links it alone.
// Not part of the public interface.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "zip_directory.h"  // ReadAt

namespace shoplens::detail {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of the names safetensors_element_bytes knows
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // within the data section
};

struct SafetensorsHeader {
  std::uint64_t data_start = 0;           // 8 + header length: where the data section begins
  std::vector<SafetensorsEntry> entries;  // ordered by begin
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a supported dtype name (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL), else 0.
int safetensors_element_bytes(const std::string& dtype);

// Throws DataError "<source>: not a valid safetensors file: ..." on anything malformed, and
// names the tensor and dtype when a dtype is not supported.
SafetensorsHeader read_safetensors_header(std::uint64_t file_size, const ReadAt& read_at, const std::string& source);

}  // namespace shoplens::detail
