// memplan planner: buffers that share a hole in every zero-slack plan.
//
// When every step's live bytes are 0 or exactly the capacity (a capacity x
// time rectangle cut into buffers), a plan within the capacity leaves no
// gap at any step: at each start time the buffers that begin fill exactly
// the memory the ended ones left. The buffers ending at one time leave
// holes (runs of them touching in memory) whose sizes must each be a sum
// of some of the starting sizes. Trying every way of splitting the ending
// buffers into such holes shows, for each buffer, which others are in its
// hole in all of them, and how large that hole can be at most. The same
// holds backwards in time for the buffers that start together.
//
//   HoleGroups groups = FindHoleGroups(problem, capacity);
//   for (const HoleGroup& g : groups.groups) {
//     // In every plan within `capacity`, g.members lie in one span of at
//     // most g.span bytes.
//   }
#ifndef MEMPLAN_PLANNER_EXACT_HOLE_GROUPS_H_
#define MEMPLAN_PLANNER_EXACT_HOLE_GROUPS_H_

#include <optional>
#include <vector>

#include "base/cancel.h"
#include "planner/problem.h"

namespace memplan::planner {

// Buffers that lie together in memory in every plan within the capacity.
struct HoleGroup {
  std::vector<int> members;  // buffer indices, ascending; two or more
  // Their offsets and tops lie within this many bytes (>= their sizes'
  // sum; equal when the hole is exactly them, so they touch).
  Bytes span = 0;
};

// What FindHoleGroups found.
struct HoleGroups {
  // False when the capacity does not leave zero slack (no gap-free plan
  // has to exist: nothing is concluded).
  bool zero_slack = false;
  std::vector<HoleGroup> groups;  // distinct, in no particular order
};

// The groups of `problem` at `capacity`; ending (and starting) sets of more
// than 10 buffers, or with more than 10 starting (ending) sizes to sum, are
// not split. REQUIRES sizes > 0 and start < end; fixed offsets are ignored.
// Polls `cancel` (may be null) at every event: once it says stop, the groups
// found so far are returned (each still holds; fewer are found).
HoleGroups FindHoleGroups(const Problem& problem, Bytes capacity,
                          const base::CancelToken* cancel = nullptr);

// A zero-slack problem's timeline, per distinct start time (ascending): the
// buffers that start then, and the ones that end after the previous start
// time and by this one. `cleared` marks the times when nothing stays live
// across (the whole arena is free then, whatever the ended buffers' places).
struct ZeroSlackEvents {
  std::vector<Step> times;
  std::vector<std::vector<int>> starting, ending;
  std::vector<char> cleared;
};

// The events of `problem` at `capacity`, or nothing when the capacity
// leaves slack somewhere (a step whose live bytes are neither 0 nor the
// capacity, or buffers ending between start times while others stay).
// REQUIRES sizes > 0 and start < end.
std::optional<ZeroSlackEvents> FindZeroSlackEvents(const Problem& problem,
                                                   Bytes capacity);

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_EXACT_HOLE_GROUPS_H_
