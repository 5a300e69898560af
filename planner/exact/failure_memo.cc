#include "planner/exact/failure_memo.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/hash/hash.h"

namespace memplan::planner::exact_internal {

// A run starts with nothing placed; only rank-restricted keys name its
// ordering, so the failures proven by other runs keep pruning.
void FailureMemo::StartRun(const std::string& ordering, uint64_t seed) {
  ordering_key_ = absl::HashOf(ordering, seed);
  placed_set_ = {};
  part_key_ = {};
}

// A part follows from its sections and the placed set when it was entered;
// its key leaves the ordering out (Key adds it where the ranks matter).
Hash128 FailureMemo::EnterPart(int lo, int hi) {
  const Hash128 saved = part_key_;
  part_key_ = placed_set_.With(static_cast<uint64_t>(lo))
                  .With(static_cast<uint64_t>(hi));
  return saved;
}

// The floors and minimum offsets follow from the placed set; hole groups
// also read the offsets of placed members, which two orders of the same
// placements can leave at different offsets (hence `open_groups`). Every
// section with unplaced bytes is tight at zero slack, so a node whose
// restriction admits all its candidates is the same whatever the ordering.
Hash128 FailureMemo::Key(std::optional<uint64_t> open_groups, bool any_order,
                         Offset last_offset, int last_rank) const {
  Hash128 key = placed_set_;
  key.a ^= part_key_.a;
  key.b ^= part_key_.b;
  if (open_groups) key = key.With(*open_groups);
  if (any_order) return key.With(~uint64_t{0});
  // The ranks, and so the restriction, depend on the ordering.
  return key.With(ordering_key_)
      .With(static_cast<uint64_t>(last_offset))
      .With(static_cast<uint64_t>(static_cast<int64_t>(last_rank)));
}

// Bounded, so that a long search's memory stays within about 36 MB.
void FailureMemo::Remember(const Hash128& key) {
  if (failed_.size() < kMaxFailedStates) failed_.insert(key);
}

}  // namespace memplan::planner::exact_internal
