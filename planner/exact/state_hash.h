// memplan planner, exact search internals: the hashing the exact search
// keys its states and seeds with.
//
// Mix is SplitMix64's finalizer; Hash128 is an order-free 128-bit hash of a
// set (toggling an element in or out) that can be extended with more
// values. The failure memo (failure_memo.h) keys failed search states with
// it, the hole-group state (hole_state.h) hashes its members' offsets with
// Mix, and exact_solver.cc draws the dives' key perturbations from Mix.
//
//   exact_internal::Hash128 set;
//   set.Toggle(3);                       // {3}
//   set.Toggle(7);                       // {3, 7}, in either order
//   const exact_internal::Hash128 key = set.With(42);  // ({3, 7}, 42)
//   set.Toggle(3);                       // {7}
//
// Internal to planner/exact/: not part of memplan's interface.
#ifndef MEMPLAN_PLANNER_EXACT_STATE_HASH_H_
#define MEMPLAN_PLANNER_EXACT_STATE_HASH_H_

#include <cstdint>
#include <utility>

namespace memplan::planner::exact_internal {

// SplitMix64's finalizer: a well-mixed 64-bit value of x (a hash of one
// value, or a seed drawn from another).
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A 128-bit hash: two independent 64-bit ones, so that a collision (which
// would prune a live subtree) is out of reach in any search. A value type;
// thread-compatible.
struct Hash128 {
  // Offsets the second hash's inputs from the first's (odd).
  static constexpr uint64_t kSecond = 0x632be59bd9b4e019ULL;
  uint64_t a = 0;  // the first 64-bit hash
  uint64_t b = 0;  // the second, independent of the first

  // Adds x to the hashed set, or takes it out (its own inverse).
  void Toggle(uint64_t x) {
    a ^= Mix(x);
    b ^= Mix(x + kSecond);
  }
  // The hash of (this, x): order matters, unlike Toggle.
  Hash128 With(uint64_t x) const {
    return {Mix(a ^ Mix(x)), Mix(b ^ Mix(x + kSecond))};
  }
  bool operator==(const Hash128& o) const { return a == o.a && b == o.b; }
  // Lets absl's hash containers hold it.
  template <typename H>
  friend H AbslHashValue(H h, const Hash128& k) {
    return H::combine(std::move(h), k.a, k.b);
  }
};

}  // namespace memplan::planner::exact_internal

#endif  // MEMPLAN_PLANNER_EXACT_STATE_HASH_H_
