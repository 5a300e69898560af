// What every model importer (onnx/, tflite/) takes and gives: the options
// a model file does not say (dynamic dims, input shapes), the imported
// graph with its statistics, and the `inspect` summary. The importers
// themselves are reached through engine::ImportModel (engine/model_import.h).
//
//   formats::ModelOptions options;
//   absl::Status s = formats::ParseDimList("batch=1", &options);
#ifndef MEMPLAN_FORMATS_MODEL_H_
#define MEMPLAN_FORMATS_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "formats/format.h"
#include "google/protobuf/arena.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::formats {

class TfliteModel;  // tflite/model.h

// What a model file does not say: values of its dynamic dims.
struct ModelOptions {
  // Symbolic dim -> value, e.g. {"batch", 1}. Default: empty.
  // REQUIRES values >= 0.
  std::map<std::string, int64_t> dims;
  // Value name -> whole shape, e.g. {"x", {1, 3, 224, 224}}; {} is a
  // scalar. For graph inputs, and for values the importer cannot size.
  // Default: empty. REQUIRES dims >= 0.
  std::map<std::string, std::vector<int64_t>> shapes;
  // The call's token: the import stops with DEADLINE_EXCEEDED once it
  // fires (polled every few hundred nodes). Default: null, never.
  const base::CancelToken* cancel = nullptr;
};

// Counts describing what was imported, and what was not planned.
struct ModelStats {
  int64_t tensors = 0;             // tensors in the graph
  int64_t ops = 0;                 // ops in the graph
  int64_t weights = 0;             // constant tensors among them
  int64_t subgraphs = 0;           // subgraphs (TFLite) or graph bodies
  int64_t control_flow_nodes = 0;  // nodes running subgraphs (If, Loop...)
  int64_t subgraph_values = 0;     // values inside subgraph bodies
  int64_t empty_values = 0;        // values with zero elements (not planned)
};

// A graph tensor's place in a TFLite model.
struct TfliteTensorRef {
  int subgraph = 0;  // index into Model.subgraphs
  int tensor = 0;    // index into that subgraph's tensors
};

// How TFLite Micro's allocator sees one tensor.
struct TflmTensorUse {
  // TFLM's planner places it (needs_allocating: no data in the file, not a
  // variable, a non-zero size).
  bool planned = false;
  bool variable = false;  // is_variable: allocated beside the plan
  int first = -1;         // first allocation scope it is live; -1: never
  int last = -1;          // last allocation scope, inclusive; -1: never
};

// The result of an import.
struct ImportedModel {
  Format format = Format::kOnnx;  // what was read
  // What memplan plans, on `arena`: a large model's hundreds of thousands
  // of messages are made and freed in blocks, not one by one (an import
  // or plan stopped by its deadline frees them at once). Moves with the
  // model; never null.
  std::unique_ptr<google::protobuf::Arena> arena =
      std::make_unique<google::protobuf::Arena>();
  v1::Graph* graph =
      google::protobuf::Arena::CreateMessage<v1::Graph>(arena.get());
  std::vector<std::string> warnings;  // e.g. an unnamed dim set to 1
  ModelStats stats;                   // what was and was not planned
  // TFLite: per graph tensor (same index), its subgraph and tensor index,
  // and the number of tensors over all subgraphs (the offline plan's N).
  std::vector<TfliteTensorRef> tflite_tensors;
  int64_t tflite_tensor_count = 0;
  // TFLite: per subgraph, the index of its tensor 0 among all tensors.
  std::vector<int64_t> tflite_tensor_base;
  // TFLite: the graph tensors (indices) that are the main subgraph's inputs
  // and outputs. They are planned with TFLM's lifetimes (from the first op,
  // to the last), so the graph marks them as activations; the plan reports
  // them as the inputs and outputs they are.
  std::vector<int> main_inputs, main_outputs;
  // TFLite: the graph tensors that are scratch memory of the operators
  // reading them (no data, no producer: an Ethos-U operator's scratch and
  // fast scratch), planned from just before their first reader to their
  // last; the plan reports them as scratch.
  std::vector<int> scratch;
  // TFLite: tensors that keep the offsets of the offline plan the model
  // already carries (an Ethos-U model's, from Vela: its command streams
  // address them from the scratch tensor's start). They are not graph
  // tensors of their own: each lies `offset` bytes into graph tensor
  // `block`, which spans them all, so the planned model keeps their
  // layout (tflite/reader.h).
  struct KeptTensor {
    int64_t tensor = 0;  // index among all tensors, subgraphs concatenated
    int block = 0;       // the graph tensor holding it
    int64_t offset = 0;  // bytes from the block's start
  };
  std::vector<KeptTensor> tflite_kept;
  // TFLite: the parsed model, a view of the bytes given to the import (they
  // must outlive it), so that the writers and the TFLM baseline never parse
  // the file again; and TFLite Micro's view of every tensor, subgraphs
  // concatenated (tflite/tflm_baseline.h).
  std::shared_ptr<const TfliteModel> tflite;
  std::vector<TflmTensorUse> tflm_uses;
  absl::Status tflm_uses_status;  // why tflm_uses is empty, when it is
};

// One graph input or output of a model, as `memplan inspect` shows it.
struct ValueSummary {
  std::string name;
  std::string element_type;  // e.g. "float32", "int8", "float16"
  // Per dim: its value ("1"), its symbolic name ("batch"), or "?" when the
  // model gives neither.
  std::vector<std::string> dims;
  int64_t bytes = -1;  // -1 while a dim is not a number
};

// A dynamic dim an import gives a value of its own unless told otherwise.
struct DefaultedDim {
  std::string value;  // the tensor (graph input) holding it
  int dim = 0;        // its index in the shape, from 0
  int64_t size = 0;   // the value used
  std::string flag;   // what sets it instead: "--dim batch=N", "--input ..."
};

// The offline plan a model file carries (TFLite OfflineMemoryAllocation).
struct OfflinePlanSummary {
  int32_t version = 0;    // word 0
  int32_t subgraphs = 0;  // word 1 (number of subgraphs)
  int64_t offsets = 0;    // word 2: N
  int64_t placed = 0;     // offsets that are not -1
  bool usable = false;    // N is the tensor count: TFLite Micro uses it
};

// What a model holds, without planning it (`memplan inspect`).
struct ModelSummary {
  Format format = Format::kOnnx;      // what was read
  std::string producer;               // e.g. "pytorch 2.1", "TOCO Converted."
  std::string version;                // e.g. "opset 17", "schema 3"
  int64_t subgraphs = 1;              // graphs holding ops (main one included)
  std::vector<ValueSummary> inputs;   // of the main graph
  std::vector<ValueSummary> outputs;  // of the main graph
  std::vector<std::string> symbolic_dims;   // every name --dim can set
  int64_t weight_bytes = 0;                 // constants kept in the model
  int64_t ops = 0;                          // nodes/operators over all graphs
  std::map<std::string, int64_t> op_types;  // op type -> count
  // Dynamic dims of the main inputs that an import sets by itself (TFLite:
  // -1 dims, to the model's own shape; ONNX: unnamed dims, to 1).
  std::vector<DefaultedDim> defaulted_dims;
  // TFLite: tensors whose shape_signature has -1 dims (all take the
  // model's own shape unless --dim or --input says otherwise).
  int64_t dynamic_tensors = 0;
  // TFLite: the offline plan the file already carries, when it has one.
  std::optional<OfflinePlanSummary> offline_plan;
};

// Adds "NAME=VALUE[,NAME=VALUE...]" (the --dim flag) to options->dims.
// INVALID_ARGUMENT for bad syntax or a negative value.
[[nodiscard]] absl::Status ParseDimList(absl::string_view text,
                                        ModelOptions* options);

// Adds "NAME=1x3x224x224[,NAME=...]" (the --input flag; "NAME=" is a
// scalar) to options->shapes. The last '=' of each item separates name and
// shape.
[[nodiscard]] absl::Status ParseShapeList(absl::string_view text,
                                          ModelOptions* options);

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_MODEL_H_
