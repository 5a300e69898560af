// What every memplan fuzz target checks after a parser or the engine
// accepted an input: the plan is valid (checked here independently of the
// planner's own verifier), within the small limits the targets plan under.
// A violation aborts, which libFuzzer reports as a crash with the input.
#ifndef MEMPLAN_TESTS_FUZZ_FUZZ_CHECKS_H_
#define MEMPLAN_TESTS_FUZZ_FUZZ_CHECKS_H_

#include "engine/plan.h"
#include "planner/planner.h"

namespace memplan::fuzz {

// Limits small enough that one input plans in milliseconds.
engine::Limits SmallLimits();

// Aborts unless every planned tensor of `result` is aligned, inside its
// arena, and overlaps no other tensor live at the same step in the same
// memory space (except in-place hand-overs). O(n^2): inputs are small.
void CheckPlan(const planner::PlanResult& result);

// The same buffers through other paths, each checked (aborts on a fault):
// the O(n log n) fallbacks of planner/sweep.h, pair by pair; and, for a
// few unpinned buffers topped up to a zero-slack packing, the exact search
// with and without remembered failures (same verdict, never more nodes).
void CheckOtherPaths(const planner::Problem& problem);

// Plans `request` under SmallLimits and a 2 s deadline; checks the plan
// when there is one. Errors are fine (bad input is bad input).
void PlanAndCheck(const v1::PlanRequest& request);

}  // namespace memplan::fuzz

#endif  // MEMPLAN_TESTS_FUZZ_FUZZ_CHECKS_H_
