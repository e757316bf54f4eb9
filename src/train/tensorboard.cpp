#include "shoplens/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/checksum.h"

namespace shoplens {
namespace {

// Wire format (tensorflow/core/util/event.proto, framework/summary.proto), fields we use:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//             SessionLog session_log = 7; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   START = 1
constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireBytes = 2, kWireFixed32 = 5;
constexpr const char* kFileVersion = "brain.Event:2";
constexpr std::size_t kAutoFlushBytes = 1 << 20;

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, int field, int wire) { put_varint(out, static_cast<std::uint64_t>(field << 3 | wire)); }

// Little-endian whatever the host, as protobuf and TFRecord require.
void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

void put_double(std::string& out, int field, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kWireFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, int field, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kWireFixed32);
  put_le(out, bits, 4);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kWireBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// wall_time and step of every Event; int64 is encoded as its two's complement, like protobuf.
std::string event_header(double wall_time, std::int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  put_key(event, 2, kWireVarint);
  put_varint(event, static_cast<std::uint64_t>(step));
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

// --- reading -------------------------------------------------------------------------------

std::uint64_t get_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// A protobuf message being decoded; `fail` names the file and the record's offset.
class Decoder {
 public:
  Decoder(const unsigned char* begin, const unsigned char* end, std::string where)
      : p_(begin), end_(end), where_(std::move(where)) {}

  bool done() const { return p_ >= end_; }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) fail("truncated varint");
      unsigned char b = *p_++;
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }

  std::uint64_t fixed(int bytes) {
    need(static_cast<std::size_t>(bytes));
    std::uint64_t v = get_le(p_, bytes);
    p_ += bytes;
    return v;
  }

  Decoder sub() {
    std::uint64_t size = varint();
    need(size);
    Decoder d(p_, p_ + size, where_);
    p_ += size;
    return d;
  }

  std::string bytes() {
    Decoder d = sub();
    return std::string(reinterpret_cast<const char*>(d.p_), static_cast<std::size_t>(d.end_ - d.p_));
  }

  void skip(int wire) {
    switch (wire) {
      case kWireVarint:
        varint();
        break;
      case kWireFixed64:
        fixed(8);
        break;
      case kWireBytes:
        sub();
        break;
      case kWireFixed32:
        fixed(4);
        break;
      default:
        fail(fmt::format("unsupported wire type {}", wire));
    }
  }

  void expect_wire(int wire, int expected, const char* field) {
    if (wire != expected) fail(fmt::format("field '{}' has wire type {}, expected {}", field, wire, expected));
  }

  [[noreturn]] void fail(const std::string& what) const { throw DataError(where_ + ": malformed event: " + what); }

 private:
  void need(std::uint64_t n) const {
    if (n > static_cast<std::uint64_t>(end_ - p_)) fail("field runs past the end of its message");
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::string where_;
};

void decode_value(Decoder d, TensorBoardEvent& event) {
  std::string tag;
  bool has_simple = false;
  float simple = 0;
  while (!d.done()) {
    std::uint64_t key = d.varint();
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1) {
      d.expect_wire(wire, kWireBytes, "Value.tag");
      tag = d.bytes();
    } else if (field == 2) {
      d.expect_wire(wire, kWireFixed32, "Value.simple_value");
      auto bits = static_cast<std::uint32_t>(d.fixed(4));
      std::memcpy(&simple, &bits, sizeof simple);
      has_simple = true;
    } else {
      d.skip(wire);
    }
  }
  if (has_simple) event.scalars.emplace_back(std::move(tag), simple);  // images, histograms: not scalars
}

TensorBoardEvent decode_event(Decoder d) {
  TensorBoardEvent event;
  while (!d.done()) {
    std::uint64_t key = d.varint();
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    switch (field) {
      case 1: {
        d.expect_wire(wire, kWireFixed64, "Event.wall_time");
        std::uint64_t bits = d.fixed(8);
        std::memcpy(&event.wall_time, &bits, sizeof bits);
        break;
      }
      case 2:
        d.expect_wire(wire, kWireVarint, "Event.step");
        event.step = static_cast<std::int64_t>(d.varint());
        break;
      case 3:
        d.expect_wire(wire, kWireBytes, "Event.file_version");
        event.file_version = d.bytes();
        break;
      case 5: {
        d.expect_wire(wire, kWireBytes, "Event.summary");
        Decoder summary = d.sub();
        while (!summary.done()) {
          std::uint64_t k = summary.varint();
          if ((k >> 3) == 1) {
            summary.expect_wire(static_cast<int>(k & 7), kWireBytes, "Summary.value");
            decode_value(summary.sub(), event);
          } else {
            summary.skip(static_cast<int>(k & 7));
          }
        }
        break;
      }
      case 7: {
        d.expect_wire(wire, kWireBytes, "Event.session_log");
        Decoder log = d.sub();
        while (!log.done()) {
          std::uint64_t k = log.varint();
          if ((k >> 3) == 1 && (k & 7) == kWireVarint)
            event.session_start = log.varint() == 1;
          else
            log.skip(static_cast<int>(k & 7));
        }
        break;
      }
      default:
        d.skip(wire);
    }
  }
  return event;
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
  std::string event = event_header(now_seconds(), 0);
  put_bytes(event, 3, kFileVersion);
  try {
    append_record(event);
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
  std::string value_msg;
  put_bytes(value_msg, 1, tag);
  put_float(value_msg, 2, value);
  std::string summary;
  put_bytes(summary, 1, value_msg);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  append_record(event);
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, std::int64_t step) {
  add_scalar(tag, value, step, now_seconds());
}

void TensorBoardWriter::add_session_start(std::int64_t step) {
  check_usable();
  std::string session_log;
  put_key(session_log, 1, kWireVarint);
  put_varint(session_log, 1);  // START
  std::string event = event_header(now_seconds(), step);
  put_bytes(event, 7, session_log);
  append_record(event);
}

void TensorBoardWriter::append_record(const std::string& payload) {
  std::string length;
  put_le(length, payload.size(), 8);
  buffer_ += length;
  put_le(buffer_, mask_crc32c(crc32c(length.data(), length.size())), 4);
  buffer_ += payload;
  put_le(buffer_, mask_crc32c(crc32c(payload.data(), payload.size())), 4);
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

std::vector<TensorBoardEvent> read_tensorboard_events(const std::filesystem::path& file) {
  const std::string data = read_file(file);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::vector<TensorBoardEvent> events;
  std::size_t pos = 0;
  while (pos < data.size()) {
    const std::string where = fmt::format("'{}' at byte {}", file.string(), pos);
    if (data.size() - pos < 12) throw DataError(where + ": truncated record header");
    const std::uint64_t length = get_le(bytes + pos, 8);
    if (mask_crc32c(crc32c(bytes + pos, 8)) != get_le(bytes + pos + 8, 4))
      throw DataError(where + ": CRC mismatch in the record length");
    if (length > data.size() - pos - 12 || data.size() - pos - 12 - length < 4)
      throw DataError(where + fmt::format(": truncated record ({} payload bytes announced)", length));
    const unsigned char* payload = bytes + pos + 12;
    if (mask_crc32c(crc32c(payload, length)) != get_le(payload + length, 4))
      throw DataError(where + ": CRC mismatch in the record payload");
    events.push_back(decode_event(Decoder(payload, payload + length, where)));
    pos += 12 + length + 4;
  }
  return events;
}

std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::filesystem::path& file) {
  std::vector<TensorBoardScalar> scalars;
  for (auto& event : read_tensorboard_events(file))
    for (auto& [tag, value] : event.scalars) scalars.push_back({std::move(tag), value, event.step, event.wall_time});
  return scalars;
}

}  // namespace shoplens
