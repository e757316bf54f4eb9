// safetensors files in and out as LibTorch tensors. The header is read and checked against the
// file by models/safetensors_header (torch-free, fuzzed) before any tensor is allocated.
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "safetensors_header.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};

// The dtypes detail::safetensors_element_bytes accepts, as LibTorch types.
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

at::ScalarType torch_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  throw Error("safetensors dtype " + name + " has no LibTorch type");  // the header reader accepted it: a bug
}

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  throw DataError(std::string("cannot store dtype ") + c10::toString(type) + " in safetensors");
}

}  // namespace

StateDict read_safetensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
  require_regular_file(path);  // a FIFO would block the open for ever
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path.string());
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError("cannot stat " + path.string() + ": " + ec.message());
  auto read_at = [&](std::uint64_t offset, std::size_t size) {
    std::string bytes(size, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!in) throw IoError("cannot read " + path.string());
    return bytes;
  };
  detail::SafetensorsHeader header = detail::read_safetensors_header(file_size, read_at, path.string());
  if (metadata)
    for (auto& [k, v] : header.metadata) (*metadata)[k] = std::move(v);

  StateDict out;
  out.reserve(header.entries.size());
  for (const auto& e : header.entries) {
    auto t = at::empty(e.shape, at::TensorOptions().dtype(torch_dtype(e.dtype)));
    in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
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
    header[name] = {
        {"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i)
    len_bytes[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));

  AtomicFileWriter out(path);
  out.write(len_bytes, 8);
  out.write(text.data(), text.size());
  for (const auto& t : data) out.write(t.data_ptr(), t.numel() * t.element_size());
  out.commit();
}

}  // namespace shoplens
