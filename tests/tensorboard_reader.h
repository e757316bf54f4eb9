// A reader of the TensorBoard event files train/tensorboard.h writes, for the tests: TFRecord
// framing with both CRCs checked, and the Event fields this project writes. The library ships the
// writer only (TensorBoard itself is the reader users run).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace shoplens::testing {

struct TensorBoardScalar {
  std::string tag;
  float value = 0;
  std::int64_t step = 0;
  double wall_time = 0;
};

// One decoded Event; the fields this project writes, others are skipped.
struct TensorBoardEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;                            // set in a file's first event
  bool session_start = false;                          // a SessionLog with status START
  std::vector<std::pair<std::string, float>> scalars;  // Summary values with a simple_value
};

// Reads a whole event file, checking both CRCs of every record. DataError naming the file and
// the byte offset on a CRC mismatch, a truncated record or a malformed message; IoError when the
// file cannot be read.
std::vector<TensorBoardEvent> read_tensorboard_events(const std::filesystem::path& file);
// The scalars of read_tensorboard_events, in file order.
std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::filesystem::path& file);

}  // namespace shoplens::testing
