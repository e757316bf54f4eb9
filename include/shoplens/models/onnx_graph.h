// A small ONNX graph builder and serializer (no torch, no protobuf library): the model emitters
// (src/models, Classifier::emit_onnx) add inputs, weights and nodes; serialize() writes a standard
// ModelProto (docs/DEPLOYING.md).
//
// Why a hand-written protobuf encoder instead of Debian's libonnx-dev + libprotobuf: pip torch's
// libtorch_cpu carries its own copy of protobuf and of ONNX's generated messages (onnx_torch::),
// and Debian's LibTorch links Debian's libprotobuf, so linking the generated onnx.pb.cc into both
// builds risks duplicate descriptor registration and mismatched protobuf runtimes at load time.
// ShopLens only ever writes eight message types, all with scalar, string, packed and nested
// fields: the wire format for those is a hundred lines, has no version coupling, and the tests
// hold every written file against onnx.checker (full_check) and ONNX Runtime.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shoplens::onnx {

// TensorProto.DataType values ShopLens emits.
enum class DataType : int { kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9 };

constexpr int kOpsetVersion = 17;  // LayerNormalization is an ONNX operator from 17 on
constexpr int kIrVersion = 8;      // the IR version of opset 17

// One dimension of a graph input or output: a fixed size, or a named symbolic one ("batch").
struct Dim {
  std::int64_t value = 0;
  std::string symbol;  // non-empty: symbolic, value ignored
};
inline Dim fixed(std::int64_t value) { return {value, ""}; }
inline Dim symbolic(const std::string& name) { return {0, name}; }

struct Attribute {
  enum class Kind { kFloat, kInt, kInts, kString } kind = Kind::kInt;
  std::string name;
  float f = 0;
  std::int64_t i = 0;
  std::vector<std::int64_t> ints;
  std::string s;
};
Attribute attr(const std::string& name, std::int64_t value);
Attribute attr(const std::string& name, int value);
Attribute attr_f(const std::string& name, float value);
Attribute attr(const std::string& name, std::vector<std::int64_t> values);
Attribute attr(const std::string& name, const std::string& value);

struct ValueInfo {
  std::string name;
  DataType type = DataType::kFloat;
  std::vector<Dim> dims;
};

struct Initializer {
  std::string name;
  DataType type = DataType::kFloat;
  std::vector<std::int64_t> dims;
  std::string raw;  // little-endian element bytes (TensorProto.raw_data)
};

struct Node {
  std::string op;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;
  std::string name;
};

class Graph {
 public:
  explicit Graph(std::string name) : name_(std::move(name)) {}

  void add_input(const std::string& name, DataType type, std::vector<Dim> dims);
  void add_output(const std::string& name, DataType type, std::vector<Dim> dims);

  // Weights and constants; each returns its name, made unique when `name` is taken.
  std::string add_floats(const std::string& name, std::vector<std::int64_t> dims, const float* data);
  std::string add_int64s(const std::string& name, std::vector<std::int64_t> dims,
                         const std::vector<std::int64_t>& values);
  std::string scalar(float value);                              // a 0-d float constant
  std::string int64s(const std::vector<std::int64_t>& values);  // a 1-d int64 constant

  // Adds a node and returns its (first) output's name, `op`-based and unique unless `output` is given.
  std::string node(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attributes = {},
                   const std::string& output = "");
  // A node with several outputs, named after `op`.
  std::vector<std::string> node_outputs(const std::string& op, std::vector<std::string> inputs, int outputs,
                                        std::vector<Attribute> attributes = {});

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  const std::vector<Initializer>& initializers() const { return initializers_; }
  const std::string& name() const { return name_; }

 private:
  std::string unique(const std::string& base);
  std::string name_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<Initializer> initializers_;
  std::vector<Node> nodes_;
  std::map<std::string, int> used_;
};

struct ModelInfo {
  std::string producer_name = "shoplens";
  std::string producer_version;
  std::string doc;
  std::map<std::string, std::string> metadata;  // ModelProto.metadata_props
};

// The ModelProto's bytes (ir_version kIrVersion, opset kOpsetVersion of the default domain).
std::string serialize(const Graph& graph, const ModelInfo& info);

}  // namespace shoplens::onnx
