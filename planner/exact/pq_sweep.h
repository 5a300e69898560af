// memplan planner: zero-slack problems solved by a sweep over time that
// keeps every memory order still possible in a PQ-tree.
//
// When every step's live bytes are 0 or exactly the capacity, a plan within
// the capacity leaves no gap anywhere: at each start time the buffers that
// end leave holes (runs of them touching in memory) and the buffers that
// start fill those holes exactly. A plan is then a memory order of the live
// buffers at every step, each start time replacing every run of ended
// buffers by a run of starting ones of the same total size. Which orders of
// the live buffers some history allows is exactly the set of frontiers of a
// PQ-tree (Booth and Lueker, 1976): a run of ended buffers must be
// consecutive (a PQ-tree reduction), and is then replaced by a P-node of
// the buffers filling it (in any order), as in vertex-addition planarity
// testing. The only choices left are how the ended buffers split into holes
// and which starting buffers fill each (sums of sizes must match), searched
// depth first; the tree refutes a wrong choice as soon as a run cannot be
// made consecutive. With one split per start time the sweep is polynomial;
// the exact solver (exact_solver.h) runs it first at zero slack.
//
// With fill_slack the capacity may leave slack: between every two
// consecutive event times the slack becomes one more buffer of that size
// (a filler), so every step is full again. A plan of that problem is a plan
// of the input with at most one free run per step (often enough when the
// slack is small); a plan with more runs is not searched, so once fillers
// were added the sweep finds plans but refutes none (a capacity that
// leaves no slack adds none: the plain sweep, refutations included).
//
//   PqSweepAnswer a = PqSweep(problem, capacity, {.max_nodes = 1 << 20},
//                             &cancel);
//   if (a.outcome == PqSweepOutcome::kFound) Use(a.offsets);
//
// Thread-safe: the state lives on the stack.
#ifndef MEMPLAN_PLANNER_EXACT_PQ_SWEEP_H_
#define MEMPLAN_PLANNER_EXACT_PQ_SWEEP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// What PqSweep concluded.
enum class PqSweepOutcome {
  kFound,          // a plan within the capacity (offsets)
  kInfeasible,     // proven: no plan within the capacity
  kNotApplicable,  // the capacity leaves slack (without fill_slack), fixed
                   // offsets, a gap-free plan found but misaligned, a start
                   // time with more than 12 ended or 16 starting buffers,
                   // none found among the splits kept (max_splits), or
                   // none with one free run per step (fill_slack): nothing
                   // concluded
  kStopped,        // out of nodes, or cancelled: nothing concluded
};

// Settings of PqSweep.
struct PqSweepOptions {
  // Splits tried (search nodes) at most; <= 0: no limit but the token.
  // Default 0.
  int64_t max_nodes = 0;
  // A start time's ways to split its ended and starting buffers into holes
  // kept at most (identical starting buffers taken as one), the finer ones: a
  // plan may still be found, but without all of them none is refuted. Default
  // 4096.
  int64_t max_splits = 4096;
  // The search restarts after 1, 1, 2, 1, 1, 2, 4, ... times this many
  // nodes (the Luby sequence), alternating forward and backward in time,
  // each run trying the splits of equal fineness in another shuffled
  // order: which choices lead to a plan at once varies a lot. A run that
  // ends within its length (found, or every choice refuted) answers.
  // Default 4096.
  int64_t restart_nodes = 4096;
  // Where the capacity leaves slack, search the plans with at most one free
  // run per step (each step's slack a filler buffer); kInfeasible then
  // means only that some step's live bytes exceed the capacity (or, with
  // no slack anywhere and so no fillers, what it means without this).
  // Default false: slack anywhere is kNotApplicable.
  bool fill_slack = false;
};

// The answer of PqSweep.
struct PqSweepAnswer {
  PqSweepOutcome outcome = PqSweepOutcome::kNotApplicable;
  std::vector<Offset> offsets;  // kFound: one per buffer, tops <= capacity
  int64_t nodes = 0;            // splits tried
};

// A sweep that can be continued: each Continue() call searches on for a
// number of nodes where the last one stopped (kStopped), so a caller can
// interleave it with other searches. Once an answer other than kStopped is
// given, every later call gives it again. Thread-compatible.
class PqSweeper {
 public:
  // Finds the start times and their splits (kNotApplicable or kInfeasible
  // may be known from these alone), polling `cancel` (may be null) between
  // start times: a sweeper cancelled while preparing answers kStopped to
  // every call. `problem` must outlive the sweeper.
  // REQUIRES sizes > 0 and start < end (ValidateBuffers).
  PqSweeper(const Problem& problem, Bytes capacity,
            const PqSweepOptions& options,
            const base::CancelToken* cancel = nullptr);
  ~PqSweeper();
  PqSweeper(const PqSweeper&) = delete;
  PqSweeper& operator=(const PqSweeper&) = delete;

  // Searches on for at most `max_nodes` nodes (<= 0: until an answer or
  // `cancel`, which may be null). options.max_nodes is not used here.
  PqSweepAnswer Continue(int64_t max_nodes, const base::CancelToken* cancel);

  // The capacity searched.
  Bytes capacity() const { return capacity_; }
  // Whether fillers were added (fill_slack where the capacity leaves slack).
  bool filled() const { return filled_; }

 private:
  struct Direction;
  struct Run;
  // Direction 0 (forward in time) or 1: prepared and not searched through.
  bool Searchable(int direction) const;
  const Problem& problem_;
  const Bytes capacity_;
  const PqSweepOptions options_;
  bool filled_ = false;  // fillers were added (fill_slack): refutes nothing
  PqSweepOutcome outcome_ = PqSweepOutcome::kNotApplicable;
  std::unique_ptr<Direction> directions_[2];  // forward, backward in time
  std::unique_ptr<Run> run_;                  // the run in progress
  int run_direction_ = 0;  // its direction: 0 forward, 1 backward
  int64_t runs_ = 0;       // runs started
};

// Searches a plan of `problem` within `capacity` when that capacity leaves
// zero slack: a PqSweeper continued once for options.max_nodes. `cancel` (may
// be null) stops it (kStopped). REQUIRES sizes > 0 and start < end
// (ValidateBuffers).
PqSweepAnswer PqSweep(const Problem& problem, Bytes capacity,
                      const PqSweepOptions& options,
                      const base::CancelToken* cancel);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_EXACT_PQ_SWEEP_H_
