// Greedy offset assignment: buffers are taken in a fixed order and each is
// put into a gap among the already placed buffers whose lifetimes overlap its
// own (TFLite's ArenaPlanner, XLA's heap simulator, tflite-micro's greedy
// planner). Best fit takes the smallest gap that holds the buffer; first fit
// the lowest. Fixed-offset buffers are placed first, where they are pinned.
//
//   planner::GreedyStrategy best(planner::GreedyOrder::kSize,
//                                planner::FitPolicy::kBestFit);
//   absl::StatusOr<planner::Solution> s = best.Solve(problem, {});
//
// Buffers live over the whole schedule (weights, graph inputs and outputs)
// are stacked at the arena's base first: they can share with nothing.
//
// Cost: O(n log n) set-up (compressed time, the order), then per buffer
// the gap search over the ranges taken during its lifetime. When buffers
// overlap few others (fewer than 128 on average) those come from a TimeIndex
// scan (cost: the placed buffers it overlaps); otherwise from a GapIndex
// (gap_index.h), merged (cost: O(log^2 n) plus the merged ranges read), so
// buffers stacked over one another cost a range, not one entry each.
// Either way the same gaps, so the same plans. The cancel token is polled
// every few milliseconds of work, set-up included.
#ifndef MEMPLAN_PLANNER_GREEDY_H_
#define MEMPLAN_PLANNER_GREEDY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/parallel.h"
#include "planner/gap.h"
#include "planner/strategy.h"

namespace memplan::planner {

// The order in which buffers are placed.
enum class GreedyOrder {
  kSize,      // largest first, then earliest start (TFLite, XLA)
  kLifetime,  // earliest start first, then largest
  kArea,      // largest size * lifetime first
  // Most interfering first: by the number of other buffers whose lifetimes
  // overlap, then largest, then index (TVM USMP's greedy_by_conflicts).
  kConflicts,
  // Widest step first (Pisarchyk and Lee's "greedy by breadth", TFLite GPU):
  // steps in decreasing order of the sum of sizes live there; at each step
  // its live buffers not yet placed, largest first. A buffer thus goes at
  // the widest step of its lifetime.
  kBreadth,
};

// For each buffer, how many other buffers' lifetimes overlap its own.
// O(n log n): compressed time and counting, no pair is visited.
std::vector<int64_t> CountConflicts(const Problem& problem);

// The work of one greedy placement of every buffer, in the units the hill
// climb and the default plan's climb count: n plus the sum of
// CountConflicts (each buffer placed reads the placed ones it overlaps).
int64_t PlacementWork(const Problem& problem);

// The placement order of `problem` under `order`; ties by index.
// O(n log n).
std::vector<int> GreedyPlacementOrder(const Problem& problem,
                                      GreedyOrder order);
// The same, polling `cancel` (may be null): DEADLINE_EXCEEDED when
// cancelled.
[[nodiscard]] absl::StatusOr<std::vector<int>> GreedyPlacementOrder(
    const Problem& problem, GreedyOrder order, const base::CancelToken* cancel);
// The same, sorting on the threads `parallel` gives (the same order).
[[nodiscard]] absl::StatusOr<std::vector<int>> GreedyPlacementOrder(
    const Problem& problem, GreedyOrder order, const base::CancelToken* cancel,
    const base::Parallelism& parallel);

// The size order (GreedyOrder::kSize) of one problem, sorted once for
// every stage of a plan that reads it: the shared-object coloring and the
// size-ordered greedy heuristics (a million buffers: about 30 ms of one
// core per sort). Thread-safe: the first caller sorts, on the threads its
// `parallel` gives, while later callers wait for its order; a sort cut
// short by its caller's token is not kept, and the next caller sorts
// again under its own.
class SizeOrderCache {
 public:
  explicit SizeOrderCache(const Problem* problem) : problem_(problem) {}
  SizeOrderCache(const SizeOrderCache&) = delete;
  SizeOrderCache& operator=(const SizeOrderCache&) = delete;

  // Whether this cache sorts `problem` (the same object, not a copy).
  bool Holds(const Problem& problem) const { return &problem == problem_; }

  // The order, sorted at the first call that is not cancelled; polls
  // `cancel` (may be null) while sorting: DEADLINE_EXCEEDED when cancelled.
  [[nodiscard]] absl::StatusOr<const std::vector<int>*> Get(
      const base::CancelToken* cancel, const base::Parallelism& parallel);

 private:
  const Problem* const problem_;
  absl::Mutex mu_;
  std::optional<std::vector<int>> order_ ABSL_GUARDED_BY(mu_);
};

// GreedyPlacementOrder(problem, GreedyOrder::kSize, cancel, parallel): the
// order `cache` (may be null) keeps when it holds `problem`, else sorted
// into *own. The pointer lives as long as the cache or *own.
[[nodiscard]] absl::StatusOr<const std::vector<int>*> SizeOrder(
    const Problem& problem, SizeOrderCache* cache,
    const base::CancelToken* cancel, const base::Parallelism& parallel,
    std::vector<int>* own);

// Places buffers in `order` (every index once). Thread-safe.
[[nodiscard]] absl::StatusOr<Solution> PlaceInOrder(
    const Problem& problem, const std::vector<int>& order, FitPolicy fit,
    const base::CancelToken* cancel);

// PlaceInOrder with best fit that gives up once a buffer would end above
// `limit`: ABORTED then (the moves of the hill climb keep only plans no
// larger than the best so far, so the rest of a worse one is not placed).
// `time`: the problem's compressed lifetimes (sections.h); null: computed.
// Otherwise the plan PlaceInOrder gives. Thread-safe.
[[nodiscard]] absl::StatusOr<Solution> PlaceInOrderWithin(
    const Problem& problem, const std::vector<int>& order, Bytes limit,
    const Sections* time, const base::CancelToken* cancel);

// Where placement finds the ranges taken during a buffer's lifetime.
enum class OverlapSearch {
  kAuto,    // kScan when buffers overlap few others, else kMerged
  kScan,    // a TimeIndex scan of the placed buffers overlapping it
  kMerged,  // merged ranges from a GapIndex
};

// PlaceInOrder with the search chosen (tests and benchmarks): every
// choice gives the same plan.
[[nodiscard]] absl::StatusOr<Solution> PlaceInOrder(
    const Problem& problem, const std::vector<int>& order, FitPolicy fit,
    const base::CancelToken* cancel, OverlapSearch search);

// PlaceInOrder cut into time windows in which about `buffers_per_window`
// buffers start (windows.h; large problems are placed so by default), on
// the threads `parallel` gives (tests and benchmarks): the plan of one
// pass, whatever the windows and the threads.
[[nodiscard]] absl::StatusOr<Solution> PlaceInOrder(
    const Problem& problem, const std::vector<int>& order, FitPolicy fit,
    const base::CancelToken* cancel, OverlapSearch search,
    int buffers_per_window, const base::Parallelism& parallel);

// Places buffers in `order` with best fit, skipping every buffer that would
// end past `capacity`: their offsets stay -1, and arena_size covers the
// placed ones. What fits is decided in order, so earlier buffers win.
// REQUIRES no fixed offsets. Thread-safe.
[[nodiscard]] absl::StatusOr<Solution> PlaceWithinCapacity(
    const Problem& problem, const std::vector<int>& order, Bytes capacity,
    const base::CancelToken* cancel);

// Buffers live over the whole schedule share memory with nothing, so they
// are stacked at the arena's base, most aligned first, then largest, and
// the rest is planned above them: this keeps graphs with many weights
// linear. Does nothing when any buffer is pinned (pins may lie anywhere).
// Sets their offsets in `solution` (sized to the problem) and returns the
// stack's top.
Offset StackSpanningBuffers(const Problem& problem, Solution* solution);

class GreedyStrategy : public OffsetStrategy {
 public:
  GreedyStrategy(GreedyOrder order, FitPolicy fit);
  std::string_view name() const override { return name_; }
  absl::StatusOr<Solution> Solve(const Problem& problem,
                                 const SolveContext& ctx) const override;

 private:
  GreedyOrder order_;
  FitPolicy fit_;
  std::string name_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_GREEDY_H_
