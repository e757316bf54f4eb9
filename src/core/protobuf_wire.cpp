#include "shoplens/core/protobuf_wire.h"

#include <cstring>

namespace shoplens::protobuf {

void append_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

void MessageWriter::varint(std::uint64_t value) {
  while (value >= 0x80) {
    out_ += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out_ += static_cast<char>(value);
}

void MessageWriter::key(int field, WireType wire) {
  varint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire));
}

void MessageWriter::int_field(int field, std::int64_t value) {
  key(field, WireType::kVarint);
  varint(static_cast<std::uint64_t>(value));
}

void MessageWriter::float_field(int field, float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  key(field, WireType::kFixed32);
  append_little_endian(out_, bits, 4);
}

void MessageWriter::double_field(int field, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  key(field, WireType::kFixed64);
  append_little_endian(out_, bits, 8);
}

void MessageWriter::bytes_field(int field, std::string_view bytes) {
  key(field, WireType::kBytes);
  varint(bytes.size());
  out_ += bytes;
}

void MessageWriter::packed_ints(int field, const std::vector<std::int64_t>& values) {
  MessageWriter inner;
  for (auto v : values) inner.varint(static_cast<std::uint64_t>(v));
  bytes_field(field, inner.bytes());
}

}  // namespace shoplens::protobuf
