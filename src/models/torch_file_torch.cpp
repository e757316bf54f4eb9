// Reads the state dict out of a zip-format torch.save file: archive/data.pkl through our own
// unpickler (LibTorch 1.13's turns OrderedDict into None), tensor bytes from archive/data/<key>.
#include <cstring>
#include <fstream>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include "pickle_internal.h"
#include "zip_directory.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

using detail::PickleValue;
using Kind = PickleValue::Kind;

const PickleValue* find_key(const PickleValue& dict, const std::string& key) {
  for (const auto& [k, v] : dict.entries)
    if (k->kind == Kind::kString && k->text == key) return v.get();
  return nullptr;
}

// The tensors of a state dict; any other value is an error naming its key.
StateDict tensors_of(const PickleValue& dict, const std::string& file, const std::string& where) {
  StateDict out;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind != Kind::kString)
      throw DataError(file + ": " + where + " has a key that is " + detail::describe(*k) + ", not a parameter name");
    if (v->kind != Kind::kTensor)
      throw DataError(file + ": " + where + " maps '" + k->text + "' to " + detail::describe(*v) +
                      ", not a tensor (expected a state dict: parameter name -> tensor)");
    out.emplace_back(k->text, v->tensor);
  }
  return out;
}

StateDict state_dict_of(const PickleValue& top, const std::string& file) {
  if (top.kind == Kind::kObject)
    throw DataError(file + ": holds " + detail::describe(top) +
                    ", not a state dict (a pickled module needs its Python code; save model.state_dict() instead)");
  if (top.kind != Kind::kDict) throw DataError(file + ": holds " + detail::describe(top) + ", not a state dict");
  // Training checkpoints wrap the weights next to optimizer state, epoch, config, ...
  for (const char* key : {"state_dict", "model_state_dict", "model"}) {
    const auto* inner = find_key(top, key);
    if (inner && inner->kind == Kind::kDict) return tensors_of(*inner, file, std::string("the '") + key + "' entry");
    if (inner && inner->kind == Kind::kObject)
      throw DataError(file + ": its '" + key + "' entry is " + detail::describe(*inner) +
                      ", not a state dict (save model.state_dict() instead)");
  }
  bool any_tensor = false;
  for (const auto& entry : top.entries) any_tensor = any_tensor || entry.second->kind == Kind::kTensor;
  if (!any_tensor && !top.entries.empty())
    throw DataError(file + ": holds " + detail::describe(top) +
                    " and no tensors; expected a state dict, or a checkpoint with a 'state_dict' or 'model' entry");
  return tensors_of(top, file, "the state dict");
}

std::string record_text(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  auto [ptr, size] = reader.getRecord(name);
  return std::string(static_cast<const char*>(ptr.get()), size);
}

// Every entry's declared size checked before the archive reader allocates it (a 10 KB archive
// declaring gigabytes reached 1.7 GB of memory).
void check_archive_sizes(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  const auto file_size = static_cast<std::uint64_t>(std::filesystem::file_size(path));
  auto read_at = [&](std::uint64_t offset, std::size_t size) {
    std::string bytes(size, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!in)
      throw IoError("cannot read " + std::to_string(size) + " bytes at offset " + std::to_string(offset) + " of " +
                    file);
    return bytes;
  };
  detail::check_zip_sizes(detail::read_zip_directory(file_size, read_at, file), file_size, file);
}

}  // namespace

StateDict read_torch_state_dict(const std::filesystem::path& path) {
  const std::string file = path.string();
  if (!std::filesystem::exists(path)) throw IoError("no such file: " + file);
  require_regular_file(path);  // a FIFO would block the archive reader's open for ever
  check_archive_sizes(path);
  try {
    caffe2::serialize::PyTorchStreamReader reader(file);
    if (reader.hasRecord("constants.pkl") || reader.hasRecord("code/__torch__.py"))
      throw DataError(file +
                      ": is a TorchScript archive (torch.jit.save), not a state dict; save "
                      "model.state_dict() with torch.save instead");
    if (!reader.hasRecord("data.pkl"))
      throw DataError(file + ": a zip archive without data.pkl, not a torch.save file");
    if (reader.hasRecord("byteorder") && record_text(reader, "byteorder") != "little")
      throw DataError(file + ": tensors saved big-endian, which is not supported");
    const std::string pickle = record_text(reader, "data.pkl");
    auto load_storage = [&](const std::string& key, at::ScalarType dtype, std::int64_t numel) {
      const std::string name = "data/" + key;
      if (!reader.hasRecord(name)) throw DataError(file + ": storage " + name + " is missing from the archive");
      auto [ptr, size] = reader.getRecord(name);
      const auto element = c10::elementSize(dtype);
      const auto bytes = static_cast<std::size_t>(numel) * element;
      if (static_cast<std::size_t>(numel) > size / element)
        throw DataError(file + ": storage " + name + " has " + std::to_string(size) + " bytes, too few for " +
                        std::to_string(numel) + " elements of " + c10::toString(dtype));
      auto t = at::empty({numel}, at::TensorOptions().dtype(dtype));
      if (bytes > 0) std::memcpy(t.data_ptr(), ptr.get(), bytes);
      return t;
    };
    auto top = detail::unpickle(pickle, file, load_storage);
    return state_dict_of(*top, file);
  } catch (const c10::Error& e) {
    throw DataError(file + ": cannot read it as a torch.save zip archive: " + e.what_without_backtrace());
  }
}

}  // namespace shoplens
