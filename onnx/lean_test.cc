// LeanOnnxModel on models built here: the large tensors the sanitizer
// clears lose their data at the wire level, everything else stays, and the
// lean bytes give the import what the original gives (the sanitized models
// are equal byte for byte, or fail alike), malformed bytes included.
#include "onnx/lean.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/import.h"
#include "onnx/inspect.h"
#include "onnx/internal/model_reading.h"
#include "onnx/onnx_pb.h"
#include "onnx/testing/onnx_builder.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

using ::testing::ElementsAreArray;
using ::testing::Lt;

// The lean form of `bytes`; the status is OK for every input.
std::string Lean(const std::string& bytes) {
  absl::StatusOr<std::string> lean = LeanOnnxModel(bytes);
  EXPECT_TRUE(lean.ok()) << lean.status();
  return lean.ok() ? *lean : std::string();
}

// A float tensor of `dims` whose data is raw_data (bytes 0, 1, 2...).
onnx::TensorProto RawFloats(const std::string& name,
                            const std::vector<int64_t>& dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kOnnxFloat);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i);
  t.set_raw_data(raw);
  return t;
}

// A float tensor of `dims` whose data is float_data.
onnx::TensorProto Floats(const std::string& name,
                         const std::vector<int64_t>& dims) {
  onnx::TensorProto t = OnnxFloatTensor(dims);
  t.set_name(name);
  for (int i = 0; i < t.float_data_size(); ++i) t.set_float_data(i, 0.5f * i);
  return t;
}

// A model with data everywhere the sanitizer looks: initializers large and
// small (raw_data, float_data, int64_data), a Constant node's `value`, and
// an If whose branches hold a Constant and an initializer of their own.
// It imports, with `batch` set.
OnnxTestModel RichModel() {
  OnnxTestModel m(13);
  OnnxTestGraph g = m.graph();
  g.Input("x", kOnnxFloat, {"64", "100"}).Input("cond", kOnnxBool, {});
  auto* init = g.proto()->mutable_initializer();
  *init->Add() = RawFloats("big_raw", {64, 100});
  *init->Add() = Floats("big_floats", {64, 100});
  *init->Add() = RawFloats("edge_4096", {4096});
  *init->Add() = RawFloats("edge_4097", {4097});
  g.Int64Initializer("flat", {6400});
  g.Add("Add", {"x", "big_raw"}, {"a"}, "add_raw")
      .Add("Add", {"a", "big_floats"}, {"b"}, "add_floats");
  g.Node("Constant", {}, {"c"}, "const")
      .Tensor("value", RawFloats("", {64, 100}));
  g.Add("Add", {"b", "c"}, {"d"}, "add_const");
  OnnxTestNode node = g.Node("If", {"cond"}, {"z"}, "if");
  OnnxTestGraph then_branch(node.Graph("then_branch"));
  then_branch.Node("Constant", {}, {"then_c"}, "then_const")
      .Tensor("value", RawFloats("", {64, 100}));
  then_branch.Add("Add", {"d", "then_c"}, {"then_out"}, "then_add")
      .Output("then_out");
  OnnxTestGraph else_branch(node.Graph("else_branch"));
  *else_branch.proto()->add_initializer() = RawFloats("else_w", {64, 100});
  else_branch.Add("Mul", {"d", "else_w"}, {"else_out"}, "else_mul")
      .Output("else_out");
  g.Add("Reshape", {"z", "flat"}, {"y"}, "reshape").Output("y");
  return m;
}

// `bytes` parsed and sanitized as the import does; the status of each step
// and, when both succeed, the sanitized model's bytes.
struct Sanitized {
  bool parses = false;
  absl::Status status;
  std::string bytes;
};

Sanitized Sanitize(const std::string& bytes) {
  Sanitized s;
  onnx::ModelProto model;
  s.parses = model.ParseFromString(bytes);
  if (!s.parses) return s;
  s.status = internal::SanitizeTensors(&model, "m.onnx");
  if (s.status.ok()) s.bytes = model.SerializeAsString();
  return s;
}

// The lean bytes give what the original gives after protobuf's parse and
// the sanitizer: both fail to parse, or fail sanitizing alike, or give the
// same model byte for byte. Unchanged bytes pass trivially; returns whether
// the bytes changed and parse.
bool ExpectSanitizedAlike(const std::string& original,
                          const std::string& lean) {
  if (lean == original) return false;
  const Sanitized a = Sanitize(original);
  const Sanitized b = Sanitize(lean);
  EXPECT_EQ(a.parses, b.parses);
  EXPECT_EQ(a.status, b.status);
  EXPECT_TRUE(a.bytes == b.bytes) << "sanitized models differ";
  return a.parses;
}

// The tensor named `name` among a graph's initializers.
const onnx::TensorProto* Initializer(const onnx::GraphProto& g,
                                     const std::string& name) {
  for (const onnx::TensorProto& t : g.initializer()) {
    if (t.name() == name) return &t;
  }
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

// The node named `name`.
const onnx::NodeProto& FindNode(const onnx::GraphProto& g,
                                const std::string& name) {
  for (const onnx::NodeProto& n : g.node()) {
    if (n.name() == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return g.node(0);
}

// The `value` of the Constant node named `name`.
const onnx::TensorProto* ConstantValue(const onnx::GraphProto& g,
                                       const std::string& name) {
  return &FindNode(g, name).attribute(0).t();
}

// A tensor that kept nothing of its data, and is marked external.
void ExpectStripped(const onnx::TensorProto* t,
                    const std::vector<int64_t>& dims) {
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->has_raw_data());
  EXPECT_EQ(t->float_data_size(), 0);
  EXPECT_EQ(t->data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_THAT(t->dims(), ElementsAreArray(dims));
  EXPECT_EQ(t->data_type(), kOnnxFloat);
}

TEST(LeanOnnxModelTest, StripsTheLargeTensorsTheSanitizerClears) {
  const OnnxTestModel m = RichModel();
  const std::string bytes = m.Bytes();
  const std::string lean = Lean(bytes);
  EXPECT_LT(lean.size(), bytes.size() - 5 * 6400 * 4);
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(lean));
  const onnx::GraphProto& g = parsed.graph();
  ExpectStripped(Initializer(g, "big_raw"), {64, 100});
  ExpectStripped(Initializer(g, "big_floats"), {64, 100});
  ExpectStripped(Initializer(g, "edge_4097"), {4097});
  ExpectStripped(ConstantValue(g, "const"), {64, 100});
  const onnx::AttributeProto& then_branch = FindNode(g, "if").attribute(0);
  const onnx::AttributeProto& else_branch = FindNode(g, "if").attribute(1);
  ASSERT_EQ(then_branch.name(), "then_branch");
  ExpectStripped(ConstantValue(then_branch.g(), "then_const"), {64, 100});
  ExpectStripped(Initializer(else_branch.g(), "else_w"), {64, 100});
  // At most kMaxOnnxContent elements: the data stays, byte for byte.
  const onnx::GraphProto& before = m.proto().graph();
  EXPECT_EQ(Initializer(g, "edge_4096")->raw_data(),
            Initializer(before, "edge_4096")->raw_data());
  EXPECT_FALSE(Initializer(g, "edge_4096")->has_data_location());
  EXPECT_THAT(Initializer(g, "flat")->int64_data(), ElementsAreArray({6400}));
  // Everything else as it was: the lean model is the sanitized one.
  ExpectSanitizedAlike(bytes, lean);
  onnx::ModelProto sanitized = m.proto();
  ASSERT_TRUE(internal::SanitizeTensors(&sanitized, "m.onnx").ok());
  EXPECT_TRUE(sanitized.SerializeAsString() == [&] {
    onnx::ModelProto p;
    p.ParseFromString(lean);
    EXPECT_TRUE(internal::SanitizeTensors(&p, "m.onnx").ok());
    return p.SerializeAsString();
  }());
}

TEST(LeanOnnxModelTest, ImportsAndInspectsAsTheOriginal) {
  const std::string bytes = RichModel().Bytes();
  const std::string lean = Lean(bytes);
  ASSERT_NE(lean, bytes);
  ModelOptions options;
  absl::StatusOr<ImportedModel> a = ImportOnnx(bytes, "m.onnx", options);
  absl::StatusOr<ImportedModel> b = ImportOnnx(lean, "m.onnx", options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->graph->SerializeAsString(), b->graph->SerializeAsString());
  EXPECT_EQ(a->warnings, b->warnings);
  EXPECT_EQ(a->stats.tensors, b->stats.tensors);
  EXPECT_EQ(a->stats.weights, b->stats.weights);
  // The weights are still counted and sized from their dims.
  int64_t weights = 0;
  for (const v1::Tensor& t : b->graph->tensors()) {
    if (t.constant()) weights += t.size_bytes();
  }
  EXPECT_GE(weights, 5 * 6400 * 4);
  absl::StatusOr<ModelSummary> sa = SummarizeOnnx(bytes, "m.onnx");
  absl::StatusOr<ModelSummary> sb = SummarizeOnnx(lean, "m.onnx");
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->weight_bytes, sb->weight_bytes);
  EXPECT_EQ(sa->ops, sb->ops);
  ASSERT_EQ(sa->outputs.size(), sb->outputs.size());
  EXPECT_EQ(sa->outputs[0].dims, sb->outputs[0].dims);
}

TEST(LeanOnnxModelTest, TensorListsAndEveryDataField) {
  OnnxTestModel m;
  OnnxTestGraph g = m.graph();
  g.Input("x", kOnnxFloat, {"4"});
  onnx::AttributeProto* a =
      g.Node("Custom", {"x"}, {"y"}, "custom").proto()->add_attribute();
  a->set_name("tables");
  a->set_type(onnx::AttributeProto::TENSORS);
  *a->add_tensors() = RawFloats("t0", {5000});
  onnx::TensorProto* ints = a->add_tensors();
  ints->set_data_type(onnx::TensorProto::INT64);
  ints->add_dims(5000);
  for (int i = 0; i < 5000; ++i) ints->add_int64_data(i * 1000);
  onnx::TensorProto* doubles = a->add_tensors();
  doubles->set_data_type(onnx::TensorProto::DOUBLE);
  doubles->add_dims(50);
  doubles->add_dims(100);
  for (int i = 0; i < 5000; ++i) doubles->add_double_data(i);
  onnx::TensorProto* strings = a->add_tensors();
  strings->set_data_type(onnx::TensorProto::STRING);
  strings->add_dims(4097);
  for (int i = 0; i < 4097; ++i) strings->add_string_data("s");
  onnx::TensorProto* i32 = a->add_tensors();
  i32->set_data_type(onnx::TensorProto::INT32);
  i32->add_dims(4097);
  for (int i = 0; i < 4097; ++i) i32->add_int32_data(-i);
  *a->add_tensors() = RawFloats("small", {16});
  const std::string bytes = m.Bytes();
  const std::string lean = Lean(bytes);
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(lean));
  const onnx::AttributeProto& tables = parsed.graph().node(0).attribute(0);
  ASSERT_EQ(tables.tensors_size(), 6);
  for (int i = 0; i < 5; ++i) {
    const onnx::TensorProto& t = tables.tensors(i);
    EXPECT_EQ(t.data_location(), onnx::TensorProto::EXTERNAL) << i;
    EXPECT_FALSE(t.has_raw_data());
    EXPECT_EQ(t.int64_data_size() + t.double_data_size() +
                  t.string_data_size() + t.int32_data_size(),
              0);
  }
  EXPECT_EQ(tables.tensors(5).raw_data().size(), 64u);
  EXPECT_LT(lean.size(), 1000u);
  ExpectSanitizedAlike(bytes, lean);
}

// Bytes of a varint, a tag and length-delimited field, for hand-made wire
// forms protobuf itself never writes.
std::string Varint(uint64_t v) {
  std::string s;
  do {
    s += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  return s;
}
std::string Tag(int field, int wire_type) {
  return Varint(static_cast<uint64_t>(field) << 3 | wire_type);
}
std::string Bytes(int field, const std::string& content) {
  return Tag(field, 2) + Varint(content.size()) + content;
}

// A model whose one initializer is the given TensorProto wire form.
std::string ModelWithTensor(const std::string& tensor) {
  OnnxTestModel m;
  m.graph().Input("x", kOnnxFloat, {"4"}).Add("Relu", {"x"}, {"y"}, "relu");
  m.graph().Output("y");
  return m.Bytes() +
         Bytes(onnx::ModelProto::kGraphFieldNumber, Bytes(5, tensor));
}

TEST(LeanOnnxModelTest, DataFieldsOneByOneAndRepeatedScalarsAsProtobufReads) {
  // float_data unpacked (one fixed32 per element), dims packed and not,
  // data_type twice (the last counts), data_location DEFAULT written.
  std::string t = Bytes(1, Varint(50) + Varint(10)) + Tag(1, 0) + Varint(10) +
                  Tag(2, 0) + Varint(7) + Tag(2, 0) + Varint(1) + Tag(14, 0) +
                  Varint(0) + Tag(8, 2) + Varint(1) + "w";
  for (int i = 0; i < 5000; ++i) t += Tag(4, 5) + std::string(4, '\1');
  const std::string bytes = ModelWithTensor(t);
  const std::string lean = Lean(bytes);
  EXPECT_LT(lean.size(), 1000u);
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(lean));
  ExpectStripped(Initializer(parsed.graph(), "w"), {50, 10, 10});
  ExpectSanitizedAlike(bytes, lean);
}

TEST(LeanOnnxModelTest, KeepsWhatTheSanitizerKeepsOrRejects) {
  onnx::TensorProto external = RawFloats("external", {5000});
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::TensorProto negative = RawFloats("negative", {5000});
  negative.add_dims(-1);
  onnx::TensorProto overflow = RawFloats("overflow", {5000});
  overflow.add_dims(int64_t{1} << 62);
  onnx::TensorProto wrong_size = RawFloats("wrong_size", {5000});
  wrong_size.add_dims(2);
  onnx::TensorProto both = RawFloats("both", {5000});
  both.add_float_data(1);
  onnx::TensorProto no_data = RawFloats("no_data", {5000});
  no_data.clear_raw_data();
  for (const onnx::TensorProto& t :
       {external, negative, overflow, wrong_size, both, no_data}) {
    const std::string bytes = ModelWithTensor(t.SerializeAsString());
    EXPECT_EQ(Lean(bytes), bytes) << t.name();
  }
  // The sanitizer's error, as without the lean form.
  absl::StatusOr<ImportedModel> in =
      ImportOnnx(ModelWithTensor(wrong_size.SerializeAsString()), "m.onnx", {});
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(in.status().message()),
              ::testing::HasSubstr("tensor 'wrong_size' holds 20000 bytes"));
  // An unknown data_location (protobuf keeps it as an unknown field), fields
  // of a wire type protobuf does not read into the tensor, packed floats
  // that are not a whole number of floats, a length not in its shortest
  // form: kept as they are.
  const std::string raw = Bytes(9, std::string(20000, '\0'));
  const std::string header = Tag(1, 0) + Varint(5000) + Tag(2, 0) + Varint(1);
  for (const std::string& odd :
       {header + raw + Tag(14, 0) + Varint(7),
        header + raw + Bytes(14, Varint(1)), header + raw + Tag(4, 0) + "\1",
        header + Bytes(4, std::string(20001, '\0')),
        header + Tag(9, 2) + std::string("\xa0\x9c\x81\x00", 4) +
            std::string(20000, '\0')}) {
    const std::string bytes = ModelWithTensor(odd);
    EXPECT_EQ(Lean(bytes), bytes);
  }
}

TEST(LeanOnnxModelTest, RepeatedTensorAttributesMergeAndStayAsTheyAre) {
  // Two `t` in one attribute merge into one tensor: 5000 x 2 elements with
  // 20000 bytes, which the sanitizer rejects. Each alone would pass.
  onnx::AttributeProto first;
  first.set_name("value");
  first.set_type(onnx::AttributeProto::TENSOR);
  *first.mutable_t() = RawFloats("merged", {5000});
  onnx::AttributeProto second;
  second.mutable_t()->add_dims(2);
  OnnxTestModel m;
  m.graph().Input("x", kOnnxFloat, {"4"});
  onnx::NodeProto node;
  node.set_op_type("Constant");
  node.add_output("c");
  const std::string node_bytes =
      node.SerializeAsString() +
      Bytes(onnx::NodeProto::kAttributeFieldNumber,
            first.SerializeAsString() + second.SerializeAsString());
  const std::string bytes =
      m.Bytes() + Bytes(onnx::ModelProto::kGraphFieldNumber,
                        Bytes(onnx::GraphProto::kNodeFieldNumber, node_bytes));
  const std::string lean = Lean(bytes);
  EXPECT_EQ(lean, bytes);
  const Sanitized s = Sanitize(lean);
  ASSERT_TRUE(s.parses);
  EXPECT_THAT(std::string(s.status.message()),
              ::testing::HasSubstr("tensor 'merged' holds 20000 bytes"));
}

TEST(LeanOnnxModelTest, RepeatedGraphsMergeAsTheirLeanForms) {
  // ModelProto.graph twice: protobuf merges them, the initializers of both
  // kept; each lean alone gives the lean merge.
  OnnxTestModel m;
  m.graph().Input("x", kOnnxFloat, {"4"}).Add("Relu", {"x"}, {"y"}, "relu");
  *m.proto().mutable_graph()->add_initializer() = RawFloats("w1", {5000});
  onnx::GraphProto second;
  *second.add_initializer() = RawFloats("w2", {5000});
  const std::string bytes =
      m.Bytes() +
      Bytes(onnx::ModelProto::kGraphFieldNumber, second.SerializeAsString());
  const std::string lean = Lean(bytes);
  EXPECT_LT(lean.size(), 1000u);
  ExpectSanitizedAlike(bytes, lean);
}

TEST(LeanOnnxModelTest, DeepNestingIsCopiedBeyondItsLimit) {
  // Subgraphs nested 25 deep (77 messages, protobuf reads 100): beyond 64
  // levels, as it is.
  onnx::GraphProto inner;
  *inner.add_initializer() = RawFloats("deep", {5000});
  for (int i = 0; i < 25; ++i) {
    onnx::GraphProto outer;
    onnx::NodeProto* n = outer.add_node();
    n->set_op_type("If");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("then_branch");
    *a->mutable_g() = inner;
    inner = outer;
  }
  *inner.add_initializer() = RawFloats("shallow", {5000});
  onnx::ModelProto model;
  *model.mutable_graph() = inner;
  const std::string bytes = model.SerializeAsString();
  const std::string lean = Lean(bytes);
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(lean));
  EXPECT_EQ(parsed.graph().initializer(0).data_location(),
            onnx::TensorProto::EXTERNAL);
  EXPECT_GT(lean.size(), 20000u);  // the deepest tensor kept its data
  ExpectSanitizedAlike(bytes, lean);
}

TEST(LeanOnnxModelTest, TruncatedAndGarbageBytes) {
  const std::string bytes = RichModel().Bytes();
  for (size_t n = 0; n < bytes.size(); n += n < 4096 ? 1 : 61) {
    const std::string cut = bytes.substr(0, n);
    ExpectSanitizedAlike(cut, Lean(cut));
    if (HasFailure()) return;
  }
  std::mt19937 rng(29);
  for (int i = 0; i < 300; ++i) {
    std::string garbage(rng() % 2000, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    ExpectSanitizedAlike(garbage, Lean(garbage));
  }
  EXPECT_EQ(Lean(""), "");
  EXPECT_EQ(Lean("\x3a\xff\xff\xff\xff\x0f"), "\x3a\xff\xff\xff\xff\x0f");
}

TEST(LeanOnnxModelTest, RandomMutationsImportAlike) {
  // Mutations of the wire form: bytes changed, dropped or inserted, most
  // of them in the graph structure (the data is most of the bytes).
  OnnxTestModel m = RichModel();
  const std::string bytes = m.Bytes();
  std::mt19937 rng(2029);
  ModelOptions options;
  int changed = 0, imported = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string mutant = bytes;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
      size_t at = rng() % mutant.size();
      if (rng() % 2 == 0) at %= 2000;  // the header and first tensors
      switch (rng() % 3) {
        case 0:
          mutant[at] = static_cast<char>(rng());
          break;
        case 1:
          mutant.erase(at, 1);
          break;
        default:
          mutant.insert(at, 1, static_cast<char>(rng()));
      }
    }
    const std::string lean = Lean(mutant);
    changed += ExpectSanitizedAlike(mutant, lean) ? 1 : 0;
    if (HasFailure()) return;
    if (i % 10 == 0) {
      absl::StatusOr<ImportedModel> a = ImportOnnx(mutant, "m.onnx", options);
      absl::StatusOr<ImportedModel> b = ImportOnnx(lean, "m.onnx", options);
      ASSERT_EQ(a.status(), b.status()) << i;
      if (a.ok()) {
        ++imported;
        EXPECT_EQ(a->graph->SerializeAsString(), b->graph->SerializeAsString());
      }
    }
  }
  EXPECT_GT(changed, 150);  // mutants that parse, made lean
  EXPECT_GT(imported, 0);
}

TEST(LeanOnnxModelTest, HundredMegabytesOfWeightsLeaveKilobytes) {
  const std::string bytes = [] {
    OnnxTestModel m;
    OnnxTestGraph g = m.graph();
    g.Input("x", kOnnxFloat, {"1024", "1024"});
    std::string x = "x";
    for (int i = 0; i < 25; ++i) {  // 25 x 4 MiB
      const std::string w = "w" + std::to_string(i);
      const std::string y = "y" + std::to_string(i);
      *g.proto()->add_initializer() = RawFloats(w, {1024, 1024});
      g.Add("MatMul", {x, w}, {y}, "matmul" + std::to_string(i));
      x = y;
    }
    g.Output(x);
    return m.Bytes();
  }();
  ASSERT_GT(bytes.size(), 100u << 20);
  const std::string lean = Lean(bytes);
  EXPECT_THAT(lean.size(), Lt(100u << 10));
  absl::StatusOr<ImportedModel> in = ImportOnnx(bytes, "big.onnx", {});
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<ImportedModel> lean_in = ImportOnnx(lean, "big.onnx", {});
  ASSERT_TRUE(lean_in.ok()) << lean_in.status();
  EXPECT_EQ(in->graph->SerializeAsString(),
            lean_in->graph->SerializeAsString());
}

}  // namespace
}  // namespace memplan::formats
