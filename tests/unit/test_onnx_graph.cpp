// The ONNX graph builder and its protobuf writer, read back with the tests' wire-format reader (the
// e2e test holds whole models against onnx.checker and ONNX Runtime; this one needs no Python).
#include <gtest/gtest.h>

#include <cstring>

#include "protobuf_reader.h"
#include "shoplens/models/onnx_graph.h"

namespace shoplens {
namespace {

using Field = testing::ProtobufField;

std::vector<Field> fields(const std::string& s) { return testing::protobuf_fields(s); }

std::vector<Field> numbered(const std::vector<Field>& all, int number) {
  std::vector<Field> out;
  for (const auto& f : all)
    if (f.number == number) out.push_back(f);
  return out;
}

TEST(OnnxGraph, SerializesTheModelGraphOpsetAndMetadata) {
  onnx::Graph g("tiny");
  g.add_input("x", onnx::DataType::kFloat, {onnx::symbolic("batch"), onnx::fixed(4)});
  const float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto weight = g.add_floats("w", {2, 4}, w);
  const auto y = g.node("Gemm", {"x", weight}, {onnx::attr("transB", 1)});
  const auto z = g.node("Reshape", {y, g.int64s({0, -1})}, {}, "logits");
  g.add_output(z, onnx::DataType::kFloat, {onnx::symbolic("batch"), onnx::fixed(2)});
  EXPECT_EQ(g.add_floats("w", {2, 4}, w), "w_1");  // names stay unique

  const auto model = fields(onnx::serialize(g, {"shoplens", "1.0", "", {{"class_names", "[\"a\",\"b\"]"}}}));
  EXPECT_EQ(numbered(model, 1).at(0).varint, static_cast<std::uint64_t>(onnx::kIrVersion));
  const auto opset = fields(numbered(model, 8).at(0).bytes);
  EXPECT_EQ(numbered(opset, 2).at(0).varint, 17u);
  const auto meta = fields(numbered(model, 14).at(0).bytes);
  EXPECT_EQ(numbered(meta, 1).at(0).bytes, "class_names");
  EXPECT_EQ(numbered(meta, 2).at(0).bytes, "[\"a\",\"b\"]");

  const auto graph = fields(numbered(model, 7).at(0).bytes);
  ASSERT_EQ(numbered(graph, 1).size(), 2u);  // nodes
  const auto gemm = fields(numbered(graph, 1)[0].bytes);
  EXPECT_EQ(numbered(gemm, 4).at(0).bytes, "Gemm");
  EXPECT_EQ(numbered(gemm, 1).at(1).bytes, "w");
  const auto trans_b = fields(numbered(gemm, 5).at(0).bytes);
  EXPECT_EQ(numbered(trans_b, 3).at(0).varint, 1u);
  EXPECT_EQ(numbered(fields(numbered(graph, 1)[1].bytes), 2).at(0).bytes, "logits");

  // The weight: dims packed, FLOAT, raw little-endian bytes; the shape constant keeps its -1.
  const auto inits = numbered(graph, 5);
  ASSERT_EQ(inits.size(), 3u);
  const auto tensor = fields(inits[0].bytes);
  EXPECT_EQ(numbered(tensor, 2).at(0).varint, 1u);
  EXPECT_EQ(numbered(tensor, 9).at(0).bytes, std::string(reinterpret_cast<const char*>(w), sizeof(w)));
  const auto shape = fields(inits[1].bytes);
  std::int64_t dims[2];
  std::memcpy(dims, numbered(shape, 9).at(0).bytes.data(), sizeof(dims));
  EXPECT_EQ(dims[1], -1);

  // The input's batch dimension is symbolic (dim_param), its feature dimension fixed.
  const auto input = fields(numbered(graph, 11).at(0).bytes);
  const auto tensor_type = fields(numbered(fields(numbered(input, 2).at(0).bytes), 1).at(0).bytes);
  const auto dims_of_input = numbered(fields(numbered(tensor_type, 2).at(0).bytes), 1);
  ASSERT_EQ(dims_of_input.size(), 2u);
  EXPECT_EQ(numbered(fields(dims_of_input[0].bytes), 2).at(0).bytes, "batch");
  EXPECT_EQ(numbered(fields(dims_of_input[1].bytes), 1).at(0).varint, 4u);
}

}  // namespace
}  // namespace shoplens
