// Small TFLite models for tests, written with flatbuffers' builder and
// memplan's schema: tensors (with data, variable, dynamic dims, any type),
// operators (control flow included), several subgraphs, metadata, extra
// fields unknown to the schema. For tests only (formats/ unit tests and
// tests/ end to end).
//
//   formats::testing::TfliteBuilder b;
//   auto& g = b.Subgraph("main");
//   int x = g.Tensor("x", {1, 4}), y = g.Tensor("y", {1, 4});
//   g.Op(tflite_schema::BuiltinOperator_RELU, {x}, {y});
//   g.inputs = {x};
//   g.outputs = {y};
//   std::string bytes = b.Build();
#ifndef MEMPLAN_TFLITE_TESTING_TFLITE_BUILDER_H_
#define MEMPLAN_TFLITE_TESTING_TFLITE_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tflite/schema_generated.h"

namespace memplan::formats::testing {

namespace ts = ::memplan::tflite_schema;

struct TestTensor {
  std::string name;                   // Tensor.name
  std::vector<int32_t> shape;         // Tensor.shape
  int type = ts::TensorType_FLOAT32;  // TensorType, any value
  std::string data;                   // bytes in the file: a constant
  bool variable = false;              // is_variable
  std::vector<int32_t> signature;     // shape_signature, when not empty
  int64_t buffer = -1;                // a raw buffer index, overriding
  bool own_empty_buffer = false;      // an empty buffer of its own, not 0
  std::map<int, uint32_t> extra;      // fields unknown to the schema
  std::string external;               // data kept past the flatbuffer
};

struct TestOp {
  int32_t code = ts::BuiltinOperator_ADD;  // builtin code
  // Tensor indices of the subgraph (-1: an omitted optional input).
  std::vector<int32_t> inputs, outputs, intermediates;
  std::vector<int> subgraphs;  // IF: then, else; WHILE: cond, body; ...
  std::string custom;          // custom_code, for CUSTOM
  int64_t opcode_index = -1;   // a raw index, overriding
};

struct TestSubgraph {
  std::string name;                      // SubGraph.name
  std::vector<TestTensor> tensors;       // in index order
  std::vector<TestOp> ops;               // in execution order
  std::vector<int32_t> inputs, outputs;  // tensor indices

  // Adds a tensor; returns its index.
  int Tensor(std::string tensor_name, std::vector<int32_t> dims,
             int type = ts::TensorType_FLOAT32, std::string data = "") {
    TestTensor t;
    t.name = std::move(tensor_name);
    t.shape = std::move(dims);
    t.type = type;
    t.data = std::move(data);
    tensors.push_back(std::move(t));
    return static_cast<int>(tensors.size()) - 1;
  }
  TestOp& Op(int32_t code, std::vector<int32_t> in, std::vector<int32_t> out,
             std::vector<int> called = {}) {
    TestOp op;
    op.code = code;
    op.inputs = std::move(in);
    op.outputs = std::move(out);
    op.subgraphs = std::move(called);
    ops.push_back(std::move(op));
    return ops.back();
  }
};

class TfliteBuilder {
 public:
  std::vector<TestSubgraph> subgraphs;
  std::vector<std::pair<std::string, std::string>> metadata;  // name, data
  // Metadata entries pointing at an existing buffer index.
  std::vector<std::pair<std::string, uint32_t>> metadata_refs;
  std::string description = "memplan test model";
  bool identifier = true;
  std::map<int, uint32_t> model_extra;  // Model fields unknown to the schema
  std::vector<std::pair<std::string, int>> signature;  // input name, tensor

  TestSubgraph& Subgraph(std::string name) {
    subgraphs.push_back({});
    subgraphs.back().name = std::move(name);
    return subgraphs.back();
  }

  // The model's bytes; data kept past the flatbuffer follows it (from a
  // multiple of 16), the pieces one after another.
  std::string Build() {
    std::string out = BuildFlatbuffer(16);  // placeholder positions
    std::string tail;
    for (const TestSubgraph& g : subgraphs) {
      for (const TestTensor& t : g.tensors) tail += t.external;
    }
    if (tail.empty()) return out;
    const uint64_t start = (out.size() + 15) / 16 * 16;
    std::string final_out = BuildFlatbuffer(start);
    final_out.resize(start, '\0');
    return final_out + tail;
  }

 private:
  std::string BuildFlatbuffer(uint64_t external_start) {
    external_next_ = external_start;
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<ts::Buffer>> buffers = {
        ts::CreateBuffer(fbb)};
    std::vector<flatbuffers::Offset<ts::OperatorCode>> codes;
    std::map<std::pair<int32_t, std::string>, uint32_t> code_index;
    std::vector<flatbuffers::Offset<ts::SubGraph>> graphs;
    for (const TestSubgraph& g : subgraphs) {
      std::vector<flatbuffers::Offset<ts::Tensor>> tensors;
      for (const TestTensor& t : g.tensors) {
        tensors.push_back(AddTensor(fbb, t, &buffers));
      }
      std::vector<flatbuffers::Offset<ts::Operator>> ops;
      for (const TestOp& op : g.ops) {
        auto key = std::make_pair(op.code, op.custom);
        if (!code_index.count(key)) {
          code_index[key] = static_cast<uint32_t>(codes.size());
          codes.push_back(ts::CreateOperatorCode(
              fbb, static_cast<int8_t>(op.code < 127 ? op.code : 127),
              op.custom.empty() ? 0 : fbb.CreateString(op.custom), 1,
              static_cast<ts::BuiltinOperator>(op.code)));
        }
        ops.push_back(AddOp(fbb, op, code_index[key]));
      }
      graphs.push_back(ts::CreateSubGraph(
          fbb, fbb.CreateVector(tensors), fbb.CreateVector(g.inputs),
          fbb.CreateVector(g.outputs), fbb.CreateVector(ops),
          fbb.CreateString(g.name)));
    }
    std::vector<flatbuffers::Offset<ts::Metadata>> meta;
    for (const auto& [name, data] : metadata) {
      fbb.ForceVectorAlignment(data.size(), 1, 16);
      auto vec = fbb.CreateVector(reinterpret_cast<const uint8_t*>(data.data()),
                                  data.size());
      buffers.push_back(ts::CreateBuffer(fbb, vec));
      meta.push_back(
          ts::CreateMetadata(fbb, fbb.CreateString(name),
                             static_cast<uint32_t>(buffers.size() - 1)));
    }
    for (const auto& [name, index] : metadata_refs) {
      meta.push_back(ts::CreateMetadata(fbb, fbb.CreateString(name), index));
    }
    std::vector<flatbuffers::Offset<ts::TensorMap>> sig_inputs;
    for (const auto& [name, tensor] : signature) {
      sig_inputs.push_back(ts::CreateTensorMap(fbb, fbb.CreateString(name),
                                               static_cast<uint32_t>(tensor)));
    }
    std::vector<flatbuffers::Offset<ts::SignatureDef>> sigs;
    if (!signature.empty()) {
      sigs.push_back(ts::CreateSignatureDef(fbb, fbb.CreateVector(sig_inputs),
                                            0, fbb.CreateString("serve"), 0));
    }
    auto codes_v = fbb.CreateVector(codes);
    auto graphs_v = fbb.CreateVector(graphs);
    auto desc = fbb.CreateString(description);
    auto buffers_v = fbb.CreateVector(buffers);
    auto meta_v = meta.empty() ? 0 : fbb.CreateVector(meta);
    auto sigs_v = sigs.empty() ? 0 : fbb.CreateVector(sigs);
    ts::ModelBuilder mb(fbb);
    mb.add_version(3);
    mb.add_operator_codes(codes_v);
    mb.add_subgraphs(graphs_v);
    mb.add_description(desc);
    mb.add_buffers(buffers_v);
    if (!meta.empty()) mb.add_metadata(meta_v);
    if (!sigs.empty()) mb.add_signature_defs(sigs_v);
    for (const auto& [id, value] : model_extra) {
      fbb.AddElement<uint32_t>(flatbuffers::FieldIndexToOffset(
                                   static_cast<flatbuffers::voffset_t>(id)),
                               value, 0);
    }
    auto model = mb.Finish();
    if (identifier) {
      ts::FinishModelBuffer(fbb, model);
    } else {
      fbb.Finish(model);
    }
    return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                       fbb.GetSize());
  }

  flatbuffers::Offset<ts::Tensor> AddTensor(
      flatbuffers::FlatBufferBuilder& fbb, const TestTensor& t,
      std::vector<flatbuffers::Offset<ts::Buffer>>* buffers) {
    uint32_t buffer = 0;
    if (!t.external.empty()) {
      buffers->push_back(
          ts::CreateBuffer(fbb, 0, external_next_, t.external.size()));
      external_next_ += t.external.size();
      buffer = static_cast<uint32_t>(buffers->size() - 1);
    } else if (!t.data.empty() || t.own_empty_buffer) {
      flatbuffers::Offset<flatbuffers::Vector<uint8_t>> vec = 0;
      if (!t.data.empty()) {
        fbb.ForceVectorAlignment(t.data.size(), 1, 16);
        vec = fbb.CreateVector(reinterpret_cast<const uint8_t*>(t.data.data()),
                               t.data.size());
      }
      buffers->push_back(ts::CreateBuffer(fbb, vec));
      buffer = static_cast<uint32_t>(buffers->size() - 1);
    }
    if (t.buffer >= 0) buffer = static_cast<uint32_t>(t.buffer);
    auto shape = fbb.CreateVector(t.shape);
    auto sig = t.signature.empty() ? 0 : fbb.CreateVector(t.signature);
    auto name = fbb.CreateString(t.name);
    ts::TensorBuilder tb(fbb);
    tb.add_shape(shape);
    tb.add_type(static_cast<ts::TensorType>(t.type));
    tb.add_buffer(buffer);
    tb.add_name(name);
    tb.add_is_variable(t.variable);
    if (!t.signature.empty()) tb.add_shape_signature(sig);
    for (const auto& [id, value] : t.extra) {
      fbb.AddElement<uint32_t>(flatbuffers::FieldIndexToOffset(
                                   static_cast<flatbuffers::voffset_t>(id)),
                               value, 0);
    }
    return tb.Finish();
  }

  uint64_t external_next_ = 0;

  static flatbuffers::Offset<ts::Operator> AddOp(
      flatbuffers::FlatBufferBuilder& fbb, const TestOp& op, uint32_t code) {
    ts::BuiltinOptions type = ts::BuiltinOptions_NONE;
    flatbuffers::Offset<void> options = 0;
    const auto& s = op.subgraphs;
    if (op.code == ts::BuiltinOperator_IF && s.size() == 2) {
      type = ts::BuiltinOptions_IfOptions;
      options = ts::CreateIfOptions(fbb, s[0], s[1]).Union();
    } else if (op.code == ts::BuiltinOperator_WHILE && s.size() == 2) {
      type = ts::BuiltinOptions_WhileOptions;
      options = ts::CreateWhileOptions(fbb, s[0], s[1]).Union();
    } else if (op.code == ts::BuiltinOperator_CALL_ONCE && s.size() == 1) {
      type = ts::BuiltinOptions_CallOnceOptions;
      options = ts::CreateCallOnceOptions(fbb, s[0]).Union();
    } else if (op.code == ts::BuiltinOperator_CALL && s.size() == 1) {
      type = ts::BuiltinOptions_CallOptions;
      options = ts::CreateCallOptions(fbb, static_cast<uint32_t>(s[0])).Union();
    }
    return ts::CreateOperator(
        fbb,
        op.opcode_index >= 0 ? static_cast<uint32_t>(op.opcode_index) : code,
        fbb.CreateVector(op.inputs), fbb.CreateVector(op.outputs), type,
        options, 0, 0, 0,
        op.intermediates.empty() ? 0 : fbb.CreateVector(op.intermediates));
  }
};

// A float chain: x[1,4,4,3] -> ADD(x, w const) -> a -> RELU -> y.
inline TfliteBuilder ChainModel() {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int x = g.Tensor("x", {1, 4, 4, 3});
  const int w = g.Tensor("w", {3}, ts::TensorType_FLOAT32, std::string(12, 1));
  const int a = g.Tensor("a", {1, 4, 4, 3});
  const int y = g.Tensor("y", {1, 4, 4, 3});
  g.Op(ts::BuiltinOperator_ADD, {x, w}, {a});
  g.Op(ts::BuiltinOperator_RELU, {a}, {y});
  g.inputs = {x};
  g.outputs = {y};
  return b;
}

// `depth` subgraphs; each but the last runs an IF whose then and else
// branches are both the next one, so TFLM walks the last one 2^(depth-1)
// times. Each subgraph: x -> RELU -> a -> IF(c, a) -> b -> RELU -> y, every
// activation [1, width] floats.
inline TfliteBuilder DoublyNestedIfs(int depth, int width = 8) {
  TfliteBuilder b;
  for (int s = 0; s < depth; ++s) {
    TestSubgraph& g = b.Subgraph("g" + std::to_string(s));
    const int x = g.Tensor("x", {1, width}), a = g.Tensor("a", {1, width});
    const int y = g.Tensor("y", {1, width});
    g.Op(ts::BuiltinOperator_RELU, {x}, {a});
    if (s + 1 < depth) {
      const int c = g.Tensor("c", {1}, ts::TensorType_BOOL);
      const int t = g.Tensor("b", {1, width});
      g.Op(ts::BuiltinOperator_IF, {c, a}, {t}, {s + 1, s + 1});
      g.Op(ts::BuiltinOperator_RELU, {t}, {y});
      g.inputs = {x, c};
    } else {
      g.Op(ts::BuiltinOperator_RELU, {a}, {y});
      g.inputs = {x};
    }
    g.outputs = {y};
  }
  return b;
}

// A model with a dynamic batch and a dynamic length:
// x[-1,-1] -> FULLY_CONNECTED -> y[-1,8] (stored shapes [1,1] and [1,8]).
inline TfliteBuilder DynamicModel() {
  TfliteBuilder b;
  TestSubgraph& g = b.Subgraph("main");
  const int x = g.Tensor("x", {1, 1});
  g.tensors[x].signature = {-1, -1};
  const int y = g.Tensor("y", {1, 8});
  g.tensors[y].signature = {-1, 8};
  g.Op(ts::BuiltinOperator_FULLY_CONNECTED, {x}, {y});
  g.inputs = {x};
  g.outputs = {y};
  return b;
}

// Little-endian int32 words, as an offline plan's buffer holds them.
inline std::string Int32Words(const std::vector<int32_t>& words) {
  std::string out;
  for (int32_t w : words) {
    for (int i = 0; i < 4; ++i) {
      out.push_back(static_cast<char>(static_cast<uint32_t>(w) >> (8 * i)));
    }
  }
  return out;
}

// A Vela-compiled model in miniature: x[1,16,16,8] int8 -> the ethos-u
// custom operator (reading its command stream and weights, both data in
// the file, its scratch and fast scratch tensors of kVelaScratch bytes, no
// data, and x) -> y -> SOFTMAX (on the CPU) -> z. Tensors in index order:
// x, cms, flash, scratch, scratch_fast, y, z. With `vela_plan`, Vela's
// OfflineMemoryAllocation [0, 1, 7, offsets]: both scratch tensors at 0,
// spanning the arena, the feature maps inside it (x and z at 0, y at
// 2048), the data -1.
inline constexpr int32_t kVelaScratch = 8192;
inline const std::vector<int32_t>& VelaOffsets() {
  static const auto* offsets =
      new std::vector<int32_t>{0, -1, -1, 0, 0, 2048, 0};
  return *offsets;
}
inline TfliteBuilder EthosUModel(bool vela_plan) {
  TfliteBuilder b;
  b.description = "Vela Optimised";
  TestSubgraph& g = b.Subgraph("main");
  const int x = g.Tensor("x", {1, 16, 16, 8}, ts::TensorType_INT8);
  const int cms = g.Tensor("main_split_1_command_stream", {96},
                           ts::TensorType_UINT8, std::string(96, 3));
  const int flash = g.Tensor("main_split_1_flash", {512}, ts::TensorType_UINT8,
                             std::string(512, 5));
  const int scratch =
      g.Tensor("main_split_1_scratch", {kVelaScratch}, ts::TensorType_UINT8);
  const int fast = g.Tensor("main_split_1_scratch_fast", {kVelaScratch},
                            ts::TensorType_UINT8);
  const int y = g.Tensor("y", {1, 16, 16, 8}, ts::TensorType_INT8);
  const int z = g.Tensor("z", {1, 16, 16, 8}, ts::TensorType_INT8);
  g.Op(ts::BuiltinOperator_CUSTOM, {cms, flash, scratch, fast, x}, {y}).custom =
      "ethos-u";
  g.Op(ts::BuiltinOperator_SOFTMAX, {y}, {z});
  g.inputs = {x};
  g.outputs = {z};
  if (vela_plan) {
    std::vector<int32_t> words = {0, 1, 7};
    words.insert(words.end(), VelaOffsets().begin(), VelaOffsets().end());
    b.metadata = {{"OfflineMemoryAllocation", Int32Words(words)}};
  }
  return b;
}

// What TFLite Micro reads from a model's offline plan, read the way its
// GetOfflinePlannedOffsets does: every metadata entry named exactly
// "OfflineMemoryAllocation" (the last one wins), its buffer's data as
// little-endian int32 words, word 2 the tensor count, offsets from word 3.
struct DecodedPlan {
  int entries = 0;               // metadata entries of that name
  std::vector<int32_t> words;    // the whole buffer
  int32_t version = 0;           // word 0
  int32_t subgraphs = 0;         // word 1
  int32_t count = 0;             // word 2: N
  std::vector<int32_t> offsets;  // words 3 .. 3 + N - 1
};

inline DecodedPlan DecodeOfflinePlan(const std::string& bytes) {
  DecodedPlan plan;
  const ts::Model* model = ts::GetModel(bytes.data());
  if (model->metadata() == nullptr) return plan;
  for (const ts::Metadata* m : *model->metadata()) {
    if (m->name() == nullptr || m->name()->str() != "OfflineMemoryAllocation") {
      continue;
    }
    ++plan.entries;
    const ts::Buffer* buffer = model->buffers()->Get(m->buffer());
    plan.words.clear();
    for (size_t i = 0; buffer->data() && i + 4 <= buffer->data()->size();
         i += 4) {
      const uint8_t* p = buffer->data()->data() + i;
      plan.words.push_back(static_cast<int32_t>(
          p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24)));
    }
  }
  if (plan.words.size() >= 3) {
    plan.version = plan.words[0];
    plan.subgraphs = plan.words[1];
    plan.count = plan.words[2];
    plan.offsets.assign(plan.words.begin() + 3, plan.words.end());
  }
  return plan;
}

}  // namespace memplan::formats::testing

#endif  // MEMPLAN_TFLITE_TESTING_TFLITE_BUILDER_H_
