// memplan's planning pipeline, the library's front door. A graph goes
// through liveness, shared objects (a coloring of the interference between
// lifetimes), offset assignment (a portfolio of strategies run by the
// workers) and verification; a buffer list skips liveness. Every returned
// plan has passed the verifier.
//
//   base::WorkerPool workers(2, 64);
//   planner::PlanOptions options;  // alignment 64, strategy "auto"
//   absl::StatusOr<planner::PlanResult> plan =
//       planner::PlanGraph(graph, options, &workers, /*cancel=*/nullptr);
//   // plan->solution.arena_size, plan->lower_bound, plan->tensors ...
#ifndef MEMPLAN_PLANNER_PLANNER_H_
#define MEMPLAN_PLANNER_PLANNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/alignment.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "planner/graph.h"
#include "planner/liveness.h"
#include "planner/memory_spaces.h"
#include "planner/problem.h"
#include "planner/shared_objects.h"

namespace memplan::planner {

struct PlanOptions {
  // Alignment of graph tensors that do not set their own. Default
  // base::kDefaultAlignment (64). REQUIRES: a power of two.
  Bytes alignment = base::kDefaultAlignment;
  // "auto" (QuickHeuristicNames(): greedy by size, best and first fit;
  // with `optimize` the default plan, then every other heuristic including
  // the hill climb, then the exact search seeded with the best; the
  // smallest verified arena wins), "exact" (the default plan's heuristics
  // and steps as the seed, then the search; over the search's size, the
  // default plan's climb), or one heuristic from HeuristicNames(). Checked
  // before any work (CheckStrategyName). Default "auto".
  std::string strategy = "auto";
  // With "auto": after the default plan's heuristics and steps, also run
  // the other heuristics and the hill climb, and the exact search after
  // them, within time_budget. Default false: greedy by
  // size, then, where it ends above the lower bound, the exact search
  // within TightSearchNodes (work_cap.h), not time. The search runs within
  // time_budget anyway for "exact", and with "auto" when a capacity is set
  // that the heuristics miss.
  bool optimize = false;
  // How long planning may take when it searches (optimize, "exact", or a
  // capacity the heuristics miss), counted from the call, set-up included:
  // the optional heuristics, the hill climb and the exact search stop at
  // it, and the best plan so far is returned. Only the first heuristic (the
  // plan every request gets) runs past it. Default 1 s; the caller's
  // deadline (base::CancelToken) also bounds it.
  absl::Duration time_budget = absl::Seconds(1);
  // When > 0, bounds the search by work done instead of time: the exact
  // search stops after `effort` nodes (placements tried) and the hill climb
  // after 64 x effort units of greedy work (a buffer placed, an overlapping
  // buffer visited). One unit is about a microsecond of one core on the
  // build machine kind, so effort 1000000 is a search of about 1-2 s. The
  // same input and options then give the same plan on any machine, under
  // any load and with any number of worker threads, as long as time_budget
  // (still an outer cap) is not reached first. A CI that wants the same plan
  // as a developer sets effort and a generous budget (e.g. effort 200000,
  // time_budget 60 s) and gets exactly the plan of that effort; a run the
  // budget cuts short did less work, and its plan may differ. Default 0:
  // unset, the search runs until time_budget or a proof.
  int64_t effort = 0;
  // When set, a plan must fit in this many bytes, or planning fails with
  // FAILED_PRECONDITION. Default: none.
  std::optional<Bytes> capacity;
  // Several memories, fastest first (memory_spaces.h): each takes what fits
  // of what the faster ones left, smallest size x lifetime first, and is
  // planned and verified on its own; offsets are then within the buffer's
  // space. Default empty: one arena. REQUIRES no capacity and no fixed
  // offsets when set.
  std::vector<MemorySpace> memory_spaces;
  // Weights and constants (graph tensors marked constant, and tensors no op
  // produces that are not graph inputs): false (default) leaves them out of
  // the arena, as runtimes keep them in the model, and reports their total
  // as PlanResult::weights_bytes; true places each in memory of its own.
  bool weights_in_arena = false;
  // Graph inputs and outputs (liveness.h): kRuntime (default) plans them
  // as runtimes run them, an input from the start to its last use and an
  // output from its producer to the end (TFLite Micro); kKeepInputs keeps
  // inputs intact for the whole run (read again after it); kExclude leaves
  // both out, for callers that own those buffers.
  IoPolicy io = IoPolicy::kRuntime;
  // At most this many threads work on one request at once: the caller and
  // up to max_threads - 1 of the workers (fewer when the pool is smaller or
  // busy; a worker leaves between pieces of work once other tasks wait).
  // The stages that split (sorting, verification, shared objects,
  // greedy placement by time windows, the portfolio's members)
  // give the same plan whatever the count. Default 0: one per core the
  // process may use (base::UsableCores), at most kDefaultMaxThreads
  // (RequestThreads); 1: the caller alone. Not part of a plan's identity
  // (the plan cache's key).
  int max_threads = 0;
};

// The most threads one request uses by default, however many cores.
inline constexpr int kDefaultMaxThreads = 16;

// The threads one request may put to work at once: options.max_threads,
// or where it is 0 (the default) one per usable core, at most
// kDefaultMaxThreads. More threads than cores would make each split of a
// stage wait for a thread the kernel has set aside: on 2 cores, one
// million buffers planned by the caller and 2 workers took 0.75-0.78 s,
// by the caller and 1 worker 0.70-0.72 s (BENCHMARKS.md).
int RequestThreads(const PlanOptions& options);

// How long one stage took.
struct StageTime {
  // "liveness", "prepare" (validation, bounds, compressed time), "pools"
  // (shared objects, colored from the lifetimes' overlaps), "offsets" (the
  // heuristics), "search" (the exact search, when it ran), "verify" (every
  // verification). The stages do not overlap, except that on mid-size
  // problems "pools" runs beside "offsets": otherwise they add up to the
  // call.
  std::string stage;
  int64_t micros = 0;
};

// One tensor of the request (a graph tensor, or a buffer of a list) and
// where it went. Tensors written in place share the planned buffer of the
// input they reuse.
struct TensorPlacement {
  std::string name;                           // as in the request
  TensorKind kind = TensorKind::kActivation;  // how a runtime treats it
  Bytes size = 0;                             // its own size in bytes
  Step start = 0;                             // its own first live step
  Step end = 0;                               // one past its own last step
  // The planned buffer holding it (index into PlanResult::problem.buffers),
  // or -1 when it is not planned (weights, or inputs/outputs left to the
  // caller: PlanOptions::weights_in_arena, io).
  int buffer = -1;
  // Set when an in_place op wrote it into the memory of this input.
  std::string in_place_of;
};

// How one memory space was planned (PlanOptions::memory_spaces).
struct MemorySpacePlan {
  std::string name;       // the space's name
  Bytes capacity = 0;     // its capacity, 0: unbounded
  Bytes arena_size = 0;   // bytes of it the plan uses
  Bytes lower_bound = 0;  // largest sum of its buffers live at one step
  int buffers = 0;        // buffers placed in it
  std::string strategy;   // the strategy whose plan won for it
};

struct PlanResult {
  Problem problem;                   // the buffers planned, with lifetimes
  Solution solution;                 // offsets[i] for problem.buffers[i]
  std::string strategy;              // the strategy whose plan won, or
                                     // "memory_pools" (see memory_spaces)
  IoPolicy io = IoPolicy::kRuntime;  // how graph inputs and outputs were
                                     // planned (PlanOptions::io)
  bool proven_optimal = false;       // arena == lower bound or search finished
  bool proven_infeasible = false;    // the search proved no plan fits capacity
  SharedObjects shared_objects;      // per planned buffer (stage 3)
  // The time budget (or the caller's deadline) was reached before the
  // optional work ended (the heuristics `optimize` adds, the hill climb, the
  // exact search), so another machine, or this one under other load, may
  // plan differently. False: the plan follows from the input and options
  // alone (no search ran, it ended by itself, or `effort` stopped it). A CI
  // that compares plans checks this first.
  bool time_limited = false;
  // No plan can be smaller: the largest sum of sizes live at one step, each
  // padded as alignment forces (PaddedLowerBound in problem.h).
  Bytes lower_bound = 0;
  Bytes unaligned_lower_bound = 0;  // the same without alignment padding
  Bytes naive_bytes = 0;    // every planned buffer its own aligned memory
  Bytes weights_bytes = 0;  // weights and constants not planned, folded
                            // ones left out (the model does not store them)
  std::vector<StageTime> stages;
  // Every tensor of the request, in request order, and where it went.
  std::vector<TensorPlacement> tensors;
  // With PlanOptions::memory_spaces: one entry per space, in the order
  // given, and per planned buffer the index of its space. solution.offsets
  // are then within each space and solution.arena_size is their sum.
  std::vector<MemorySpacePlan> memory_spaces;
  std::vector<int> memory_space_of;

  // The offset of tensor `t` (an index into `tensors`), -1 if not planned.
  Offset OffsetOf(size_t t) const {
    const int b = tensors[t].buffer;
    return b < 0 ? -1 : solution.offsets[static_cast<size_t>(b)];
  }
};

// When the time budget (options.time_budget, the optional work) of a plan
// starting at `start` ends: the budget from then, but never later than the
// earliest deadline of `cancel` (may be null) less what the plan needs
// after it (a tenth of the time left, at least 50 ms). A budget past the
// deadline so ends with the best plan so far (time_limited), not none.
absl::Time TimeBudgetEnd(const PlanOptions& options,
                         const base::CancelToken* cancel, absl::Time start);

// Plans a graph. INVALID_ARGUMENT for a malformed graph (liveness.h),
// FAILED_PRECONDITION when a capacity is set and no plan fits it,
// DEADLINE_EXCEEDED when cancelled before any plan, INTERNAL when no
// strategy's plan passes the verifier. `workers` and `cancel` may be null.
[[nodiscard]] absl::StatusOr<PlanResult> PlanGraph(
    const Graph& graph, const PlanOptions& options, base::WorkerPool* workers,
    const base::CancelToken* cancel);

// Plans a buffer list (validated by ValidateProblem); every buffer is an
// activation. Same errors.
[[nodiscard]] absl::StatusOr<PlanResult> PlanBuffers(
    Problem problem, const PlanOptions& options, base::WorkerPool* workers,
    const base::CancelToken* cancel);

// What PlanGraph and PlanBuffers would plan, without planning: the buffers
// (liveness, kinds, in-place merges; a list validated), the tensor table,
// weights_bytes and the lower bounds; no offsets (`memplan inspect`). The
// same errors but FAILED_PRECONDITION; `cancel` may be null.
[[nodiscard]] absl::StatusOr<PlanResult> PreviewGraph(
    const Graph& graph, const PlanOptions& options,
    const base::CancelToken* cancel = nullptr);
[[nodiscard]] absl::StatusOr<PlanResult> PreviewBuffers(
    Problem problem, const PlanOptions& options,
    const base::CancelToken* cancel = nullptr);

// What a plan chose, without the problem it was made for: what a plan
// cache keeps (engine/plan_cache.h). Indices are those of the planned
// buffers (PlanResult::problem.buffers) that the same request gives.
struct PlanChoices {
  Solution solution;             // an offset per planned buffer, the arena
  std::string strategy;          // PlanResult::strategy
  bool proven_optimal = false;   // PlanResult::proven_optimal
  SharedObjects shared_objects;  // per planned buffer
  std::vector<MemorySpacePlan> memory_spaces;  // PlanResult::memory_spaces
  std::vector<int> memory_space_of;            // per planned buffer
};

// The choices of a plan, to keep them.
PlanChoices ChoicesOf(const PlanResult& result);

// The plan `choices` give `graph` under `options`, trusting them in
// nothing: liveness, buffers, kinds, lower bounds and weights come from the
// graph as PlanGraph computes them, and the choices must pass the verifier
// on them (every tensor aligned, pinned where pinned, inside its arena and
// memory pool, no two live together overlapping but in-place hand-overs;
// shared objects of members never live together; capacities kept; arenas
// exactly as large as their plans; a known strategy name). No strategy
// runs, and the result is not time_limited. proven_optimal is taken as
// recorded (a search's proof is not repeated). INVALID_ARGUMENT as
// PlanGraph for a malformed graph; DATA_LOSS naming the first fault when the
// choices do not fit it; DEADLINE_EXCEEDED when cancelled. On large
// problems the checks run on up to options.max_threads of `workers` (may
// be null), as planning's do; the result is the same on any count.
[[nodiscard]] absl::StatusOr<PlanResult> AdoptGraphPlan(
    const Graph& graph, const PlanOptions& options, PlanChoices choices,
    const base::CancelToken* cancel, base::WorkerPool* workers = nullptr);

// The same for a buffer list (validated as PlanBuffers validates it).
[[nodiscard]] absl::StatusOr<PlanResult> AdoptBuffersPlan(
    Problem problem, const PlanOptions& options, PlanChoices choices,
    const base::CancelToken* cancel, base::WorkerPool* workers = nullptr);

// A text report: arena, lower bound, efficiency, saving against naive, the
// shared objects, and for small plans an ASCII picture (steps across, memory
// down).
std::string FormatReport(const PlanResult& result, int max_picture_rows = 40);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_PLANNER_H_
