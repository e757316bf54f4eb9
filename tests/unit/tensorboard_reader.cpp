#include "tensorboard_reader.h"

#include <cstring>

#include <fmt/format.h>

#include "protobuf_reader.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/checksum.h"
#include "shoplens/core/errors.h"

namespace shoplens::testing {
namespace {

// Wire format (tensorflow/core/util/event.proto, framework/summary.proto), the fields written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//             SessionLog session_log = 7; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   START = 1
using Wire = protobuf::WireType;

template <class T>
T from_bits(std::uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

void decode_value(ProtobufReader d, TensorBoardEvent& event) {
  std::string tag;
  bool has_simple = false;
  float simple = 0;
  while (!d.done()) {
    const auto [field, wire] = d.key();
    if (field == 1) {
      d.expect_wire(wire, Wire::kBytes, "Value.tag");
      tag = std::string(d.bytes());
    } else if (field == 2) {
      d.expect_wire(wire, Wire::kFixed32, "Value.simple_value");
      simple = from_bits<float>(static_cast<std::uint32_t>(d.fixed(4)));
      has_simple = true;
    } else {
      d.skip(wire);
    }
  }
  if (has_simple) event.scalars.emplace_back(std::move(tag), simple);  // images, histograms: not scalars
}

// The message under field 1 of `d` goes to `each`; other fields are skipped.
template <class F>
void each_first_field(ProtobufReader d, const char* name, Wire expected, F each) {
  while (!d.done()) {
    const auto [field, wire] = d.key();
    if (field != 1) {
      d.skip(wire);
      continue;
    }
    d.expect_wire(wire, expected, name);
    each(d);
  }
}

TensorBoardEvent decode_event(ProtobufReader d) {
  TensorBoardEvent event;
  while (!d.done()) {
    const auto [field, wire] = d.key();
    if (field == 1) {
      d.expect_wire(wire, Wire::kFixed64, "Event.wall_time");
      event.wall_time = from_bits<double>(d.fixed(8));
    } else if (field == 2) {
      d.expect_wire(wire, Wire::kVarint, "Event.step");
      event.step = static_cast<std::int64_t>(d.varint());
    } else if (field == 3) {
      d.expect_wire(wire, Wire::kBytes, "Event.file_version");
      event.file_version = std::string(d.bytes());
    } else if (field == 5) {
      d.expect_wire(wire, Wire::kBytes, "Event.summary");
      each_first_field(d.sub(), "Summary.value", Wire::kBytes,
                       [&](ProtobufReader& s) { decode_value(s.sub(), event); });
    } else if (field == 7) {
      d.expect_wire(wire, Wire::kBytes, "Event.session_log");
      each_first_field(d.sub(), "SessionLog.status", Wire::kVarint,
                       [&](ProtobufReader& log) { event.session_start = log.varint() == 1; });
    } else {
      d.skip(wire);
    }
  }
  return event;
}

}  // namespace

std::vector<TensorBoardEvent> read_tensorboard_events(const std::filesystem::path& file) {
  const std::string data = read_file(file);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::vector<TensorBoardEvent> events;
  std::size_t pos = 0;
  while (pos < data.size()) {
    const std::string where = fmt::format("'{}' at byte {}", file.string(), pos);
    if (data.size() - pos < 12) throw DataError(where + ": truncated record header");
    const std::uint64_t length = little_endian(bytes + pos, 8);
    if (mask_crc32c(crc32c(bytes + pos, 8)) != little_endian(bytes + pos + 8, 4))
      throw DataError(where + ": CRC mismatch in the record length");
    if (length > data.size() - pos - 12 || data.size() - pos - 12 - length < 4)
      throw DataError(where + fmt::format(": truncated record ({} payload bytes announced)", length));
    const unsigned char* payload = bytes + pos + 12;
    if (mask_crc32c(crc32c(payload, length)) != little_endian(payload + length, 4))
      throw DataError(where + ": CRC mismatch in the record payload");
    events.push_back(decode_event(ProtobufReader(std::string_view(data).substr(pos + 12, length), where)));
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

}  // namespace shoplens::testing
