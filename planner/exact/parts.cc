#include "planner/exact/parts.h"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace memplan::planner::exact_internal {

// Every buffer crosses the boundaries inside its lifetime.
void Cuts::Reset(const std::vector<int>& sec_lo, const std::vector<int>& sec_hi,
                 int sections) {
  crossing_.assign(std::max(sections - 1, 0), 0);
  for (size_t b = 0; b < sec_lo.size(); ++b) {
    for (int s = sec_lo[b]; s + 1 < sec_hi[b]; ++s) ++crossing_[s];
  }
}

// Finds the cut sections, then files each unplaced buffer under the piece
// holding it (the pieces are in time order: by the first section).
size_t Cuts::SplitInto(const Part& part, const std::vector<char>& placed,
                       const std::vector<int>& sec_lo,
                       std::vector<Part>* out) const {
  size_t count = 0;  // pieces so far: (*out)[0, count)
  const auto open = [&](int lo) {
    if (count == out->size()) out->emplace_back();
    Part& p = (*out)[count++];
    p.buffers.clear();
    p.lo = lo;
  };
  open(part.lo);
  for (int s = part.lo; s + 1 < part.hi; ++s) {
    if (crossing_[s] == 0) {
      (*out)[count - 1].hi = s + 1;
      open(s + 1);
    }
  }
  (*out)[count - 1].hi = part.hi;
  for (int b : part.buffers) {
    if (placed[b]) continue;
    // The last piece starting at or before b's first section.
    const auto after =
        std::upper_bound(out->begin(), out->begin() + count, sec_lo[b],
                         [](int lo, const Part& p) { return lo < p.lo; });
    (after - 1)->buffers.push_back(b);
  }
  // Leave out the empty pieces; swaps keep every piece's storage in *out.
  size_t kept = 0;
  for (size_t k = 0; k < count; ++k) {
    if ((*out)[k].buffers.empty()) continue;
    if (kept != k) std::swap((*out)[kept], (*out)[k]);
    ++kept;
  }
  return kept;
}

std::vector<Part> Cuts::Split(const Part& part, const std::vector<char>& placed,
                              const std::vector<int>& sec_lo) const {
  std::vector<Part> parts;
  parts.resize(SplitInto(part, placed, sec_lo, &parts));
  return parts;
}

}  // namespace memplan::planner::exact_internal
