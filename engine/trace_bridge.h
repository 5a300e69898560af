// The one bridge between the planner's lifetimes and the allocators'
// traces: a planned problem becomes the alloc/free events a runtime without
// a plan would perform, and a trace becomes the problem whose static plan
// is compared with the allocators.
//
//   allocators::Trace trace = engine::TraceFromProblem(result.problem);
//   planner::Problem p = engine::ProblemFromTrace(trace);
#ifndef MEMPLAN_ENGINE_TRACE_BRIDGE_H_
#define MEMPLAN_ENGINE_TRACE_BRIDGE_H_

#include <vector>

#include "allocators/trace.h"
#include "base/cancel.h"
#include "planner/problem.h"

namespace memplan::engine {

// The allocation trace of `problem`: step by step in time order, allocate
// every buffer born at the step (in index order), then free every buffer
// whose last live step it is (in index order). Id i is buffer i. Memory
// and time O(n log n), whatever the time span. `cancel` (may be null) is
// polled every 65,536 buffers or events (the sort included); once it fires
// the trace is left incomplete (the caller checks the token and drops it).
allocators::Trace TraceFromProblem(const planner::Problem& problem,
                                   const base::CancelToken* cancel = nullptr);

// The same for the buffers `subset` of `problem` only (ids stay the
// buffers' indices in `problem`; the others are never allocated).
allocators::Trace TraceFromProblem(const planner::Problem& problem,
                                   const std::vector<int>& subset,
                                   const base::CancelToken* cancel = nullptr);

// The problem a trace describes: each id lives from its allocation event
// to its free event (event indices as steps), or to the end if never
// freed. REQUIRES a well-formed trace (ids allocated once). `cancel` (may
// be null) is polled every 4096 events; once it fires the problem is left
// incomplete (the caller checks the token and drops it).
planner::Problem ProblemFromTrace(const allocators::Trace& trace,
                                  const base::CancelToken* cancel = nullptr);

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_TRACE_BRIDGE_H_
