// Checkpoint files and the folder that keeps them. A checkpoint is one file:
//
//   "SLCKPT01" | u64 state length | state JSON | u64 tensors length | tensors | u32 CRC32
//
// (little endian; the CRC covers every byte before it). The JSON holds everything that is not a
// tensor (step, data position, config, metric history, loss scaler, ...); the tensor blob is a
// LibTorch archive (model, optimizer, RNG). Files are written atomically (temporary, fsync,
// rename), so a crash leaves the previous checkpoints intact and never a torn one that looks
// complete; a file that fails its checksum is reported and skipped by `--resume auto`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens {

// clang-tidy 14 flags the implicit noexcept move of this struct: it cannot see that nlohmann::json's
// move constructor (noexcept, asserting invariants) does not throw.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Checkpoint {
  nlohmann::json state;
  std::string tensors;  // serialized LibTorch archive
  std::filesystem::path path;
};

void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& state, const std::string& tensors);
// DataError naming the file on a bad magic, truncation, trailing bytes or checksum mismatch.
Checkpoint read_checkpoint(const std::filesystem::path& path);

// The checkpoints of one run: `step-<12 digits>.ckpt`, plus `best.ckpt` (a hard link to the best
// one, so keeping it costs no second write). Keeps the newest `keep_last` besides the best.
class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path dir, int keep_last);
  const std::filesystem::path& dir() const { return dir_; }

  // Writes the checkpoint of `step`; `is_best` also points best.ckpt at it. Then prunes.
  std::filesystem::path save(std::int64_t step, const nlohmann::json& state, const std::string& tensors, bool is_best);
  // Step checkpoints, oldest first.
  std::vector<std::filesystem::path> list() const;
  // The newest checkpoint that reads back whole; corrupt ones are logged and skipped, and each
  // skipped one's error (naming the file and the damage) is added to `damaged` when given.
  std::optional<Checkpoint> newest_valid(std::vector<std::string>* damaged = nullptr) const;
  std::filesystem::path best_path() const { return dir_ / "best.ckpt"; }

 private:
  void prune();
  std::filesystem::path dir_;
  int keep_last_;
};

}  // namespace shoplens
