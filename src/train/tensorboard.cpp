#include "shoplens/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/checksum.h"
#include "shoplens/core/protobuf_wire.h"

namespace shoplens {
namespace {

// Wire format (tensorflow/core/util/event.proto, framework/summary.proto), fields we use:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//             SessionLog session_log = 7; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   START = 1
constexpr const char* kFileVersion = "brain.Event:2";
constexpr std::size_t kAutoFlushBytes = 1 << 20;

// wall_time and step of every Event; int64 is encoded as its two's complement, like protobuf.
protobuf::MessageWriter event_header(double wall_time, std::int64_t step) {
  protobuf::MessageWriter event;
  event.double_field(1, wall_time);
  event.int_field(2, step);
  return event;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw IoError("cannot create TensorBoard folder '" + log_dir.string() + "': " + ec.message());
  const std::string base =
      fmt::format("events.out.tfevents.{}.{}.{}.shoplens", static_cast<long long>(std::time(nullptr)), host_name(),
                  static_cast<long long>(::getpid()));
  // Two writers of one process in one second would share a name; the suffix keeps them apart and
  // sorts after the first, which is the order TensorBoard reads a folder's files in.
  for (int attempt = 1; fd_ < 0; ++attempt) {
    file_ = log_dir / (attempt == 1 ? base : fmt::format("{}.{}", base, attempt));
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 1000))
      throw IoError("cannot create TensorBoard event file '" + file_.string() + "': " + std::strerror(errno));
  }
  protobuf::MessageWriter event = event_header(now_seconds(), 0);
  event.bytes_field(3, kFileVersion);
  try {
    append_record(event.bytes());
    flush();  // an empty run still shows up as a valid file
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  try {
    if (!failed_) flush();
  } catch (const std::exception& e) {
    spdlog::warn("{}", e.what());
  }
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, std::int64_t step, double wall_time) {
  check_usable();
  protobuf::MessageWriter value_msg;
  value_msg.bytes_field(1, tag);
  value_msg.float_field(2, value);
  protobuf::MessageWriter summary;
  summary.bytes_field(1, value_msg.bytes());
  protobuf::MessageWriter event = event_header(wall_time, step);
  event.bytes_field(5, summary.bytes());
  append_record(event.bytes());
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, std::int64_t step) {
  add_scalar(tag, value, step, now_seconds());
}

void TensorBoardWriter::add_session_start(std::int64_t step) {
  check_usable();
  protobuf::MessageWriter session_log;
  session_log.int_field(1, 1);  // START
  protobuf::MessageWriter event = event_header(now_seconds(), step);
  event.bytes_field(7, session_log.bytes());
  append_record(event.bytes());
}

void TensorBoardWriter::append_record(const std::string& payload) {
  // TFRecord: length, its masked CRC-32C, the payload, its masked CRC-32C; all little-endian.
  std::string length;
  protobuf::append_little_endian(length, payload.size(), 8);
  buffer_ += length;
  protobuf::append_little_endian(buffer_, mask_crc32c(crc32c(length.data(), length.size())), 4);
  buffer_ += payload;
  protobuf::append_little_endian(buffer_, mask_crc32c(crc32c(payload.data(), payload.size())), 4);
  if (buffer_.size() >= kAutoFlushBytes) flush();
}

void TensorBoardWriter::check_usable() const {
  if (failed_) throw IoError("TensorBoard event file '" + file_.string() + "' failed earlier and is no longer written");
}

void TensorBoardWriter::flush() {
  check_usable();
  std::size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      buffer_.clear();
      throw IoError("cannot write TensorBoard event file '" + file_.string() +
                    "': " + (n < 0 ? std::strerror(errno) : "no progress"));
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

}  // namespace shoplens
