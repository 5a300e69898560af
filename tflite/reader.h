// Importing TFLite models: the flatbuffer is verified and every index
// checked (tflite_model.h), then every subgraph becomes part of the one
// memplan.v1.Graph memplan plans, following the lifetimes TFLite Micro's
// own allocator gives tensors (micro_allocation_info.cc):
//
//   formats::ModelOptions options;
//   options.dims["batch"] = 1;
//   absl::StatusOr<formats::ImportedModel> m =
//       formats::ImportTflite(bytes, "model.tflite", options);
//   // m->graph; m->tflite_tensors[i] is graph tensor i's (subgraph, tensor)
//
// Callers usually go through ImportModel (model.h).
//
// What is planned:
// - One graph tensor per TFLite tensor of every subgraph that holds bytes.
//   A tensor whose buffer holds data is a constant (Tensor.constant: not
//   planned unless options.weights is "arena"; its size is its data's);
//   a variable tensor (is_variable) is Tensor.variable: persistent. Other
//   tensors are sized from shape x element type: 2- and 4-bit types packed,
//   except int4, which TFLite Micro allocates at one byte per element (a
//   warning says so). Tensors with a zero dim hold nothing and are left out
//   (stats.empty_values). String and variant tensors without data have no
//   size before run time: an error naming them.
// - Scratch tensors: a tensor operators read that holds no data, is no
//   variable, and that no operator writes and no caller fills (Vela's
//   scratch and fast scratch, read by the ethos-u operator) is memory the
//   operators use as they run: an op "<reader>/scratch" writes it just
//   before its first reader, so it lives from there to its last reader
//   (ImportedModel::scratch; reported as scratch). TFLite Micro plans such
//   tensors too, from the start of the run.
// - Ethos-U models keep their offline plan: when a model with an ethos-u
//   operator carries a usable OfflineMemoryAllocation (Vela writes one),
//   the command streams address the feature maps from the scratch tensor's
//   start as Vela placed them, so the tensors that plan places keep its
//   layout. They become one block: the graph tensor that starts lowest (a
//   scratch tensor first, then the largest), sized to span them all,
//   aligned to 16, live from the first operator using one of them (which
//   writes it) to the last; the others are left out of the graph and lie
//   inside it (ImportedModel::tflite_kept), and the planned model gives
//   them the block's offset plus their own in it. Other tensors are
//   planned around the block (not in its bytes while it lives, even where
//   Vela's layout leaves a hole). A warning says so; an ethos-u model
//   without such a plan plans afresh, with a warning that the NPU needs
//   Vela's layout.
// - Main subgraph (0) inputs and outputs live as TFLM has them live: an op
//   "model/inputs" before the first operator writes the inputs (they die
//   after their last use) and an op "model/outputs" after the last reads
//   the outputs. They are therefore not graph.inputs/outputs, which
//   memplan keeps for the whole run (PlanOptions::io_in_arena does not
//   apply, and reports show them as activations): kept whole-run, an input
//   or output would make memplan's arena larger than TFLM's own on most
//   models.
// - Operators in execution order, one op each, named "<TYPE>#<index>"
//   ("CONV_2D#3"), prefixed "<subgraph>/" outside the main subgraph.
// - Operators that run subgraphs (IF, WHILE, CALL_ONCE, CALL, StableHLO
//   while and composite) are flattened (docs: ARCH_NOTES): for each
//   subgraph they run, an op "<node>/<role>/enter" reading the node's
//   inputs and writing the subgraph's inputs, the subgraph's ops, and an op
//   "<node>/<role>/exit" reading its outputs. The first enter also writes
//   the node's outputs (TFLM's WHILE copies into them before the loop) and
//   the last exit reads the node's inputs and outputs, so both stay alive
//   across the whole node; the bodies' own tensors live only while they
//   run, so two IF branches share memory. A subgraph run again later is
//   not repeated: its last call reads all its tensors (and those of the
//   subgraphs it runs), keeping them alive until then. Subgraphs no
//   operator runs (other signatures) are planned after the main graph, one
//   after the other. A subgraph that runs itself is an error.
// Tensor names are the model's, unique'd with "#<subgraph>:<index>" when
// needed and prefixed with the subgraph's name outside the main subgraph.
//
// Dynamic dims (-1 in shape_signature): a -1 in the first dim is the dim
// "batch" (--dim batch=N); any tensor's whole shape can be given by its
// name (--input NAME=1x16000), which sets its -1 dims. Other -1 dims take
// the model's own shape (Tensor.shape: what TFLite Micro runs), with one
// warning counting the tensors and naming the flags. Only a tensor whose
// own shape cannot stand in (another rank, a negative dim) is an error,
// which gives the fix first and names a few tensors. A --dim the model has
// no use for is a warning (one set of flags may serve a pipeline's models),
// or an error suggesting "batch" when it looks like a misspelling of it;
// an --input naming no tensor is an error suggesting the nearest name.
#ifndef MEMPLAN_TFLITE_READER_H_
#define MEMPLAN_TFLITE_READER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/model.h"
#include "planner/tflm_greedy.h"

namespace memplan::formats {

// Imports a TFLite flatbuffer. INVALID_ARGUMENT naming `name` and what is
// wrong (tflite_model.h's checks, unknown sizes, recursion, bad --dim or
// --input names), RESOURCE_EXHAUSTED past the limits of tflite_model.h.
[[nodiscard]] absl::StatusOr<ImportedModel> ImportTflite(
    absl::string_view bytes, absl::string_view name,
    const ModelOptions& options);

// Bytes of a tensor of TFLite type `type` with `dims` (>= 0): element size
// x count, 2- and 4-bit types packed two or four to a byte, rounded up.
// INVALID_ARGUMENT naming `what` for string and variant tensors, negative
// dims, and sizes past 2^62.
[[nodiscard]] absl::StatusOr<int64_t> TfliteTensorBytes(
    int type, const std::vector<int64_t>& dims, absl::string_view what);

}  // namespace memplan::formats

#endif  // MEMPLAN_TFLITE_READER_H_
