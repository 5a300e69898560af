// A plan as a C header an embedded build compiles (C99, no warnings under
// -Wall -Wextra): the arena size as macros (one per memory pool when pools
// are used), and per tensor, in the request's tensor order, its offset
// (-1: not in the arena), size, memory pool and lifetime, names in
// comments. For TFLite models it also holds the plan as TFLite Micro's
// NonPersistentMemoryPlannerShim takes it (a tflite::BufferPlan).
//
//   absl::StatusOr<std::string> h = formats::EmitCHeader(
//       {"model.tflite", &result, &options, &model});
//
// Every name in the file starts with MEMPLAN_<ID>_ (macros) or
// memplan_<id>_ (data), so that plans of several models can live in one
// program. ID is the user's (PlanRequest.c_header_id, --c_header_id), or by
// default the input's file name as a C identifier and 8 hex digits of a
// hash of the model's bytes and the plan ("face_detection_1f0c93ab" for
// face_detection.tflite): two different models both called model.tflite
// get different include guards and symbols. Memory pools get one macro
// each, named from the pool's name and made unique with a suffix
// ("sram.0", "sram", "SRAM" -> POOL_SRAM_0, POOL_SRAM, POOL_SRAM_2). The
// arrays are declared by the header and defined where
// MEMPLAN_<ID>_IMPLEMENTATION is defined before including it (in one .c
// file), so that including it anywhere else costs nothing and warns of
// nothing.
#ifndef MEMPLAN_FORMATS_C_HEADER_H_
#define MEMPLAN_FORMATS_C_HEADER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "formats/model.h"
#include "planner/planner.h"

namespace memplan::formats {

// What a header is written from.
struct CHeaderInput {
  // The input's name (a path: its file name without extension gives ID;
  // "plan" when it gives none).
  std::string name;
  const planner::PlanResult* result = nullptr;    // REQUIRES non-null
  const planner::PlanOptions* options = nullptr;  // REQUIRES non-null
  // When the plan is of an imported model: the model (for TFLite, its
  // tflm_uses give TFLite Micro's buffer order). Default: none.
  const ImportedModel* model = nullptr;
  // The ID the header's names are built on. Default empty: CHeaderId(name),
  // '_' and 8 hex digits of a hash of `content` and the plan. REQUIRES
  // empty or IsCHeaderId.
  std::string id;
  // The input's bytes (a model file as sent), hashed into the default ID.
  // Default: none (the plan alone is hashed).
  absl::string_view content;
  // Polled as the header is written: DEADLINE_EXCEEDED once it fires.
  // Default: none.
  const base::CancelToken* cancel = nullptr;
  // TFLite: the head of TFLite Micro's arena running this plan, when it is
  // more than the plan's arena rounded up to 16 (tensors TFLM places
  // itself: engine's runtime figure). Default: none.
  std::optional<int64_t> tflm_arena_bytes;
  // TFLite: why TFLite Micro would not run this plan as it is (what `emit
  // tflite` refuses it for: other shapes than the file stores, offsets off
  // its alignment or past int32, memory pools). When set the header has no
  // TFLite Micro section, and a comment says why. Default: none.
  std::string tflm_refusal;
};

// The C99 header text for a plan. The error of the TFLM walk when a TFLite
// model's failed (tflm_uses_status); FAILED_PRECONDITION when a TFLite offset
// does not fit TFLite Micro's int32; DEADLINE_EXCEEDED when input.cancel
// fires.
[[nodiscard]] absl::StatusOr<std::string> EmitCHeader(
    const CHeaderInput& input);

// `name`'s file name without its extension as a C identifier in lower case
// ("plan" when empty): the first part of a header's default ID.
std::string CHeaderId(absl::string_view name);

// Whether `id` can be a header's ID as given: letters, digits and '_',
// starting with a letter, at most 64 characters.
bool IsCHeaderId(absl::string_view id);

// The ID `input`'s header is built on, in lower case: input.id, or the
// default described at CHeaderInput::id. Empty when input.cancel fired
// while the input was hashed.
std::string CHeaderIdFor(const CHeaderInput& input);

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_C_HEADER_H_
