// memplan planner, exact search internals: the hole groups' state along one
// path of the exact search.
//
// Before a zero-slack search, hole_groups.h finds groups of buffers that lie
// within one span of memory in every plan. HoleState follows the search as
// it places and removes buffers, and says whether the groups a placement
// touched can still lie within their spans: the search prunes a node where
// one cannot. It also hands the failure memo (failure_memo.h) what a failed
// state depends on besides the placed set: the offsets of the placed members
// of every group only partly placed. The Search class of exact_solver.cc
// owns one, active at zero slack when some group was found.
//
//   HoleState groups(found.groups, groups_of, sizes, /*active=*/true);
//   groups.Reset();                   // nothing placed
//   placed[b] = 1, offset[b] = 0;
//   groups.Place(b, 0);
//   if (!groups.Hold(b, raised, 0, {placed, offset, min_offset})) Prune();
//   placed[b] = 0, groups.Remove(b, 0);
//
// Internal to planner/exact/: not part of memplan's interface.
#ifndef MEMPLAN_PLANNER_EXACT_HOLE_STATE_H_
#define MEMPLAN_PLANNER_EXACT_HOLE_STATE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/exact/hole_groups.h"
#include "planner/problem.h"

namespace memplan::planner::exact_internal {

// What HoleState reads of the search's state, per buffer of the search (the
// indices of the groups' members); the vectors belong to the search.
struct PlacedView {
  const std::vector<char>& placed;        // 1 for a placed buffer
  const std::vector<Offset>& offset;      // a placed buffer's offset
  const std::vector<Offset>& min_offset;  // an unplaced one's lowest offset
};

// Per hole group: its members still unplaced and a hash of where the placed
// ones lie. Thread-compatible: one search thread owns it.
class HoleState {
 public:
  // `groups` (hole_groups.h), `groups_of` (per buffer, the indices of the
  // groups it is in) and `sizes` (per buffer) outlive this object. When not
  // `active` (slack, or no groups) every call holds and changes nothing.
  HoleState(const std::vector<HoleGroup>& groups,
            const std::vector<std::vector<int>>& groups_of,
            const std::vector<Bytes>& sizes, bool active)
      : groups_(groups),
        groups_of_(groups_of),
        sizes_(sizes),
        active_(active) {}

  // Whether groups are checked (the failure memo's key then includes
  // open_key()).
  bool active() const { return active_; }

  // A fresh run: every member unplaced.
  void Reset();

  // Buffer b was placed at `offset`.
  void Place(int b, Offset offset) {
    if (active_) Toggle(b, offset, -1);
  }
  // Buffer b, placed at `offset`, was unplaced again.
  void Remove(int b, Offset offset) {
    if (active_) Toggle(b, offset, +1);
  }

  // After b was placed: whether its groups, and those of every buffer whose
  // minimum offset the placement raised (the buffers named by the .first of
  // raised[from..], the search's undo log), can still lie within their
  // spans. Only those groups can newly fail.
  bool Hold(int b, const std::vector<std::pair<int, Offset>>& raised,
            size_t from, const PlacedView& view) const {
    return !active_ || HoldSlow(b, raised, from, view);
  }

  // A hash of the placed members' offsets of the groups with members both
  // placed and not: what Hold reads besides the search's floors and
  // minimum offsets (0 when no group is partly placed).
  uint64_t open_key() const { return open_; }

 private:
  // Hold's work when active.
  bool HoldSlow(int b, const std::vector<std::pair<int, Offset>>& raised,
                size_t from, const PlacedView& view) const;
  // Whether group g can still lie within its span.
  bool Fits(int g, const PlacedView& view) const;
  // Group g's share of open_key().
  uint64_t OpenTerm(int g) const;
  // Place (unplaced_delta -1) or Remove (+1) in every group of b.
  void Toggle(int b, Offset offset, int unplaced_delta);

  const std::vector<HoleGroup>& groups_;
  const std::vector<std::vector<int>>& groups_of_;
  const std::vector<Bytes>& sizes_;
  const bool active_;
  std::vector<int> unplaced_;   // per group: members not placed
  std::vector<uint64_t> hash_;  // per group: of the placed members' offsets
  uint64_t open_ = 0;           // open_key()
};

}  // namespace memplan::planner::exact_internal

#endif  // MEMPLAN_PLANNER_EXACT_HOLE_STATE_H_
