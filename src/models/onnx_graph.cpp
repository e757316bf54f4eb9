// The ONNX graph builder and the protobuf wire format of the messages it writes (onnx.proto's
// field numbers are noted where each message is written).
#include "shoplens/models/onnx_graph.h"

#include "shoplens/core/errors.h"
#include "shoplens/core/protobuf_wire.h"

namespace shoplens::onnx {
namespace {

using Writer = protobuf::MessageWriter;

std::string attribute_bytes(const Attribute& a) {
  // AttributeProto: name 1, f 2, i 3, s 4, ints 8, type 20 (FLOAT 1, INT 2, STRING 3, INTS 7).
  Writer w;
  w.bytes_field(1, a.name);
  switch (a.kind) {
    case Attribute::Kind::kFloat:
      w.float_field(2, a.f);
      w.int_field(20, 1);
      break;
    case Attribute::Kind::kInt:
      w.int_field(3, a.i);
      w.int_field(20, 2);
      break;
    case Attribute::Kind::kString:
      w.bytes_field(4, a.s);
      w.int_field(20, 3);
      break;
    case Attribute::Kind::kInts:
      w.packed_ints(8, a.ints);
      w.int_field(20, 7);
      break;
  }
  return w.bytes();
}

std::string node_bytes(const Node& n) {
  // NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
  Writer w;
  for (const auto& i : n.inputs) w.bytes_field(1, i);
  for (const auto& o : n.outputs) w.bytes_field(2, o);
  w.bytes_field(3, n.name);
  w.bytes_field(4, n.op);
  for (const auto& a : n.attributes) w.bytes_field(5, attribute_bytes(a));
  return w.bytes();
}

std::string value_info_bytes(const ValueInfo& v) {
  // ValueInfoProto: name 1, type 2. TypeProto: tensor_type 1. TypeProto.Tensor: elem_type 1,
  // shape 2. TensorShapeProto: dim 1. Dimension: dim_value 1, dim_param 2.
  Writer shape;
  for (const auto& d : v.dims) {
    Writer dim;
    if (d.symbol.empty())
      dim.int_field(1, d.value);
    else
      dim.bytes_field(2, d.symbol);
    shape.bytes_field(1, dim.bytes());
  }
  Writer tensor;
  tensor.int_field(1, static_cast<int>(v.type));
  tensor.bytes_field(2, shape.bytes());
  Writer type;
  type.bytes_field(1, tensor.bytes());
  Writer w;
  w.bytes_field(1, v.name);
  w.bytes_field(2, type.bytes());
  return w.bytes();
}

std::string tensor_bytes(const Initializer& t) {
  // TensorProto: dims 1, data_type 2, name 8, raw_data 9.
  Writer w;
  if (!t.dims.empty()) w.packed_ints(1, t.dims);
  w.int_field(2, static_cast<int>(t.type));
  w.bytes_field(8, t.name);
  w.bytes_field(9, t.raw);
  return w.bytes();
}

std::string graph_bytes(const Graph& g) {
  // GraphProto: node 1, name 2, initializer 5, input 11, output 12.
  Writer w;
  for (const auto& n : g.nodes()) w.bytes_field(1, node_bytes(n));
  w.bytes_field(2, g.name());
  for (const auto& t : g.initializers()) w.bytes_field(5, tensor_bytes(t));
  for (const auto& v : g.inputs()) w.bytes_field(11, value_info_bytes(v));
  for (const auto& v : g.outputs()) w.bytes_field(12, value_info_bytes(v));
  return w.bytes();
}

std::int64_t element_count(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

}  // namespace

Attribute attr(const std::string& name, std::int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.name = name;
  a.i = value;
  return a;
}
Attribute attr(const std::string& name, int value) { return attr(name, static_cast<std::int64_t>(value)); }
Attribute attr_f(const std::string& name, float value) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.name = name;
  a.f = value;
  return a;
}
Attribute attr(const std::string& name, std::vector<std::int64_t> values) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.name = name;
  a.ints = std::move(values);
  return a;
}
Attribute attr(const std::string& name, const std::string& value) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.name = name;
  a.s = value;
  return a;
}

std::string Graph::unique(const std::string& base) {
  const int n = used_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

void Graph::add_input(const std::string& name, DataType type, std::vector<Dim> dims) {
  inputs_.push_back({unique(name), type, std::move(dims)});
}

void Graph::add_output(const std::string& name, DataType type, std::vector<Dim> dims) {
  outputs_.push_back({name, type, std::move(dims)});
}

std::string Graph::add_floats(const std::string& name, std::vector<std::int64_t> dims, const float* data) {
  Initializer t{unique(name), DataType::kFloat, std::move(dims), ""};
  t.raw.assign(reinterpret_cast<const char*>(data), static_cast<std::size_t>(element_count(t.dims)) * sizeof(float));
  initializers_.push_back(std::move(t));
  return initializers_.back().name;
}

std::string Graph::add_int64s(const std::string& name, std::vector<std::int64_t> dims,
                              const std::vector<std::int64_t>& values) {
  if (element_count(dims) != static_cast<std::int64_t>(values.size()))
    throw Error("onnx: initializer " + name + " has " + std::to_string(values.size()) + " values for its shape");
  Initializer t{unique(name), DataType::kInt64, std::move(dims), ""};
  t.raw.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(std::int64_t));
  initializers_.push_back(std::move(t));
  return initializers_.back().name;
}

std::string Graph::scalar(float value) { return add_floats("const", {}, &value); }

std::string Graph::int64s(const std::vector<std::int64_t>& values) {
  return add_int64s("const_i64", {static_cast<std::int64_t>(values.size())}, values);
}

std::string Graph::node(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attributes,
                        const std::string& output) {
  std::string out = output.empty() ? unique(op) : output;
  if (!output.empty()) used_[output]++;
  nodes_.push_back({op, std::move(inputs), {out}, std::move(attributes), unique("n_" + op)});
  return out;
}

std::vector<std::string> Graph::node_outputs(const std::string& op, std::vector<std::string> inputs, int outputs,
                                             std::vector<Attribute> attributes) {
  std::vector<std::string> names;
  names.reserve(outputs);
  for (int i = 0; i < outputs; ++i) names.push_back(unique(op));
  nodes_.push_back({op, std::move(inputs), names, std::move(attributes), unique("n_" + op)});
  return names;
}

std::string serialize(const Graph& graph, const ModelInfo& info) {
  // ModelProto: ir_version 1, producer_name 2, producer_version 3, doc_string 6, graph 7,
  // opset_import 8 (OperatorSetIdProto: domain 1, version 2), metadata_props 14 (key 1, value 2).
  Writer w;
  w.int_field(1, kIrVersion);
  w.bytes_field(2, info.producer_name);
  w.bytes_field(3, info.producer_version);
  if (!info.doc.empty()) w.bytes_field(6, info.doc);
  w.bytes_field(7, graph_bytes(graph));
  Writer opset;
  opset.bytes_field(1, "");
  opset.int_field(2, kOpsetVersion);
  w.bytes_field(8, opset.bytes());
  for (const auto& [key, value] : info.metadata) {
    Writer entry;
    entry.bytes_field(1, key);
    entry.bytes_field(2, value);
    w.bytes_field(14, entry.bytes());
  }
  return w.bytes();
}

}  // namespace shoplens::onnx
