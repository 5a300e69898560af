#include "planner/exact/hole_state.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "planner/exact/state_hash.h"

namespace memplan::planner::exact_internal {

// Every member unplaced, no group open: the state a run starts from.
void HoleState::Reset() {
  if (!active_) return;
  unplaced_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    unplaced_[g] = static_cast<int>(groups_[g].members.size());
  }
  hash_.assign(groups_.size(), 0);
  open_ = 0;
}

// Only the groups of b and of the buffers it raised changed.
bool HoleState::HoldSlow(int b,
                         const std::vector<std::pair<int, Offset>>& raised,
                         size_t from, const PlacedView& view) const {
  for (int g : groups_of_[b]) {
    if (!Fits(g, view)) return false;
  }
  for (size_t k = from; k < raised.size(); ++k) {
    for (int g : groups_of_[raised[k].first]) {
      if (!Fits(g, view)) return false;
    }
  }
  return true;
}

// Group g's placed buffers lie within its span, and each unplaced one can
// still be placed inside it (it goes to its minimum offset or higher).
bool HoleState::Fits(int g, const PlacedView& view) const {
  const HoleGroup& group = groups_[g];
  Offset lo = std::numeric_limits<Offset>::max(), hi = -1;
  for (int b : group.members) {
    if (!view.placed[b]) continue;
    lo = std::min(lo, view.offset[b]);
    hi = std::max(hi, view.offset[b] + sizes_[b]);
  }
  if (hi < 0) return true;
  if (hi - lo > group.span) return false;
  for (int b : group.members) {
    if (!view.placed[b] && view.min_offset[b] + sizes_[b] > lo + group.span) {
      return false;
    }
  }
  return true;
}

// A hash of group g's placed members' offsets while some members are placed
// and some not, else nothing (Fits reads a group only when one of its
// members is placed or raised, and a group wholly placed reads no minimum
// offsets).
uint64_t HoleState::OpenTerm(int g) const {
  const int unplaced = unplaced_[g];
  if (unplaced == 0 ||
      unplaced == static_cast<int>(groups_[g].members.size())) {
    return 0;
  }
  return Mix(hash_[g] ^ Mix(static_cast<uint64_t>(g)));
}

// Keeps every group's count, hash and share of open_ in step with b.
void HoleState::Toggle(int b, Offset offset, int unplaced_delta) {
  for (int g : groups_of_[b]) {
    open_ ^= OpenTerm(g);
    hash_[g] ^= Mix(static_cast<uint64_t>(b) * Hash128::kSecond +
                    static_cast<uint64_t>(offset));
    unplaced_[g] += unplaced_delta;
    open_ ^= OpenTerm(g);
  }
}

}  // namespace memplan::planner::exact_internal
