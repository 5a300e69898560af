// A TFLite flatbuffer that is safe to walk: checked by the flatbuffers
// verifier, then every index it holds (buffers, tensors, operator codes,
// subgraphs, metadata, signature defs) checked against what it indexes, and
// its size kept within bounds memplan can afford. The reader, the writer and
// the tests all start here, so that no index is ever trusted unchecked.
//
//   absl::StatusOr<formats::TfliteModel> m =
//       formats::TfliteModel::Parse(bytes, "model.tflite");
//   for (int s = 0; s < m->subgraph_count(); ++s) ... m->tensor(s, t) ...
//
// The schema (formats/tflite_schema.fbs) is the part of TFLite's public
// schema memplan needs, with the public field ids.
#ifndef MEMPLAN_TFLITE_MODEL_H_
#define MEMPLAN_TFLITE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tflite/schema_generated.h"  // from tflite_schema.fbs

namespace memplan::formats {

namespace tfl = ::memplan::tflite_schema;

// Elements of a flatbuffer vector; 0 when the field is absent.
template <typename T>
int Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : static_cast<int>(v->size());
}

// What one model may hold before an import refuses it
// (RESOURCE_EXHAUSTED): flatbuffer vectors may alias one another, so a
// small file could otherwise describe an enormous graph.
inline constexpr int64_t kTfliteMaxTensors = 2'000'000;      // all subgraphs
inline constexpr int64_t kTfliteMaxOps = 2'000'000;          // all subgraphs
inline constexpr int64_t kTfliteMaxTensorRefs = 16'000'000;  // op operands
inline constexpr int kTfliteMaxRank = 64;                    // dims per shape

// A subgraph an operator runs, and the part it plays ("then", "body"...).
struct SubgraphCall {
  std::string role;  // then, else, cond, body, init, call, decomposition
  int subgraph = 0;  // index into Model.subgraphs (checked)
};

// The metadata name TFLite Micro looks for an offline plan under.
inline constexpr char kOfflinePlanMetadata[] = "OfflineMemoryAllocation";

// The offline plan a model carries, read as TFLite Micro reads it
// (micro_allocation_info.cc, GetOfflinePlannedOffsets): the last metadata
// entry named exactly kOfflinePlanMetadata, its buffer's data as
// little-endian int32 words [version, number of subgraphs, N, N offsets].
// TFLite Micro reads word 2 and the offsets only; word 1 is the number of
// subgraphs in its memory_management.md and in what Vela writes (an older
// copy of that page called it the subgraph index), so any value is read.
struct TfliteOfflinePlan {
  int entries = 0;        // metadata entries of that name (0: no plan)
  bool present = false;   // the last one holds at least the 3 header words
  int32_t version = 0;    // word 0 (memplan writes 1, Vela 0)
  int32_t subgraphs = 0;  // word 1
  int32_t count = 0;      // word 2: N
  // The words after the header, as many as the buffer holds.
  std::vector<int32_t> offsets;
  // N is the model's tensor count and the buffer holds N offsets: TFLite
  // Micro uses the plan (it refuses the model when N differs).
  bool usable = false;
};

// A verified model. Thread-compatible; holds a view of the bytes given to
// Parse (or of its own aligned copy), which must outlive it.
class TfliteModel {
 public:
  // Verifies `bytes` and checks every index. INVALID_ARGUMENT naming `name`
  // and what is wrong (not TFLite, truncated or corrupt, no subgraphs, an
  // index out of range, an unknown tensor type, a rank over
  // kTfliteMaxRank); RESOURCE_EXHAUSTED over the limits above.
  [[nodiscard]] static absl::StatusOr<TfliteModel> Parse(
      absl::string_view bytes, absl::string_view name);

  const tfl::Model& model() const { return *model_; }
  absl::string_view bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

  int subgraph_count() const { return static_cast<int>(base_.size()); }
  const tfl::SubGraph& subgraph(int s) const;
  // Tensors of subgraph `s`, and of all subgraphs (the offline plan's N).
  int tensor_count(int s) const;
  int64_t tensor_count() const { return total_tensors_; }
  // Index of tensor (s, t) among all tensors, subgraphs concatenated.
  int64_t global_index(int s, int t) const { return base_[s] + t; }
  const tfl::Tensor& tensor(int s, int t) const;
  int op_count(int s) const;
  const tfl::Operator& op(int s, int i) const;
  int buffer_count() const;

  // The operator's builtin code (TFLite's rule: the larger of the two code
  // fields) and its type name: "CONV_2D", a custom op's code, or
  // "BUILTIN_<n>" for a code newer than the schema.
  int32_t BuiltinCode(const tfl::Operator& op) const;
  std::string OpType(const tfl::Operator& op) const;
  // Subgraphs the operator runs (IF, WHILE, CALL_ONCE, CALL, StableHLO
  // while and composite), in the order a runtime runs them first.
  std::vector<SubgraphCall> CalledSubgraphs(const tfl::Operator& op) const;

  // Bytes of data the tensor's buffer holds in the file (0: none, an
  // activation). Data kept past the flatbuffer (Buffer.offset) counts.
  int64_t DataBytes(const tfl::Tensor& tensor) const;
  // The bytes of buffer `b`'s data inside the flatbuffer (empty for none).
  absl::string_view BufferData(int b) const;

  // The offline plan the model carries (TfliteOfflinePlan; entries 0 when
  // none).
  TfliteOfflinePlan OfflinePlan() const;

  // For messages: "subgraph 1 ('body')", "tensor 5 ('x') of subgraph 0".
  std::string SubgraphLabel(int s) const;
  std::string TensorLabel(int s, int t) const;
  // The tensor's name as stored (clipped to 256 bytes), maybe empty, as
  // text every output accepts (base::SafeText): for messages.
  std::string TensorName(int s, int t) const;
  // The same bytes as stored, clipped to 256 bytes: what the imported
  // graph's tensor is named. engine::Plan applies the text rule to it
  // (base/text.h), which keeps distinct names distinct.
  std::string RawTensorName(int s, int t) const;

 private:
  TfliteModel() = default;
  absl::Status CheckTensors(int s) const;
  absl::Status CheckOps(int s, int64_t* refs) const;
  absl::Status CheckModelLists() const;
  absl::Status CheckSubgraphIo(int s, int64_t* refs) const;

  std::vector<uint64_t> copy_;  // an aligned copy when `bytes` was not
  absl::string_view bytes_;
  std::string name_;
  const tfl::Model* model_ = nullptr;
  std::vector<int64_t> base_;  // per subgraph: global index of tensor 0
  int64_t total_tensors_ = 0;
};

// "float32", "int8", "int4"...: a TFLite tensor type, lower case.
std::string TfliteTypeName(int type);

// The custom operator of Arm's Ethos-U NPU (Vela's output): its inputs are
// the command stream, the weights ("flash"), the scratch and fast scratch
// tensors (no data: arena memory), then its feature maps.
inline constexpr char kEthosUOp[] = "ethos-u";

// The name `--dim` gives a dynamic first dim (-1 in shape_signature).
inline constexpr char kTfliteBatchDim[] = "batch";

// The dims a tensor declares: shape_signature (with -1 for dynamic dims)
// when it has the rank of shape, else shape.
std::vector<int64_t> TfliteDeclaredDims(const tfl::Tensor& t);

// Whether declared dims have a dynamic first dim (the batch).
inline bool TfliteHasDynamicBatch(const std::vector<int64_t>& dims) {
  return !dims.empty() && dims[0] < 0;
}

}  // namespace memplan::formats

#endif  // MEMPLAN_TFLITE_MODEL_H_
