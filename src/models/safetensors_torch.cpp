// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes, offsets relative to the
// end of the header. The reader trusts nothing: every size and offset is checked against the file.
#include <cstring>
#include <fstream>

#include <torch/torch.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

// Headers of real files are a few hundred KB; this bound only stops a corrupt length from
// allocating gigabytes before the JSON parser can complain.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeName {
  const char* name;
  at::ScalarType type;
};

// U16/U32/U64 and the float8 types have no LibTorch 1.13 equivalent and are rejected by name.
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

[[noreturn]] void malformed(const std::filesystem::path& path, const std::string& what) {
  throw DataError(path.string() + ": not a valid safetensors file: " + what);
}

at::ScalarType parse_dtype(const std::filesystem::path& path, const std::string& tensor, const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  throw DataError(path.string() + ": tensor '" + tensor + "' has dtype " + name + ", which is not supported here (" +
                  "supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  throw DataError(std::string("cannot store dtype ") + c10::toString(type) + " in safetensors");
}

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

std::uint64_t as_u64(const std::filesystem::path& path, const std::string& what, const nlohmann::json& v) {
  if (!v.is_number_unsigned()) malformed(path, what + " is not a non-negative integer");
  return v.get<std::uint64_t>();
}

Entry parse_entry(const std::filesystem::path& path, const std::string& name, const nlohmann::json& j) {
  if (!j.is_object()) malformed(path, "entry '" + name + "' is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) malformed(path, "entry '" + name + "' has no '" + key + "'");
  if (!j["dtype"].is_string()) malformed(path, "entry '" + name + "': dtype is not a string");
  if (!j["shape"].is_array()) malformed(path, "entry '" + name + "': shape is not an array");
  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2) malformed(path, "entry '" + name + "': data_offsets is not [begin, end]");
  Entry e{name, parse_dtype(path, name, j["dtype"].get<std::string>()), {}, 0, 0};
  std::uint64_t numel = 1;
  for (const auto& d : j["shape"]) {
    const auto dim = as_u64(path, "a dimension of '" + name + "'", d);
    // Overflow-safe product (times at most 8 bytes an element below): a huge shape must fail
    // here, not wrap around to a small size.
    if (dim != 0 && numel > (std::uint64_t{1} << 60) / dim) malformed(path, "entry '" + name + "': shape too large");
    numel *= dim;
    e.shape.push_back(static_cast<std::int64_t>(dim));
  }
  e.begin = as_u64(path, "data_offsets of '" + name + "'", off[0]);
  e.end = as_u64(path, "data_offsets of '" + name + "'", off[1]);
  const std::uint64_t bytes = numel * c10::elementSize(e.type);
  if (e.end < e.begin || e.end - e.begin != bytes)
    malformed(path, "entry '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                        "] do not hold " + std::to_string(bytes) + " bytes for its dtype and shape");
  return e;
}

}  // namespace

StateDict read_safetensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path.string());
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError("cannot stat " + path.string() + ": " + ec.message());
  if (file_size < 8) malformed(path, "only " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");

  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8)
    malformed(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                        std::to_string(file_size) + " bytes)");
  if (header_len > kMaxHeaderBytes) malformed(path, "header length " + std::to_string(header_len) + " is implausibly large");

  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw IoError("cannot read " + path.string());
  if (json_nesting_exceeds(header)) malformed(path, "header nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    malformed(path, std::string("header is not JSON: ") + e.what());
  }
  if (!j.is_object()) malformed(path, "header is not a JSON object");

  const std::uint64_t data_size = file_size - 8 - header_len;
  std::vector<Entry> entries;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) malformed(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) malformed(path, "__metadata__['" + k + "'] is not a string");
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, value));
  }
  // The format requires the tensors to tile the data exactly: no gaps, no overlaps, no slack.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.end > data_size)
      malformed(path, "tensor '" + e.name + "' ends at byte " + std::to_string(e.end) + " of a " +
                          std::to_string(data_size) + "-byte data section (truncated file?)");
    if (e.begin != expected)
      malformed(path, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + ", expected " +
                          std::to_string(expected) + " (overlapping or non-contiguous data_offsets)");
    expected = e.end;
  }
  if (expected != data_size)
    malformed(path, std::to_string(data_size - expected) + " bytes after the last tensor");

  StateDict out;
  out.reserve(entries.size());
  for (const auto& e : entries) {
    auto t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) throw IoError("cannot read tensor '" + e.name + "' from " + path.string());
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") throw DataError("a tensor cannot be named __metadata__ in safetensors");
    if (header.contains(name)) throw DataError("duplicate tensor name '" + name + "' for " + path.string());
    auto t = tensor.detach().to(at::kCPU).contiguous();
    const std::uint64_t bytes = t.numel() * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));

  AtomicFileWriter out(path);
  out.write(len_bytes, 8);
  out.write(text.data(), text.size());
  for (const auto& t : data) out.write(t.data_ptr(), t.numel() * t.element_size());
  out.commit();
}

}  // namespace shoplens
