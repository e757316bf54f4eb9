// The writing half of protobuf's wire format, for the two files ShopLens writes as protobuf without
// the protobuf library: TensorBoard event files (train/tensorboard.h) and ONNX models
// (models/onnx_graph.h, which says why no protobuf library). Both write a few scalar, string,
// packed and nested fields; a nested message is a writer of its own whose bytes() go into
// bytes_field(). Every number is written little-endian whatever the host, as the format requires.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shoplens::protobuf {

// The wire types of a field's key.
enum class WireType : int { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// `bytes` bytes of `value`, least significant first (protobuf's fixed fields, TFRecord's framing).
void append_little_endian(std::string& out, std::uint64_t value, int bytes);

class MessageWriter {
 public:
  // A base-128 varint: seven bits a byte, least significant group first.
  void varint(std::uint64_t value);
  // A field's key: its number and wire type.
  void key(int field, WireType wire);
  // int32, int64, enum and bool fields: a negative value is its ten-byte two's complement varint.
  void int_field(int field, std::int64_t value);
  void float_field(int field, float value);
  void double_field(int field, double value);
  // A string, bytes or nested message field: its length, then the bytes.
  void bytes_field(int field, std::string_view bytes);
  // A packed repeated int64 field.
  void packed_ints(int field, const std::vector<std::int64_t>& values);

  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

}  // namespace shoplens::protobuf
