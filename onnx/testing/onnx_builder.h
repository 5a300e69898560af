// Test helpers (header only, for the formats/onnx_*_test.cc files): small
// ONNX models built with ONNX's own protobuf types, one call per element,
// the way exporters lay them out.
//
//   OnnxTestModel m(13);
//   m.graph().Input("x", kOnnxFloat, {"batch", "16"});
//   m.graph().Node("Relu", {"x"}, {"y"}, "relu");
//   m.graph().Output("y");
//   ImportOnnx(m.Bytes(), "test.onnx", options);
#ifndef MEMPLAN_ONNX_TESTING_ONNX_BUILDER_H_
#define MEMPLAN_ONNX_TESTING_ONNX_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "onnx/onnx_pb.h"

namespace memplan::formats {

constexpr int kOnnxFloat = ::ONNX_NAMESPACE::TensorProto::FLOAT;
constexpr int kOnnxInt64 = ::ONNX_NAMESPACE::TensorProto::INT64;
constexpr int kOnnxBool = ::ONNX_NAMESPACE::TensorProto::BOOL;

// Sets a tensor type from strings: "4" is a value, "batch" a symbolic dim,
// "?" a dim with neither.
inline void SetOnnxTestShape(::ONNX_NAMESPACE::TypeProto* type, int elem,
                             const std::vector<std::string>& dims) {
  auto* t = type->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    int64_t v = 0;
    if (absl::SimpleAtoi(d, &v)) {
      dim->set_dim_value(v);
    } else if (d != "?") {
      dim->set_dim_param(d);
    }
  }
}

// A float tensor of `dims`, all zeros.
inline ::ONNX_NAMESPACE::TensorProto OnnxFloatTensor(
    const std::vector<int64_t>& dims) {
  ::ONNX_NAMESPACE::TensorProto t;
  t.set_data_type(kOnnxFloat);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_data(0);
  return t;
}

// An int64 tensor holding `values`, of shape [n] (or a scalar).
inline ::ONNX_NAMESPACE::TensorProto OnnxInt64Tensor(
    const std::vector<int64_t>& values, bool scalar = false) {
  ::ONNX_NAMESPACE::TensorProto t;
  t.set_data_type(kOnnxInt64);
  if (!scalar) t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

// Attributes of a node, one call each.
class OnnxTestNode {
 public:
  explicit OnnxTestNode(::ONNX_NAMESPACE::NodeProto* n) : n_(n) {}
  OnnxTestNode& Int(const std::string& name, int64_t v) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OnnxTestNode& Float(const std::string& name, float v) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  OnnxTestNode& Ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  OnnxTestNode& Floats(const std::string& name, const std::vector<float>& v) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
    return *this;
  }
  OnnxTestNode& Str(const std::string& name, const std::string& v) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  OnnxTestNode& Tensor(const std::string& name,
                       const ::ONNX_NAMESPACE::TensorProto& t) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::TENSOR);
    *a->mutable_t() = t;
    return *this;
  }
  // A graph attribute (If branches, Loop and Scan bodies), to fill.
  ::ONNX_NAMESPACE::GraphProto* Graph(const std::string& name) {
    auto* a = Add(name, ::ONNX_NAMESPACE::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
    return a->mutable_g();
  }
  ::ONNX_NAMESPACE::NodeProto* proto() { return n_; }

 private:
  ::ONNX_NAMESPACE::AttributeProto* Add(
      const std::string& name,
      ::ONNX_NAMESPACE::AttributeProto::AttributeType t) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(t);
    return a;
  }
  ::ONNX_NAMESPACE::NodeProto* n_;
};

// Builds a graph (the main graph or a subgraph) one call per element.
class OnnxTestGraph {
 public:
  explicit OnnxTestGraph(::ONNX_NAMESPACE::GraphProto* g) : g_(g) {}

  OnnxTestGraph& Input(const std::string& name, int elem,
                       const std::vector<std::string>& dims) {
    auto* vi = g_->add_input();
    vi->set_name(name);
    SetOnnxTestShape(vi->mutable_type(), elem, dims);
    return *this;
  }
  OnnxTestGraph& Output(const std::string& name) {
    g_->add_output()->set_name(name);
    return *this;
  }
  OnnxTestGraph& Output(const std::string& name, int elem,
                        const std::vector<std::string>& dims) {
    auto* vi = g_->add_output();
    vi->set_name(name);
    SetOnnxTestShape(vi->mutable_type(), elem, dims);
    return *this;
  }
  // An int64 initializer holding `values` (shape [n]).
  OnnxTestGraph& Int64Initializer(const std::string& name,
                                  const std::vector<int64_t>& values) {
    auto* t = g_->add_initializer();
    *t = OnnxInt64Tensor(values);
    t->set_name(name);
    return *this;
  }
  // A float initializer of zeros; `external` puts its data in a file that
  // does not exist.
  OnnxTestGraph& FloatInitializer(const std::string& name,
                                  const std::vector<int64_t>& dims,
                                  bool external = false) {
    auto* t = g_->add_initializer();
    *t = OnnxFloatTensor(dims);
    t->set_name(name);
    if (external) {
      t->clear_float_data();
      t->set_data_location(::ONNX_NAMESPACE::TensorProto::EXTERNAL);
      auto* e = t->add_external_data();
      e->set_key("location");
      e->set_value("weights_that_do_not_exist.bin");
    }
    return *this;
  }
  OnnxTestNode Node(const std::string& op,
                    const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs,
                    const std::string& name = "") {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return OnnxTestNode(n);
  }
  OnnxTestGraph& Add(const std::string& op,
                     const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs,
                     const std::string& name = "") {
    Node(op, inputs, outputs, name);
    return *this;
  }
  // A Constant node holding int64 `values` ([n], or a scalar), as torch.onnx
  // emits for shape arithmetic.
  OnnxTestGraph& Ints(const std::string& output,
                      const std::vector<int64_t>& values, bool scalar = false) {
    Node("Constant", {}, {output}, output)
        .Tensor("value", OnnxInt64Tensor(values, scalar));
    return *this;
  }
  ::ONNX_NAMESPACE::GraphProto* proto() { return g_; }

 private:
  ::ONNX_NAMESPACE::GraphProto* g_;
};

// A model importing `opset` of the default domain.
class OnnxTestModel {
 public:
  explicit OnnxTestModel(int opset = 13) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }
  OnnxTestGraph graph() { return OnnxTestGraph(model_.mutable_graph()); }
  ::ONNX_NAMESPACE::ModelProto& proto() { return model_; }
  const ::ONNX_NAMESPACE::ModelProto& proto() const { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  ::ONNX_NAMESPACE::ModelProto model_;
};

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_TESTING_ONNX_BUILDER_H_
