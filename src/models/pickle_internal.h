// A minimal unpickler for what torch.save writes (protocol 2, and the protocol 3-4 opcodes a
// user may pick): dicts, lists, tuples, scalars, strings, tensors. It never imports or calls
// anything: known globals (OrderedDict, _rebuild_tensor_v2, the storage types) are interpreted,
// every other global becomes an opaque Object carrying its class name, so a checkpoint holding
// e.g. an argparse.Namespace next to its state dict still reads, and a pickled nn.Module is
// reported by class name. Not part of the public interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shoplens::detail {

struct PickleValue;
using PickleValuePtr = std::shared_ptr<PickleValue>;

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kTuple,
    kList,
    kDict,
    kTensor,
    kStorage,
    kGlobal,
    kObject
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0.0;
  std::string text;                   // string, bytes, "module.name" of a global or an object's class
  std::vector<PickleValuePtr> items;  // tuple, list
  std::vector<std::pair<PickleValuePtr, PickleValuePtr>> entries;  // dict, in insertion order
  at::Tensor tensor;                                               // tensor, or a storage as a flat 1-d tensor

  PickleValue() = default;
  PickleValue(const PickleValue&) = delete;
  PickleValue& operator=(const PickleValue&) = delete;
  // Frees nested containers iteratively: a hostile pickle can nest lists a million deep, and
  // the default recursive destruction would overflow the stack.
  ~PickleValue();
};

// Loads storage `key` ("data/<key>" in the zip) as a flat tensor of `numel` elements of `dtype`.
using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype, std::int64_t numel)>;

// Throws DataError prefixed with `source` on anything malformed or unsupported.
PickleValuePtr unpickle(std::string_view data, const std::string& source, const StorageLoader& load_storage);

// "a dict with keys [a, b, ...]", "an object of class x.Y", "a tensor", ... for error messages.
std::string describe(const PickleValue& value);

}  // namespace shoplens::detail
