// Which weight format a file holds, from its first bytes.
#include <fstream>

#include <torch/torch.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/models/weights.h"

namespace shoplens {

WeightFormat detect_weight_format(const std::filesystem::path& path) {
  require_regular_file(path);  // a FIFO would block the open for ever
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path.string());
  char head[9] = {};
  in.read(head, sizeof head);
  const auto n = static_cast<std::size_t>(in.gcount());
  const std::string file = path.string();
  if (n >= 4 && std::string_view(head, 4) == std::string_view("PK\x03\x04", 4)) return WeightFormat::kTorchZip;
  // safetensors: an 8-byte header length, then the JSON header's '{'. The length itself is
  // checked by the reader, so a truncated file gets the precise complaint.
  if (n == 9 && head[8] == '{') return WeightFormat::kSafetensors;
  if (n == 0) throw DataError(file + ": empty file, not a weight file");
  if (n >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && static_cast<unsigned char>(head[1]) <= 5)
    throw DataError(file +
                    ": a legacy (non-zip) torch.save file or a raw pickle; re-save it with torch.save from "
                    "PyTorch >= 1.6 (zip format, the default) or as safetensors");
  std::string hex;
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i) {
    char b[4];
    std::snprintf(b, sizeof b, "%02x ", static_cast<unsigned char>(head[i]));
    hex += b;
  }
  if (!hex.empty()) hex.pop_back();
  throw DataError(file + ": neither a torch.save zip archive nor a safetensors file (it starts with bytes " + hex +
                  ")");
}

StateDict read_weights(const std::filesystem::path& path) {
  return detect_weight_format(path) == WeightFormat::kSafetensors ? read_safetensors(path)
                                                                  : read_torch_state_dict(path);
}

}  // namespace shoplens
