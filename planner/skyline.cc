#include "planner/skyline.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "planner/sections.h"
#include "planner/validate.h"

namespace memplan::planner {
namespace {

// Units of work (base::WorkMeter's) per buffer taken from the queue,
// beside the pinned buffers its lift passes: the tree's two walks.
constexpr int64_t kPopWork = 8;

// Lifetimes spanning at most this many intervals on average use a flat
// skyline: each read and raise then costs the intervals it spans (counted
// as work, a unit per kFlatWidth).
constexpr int64_t kFlatWidth = 16;

// The highest top: room above it for any alignment's rounding.
constexpr Offset kHighest = std::numeric_limits<Offset>::max() - kMaxAlignment;

// The skyline over compressed time: the highest top placed in each
// elementary interval, with range max queries and range raises (tops only
// rise). Where lifetimes span few intervals (kFlatWidth on average) a flat
// array read and written interval by interval; otherwise a bottom-up
// segment tree: max_[p] is the highest top in p's subtree, raised_[p]
// (inner nodes) a raise that covered all of p's subtree, not pushed down
// (it holds for p's leaves all the same, so a query takes it from the
// ancestors of its end leaves). The same answers either way.
class Skyline {
 public:
  Skyline(int size, bool flat) : flat_(flat) {
    if (flat_) {
      max_.assign(size, 0);
      return;
    }
    while (leaves_ < size) leaves_ *= 2;
    max_.assign(2 * leaves_, 0);
    raised_.assign(leaves_, 0);
  }

  // The highest top over intervals [lo, hi). REQUIRES lo < hi.
  Offset Max(int lo, int hi) const {
    if (flat_) return *std::max_element(&max_[lo], &max_[lo] + (hi - lo));
    Offset top = std::max(Above(lo + leaves_), Above(hi - 1 + leaves_));
    for (int l = lo + leaves_, r = hi + leaves_; l < r; l >>= 1, r >>= 1) {
      if (l & 1) top = std::max(top, max_[l++]);
      if (r & 1) top = std::max(top, max_[--r]);
    }
    return top;
  }

  // Raises intervals [lo, hi) to at least `top`. REQUIRES lo < hi.
  void Raise(int lo, int hi, Offset top) {
    if (flat_) {
      for (int k = lo; k < hi; ++k) max_[k] = std::max(max_[k], top);
      return;
    }
    for (int l = lo + leaves_, r = hi + leaves_; l < r; l >>= 1, r >>= 1) {
      if (l & 1) RaiseNode(l++, top);
      if (r & 1) RaiseNode(--r, top);
    }
    Rebuild(lo + leaves_);
    Rebuild(hi - 1 + leaves_);
  }

 private:
  void RaiseNode(int p, Offset top) {
    max_[p] = std::max(max_[p], top);
    if (p < leaves_) raised_[p] = std::max(raised_[p], top);
  }
  // The raises pending above leaf p.
  Offset Above(int p) const {
    Offset top = 0;
    for (p >>= 1; p >= 1; p >>= 1) top = std::max(top, raised_[p]);
    return top;
  }
  // Recomputes the ancestors of leaf p.
  void Rebuild(int p) {
    for (p >>= 1; p >= 1; p >>= 1) {
      max_[p] = std::max({max_[2 * p], max_[2 * p + 1], raised_[p]});
    }
  }

  const bool flat_;
  int leaves_ = 1;
  std::vector<Offset> max_;     // per interval (flat), else per node
  std::vector<Offset> raised_;  // per inner node: a raise of all of it
};

// The order among equal floors: largest area (size x lifetime) or size
// first, then the lowest index. Per buffer its rank in that order.
std::vector<int> Ranks(const Problem& problem, SkylineTies ties) {
  const std::vector<Buffer>& b = problem.buffers;
  const auto width = [&](size_t i) -> uint64_t {
    return ties == SkylineTies::kArea
               ? static_cast<uint64_t>(b[i].end - b[i].start)
               : 1;
  };
  // Ranks by (~area, index) keys of the type of `zero`: largest first.
  std::vector<int> rank(b.size());
  const auto rank_by = [&](auto zero) {
    using Key = decltype(zero);
    std::vector<std::pair<Key, int>> keys(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
      keys[i] = {~(Key(static_cast<uint64_t>(b[i].size)) * width(i)),
                 static_cast<int>(i)};
    }
    std::sort(keys.begin(), keys.end());
    for (size_t r = 0; r < keys.size(); ++r) {
      rank[keys[r].second] = static_cast<int>(r);
    }
  };
  uint64_t max_size = 0, max_width = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_size = std::max(max_size, static_cast<uint64_t>(b[i].size));
    max_width = std::max(max_width, width(i));
  }
  // Where every area fits in 64 bits (nearly always), the cheaper keys.
  if (max_width == 0 ||
      max_size <= std::numeric_limits<uint64_t>::max() / max_width) {
    rank_by(uint64_t{0});
  } else {
    rank_by(absl::uint128(0));
  }
  return rank;
}

// Pinned buffers, lowest offset first: the obstacles a floor is lifted
// over.
std::vector<int> PinnedByOffset(const Problem& problem) {
  std::vector<int> pinned;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (problem.buffers[i].fixed_offset) pinned.push_back(static_cast<int>(i));
  }
  std::sort(pinned.begin(), pinned.end(), [&](int x, int y) {
    return *problem.buffers[x].fixed_offset < *problem.buffers[y].fixed_offset;
  });
  return pinned;
}

// The lowest offset >= `floor`, aligned, where buffer `b` clears every
// pinned buffer live with it; counts a unit per pinned buffer passed.
// Returns > kHighest - size when none fits below 2^63.
Offset Lift(const Problem& problem, const std::vector<int>& pinned, int b,
            Offset floor, int64_t* work) {
  const Buffer& x = problem.buffers[b];
  Offset at = AlignUp(floor, x.alignment);
  for (int p : pinned) {
    ++*work;
    const Buffer& y = problem.buffers[p];
    // (at + size may pass 2^63: compared the other way round.)
    if (*y.fixed_offset - x.size >= at) break;
    if (!LifetimesOverlap(x, y)) continue;
    const Offset top = *y.fixed_offset + y.size;
    if (top > at) at = AlignUp(top, x.alignment);
    if (at > kHighest - x.size) break;
  }
  return at;
}

// Restores the min-heap `heap` after its first entry rose.
template <typename Entry>
void SiftDown(std::vector<Entry>* heap) {
  std::vector<Entry>& h = *heap;
  const size_t n = h.size();
  size_t at = 0;
  const Entry moved = h[0];
  for (;;) {
    size_t child = 2 * at + 1;
    if (child >= n) break;
    if (child + 1 < n && h[child + 1] < h[child]) ++child;
    if (!(h[child] < moved)) break;
    h[at] = h[child];
    at = child;
  }
  h[at] = moved;
}

}  // namespace

absl::StatusOr<Solution> SkylineOffsets(const Problem& problem,
                                        const base::CancelToken* cancel,
                                        const SkylineOptions& options) {
  const std::vector<Buffer>& b = problem.buffers;
  const int n = static_cast<int>(b.size());
  Solution solution;
  solution.offsets.assign(n, -1);
  // Two lifetimes overlap exactly when their compressed ranges do.
  Sections own;
  absl::StatusOr<const Sections*> time =
      CompressedTime(problem, options.time, &own, cancel);
  if (!time.ok()) return time.status();
  const std::vector<int>& lo = (*time)->first;
  const std::vector<int>& hi = (*time)->last;
  const int intervals = (*time)->size();
  int64_t widths = 0;
  for (int i = 0; i < n; ++i) widths += hi[i] - lo[i];
  const bool flat = options.index == SkylineIndex::kAuto
                        ? widths <= kFlatWidth * n
                        : options.index == SkylineIndex::kFlat;
  Skyline skyline(intervals, flat);
  const std::vector<int> rank = Ranks(problem, options.ties);
  const std::vector<int> pinned = PinnedByOffset(problem);
  base::WorkMeter meter(cancel, options.work_cap);
  // (floor, rank), lowest first. A buffer's floor only rises, so a
  // queued floor is a lower bound: the first buffer goes there if its floor
  // still holds, else moves down the queue to its new floor.
  using Entry = std::pair<Offset, int>;  // (floor, rank)
  std::vector<int> by_rank(n);
  std::vector<Entry> initial;
  initial.reserve(n);
  for (int i = 0; i < n; ++i) {
    by_rank[rank[i]] = i;
    if (b[i].fixed_offset) {
      solution.offsets[i] = *b[i].fixed_offset;
      continue;
    }
    int64_t work = 0;
    initial.emplace_back(Lift(problem, pinned, i, 0, &work), rank[i]);
    if (meter.Stop(work)) return meter.StopStatus("skyline placement");
  }
  std::vector<Entry>& queue = initial;  // a min-heap
  std::make_heap(queue.begin(), queue.end(), std::greater<Entry>());
  while (!queue.empty()) {
    const auto [queued, r] = queue.front();
    const int i = by_rank[r];
    int64_t work = kPopWork + (flat ? (hi[i] - lo[i]) / kFlatWidth : 0);
    const Offset floor =
        Lift(problem, pinned, i, skyline.Max(lo[i], hi[i]), &work);
    if (floor > kHighest - b[i].size) {
      return absl::InvalidArgumentError(
          "the plan's arena would pass 2^63 bytes: buffers pinned near 2^62 "
          "with the rest planned above them");
    }
    if (meter.Stop(work)) return meter.StopStatus("skyline placement");
    if (floor > queued) {
      queue.front().first = floor;
      SiftDown(&queue);
      continue;
    }
    std::pop_heap(queue.begin(), queue.end(), std::greater<Entry>());
    queue.pop_back();
    solution.offsets[i] = floor;
    skyline.Raise(lo[i], hi[i], floor + b[i].size);
  }
  solution.arena_size = ArenaOf(problem, solution.offsets);
  return solution;
}

std::string_view SkylineStrategy::name() const {
  return ties_ == SkylineTies::kArea ? "skyline_area" : "skyline_size";
}

absl::StatusOr<Solution> SkylineStrategy::Solve(const Problem& problem,
                                                const SolveContext& ctx) const {
  SkylineOptions options;
  options.ties = ties_;
  options.work_cap = ctx.work_cap;
  options.time = ctx.time;
  absl::StatusOr<Solution> s = SkylineOffsets(problem, ctx.cancel, options);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
