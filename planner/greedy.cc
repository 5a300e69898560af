#include "planner/greedy.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memplan::planner {
namespace {

constexpr int kCancelStride = 1024;  // buffers placed between cancel checks

// Placed buffers, searchable by time: which of them overlap [start, end)?
// A segment tree over the compressed start steps answers "live at step s"
// (stabbing) and an ordered set of starts answers "starts inside (s, e)".
class PlacedIndex {
 public:
  explicit PlacedIndex(const Problem& problem) : buffers_(problem.buffers) {
    for (const Buffer& b : buffers_) steps_.push_back(b.start);
    std::sort(steps_.begin(), steps_.end());
    steps_.erase(std::unique(steps_.begin(), steps_.end()), steps_.end());
    leaves_ = 1;
    while (leaves_ < static_cast<int>(steps_.size())) leaves_ *= 2;
    nodes_.resize(2 * leaves_);
  }

  // Records buffer i as placed.
  void Insert(int i) {
    const Buffer& b = buffers_[i];
    // Steps at which a start may be queried and i is live: [start, end).
    int lo = Index(b.start);
    int hi = Index(b.end);  // first compressed step >= end
    for (lo += leaves_, hi += leaves_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) nodes_[lo++].push_back(i);
      if (hi & 1) nodes_[--hi].push_back(i);
    }
    starts_.insert({b.start, i});
  }

  // Appends every placed buffer whose lifetime overlaps buffer i's.
  void Overlapping(int i, std::vector<int>* out) const {
    const Buffer& b = buffers_[i];
    for (int node = Index(b.start) + leaves_; node >= 1; node /= 2) {
      out->insert(out->end(), nodes_[node].begin(), nodes_[node].end());
    }
    for (auto it =
             starts_.upper_bound({b.start, std::numeric_limits<int>::max()});
         it != starts_.end() && it->first < b.end; ++it) {
      out->push_back(it->second);
    }
  }

 private:
  // The compressed index of the first start step >= step.
  int Index(Step step) const {
    return static_cast<int>(
        std::lower_bound(steps_.begin(), steps_.end(), step) - steps_.begin());
  }

  const std::vector<Buffer>& buffers_;
  std::vector<Step> steps_;              // distinct start steps, sorted
  int leaves_ = 1;                       // leaf count, a power of two
  std::vector<std::vector<int>> nodes_;  // buffers covering each node
  absl::btree_set<std::pair<Step, int>> starts_;  // (start, index)
};

// The offset for a buffer of `size` at `alignment` among `taken` (memory
// ranges sorted by start, possibly overlapping each other).
Offset FindGap(const std::vector<std::pair<Offset, Offset>>& taken, Bytes size,
               Bytes alignment, FitPolicy fit) {
  Offset best = -1;
  Bytes best_gap = std::numeric_limits<Bytes>::max();
  Offset cursor = 0;
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
  const auto& b = problem.buffers;
  std::vector<int> idx(b.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto by_size = [&](int x, int y) {
    if (b[x].size != b[y].size) return b[x].size > b[y].size;
    if (b[x].start != b[y].start) return b[x].start < b[y].start;
    return x < y;
  };
  auto by_lifetime = [&](int x, int y) {
    if (b[x].start != b[y].start) return b[x].start < b[y].start;
    if (b[x].size != b[y].size) return b[x].size > b[y].size;
    return x < y;
  };
  auto by_area = [&](int x, int y) {
    // size * length may exceed 64 bits in theory: compare as long double.
    long double ax =
        static_cast<long double>(b[x].size) * (b[x].end - b[x].start);
    long double ay =
        static_cast<long double>(b[y].size) * (b[y].end - b[y].start);
    if (ax != ay) return ax > ay;
    return by_size(x, y);
  };
  switch (order) {
    case GreedyOrder::kSize:
      std::sort(idx.begin(), idx.end(), by_size);
      break;
    case GreedyOrder::kLifetime:
      std::sort(idx.begin(), idx.end(), by_lifetime);
      break;
    case GreedyOrder::kArea:
      std::sort(idx.begin(), idx.end(), by_area);
      break;
  }
  return idx;
}

absl::StatusOr<Solution> PlaceInOrder(const Problem& problem,
                                      const std::vector<int>& order,
                                      FitPolicy fit,
                                      const CancelToken* cancel) {
  const auto& buffers = problem.buffers;
  Solution solution;
  solution.offsets.assign(buffers.size(), -1);
  PlacedIndex placed(problem);
  // Pinned buffers go first, where they are pinned.
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    if (!buffers[i].fixed_offset.has_value()) continue;
    solution.offsets[i] = *buffers[i].fixed_offset;
    placed.Insert(i);
  }
  std::vector<int> overlapping;
  std::vector<std::pair<Offset, Offset>> taken;
  int count = 0;
  for (int i : order) {
    if (solution.offsets[i] >= 0) continue;
    if (++count % kCancelStride == 0 && cancel != nullptr &&
        cancel->Cancelled()) {
      return absl::DeadlineExceededError("greedy placement cancelled");
    }
    overlapping.clear();
    taken.clear();
    placed.Overlapping(i, &overlapping);
    for (int j : overlapping) {
      taken.emplace_back(solution.offsets[j],
                         solution.offsets[j] + buffers[j].size);
    }
    std::sort(taken.begin(), taken.end());
    solution.offsets[i] =
        FindGap(taken, buffers[i].size, buffers[i].alignment, fit);
    placed.Insert(i);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
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
