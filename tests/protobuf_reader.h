// Protobuf's wire format read back, for the tests of the files ShopLens writes as protobuf with
// core/protobuf_wire.h (TensorBoard events: tensorboard_reader.h; ONNX models: test_onnx_graph).
// The library only writes protobuf; reading it is the tests' business. DataError naming `where`
// on a truncated or malformed message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/protobuf_wire.h"

namespace shoplens::testing {

// `bytes` bytes of `p`, least significant first.
inline std::uint64_t little_endian(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// One message being decoded, field by field.
class ProtobufReader {
 public:
  using WireType = protobuf::WireType;

  ProtobufReader(std::string_view message, std::string where)
      : p_(reinterpret_cast<const unsigned char*>(message.data())),
        end_(p_ + message.size()),
        where_(std::move(where)) {}

  bool done() const { return p_ >= end_; }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) fail("truncated varint");
      const unsigned char b = *p_++;
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }

  // A field's key: its number and wire type.
  std::pair<int, WireType> key() {
    const std::uint64_t k = varint();
    return {static_cast<int>(k >> 3), static_cast<WireType>(k & 7)};
  }

  std::uint64_t fixed(int bytes) {
    need(static_cast<std::size_t>(bytes));
    const std::uint64_t v = little_endian(p_, bytes);
    p_ += bytes;
    return v;
  }

  // A length-delimited field's bytes (a string or a nested message).
  std::string_view bytes() {
    const std::uint64_t size = varint();
    need(size);
    const std::string_view out(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(size));
    p_ += size;
    return out;
  }

  ProtobufReader sub() { return ProtobufReader(bytes(), where_); }

  void skip(WireType wire) {
    switch (wire) {
      case WireType::kVarint:
        varint();
        break;
      case WireType::kFixed64:
        fixed(8);
        break;
      case WireType::kBytes:
        bytes();
        break;
      case WireType::kFixed32:
        fixed(4);
        break;
      default:
        fail(fmt::format("unsupported wire type {}", static_cast<int>(wire)));
    }
  }

  void expect_wire(WireType wire, WireType expected, const char* field) const {
    if (wire != expected)
      fail(fmt::format("field '{}' has wire type {}, expected {}", field, static_cast<int>(wire),
                       static_cast<int>(expected)));
  }

  [[noreturn]] void fail(const std::string& what) const { throw DataError(where_ + ": malformed message: " + what); }

 private:
  void need(std::uint64_t n) const {
    if (n > static_cast<std::uint64_t>(end_ - p_)) fail("field runs past the end of its message");
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::string where_;
};

// One field of a message: a varint's value, or the bytes of any other wire type.
struct ProtobufField {
  int number = 0;
  protobuf::WireType wire = protobuf::WireType::kVarint;
  std::uint64_t varint = 0;
  std::string bytes;  // length-delimited: the payload; fixed32/fixed64: the little-endian bytes
};

// The fields of one message, in order.
inline std::vector<ProtobufField> protobuf_fields(std::string_view message) {
  std::vector<ProtobufField> out;
  ProtobufReader reader(message, "message");
  while (!reader.done()) {
    ProtobufField f;
    std::tie(f.number, f.wire) = reader.key();
    if (f.wire == protobuf::WireType::kVarint) {
      f.varint = reader.varint();
    } else if (f.wire == protobuf::WireType::kBytes) {
      f.bytes = std::string(reader.bytes());
    } else {
      const int size = f.wire == protobuf::WireType::kFixed32 ? 4 : 8;
      const std::uint64_t v = reader.fixed(size);
      protobuf::append_little_endian(f.bytes, v, size);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace shoplens::testing
