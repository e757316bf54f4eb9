#include "shoplens/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/checksum.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'S', 'L', 'C', 'K', 'P', 'T', '0', '1'};

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint64_t get_u64(const std::string& in, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

bool parse_step_name(const std::string& name, std::int64_t& step) {
  if (name.size() != 5 + 12 + 5 || name.rfind("step-", 0) != 0 || name.substr(17) != ".ckpt") return false;
  step = 0;
  for (std::size_t i = 5; i < 17; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    step = step * 10 + (name[i] - '0');
  }
  return true;
}

}  // namespace

void write_checkpoint(const fs::path& path, const nlohmann::json& state, const std::string& tensors) {
  const std::string json_text = state.dump();
  std::string head(kMagic, sizeof kMagic);
  put_u64(head, json_text.size());
  std::string mid;
  put_u64(mid, tensors.size());
  std::uint32_t crc = crc32_of(head.data(), head.size(), 0);
  crc = crc32_of(json_text.data(), json_text.size(), crc);
  crc = crc32_of(mid.data(), mid.size(), crc);
  crc = crc32_of(tensors.data(), tensors.size(), crc);
  char tail[4];
  for (int i = 0; i < 4; ++i) tail[i] = static_cast<char>((crc >> (8 * i)) & 0xff);

  AtomicFileWriter out(path);
  out.write(head.data(), head.size());
  out.write(json_text.data(), json_text.size());
  out.write(mid.data(), mid.size());
  out.write(tensors.data(), tensors.size());
  out.write(tail, sizeof tail);
  out.commit();
}

Checkpoint read_checkpoint(const fs::path& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    throw DataError("checkpoint '" + path.string() + "': " + e.what());
  }
  auto fail = [&](const std::string& why) {
    return DataError("checkpoint '" + path.string() + "' is unusable: " + why);
  };
  if (bytes.size() < 8 + 8 + 8 + 4 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw fail("not a ShopLens checkpoint (bad magic or too short)");
  const std::uint64_t json_size = get_u64(bytes, 8);
  if (json_size > bytes.size() - 28) throw fail("truncated (state section past the end)");
  const std::size_t tensors_at = 16 + json_size + 8;
  const std::uint64_t tensors_size = get_u64(bytes, 16 + json_size);
  if (tensors_size > bytes.size() - tensors_at - 4) throw fail("truncated (tensor section past the end)");
  if (tensors_at + tensors_size + 4 != bytes.size()) throw fail("trailing bytes after the checksum");
  std::uint32_t stored = 0;
  for (int i = 3; i >= 0; --i)
    stored = (stored << 8) | static_cast<unsigned char>(bytes[tensors_at + tensors_size + i]);
  if (crc32_of(bytes.data(), bytes.size() - 4, 0) != stored) throw fail("checksum mismatch (torn or corrupted file)");

  Checkpoint ckpt;
  ckpt.path = path;
  if (json_nesting_exceeds(std::string_view(bytes).substr(16, json_size)))
    throw fail("state nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  try {
    ckpt.state = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<std::ptrdiff_t>(json_size));
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("state is not valid JSON: ") + e.what());
  }
  ckpt.tensors.assign(bytes, tensors_at, tensors_size);
  return ckpt;
}

CheckpointStore::CheckpointStore(fs::path dir, int keep_last)
    : dir_(std::move(dir)), keep_last_(std::max(1, keep_last)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw IoError("cannot create checkpoint folder '" + dir_.string() + "': " + ec.message());
}

fs::path CheckpointStore::save(std::int64_t step, const nlohmann::json& state, const std::string& tensors,
                               bool is_best) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%012lld.ckpt", static_cast<long long>(step));
  fs::path path = dir_ / name;
  write_checkpoint(path, state, tensors);
  if (is_best) {
    // Link under a temporary name, then rename over best.ckpt: readers never see it missing.
    const fs::path tmp = dir_ / ("best.ckpt.tmp." + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove(tmp, ec);
    fs::create_hard_link(path, tmp, ec);
    if (ec) {
      write_checkpoint(tmp, state, tensors);  // file systems without hard links get a copy
      ec.clear();
    }
    fs::rename(tmp, best_path(), ec);
    if (ec) throw IoError("cannot update '" + best_path().string() + "': " + ec.message());
    fsync_directory(dir_);
  }
  prune();
  return path;
}

std::vector<fs::path> CheckpointStore::list() const {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::int64_t step;
    if (entry.is_regular_file() && parse_step_name(entry.path().filename().string(), step))
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  paths.reserve(found.size());
  for (auto& f : found) paths.push_back(f.second);
  return paths;
}

std::optional<Checkpoint> CheckpointStore::newest_valid(std::vector<std::string>* damaged) const {
  auto paths = list();
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
    try {
      return read_checkpoint(*it);
    } catch (const DataError& e) {
      spdlog::warn("skipping {}", e.what());
      if (damaged) damaged->emplace_back(e.what());
    }
  }
  return std::nullopt;
}

void CheckpointStore::prune() {
  auto paths = list();
  if (static_cast<int>(paths.size()) <= keep_last_) return;
  for (std::size_t i = 0; i + keep_last_ < paths.size(); ++i) {
    std::error_code ec;
    fs::remove(paths[i], ec);  // best.ckpt is a separate link and survives
    if (ec) spdlog::warn("cannot remove old checkpoint {}: {}", paths[i].string(), ec.message());
  }
}

}  // namespace shoplens
