#include "planner/exact/hole_groups.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace memplan::planner {
namespace {

// Ending (or starting) sets split, and starting (ending) sizes summed, at
// most: 3^10 (59,049) steps of the split per event, so that a problem of
// the exact solver's 4096 buffers takes well under a tenth of a second.
constexpr size_t kMaxSplit = 10;

// One direction of time: a buffer lives over [start, end).
struct Life {
  Step start = 0;
  Step end = 0;
  Bytes size = 0;
};

// Every subset sum of `sizes` (the empty one included), sorted, unique.
std::vector<Bytes> SubsetSums(const std::vector<Bytes>& sizes) {
  std::vector<Bytes> sums = {0};
  for (Bytes s : sizes) {
    const size_t n = sums.size();
    for (size_t i = 0; i < n; ++i) sums.push_back(sums[i] + s);
  }
  std::sort(sums.begin(), sums.end());
  sums.erase(std::unique(sums.begin(), sums.end()), sums.end());
  return sums;
}

// The events of `lives` (ZeroSlackEvents), or nothing when the capacity
// leaves slack somewhere.
std::optional<ZeroSlackEvents> SweepEvents(const std::vector<Life>& lives,
                                           Bytes capacity) {
  std::vector<Step> times;
  for (const Life& l : lives) times.push_back(l.start);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  ZeroSlackEvents events;
  events.times = times;
  events.starting.resize(times.size());
  events.ending.resize(times.size());
  events.cleared.resize(times.size());
  std::optional<Step> final_end;  // of the buffers live after the last start
  bool one_final_end = true;
  for (size_t i = 0; i < lives.size(); ++i) {
    const auto at = [&](Step t) {
      return std::lower_bound(times.begin(), times.end(), t) - times.begin();
    };
    events.starting[at(lives[i].start)].push_back(static_cast<int>(i));
    const size_t e = static_cast<size_t>(at(lives[i].end));
    if (e < times.size()) {
      events.ending[e].push_back(static_cast<int>(i));
    } else {
      one_final_end = one_final_end &&
                      (!final_end.has_value() || *final_end == lives[i].end);
      final_end = lives[i].end;
    }
  }
  if (!one_final_end) return std::nullopt;
  // Zero slack: after each start time's ends and starts the live bytes are
  // the capacity, and a buffer ends between start times only when all do.
  Bytes live = 0;
  for (size_t e = 0; e < times.size(); ++e) {
    bool all_at_start = true;
    for (int i : events.ending[e]) {
      live -= lives[i].size;
      all_at_start = all_at_start && lives[i].end == times[e];
    }
    if (live != 0 && !all_at_start) return std::nullopt;
    events.cleared[e] = live == 0;
    for (int i : events.starting[e]) live += lives[i].size;
    if (live != capacity) return std::nullopt;
  }
  return events;
}

// The groups of one event: `ends` must split into holes whose sizes are
// sums of `sums`. Adds each buffer's group (its hole's buffers in every
// split) to `groups`. (All of `ends` is one such hole: their sizes and the
// starting ones add up to the same.)
void SplitEnds(const std::vector<Life>& lives, const std::vector<int>& ends,
               const std::vector<Bytes>& sums,
               std::set<std::pair<std::vector<int>, Bytes>>& groups) {
  const size_t m = ends.size();
  const uint32_t full = (uint32_t{1} << m) - 1;
  std::vector<Bytes> sum(full + 1, 0);
  std::vector<char> hole(full + 1, 0), splits(full + 1, 0);
  for (uint32_t mask = 1; mask <= full; ++mask) {
    sum[mask] = sum[mask & (mask - 1)] + lives[ends[__builtin_ctz(mask)]].size;
    hole[mask] = std::binary_search(sums.begin(), sums.end(), sum[mask]);
  }
  splits[0] = 1;  // splits[mask]: mask's buffers split into holes
  for (uint32_t mask = 1; mask <= full; ++mask) {
    const uint32_t lowest = mask & (~mask + 1);
    for (uint32_t t = mask; t != 0 && !splits[mask]; t = (t - 1) & mask) {
      splits[mask] = (t & lowest) != 0 && hole[t] && splits[mask ^ t];
    }
  }
  for (size_t x = 0; x < m; ++x) {
    uint32_t with = full;
    Bytes span = 0;
    bool any = false;
    for (uint32_t t = 1; t <= full; ++t) {
      if ((t >> x & 1) == 0 || !hole[t] || !splits[full ^ t]) continue;
      with &= t;
      span = std::max(span, sum[t]);
      any = true;
    }
    if (!any || __builtin_popcount(with) < 2) continue;
    std::vector<int> members;
    for (size_t y = 0; y < m; ++y) {
      if (with >> y & 1) members.push_back(ends[y]);
    }
    std::sort(members.begin(), members.end());
    groups.emplace(std::move(members), span);
  }
}

// FindHoleGroups in one direction of time.
bool AddGroups(const std::vector<Life>& lives, Bytes capacity,
               const base::CancelToken* cancel,
               std::set<std::pair<std::vector<int>, Bytes>>& groups) {
  const std::optional<ZeroSlackEvents> events = SweepEvents(lives, capacity);
  if (!events) return false;
  for (size_t e = 0; e < events->ending.size(); ++e) {
    if (cancel != nullptr && cancel->Cancelled()) break;
    const std::vector<int>& ends = events->ending[e];
    const std::vector<int>& starts = events->starting[e];
    if (events->cleared[e] || ends.size() < 2 || ends.size() > kMaxSplit ||
        starts.size() > kMaxSplit) {
      continue;
    }
    std::vector<Bytes> sizes;
    for (int i : starts) sizes.push_back(lives[i].size);
    SplitEnds(lives, ends, SubsetSums(sizes), groups);
  }
  return true;
}

}  // namespace

HoleGroups FindHoleGroups(const Problem& problem, Bytes capacity,
                          const base::CancelToken* cancel) {
  std::vector<Life> forward, backward;
  for (const Buffer& b : problem.buffers) {
    forward.push_back({b.start, b.end, b.size});
    backward.push_back({-b.end, -b.start, b.size});
  }
  HoleGroups result;
  std::set<std::pair<std::vector<int>, Bytes>> groups;
  if (!AddGroups(forward, capacity, cancel, groups)) return result;
  AddGroups(backward, capacity, cancel, groups);
  result.zero_slack = true;
  for (const auto& [members, span] : groups) {
    result.groups.push_back({members, span});
  }
  return result;
}

std::optional<ZeroSlackEvents> FindZeroSlackEvents(const Problem& problem,
                                                   Bytes capacity) {
  std::vector<Life> lives;
  for (const Buffer& b : problem.buffers) {
    lives.push_back({b.start, b.end, b.size});
  }
  return SweepEvents(lives, capacity);
}

}  // namespace memplan::planner
