// Planned TFLite models: a copy of a model that carries a plan the way
// TFLite Micro reads one (micro_allocation_info.cc, GetOfflinePlannedOffsets):
// a Model.metadata entry named exactly "OfflineMemoryAllocation" whose
// buffer holds little-endian int32 words
//   [version 1, number of subgraphs, N, offset_0 ... offset_{N-1}]
// with one offset per tensor, the subgraphs' tensors concatenated, in bytes
// from the start of the arena, -1 for a tensor TFLM plans itself (online).
// This is the layout of tflite-micro's docs/memory_management.md, whose
// word 1 is the number of subgraphs, and what Vela writes (version 0, the
// number of subgraphs); TFLM reads only N and the offsets. (An older copy
// of that page, in the tensorflow repository, named word 1 "subgraph index
// to which this allocation applies"; with every subgraph's tensors in one
// list there is no single index to give.) Any header is read back
// (TfliteModel::OfflinePlan).
//
//   absl::StatusOr<std::string> planned =
//       formats::EmitPlannedTflite(model, result);  // model: a TFLite import
//
// Everything else is kept as it was: the tables of the original file are
// copied byte for byte (fields this build's schema does not know included),
// so tensors, operators, buffers, other metadata and signature defs keep
// their meaning, and constant data keeps its alignment. When the model
// already has such an entry whose buffer is its own and of the right
// length, the new offsets overwrite it in place (so planning a planned model
// again gives the same file). Otherwise a new root table goes in front of
// the original bytes (shifted by a multiple of 64, so data aligned to 64
// or less stays so; positions of data kept past the flatbuffer are moved
// with it): its buffers and metadata lists are the old ones plus the plan,
// an old entry of that name replaced rather than repeated.
#ifndef MEMPLAN_TFLITE_WRITER_H_
#define MEMPLAN_TFLITE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "formats/model.h"
#include "planner/planner.h"
#include "tflite/model.h"

namespace memplan::formats {

// The format version written (word 0; the metadata's name,
// kOfflinePlanMetadata, is in tflite/model.h).
inline constexpr int32_t kOfflinePlanVersion = 1;

// The offline plan of `result` for `model` (a TFLite import): per TFLite
// tensor (subgraphs concatenated) its planned offset, or -1 for constants
// (always: TFLM keeps them in the model, even when the plan placed weights
// in the arena) and every tensor the plan left out. Tensors that keep the
// model's own offline offsets (ImportedModel::tflite_kept, an Ethos-U
// model's) get their block's offset plus their offset in it, so their
// layout is Vela's. FAILED_PRECONDITION for
// a plan over several memory pools (TFLM has one arena) or offsets past
// 2^31; INTERNAL when `result` is not a plan of `model`.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> OfflinePlanOffsets(
    const ImportedModel& model, const planner::PlanResult& result);

// `bytes` (a TFLite model named `name`) with `offsets` (one per tensor) as
// its offline plan. INVALID_ARGUMENT when `bytes` is no valid model or the
// count differs from its tensor count; FAILED_PRECONDITION when its root
// table has fields newer than this build's schema (they could not be
// copied) or the result would pass the 2 GiB flatbuffer limit; INTERNAL if
// the result fails the flatbuffers verifier (never expected).
// DEADLINE_EXCEEDED when `cancel` (may be null) fires: it is polled
// between the steps (writing, reading back), each linear in the file.
[[nodiscard]] absl::StatusOr<std::string> WriteOfflinePlan(
    const TfliteModel& model, const std::vector<int32_t>& offsets,
    const base::CancelToken* cancel = nullptr);
// The same for a model not yet parsed: `bytes`, named `name`.
[[nodiscard]] absl::StatusOr<std::string> WriteOfflinePlan(
    absl::string_view bytes, absl::string_view name,
    const std::vector<int32_t>& offsets);

// OfflinePlanOffsets then WriteOfflinePlan: the file `--emit tflite` writes.
// `model` must be a TFLite import whose bytes are still alive.
// DEADLINE_EXCEEDED when `cancel` (may be null) fires.
[[nodiscard]] absl::StatusOr<std::string> EmitPlannedTflite(
    const ImportedModel& model, const planner::PlanResult& result,
    const base::CancelToken* cancel = nullptr);

}  // namespace memplan::formats

#endif  // MEMPLAN_TFLITE_WRITER_H_
