#include "planner/greedy.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/sections.h"
#include "planner/time_index.h"

namespace memplan::planner {
namespace {

constexpr int kCancelStride = 1024;  // buffers placed between cancel checks

// Buffers live over the whole schedule share memory with nothing, so they
// are stacked at the arena's base, most aligned first, and the rest is
// planned above them: this keeps graphs with many weights linear. Skipped
// when any buffer is pinned (pins may lie anywhere). Returns the stack's top.
Offset StackSpanningBuffers(const Problem& problem, Solution* solution) {
  const auto& b = problem.buffers;
  std::vector<int> spanning;
  const auto span = ScheduleSpan(problem);
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (b[i].fixed_offset.has_value()) return 0;
    if (SpansAll(b[i], span)) spanning.push_back(i);
  }
  std::sort(spanning.begin(), spanning.end(), [&](int x, int y) {
    if (b[x].alignment != b[y].alignment)
      return b[x].alignment > b[y].alignment;
    if (b[x].size != b[y].size) return b[x].size > b[y].size;
    return x < y;
  });
  Offset top = 0;
  for (int i : spanning) {
    solution->offsets[i] = AlignUp(top, b[i].alignment);
    top = solution->offsets[i] + b[i].size;
  }
  return top;
}

// A minimum over ranges of a fixed array: an iterative segment tree, 2m
// ints (a sparse table would need m log m, too much at a million buffers).
class RangeMin {
 public:
  explicit RangeMin(const std::vector<int>& values)
      : m_(values.size()), tree_(2 * values.size()) {
    std::copy(values.begin(), values.end(), tree_.begin() + m_);
    for (size_t i = m_ - 1; i > 0; --i) {
      tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
    }
  }
  // The minimum of values[lo..hi], both inclusive. REQUIRES lo <= hi < m.
  int Min(size_t lo, size_t hi) const {
    int best = std::numeric_limits<int>::max();
    for (lo += m_, hi += m_ + 1; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::min(best, tree_[lo++]);
      if (hi & 1) best = std::min(best, tree_[--hi]);
    }
    return best;
  }

 private:
  size_t m_;
  std::vector<int> tree_;
};

// For each buffer, the rank of the widest section of its lifetime, where
// sections (maximal step ranges with one live set) are ranked by total live
// size, widest first, earlier first on ties. Sorting by this rank, then by
// size, is exactly "greedy by breadth" without listing every step's
// live set (which would cost the sum of all lifetimes).
std::vector<int> WidestSectionRanks(const Problem& problem) {
  const auto& b = problem.buffers;
  if (b.empty()) return {};
  const Sections sections = SweepSections(problem);
  const std::vector<Bytes> width =
      SectionTotals(sections, [&](int i) { return b[i].size; });
  std::vector<int> by_width(width.size());
  std::iota(by_width.begin(), by_width.end(), 0);
  std::stable_sort(by_width.begin(), by_width.end(),
                   [&](int x, int y) { return width[x] > width[y]; });
  std::vector<int> rank(width.size());
  for (size_t r = 0; r < by_width.size(); ++r) rank[by_width[r]] = r;
  RangeMin widest(rank);
  std::vector<int> out(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    out[i] = widest.Min(sections.first[i], sections.last[i] - 1);
  }
  return out;
}

}  // namespace

std::vector<int64_t> CountConflicts(const Problem& problem) {
  const auto& b = problem.buffers;
  std::vector<Step> starts(b.size()), ends(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    starts[i] = b[i].start;
    ends[i] = b[i].end;
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  std::vector<int64_t> conflicts(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    // Buffers starting before i ends, less those that ended by i's start
    // (a subset of the former), less i itself.
    const int64_t started =
        std::lower_bound(starts.begin(), starts.end(), b[i].end) -
        starts.begin();
    const int64_t ended =
        std::upper_bound(ends.begin(), ends.end(), b[i].start) - ends.begin();
    conflicts[i] = started - ended - 1;
  }
  return conflicts;
}

std::vector<int> GreedyPlacementOrder(const Problem& problem,
                                      GreedyOrder order) {
  // Sorting packed keys, not indices with a comparator that reads buffers,
  // keeps the sort in cache for millions of buffers.
  struct Key {
    long double primary;  // ascending
    Bytes secondary;      // ascending
    Step tertiary;        // ascending
    int index;
    bool operator<(const Key& o) const {
      return std::tie(primary, secondary, tertiary, index) <
             std::tie(o.primary, o.secondary, o.tertiary, o.index);
    }
  };
  const auto& b = problem.buffers;
  std::vector<int64_t> conflicts;
  if (order == GreedyOrder::kConflicts) conflicts = CountConflicts(problem);
  std::vector<int> widest;
  if (order == GreedyOrder::kBreadth) widest = WidestSectionRanks(problem);
  std::vector<Key> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    const long double area = static_cast<long double>(b[i].size) *
                             (static_cast<long double>(b[i].end) - b[i].start);
    switch (order) {
      case GreedyOrder::kSize:  // largest first, then earliest start
        keys[i] = {static_cast<long double>(-b[i].size), b[i].start, 0, i};
        break;
      case GreedyOrder::kLifetime:  // earliest start, then largest
        keys[i] = {static_cast<long double>(b[i].start), -b[i].size, 0, i};
        break;
      case GreedyOrder::kArea:  // largest area, then as kSize
        keys[i] = {-area, -b[i].size, b[i].start, i};
        break;
      case GreedyOrder::kConflicts:  // most conflicts, then largest
        keys[i] = {static_cast<long double>(-conflicts[i]), -b[i].size, 0, i};
        break;
      case GreedyOrder::kBreadth:  // widest section first, then largest
        keys[i] = {static_cast<long double>(widest[i]), -b[i].size, 0, i};
        break;
    }
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int> idx(b.size());
  for (size_t k = 0; k < keys.size(); ++k) idx[k] = keys[k].index;
  return idx;
}

absl::StatusOr<Solution> PlaceInOrder(const Problem& problem,
                                      const std::vector<int>& order,
                                      FitPolicy fit,
                                      const CancelToken* cancel) {
  const auto& buffers = problem.buffers;
  Solution solution;
  solution.offsets.assign(buffers.size(), -1);
  const Offset base = StackSpanningBuffers(problem, &solution);
  // Placed buffers as memory ranges, searchable by lifetime.
  const Sections time = CompressTime(problem);
  TimeIndex<TakenRange> placed(time);
  auto insert = [&](int i, Offset offset) {
    placed.Insert(i, {offset, offset + buffers[i].size});
  };
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    if (!buffers[i].fixed_offset.has_value()) continue;
    solution.offsets[i] = *buffers[i].fixed_offset;
    insert(i, solution.offsets[i]);
  }
  std::vector<TakenRange> taken;
  int count = 0;
  for (int i : order) {
    if (solution.offsets[i] >= 0) continue;
    if (++count % kCancelStride == 0 && cancel != nullptr &&
        cancel->Cancelled()) {
      return absl::DeadlineExceededError("greedy placement cancelled");
    }
    const Buffer& b = buffers[i];
    taken.clear();
    placed.ForEachOverlapping(
        i, [&](const TakenRange& range) { taken.push_back(range); });
    std::sort(taken.begin(), taken.end());
    const Offset offset = FindGap(taken, b.size, b.alignment, fit, base);
    solution.offsets[i] = offset;
    solution.arena_size = std::max(solution.arena_size, offset + b.size);
    insert(i, offset);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {  // stacked and pinned ones
    solution.arena_size =
        std::max(solution.arena_size, solution.offsets[i] + buffers[i].size);
  }
  return solution;
}

absl::StatusOr<Solution> PlaceWithinCapacity(const Problem& problem,
                                             const std::vector<int>& order,
                                             Bytes capacity,
                                             const CancelToken* cancel) {
  const auto& buffers = problem.buffers;
  Solution solution;
  solution.offsets.assign(buffers.size(), -1);
  const Sections time = CompressTime(problem);
  TimeIndex<TakenRange> placed(time);
  std::vector<TakenRange> taken;
  int count = 0;
  for (int i : order) {
    if (++count % kCancelStride == 0 && cancel != nullptr &&
        cancel->Cancelled()) {
      return absl::DeadlineExceededError("placement cancelled");
    }
    const Buffer& b = buffers[i];
    taken.clear();
    placed.ForEachOverlapping(i,
                              [&](const TakenRange& r) { taken.push_back(r); });
    std::sort(taken.begin(), taken.end());
    const Offset offset =
        FindGap(taken, b.size, b.alignment, FitPolicy::kBestFit, 0);
    if (offset + b.size > capacity) continue;  // left for the next memory
    solution.offsets[i] = offset;
    solution.arena_size = std::max(solution.arena_size, offset + b.size);
    placed.Insert(i, {offset, offset + b.size});
  }
  return solution;
}

GreedyStrategy::GreedyStrategy(GreedyOrder order, FitPolicy fit)
    : order_(order), fit_(fit), name_(GreedyStrategyName(order, fit)) {}

absl::StatusOr<Solution> GreedyStrategy::Solve(const Problem& problem,
                                               const SolveContext& ctx) const {
  absl::StatusOr<Solution> s = PlaceInOrder(
      problem, GreedyPlacementOrder(problem, order_), fit_, ctx.cancel);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
