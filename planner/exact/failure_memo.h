// memplan planner, exact search internals: the failure memo, the search
// states the exact search has already seen fail.
//
// At zero slack (every section's live bytes equal the capacity searched)
// every node that survives the bounds packs its sections without a gap, so
// its floors and minimum offsets follow from the SET of placed buffers,
// whatever their offsets: a node that failed fails again when another
// order of placements reaches the same set in the same part with the same
// rank restriction. The memo keeps the keys of failed nodes across the
// restarts and orderings of a round robin, so a restart skips what the last
// run finished (ExactOptions::remember_failures). The Search class of
// exact_solver.cc owns one and feeds it every placement; at zero slack one
// Search per capacity runs every ordering's restarts, one at a time on
// whichever search thread is free, so they all share its memo.
//
//   FailureMemo memo(/*enabled=*/true);
//   memo.StartRun("Zh", /*seed=*/0);  // nothing placed yet
//   memo.Toggle(b);                   // b placed
//   const Hash128 key = memo.Key(std::nullopt, /*any_order=*/true, 0, -1);
//   if (!memo.Failed(key) && !SearchNode()) memo.Remember(key);
//
// Internal to planner/exact/: not part of memplan's interface.
#ifndef MEMPLAN_PLANNER_EXACT_FAILURE_MEMO_H_
#define MEMPLAN_PLANNER_EXACT_FAILURE_MEMO_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "planner/exact/state_hash.h"
#include "planner/problem.h"

namespace memplan::planner::exact_internal {

// Failed states remembered per memo: 7/8 of 2^21, the most a table of 2^21
// slots holds (about 36 MB: 16-byte keys and a control byte per slot).
inline constexpr size_t kMaxFailedStates = (size_t{1} << 21) / 8 * 7;

// The keys of the failed nodes of one search thread, and the hashes of the
// placed set and the part being searched that the next key is made of.
// Thread-compatible: one search thread owns it.
class FailureMemo {
 public:
  // `enabled`: failures are remembered (zero slack and
  // ExactOptions::remember_failures). Failed and Remember REQUIRE it; the
  // placed set and part are followed either way.
  explicit FailureMemo(bool enabled) : enabled_(enabled) {}

  // Whether the search should key its nodes at all.
  bool enabled() const { return enabled_; }

  // Starts a run of `ordering` (ExactOptions::orderings' letters, 'h'
  // included) perturbed by `seed` (0: none): nothing placed, no part
  // entered. The failures of earlier runs are kept.
  void StartRun(const std::string& ordering, uint64_t seed);

  // Buffer b was placed, or unplaced again (each undoes the other).
  void Toggle(int b) { placed_set_.Toggle(static_cast<uint64_t>(b)); }

  // Enters the part of sections [lo, hi), searched from the current placed
  // set; returns what LeavePart restores.
  Hash128 EnterPart(int lo, int hi);
  // Back in the enclosing part (`saved`: EnterPart's answer).
  void LeavePart(const Hash128& saved) { part_key_ = saved; }

  // The key of the current node: the placed set and part, plus
  // `open_groups` (HoleState::open_key) when hole groups are checked. With
  // `any_order` the node's rank restriction admits every candidate: it is
  // searched completely under any ordering (the orderings only change which
  // child comes first), so its failure is a fact about the state, shared by
  // all orderings. Otherwise the key names the run's ordering and the
  // restriction (last_offset, last_rank).
  Hash128 Key(std::optional<uint64_t> open_groups, bool any_order,
              Offset last_offset, int last_rank) const;

  // Whether a node of this key failed before. REQUIRES enabled().
  bool Failed(const Hash128& key) const { return failed_.contains(key); }
  // Records that the node of `key` failed, while fewer than
  // kMaxFailedStates are held. REQUIRES enabled().
  void Remember(const Hash128& key);

 private:
  const bool enabled_;
  Hash128 placed_set_;         // of the placed buffers
  Hash128 part_key_;           // the part being searched: its sections
  uint64_t ordering_key_ = 0;  // the run's ordering and seed
  absl::flat_hash_set<Hash128> failed_;  // keys of failed nodes
};

}  // namespace memplan::planner::exact_internal

#endif  // MEMPLAN_PLANNER_EXACT_FAILURE_MEMO_H_
