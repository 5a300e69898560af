// Where the text rule (base/text.h) is applied in the Plan use case: once,
// after a model is imported and before planning, to every name a plan
// carries (graph, tensor, op and buffer names, memory pool names, the
// model's file name), so that the response, the text report and every
// emitted file (C header, SVG, HTML) see the same clean names. A name that
// is valid UTF-8 of printable characters is kept as it is; distinct names
// stay distinct (base::SafeName is injective).
//
//   std::optional<v1::PlanRequest> clean = engine::CleanNames(request,
//                                                             &outcome);
//   const v1::PlanRequest& input = clean ? *clean : request;
#ifndef MEMPLAN_ENGINE_NAMES_H_
#define MEMPLAN_ENGINE_NAMES_H_

#include <optional>

#include "base/cancel.h"
#include "engine/plan.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::engine {

// Every name of `graph` through base::SafeName, in place: its own, its
// tensors', its ops' and every reference to a tensor. Stops part way once
// `cancel` (may be null) fires: the caller then plans nothing.
void CleanGraphNames(v1::Graph* graph,
                     const base::CancelToken* cancel = nullptr);

// Cleans what `outcome` holds (the imported model's graph, the memory pool
// names of its options) and sets outcome->input_name. For a request that
// carries its graph or buffers itself: a copy with them cleaned, or
// nullopt when every name is clean already (the request is then planned as
// it is). REQUIRES options set and, for a model, outcome->model imported.
// Polls `cancel` (may be null) as CleanGraphNames: once it fired, the
// names may be left part cleaned, and the caller must not plan them.
std::optional<v1::PlanRequest> CleanNames(
    const v1::PlanRequest& request, PlanOutcome* outcome,
    const base::CancelToken* cancel = nullptr);

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_NAMES_H_
