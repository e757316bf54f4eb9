// libFuzzer target: the torch.save unpickler must reject any malformed or unsupported pickle with
// a DataError (never crash, hang, or recurse without bound), and free whatever it built, however
// deep. Storages come from a stand-in loader: zero-filled, bounded in size like the zip entries
// the real reader checks first.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <ATen/ATen.h>

#include "models/pickle_internal.h"
#include "shoplens/core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto load_storage = [](const std::string& key, at::ScalarType dtype, std::int64_t numel) {
    if (numel < 0 || numel > (1 << 16)) throw shoplens::DataError("fuzz: storage " + key + " too large");
    return at::zeros({numel}, at::TensorOptions().dtype(dtype));
  };
  try {
    const auto value = shoplens::detail::unpickle(std::string_view(reinterpret_cast<const char*>(data), size),
                                                  "fuzz.pkl", load_storage);
    (void)shoplens::detail::describe(*value);
  } catch (const shoplens::DataError&) {}
  return 0;
}
