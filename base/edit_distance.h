// How far apart two names are, for "did you mean" suggestions: the optimal
// string alignment distance (inserting, deleting or changing a character,
// or swapping two adjacent ones, each costs 1), so that the usual typos
// ("bacth", "bach", "Batch") are 1 from "batch".
//
//   base::EditDistance("bacth", "batch");            // 1
//   base::LooksLikeMisspelling("bach", "batch");     // true
//   base::LooksLikeMisspelling("seq_len", "batch");  // false
//   base::ClosestName("bach", {"batch", "length"});  // "batch"
#ifndef MEMPLAN_BASE_EDIT_DISTANCE_H_
#define MEMPLAN_BASE_EDIT_DISTANCE_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace memplan::base {

// The optimal string alignment distance between `a` and `b`, byte by byte.
inline size_t EditDistance(absl::string_view a, absl::string_view b) {
  // Three rows: two back (for swaps), one back, and this one.
  std::vector<size_t> two(b.size() + 1), one(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) one[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({one[j] + 1, row[j - 1] + 1, one[j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], two[j - 2] + 1);
      }
    }
    std::swap(two, one);
    std::swap(one, row);
  }
  return one[b.size()];
}

// Whether `given` is close enough to `known` to be a typo of it (and is not
// it): up to one edit in every three characters of `known`, at least one.
inline bool LooksLikeMisspelling(absl::string_view given,
                                 absl::string_view known) {
  if (given == known) return false;
  const size_t allowed = std::max<size_t>(1, (known.size() + 1) / 3);
  const size_t longer = std::max(given.size(), known.size());
  const size_t shorter = std::min(given.size(), known.size());
  if (longer - shorter > allowed) return false;  // no need to count
  return EditDistance(given, known) <= allowed;
}

// The name of `known` that `given` most likely misspells (the nearest; the
// first of equals), or "" when none is close enough.
inline std::string ClosestName(absl::string_view given,
                               const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& k : known) {
    if (!LooksLikeMisspelling(given, k)) continue;
    const size_t d = EditDistance(given, k);
    if (best.empty() || d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_EDIT_DISTANCE_H_
