#include "planner/exact/parts.h"

#include <algorithm>
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
// holding it.
std::vector<Part> Cuts::Split(const Part& part, const std::vector<char>& placed,
                              const std::vector<int>& sec_lo) const {
  std::vector<int> starts = {part.lo};  // first section of every piece
  for (int s = part.lo; s + 1 < part.hi; ++s) {
    if (crossing_[s] == 0) starts.push_back(s + 1);
  }
  std::vector<Part> parts(starts.size());
  for (size_t k = 0; k < starts.size(); ++k) {
    parts[k].lo = starts[k];
    parts[k].hi = k + 1 < starts.size() ? starts[k + 1] : part.hi;
  }
  for (int b : part.buffers) {
    if (placed[b]) continue;
    const size_t k = std::upper_bound(starts.begin(), starts.end(), sec_lo[b]) -
                     starts.begin() - 1;
    parts[k].buffers.push_back(b);
  }
  parts.erase(std::remove_if(parts.begin(), parts.end(),
                             [](const Part& p) { return p.buffers.empty(); }),
              parts.end());
  return parts;
}

}  // namespace memplan::planner::exact_internal
