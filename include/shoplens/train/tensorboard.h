// TensorBoard event files without TensorFlow or protobuf: TFRecord framing with masked CRC-32C
// around hand-encoded `tensorflow.Event` messages (scalars only). `tensorboard --logdir DIR`
// reads what this writes; docs/TRAINING.md shows how. The tests read them back with their own
// reader (tests/tensorboard_reader.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace shoplens {

// Appends to a new file `events.out.tfevents.<unix time>.<hostname>.<pid>.shoplens` in `log_dir`
// (created if missing; a `.<n>` suffix is added if that name is taken). Events are buffered:
// call flush() to make them visible; the destructor flushes too. Not thread-safe.
// IoError naming the file when it cannot be created or written; after a failed write the writer
// stays failed (a partial record would make every later one unreadable).
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::filesystem::path& log_dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // wall_time in seconds since the epoch; the overload without it uses the current time.
  void add_scalar(const std::string& tag, float value, std::int64_t step, double wall_time);
  void add_scalar(const std::string& tag, float value, std::int64_t step);
  // A SessionLog START at `step`: TensorBoard then drops what earlier files of the run recorded
  // at steps >= `step` (the orphaned tail of a run resumed from an earlier checkpoint).
  void add_session_start(std::int64_t step);
  void flush();

  const std::filesystem::path& file() const { return file_; }

 private:
  void append_record(const std::string& payload);
  void check_usable() const;

  std::filesystem::path file_;
  int fd_ = -1;
  std::string buffer_;
  bool failed_ = false;
};

}  // namespace shoplens
