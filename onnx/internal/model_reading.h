// Private to onnx/: reading a ModelProto safely, shared by the import
// (onnx/import.cc) and the `inspect` summary (onnx/inspect.cc). ONNX 1.12
// reads tensor data, attributes and node inputs unchecked and crashes on
// hostile models, so a model is checked before its inference runs:
//
//   absl::StatusOr<::ONNX_NAMESPACE::ModelProto> model =
//       internal::ParseModel(bytes, "model.onnx");
//   if (!model.ok()) return model.status();
//   if (auto s = internal::SanitizeTensors(&*model, name); !s.ok()) return s;
//   // then CheckAttributes, SortNodes, CheckReads, and InferShapes
#ifndef MEMPLAN_ONNX_INTERNAL_MODEL_READING_H_
#define MEMPLAN_ONNX_INTERNAL_MODEL_READING_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "google/protobuf/arena.h"
#include "onnx/onnx_pb.h"

namespace memplan::formats::internal {

// Parses the bytes, in their lean form (onnx/lean.h: the data of large
// tensors is never parsed); protobuf accepts some garbage, so a model also
// needs a graph with something in it. INVALID_ARGUMENT naming `name`
// otherwise.
absl::StatusOr<::ONNX_NAMESPACE::ModelProto> ParseModel(absl::string_view bytes,
                                                        absl::string_view name);
// Bytes protobuf's parse of a model reads between two polls of a token.
inline constexpr int kParseBlockBytes = 256 << 10;

// The same, the message on `arena` (freed with it at once: the import of a
// 100,000-node model ends tens of milliseconds sooner, cancelled or not).
// DEADLINE_EXCEEDED when `cancel` (may be null) fires while the bytes are
// made lean or parsed (polled every few milliseconds of either).
absl::StatusOr<::ONNX_NAMESPACE::ModelProto*> ParseModel(
    absl::string_view bytes, absl::string_view name,
    google::protobuf::Arena* arena, const base::CancelToken* cancel = nullptr);
// The same, into `model` (cleared first by the parse).
absl::Status ParseModelInto(absl::string_view bytes, absl::string_view name,
                            ::ONNX_NAMESPACE::ModelProto* model,
                            const base::CancelToken* cancel = nullptr);

// Calls f(graph) for the main graph and every subgraph, outer first.
template <typename F>
void ForEachGraph(const ::ONNX_NAMESPACE::GraphProto& g, const F& f) {
  f(g);
  for (const ::ONNX_NAMESPACE::NodeProto& n : g.node()) {
    for (const ::ONNX_NAMESPACE::AttributeProto& a : n.attribute()) {
      if (a.has_g()) ForEachGraph(a.g(), f);
      for (const ::ONNX_NAMESPACE::GraphProto& s : a.graphs()) {
        ForEachGraph(s, f);
      }
    }
  }
}

// The model's opset of the default domain, or -1.
int DefaultOpset(const ::ONNX_NAMESPACE::ModelProto& model);

// The named dims declared on the main graph's inputs, outputs and
// value_info: the names --dim can set, sorted.
std::set<std::string> DeclaredDims(const ::ONNX_NAMESPACE::GraphProto& g);

// What SanitizeTensors reads of one tensor to check its data and decide
// whether to clear it: filled from a parsed TensorProto, or from its wire
// form by LeanOnnxModel (onnx/lean.h), which must decide alike.
struct TensorDataFacts {
  int32_t data_type = 0;      // TensorProto.data_type
  bool external = false;      // data_location is EXTERNAL
  std::vector<int64_t> dims;  // TensorProto.dims, as they are
  bool has_raw = false;       // raw_data is set (even empty)
  int64_t raw_bytes = 0;      // raw_data's size
  int64_t held = 0;           // numbers and strings of the typed data fields
                              // (float_data... string_data) together
};

// What SanitizeTensors does with one tensor.
enum class TensorDataVerdict {
  kKeep,             // its data stays: small, external, or a negative dim
  kClearLarge,       // over kMaxOnnxContent elements: data cleared, and
                     // the tensor marked external
  kMarkNoData,       // elements but no data: marked external
  kTooManyElements,  // an error: its element count overflows 64 bits
  kMismatch,         // an error: its data does not match its dims and type
};

// Judges one tensor as SanitizeTensors does; the one place that decides.
TensorDataVerdict JudgeTensorData(const TensorDataFacts& t);

// Checks every initializer and tensor attribute of every graph against its
// dims (INVALID_ARGUMENT naming the tensor on a mismatch); clears data too
// large for the evaluation to fold (only shapes matter, and the model is
// copied several times) and marks tensors without data as external, so that
// ONNX 1.12's inference, which reads data without checking its length,
// throws instead of reading past it.
absl::Status SanitizeTensors(::ONNX_NAMESPACE::ModelProto* model,
                             absl::string_view name,
                             const base::CancelToken* cancel = nullptr);

// Required attributes the node's schema lists must be there, of their
// type: ONNX 1.12's inference functions read some without checking (a Scan
// without num_scan_inputs crashes it). Ops whose definition changed after
// the opsets ONNX knows are left to memplan's rules.
absl::Status CheckAttributes(const ::ONNX_NAMESPACE::ModelProto& model,
                             absl::string_view name,
                             const base::CancelToken* cancel = nullptr);

// Sorts the nodes of the main graph and of every subgraph topologically, as
// ONNX Runtime does before it runs a model (ONNX's inference and memplan's
// evaluation read nodes in order): each node after the nodes of its graph
// making what it reads, what its subgraphs read from that graph included.
// Stable: among the nodes ready to run, the first in the file goes first,
// so a node keeps its place wherever what it reads allows, and a file in
// topological order keeps its order. Names no node of the graph makes
// (inputs, initializers, outer values, or undefined ones, which CheckReads
// names) order nothing. O((nodes + edges) log nodes) per graph.
// INVALID_ARGUMENT naming nodes of a cycle (a few, in the order they feed
// each other) when there is no such order.
absl::Status SortNodes(::ONNX_NAMESPACE::ModelProto* model,
                       absl::string_view name,
                       const base::CancelToken* cancel = nullptr);

// Every name a node reads must be defined before it, in its graph or an
// enclosing one (`outer`, innermost last; empty for the main graph), and
// every graph output too: checked, after SortNodes, before ONNX's inference
// runs (it dereferences the type of an undefined input). `path` is the
// graph's subgraph path ("" for the main graph); `name` names the model.
// The steps above, from SanitizeTensors on, end in ImportCancelled(name)
// when `cancel` (may be null) fires: they poll it every few thousand
// nodes.
// The names each enclosing graph defines (views into the model).
using ReadScopes = std::vector<const absl::flat_hash_set<absl::string_view>*>;
absl::Status CheckReads(const ::ONNX_NAMESPACE::GraphProto& g,
                        ReadScopes* outer, const std::string& path,
                        absl::string_view name,
                        const base::CancelToken* cancel = nullptr);

// Runs ONNX's shape inference, catching whatever ONNX throws. Its data
// propagation stays off: memplan's evaluation folds shape computations
// itself, and ONNX 1.12's propagation functions dereference the type of an
// input that has none (an output of an op without a schema) and crash. Ops
// whose shapes changed after the opsets ONNX knows are hidden from it.
// With a `cancel` token (may be null) that fires, ONNX's inference is ended
// at the next node it looks up (ImportCancelled).
absl::Status InferShapes(::ONNX_NAMESPACE::ModelProto* model,
                         absl::string_view name,
                         const base::CancelToken* cancel = nullptr);

// DEADLINE_EXCEEDED: the import of `name` stopped for its call's token.
absl::Status ImportCancelled(absl::string_view name);

// Whether the token (may be null) fired; polled by the import's loops every
// kPollEvery items (about a millisecond of work at most).
inline constexpr int kPollEvery = 256;
inline bool ShouldStop(const base::CancelToken* cancel, int64_t item) {
  return cancel != nullptr && item % kPollEvery == 0 && cancel->Cancelled();
}

}  // namespace memplan::formats::internal

#endif  // MEMPLAN_ONNX_INTERNAL_MODEL_READING_H_
