// core/protobuf_wire.h, the one protobuf writer of the TensorBoard and ONNX files: each field kind
// against the bytes protobuf's encoding guide gives, and read back by the tests' reader.
#include <gtest/gtest.h>

#include <limits>

#include "protobuf_reader.h"
#include "shoplens/core/protobuf_wire.h"

namespace shoplens {
namespace {

using protobuf::MessageWriter;
using protobuf::WireType;

TEST(ProtobufWire, VarintsAsTheEncodingGuideWritesThem) {
  MessageWriter w;
  w.varint(1);
  w.varint(150);  // the guide's example: 96 01
  w.varint(300);  // ac 02
  EXPECT_EQ(w.bytes(), std::string("\x01\x96\x01\xac\x02"));
  MessageWriter negative;
  negative.int_field(1, -1);  // key 08, then ten bytes: ff x9, 01
  EXPECT_EQ(negative.bytes(), std::string("\x08") + std::string(9, '\xff') + "\x01");
}

TEST(ProtobufWire, FieldsReadBackWithTheirKeys) {
  MessageWriter inner;
  inner.bytes_field(1, "tag");
  MessageWriter w;
  w.int_field(2, std::numeric_limits<std::int64_t>::max());
  w.float_field(3, 1.5f);
  w.double_field(4, -2.25);
  w.bytes_field(5, inner.bytes());
  w.packed_ints(6, {1, 300, -2});
  const auto fields = testing::protobuf_fields(w.bytes());
  ASSERT_EQ(fields.size(), 5u);
  EXPECT_EQ(fields[0].number, 2);
  EXPECT_EQ(fields[0].varint, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(fields[1].wire, WireType::kFixed32);
  EXPECT_EQ(fields[1].bytes, std::string("\x00\x00\xc0\x3f", 4));  // 1.5f, little-endian
  EXPECT_EQ(fields[2].wire, WireType::kFixed64);
  EXPECT_EQ(fields[2].bytes, std::string("\x00\x00\x00\x00\x00\x00\x02\xc0", 8));  // -2.25
  EXPECT_EQ(testing::protobuf_fields(fields[3].bytes).at(0).bytes, "tag");
  testing::ProtobufReader packed(fields[4].bytes, "packed");
  EXPECT_EQ(packed.varint(), 1u);
  EXPECT_EQ(packed.varint(), 300u);
  EXPECT_EQ(static_cast<std::int64_t>(packed.varint()), -2);
  EXPECT_TRUE(packed.done());
}

TEST(ProtobufWire, LittleEndianWhateverTheHost) {
  std::string out;
  protobuf::append_little_endian(out, 0x0102030405060708ULL, 8);
  EXPECT_EQ(out, std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  out.clear();
  protobuf::append_little_endian(out, 0xA1B2C3D4ULL, 4);
  EXPECT_EQ(out, std::string("\xd4\xc3\xb2\xa1", 4));
}

}  // namespace
}  // namespace shoplens
