#include "planner/greedy.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/time_index.h"

namespace memplan::planner {
namespace {

constexpr int kCancelStride = 1024;  // buffers placed between cancel checks

// The offset for a buffer of `size` at `alignment` among `taken` (memory
// ranges sorted by start, possibly overlapping each other).
Offset FindGap(const std::vector<std::pair<Offset, Offset>>& taken, Bytes size,
               Bytes alignment, FitPolicy fit, Offset base) {
  Offset best = -1;
  Bytes best_gap = std::numeric_limits<Bytes>::max();
  Offset cursor = base;
  for (const auto& [lo, hi] : taken) {
    Offset candidate = AlignUp(cursor, alignment);
    if (candidate + size <= lo) {
      if (fit == FitPolicy::kFirstFit) return candidate;
      if (lo - cursor < best_gap) {
        best_gap = lo - cursor;
        best = candidate;
      }
    }
    cursor = std::max(cursor, hi);
  }
  return best >= 0 ? best : AlignUp(cursor, alignment);
}

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

std::string StrategyName(GreedyOrder order, FitPolicy fit) {
  const char* fit_name = fit == FitPolicy::kBestFit ? "best_fit" : "first_fit";
  const char* order_name = order == GreedyOrder::kSize       ? "size"
                           : order == GreedyOrder::kLifetime ? "lifetime"
                                                             : "area";
  return absl::StrCat(fit_name, "_", order_name);
}

}  // namespace

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
  std::vector<Key> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    const long double area =
        static_cast<long double>(b[i].size) * (b[i].end - b[i].start);
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
  TimeIndex<std::pair<Offset, Offset>> placed(problem);
  auto insert = [&](const Buffer& b, Offset offset) {
    placed.Insert(b.start, b.end, {offset, offset + b.size});
  };
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    if (!buffers[i].fixed_offset.has_value()) continue;
    solution.offsets[i] = *buffers[i].fixed_offset;
    insert(buffers[i], solution.offsets[i]);
  }
  std::vector<std::pair<Offset, Offset>> taken;
  int count = 0;
  for (int i : order) {
    if (solution.offsets[i] >= 0) continue;
    if (++count % kCancelStride == 0 && cancel != nullptr &&
        cancel->Cancelled()) {
      return absl::DeadlineExceededError("greedy placement cancelled");
    }
    const Buffer& b = buffers[i];
    taken.clear();
    placed.ForEachOverlapping(b.start, b.end,
                              [&](const std::pair<Offset, Offset>& range) {
                                taken.push_back(range);
                              });
    std::sort(taken.begin(), taken.end());
    const Offset offset = FindGap(taken, b.size, b.alignment, fit, base);
    solution.offsets[i] = offset;
    solution.arena_size = std::max(solution.arena_size, offset + b.size);
    insert(b, offset);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {  // stacked and pinned ones
    solution.arena_size =
        std::max(solution.arena_size, solution.offsets[i] + buffers[i].size);
  }
  return solution;
}

GreedyStrategy::GreedyStrategy(GreedyOrder order, FitPolicy fit)
    : order_(order), fit_(fit), name_(StrategyName(order, fit)) {}

absl::StatusOr<Solution> GreedyStrategy::Solve(const Problem& problem,
                                               const SolveContext& ctx) const {
  absl::StatusOr<Solution> s = PlaceInOrder(
      problem, GreedyPlacementOrder(problem, order_), fit_, ctx.cancel);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
