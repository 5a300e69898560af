#include "planner/greedy.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/sort.h"
#include "planner/gap_index.h"
#include "planner/sections.h"
#include "planner/time_index.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

// Units of placement work (base::WorkMeter's) a buffer placed counts, beside
// the taken ranges read.
constexpr int64_t kBufferWork = 16;

absl::Status Cancelled() {
  return absl::DeadlineExceededError("greedy placement cancelled");
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
// sections (compressed time: maximal sets of buffers live together) are
// ranked by total live size, widest first, earlier first on ties. Sorting
// by this rank, then by size, is exactly "greedy by breadth" (the widest
// step of a lifetime always lies in one of these sections) without
// listing every step's live set.
absl::StatusOr<std::vector<int>> WidestSectionRanks(
    const Problem& problem, const Sections& time,
    const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  if (b.empty()) return std::vector<int>{};
  const std::vector<Bytes> width =
      SectionTotals(time, [&](int i) { return b[i].size; });
  std::vector<std::pair<Bytes, int>> by_width(width.size());
  for (int k = 0; k < static_cast<int>(width.size()); ++k) {
    by_width[k] = {-width[k], k};
  }
  if (!base::SortOrCancel(by_width.begin(), by_width.end(), std::less<>(),
                          cancel)) {
    return Cancelled();
  }
  std::vector<int> rank(width.size());
  for (size_t r = 0; r < by_width.size(); ++r) rank[by_width[r].second] = r;
  RangeMin widest(rank);
  std::vector<int> out(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    out[i] = widest.Min(time.first[i], time.last[i] - 1);
  }
  return out;
}

// A sort key of two fields and the buffer index.
struct Key {
  int64_t primary;    // ascending
  int64_t secondary;  // ascending
  int index;          // ties
};

// The area order's key: size x lifetime needs more than 64 bits.
struct AreaKey {
  long double area;  // descending: stored negated
  Bytes size;        // descending: stored negated
  Step start;        // ascending
  int index;         // ties
  bool operator<(const AreaKey& o) const {
    return std::tie(area, size, start, index) <
           std::tie(o.area, o.size, o.start, o.index);
  }
};

// The indices of keys in their sorted order.
template <typename K>
std::vector<int> IndicesOf(const std::vector<K>& keys) {
  std::vector<int> order(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].index;
  return order;
}

// A Key's (primary, secondary) as one number, and its index.
struct PackedKey {
  uint64_t key;
  int index;
};

// The bits that hold every value of [0, range].
int BitsFor(uint64_t range) {
  return range == 0 ? 0 : 64 - __builtin_clzll(range);
}

// Sorts keys (made in index order) by (primary, secondary, index). Where
// the two fields' ranges fit in 64 bits together (sizes and steps of real
// lists do), one stable radix sort of (primary - min) above (secondary -
// min) on 16-byte items; else two stable radix passes on the keys, least
// significant field first. The same order either way: the packed number
// orders as the pair, and both sorts keep index order among equals. (On a
// million random buffers the packed sort moves about 40% less memory.)
absl::StatusOr<std::vector<int>> SortedIndices(
    std::vector<Key> keys, const base::CancelToken* cancel,
    const base::Parallelism& parallel) {
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t n = keys.size();
  const int chunks = base::ChunkCount(n, kChunk);
  // The smallest and largest of each field.
  struct Range {
    int64_t primary_min = std::numeric_limits<int64_t>::max();
    int64_t primary_max = std::numeric_limits<int64_t>::min();
    int64_t secondary_min = std::numeric_limits<int64_t>::max();
    int64_t secondary_max = std::numeric_limits<int64_t>::min();
    void Take(int64_t primary, int64_t secondary) {
      primary_min = std::min(primary_min, primary);
      primary_max = std::max(primary_max, primary);
      secondary_min = std::min(secondary_min, secondary);
      secondary_max = std::max(secondary_max, secondary);
    }
  };
  std::vector<Range> ranges(chunks);
  base::ParallelForRange(parallel, n, kChunk,
                         [&](int c, size_t begin, size_t end) {
                           for (size_t k = begin; k < end; ++k) {
                             ranges[c].Take(keys[k].primary, keys[k].secondary);
                           }
                         });
  Range all;
  for (const Range& r : ranges) {
    all.Take(r.primary_min, r.secondary_min);
    all.Take(r.primary_max, r.secondary_max);
  }
  // (Differences as unsigned: the range of two int64s fits in 64 bits.)
  const int primary_bits = BitsFor(static_cast<uint64_t>(all.primary_max) -
                                   static_cast<uint64_t>(all.primary_min));
  const int secondary_bits = BitsFor(static_cast<uint64_t>(all.secondary_max) -
                                     static_cast<uint64_t>(all.secondary_min));
  if (n > 0 && primary_bits + secondary_bits <= 64) {
    std::vector<PackedKey> packed(n);
    base::ParallelForRange(
        parallel, n, kChunk, [&](int, size_t begin, size_t end) {
          for (size_t k = begin; k < end; ++k) {
            const uint64_t p = static_cast<uint64_t>(keys[k].primary) -
                               static_cast<uint64_t>(all.primary_min);
            const uint64_t q = static_cast<uint64_t>(keys[k].secondary) -
                               static_cast<uint64_t>(all.secondary_min);
            // (A shift by 64, where the secondary takes every bit, would
            // be undefined; the primary is then 0.)
            packed[k] = {primary_bits == 0 ? q : (p << secondary_bits) | q,
                         keys[k].index};
          }
        });
    keys = std::vector<Key>();  // freed before the sort's scratch
    if (!base::RadixSortOrCancel(
            &packed, [](const PackedKey& k) { return k.key; }, cancel,
            parallel)) {
      return Cancelled();
    }
    return IndicesOf(packed);
  }
  if (!base::RadixSortOrCancel(
          &keys, [](const Key& k) { return base::SignedKey(k.secondary); },
          cancel, parallel) ||
      !base::RadixSortOrCancel(
          &keys, [](const Key& k) { return base::SignedKey(k.primary); },
          cancel, parallel)) {
    return Cancelled();
  }
  return IndicesOf(keys);
}

// The area order: largest size x lifetime first, then as by size.
absl::StatusOr<std::vector<int>> AreaOrder(const Problem& problem,
                                           const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  std::vector<AreaKey> keys(b.size());
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    const long double area = static_cast<long double>(b[i].size) *
                             (static_cast<long double>(b[i].end) - b[i].start);
    keys[i] = {-area, -b[i].size, b[i].start, i};
  }
  if (!base::SortOrCancel(keys.begin(), keys.end(), std::less<>(), cancel)) {
    return Cancelled();
  }
  return IndicesOf(keys);
}

// Whether OrderOf reads compressed time for `order` (the others get it
// empty).
bool ReadsCompressedTime(GreedyOrder order) {
  switch (order) {
    case GreedyOrder::kConflicts:
    case GreedyOrder::kBreadth:
      return true;
    case GreedyOrder::kSize:
    case GreedyOrder::kLifetime:
    case GreedyOrder::kArea:
      return false;
  }
  return true;
}

// The placement order under `order`, with compressed time at hand.
absl::StatusOr<std::vector<int>> OrderOf(
    const Problem& problem, const Sections& time, GreedyOrder order,
    const base::CancelToken* cancel, const base::Parallelism& parallel = {}) {
  if (order == GreedyOrder::kArea) return AreaOrder(problem, cancel);
  const auto& b = problem.buffers;
  std::vector<int64_t> rank;  // conflicts or widest section, per buffer
  if (order == GreedyOrder::kConflicts) rank = OverlapCounts(time);
  if (order == GreedyOrder::kBreadth) {
    absl::StatusOr<std::vector<int>> widest =
        WidestSectionRanks(problem, time, cancel);
    if (!widest.ok()) return widest.status();
    rank.assign(widest->begin(), widest->end());
  }
  std::vector<Key> keys(b.size());
  base::ParallelForRange(
      parallel, b.size(), size_t{1} << 16, [&](int, size_t begin, size_t end) {
        if (cancel != nullptr && cancel->Cancelled()) return;
        for (int i = static_cast<int>(begin); i < static_cast<int>(end); ++i) {
          switch (order) {
            case GreedyOrder::kSize:  // largest first, then earliest start
              keys[i] = {-b[i].size, b[i].start, i};
              break;
            case GreedyOrder::kLifetime:  // earliest start, then largest
              keys[i] = {b[i].start, -b[i].size, i};
              break;
            case GreedyOrder::kConflicts:  // most conflicts, then largest
              keys[i] = {-rank[i], -b[i].size, i};
              break;
            case GreedyOrder::kBreadth:  // widest section first, then largest
              keys[i] = {rank[i], -b[i].size, i};
              break;
            case GreedyOrder::kArea:
              break;
          }
        }
      });
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  return SortedIndices(std::move(keys), cancel, parallel);
}

// Sorts ranges by offset alone. Most answers of a scan are a few dozen
// ranges: insertion sort moves them in cache without std::sort's
// partitioning; longer ones (a long-lived buffer overlaps thousands) go to
// the radix sort, a pass per byte of offset, in `scratch`. On 1M random
// buffers the sort was a sixth of a best-fit placement with std::sort
// alone, measured 2026-11-24.
void SortByOffset(std::vector<TakenRange>* ranges,
                  std::vector<TakenRange>* scratch) {
  constexpr size_t kInsertionSortUpTo = 64;
  auto& r = *ranges;
  if (r.size() > kInsertionSortUpTo) {
    (void)base::RadixSortWith(
        ranges, scratch,
        [](const TakenRange& t) { return base::SignedKey(t.offset); }, nullptr);
    return;
  }
  for (size_t i = 1; i < r.size(); ++i) {
    const TakenRange x = r[i];
    size_t j = i;
    for (; j > 0 && r[j - 1].offset > x.offset; --j) r[j] = r[j - 1];
    r[j] = x;
  }
}

// The placed buffers as memory ranges, searchable by lifetime: scanned
// from a TimeIndex when buffers overlap few others, read merged from a
// GapIndex when they overlap many (the scan's cost would grow with the
// overlaps). Both give the same gaps, so the same plans.
class PlacedBuffers {
 public:
  PlacedBuffers(const Sections& time, bool dense) {
    if (dense) {
      gaps_.emplace(time.size());
    } else {
      scan_.emplace(time);
    }
  }

  // From now on every buffer asks for at least `size` at `alignment`.
  void SetSmallestRequest(Bytes size, Bytes alignment) {
    if (gaps_) gaps_->SetSmallestRequest(size, alignment);
  }

  // Marks `range` taken during sections [lo, hi).
  void Insert(int lo, int hi, TakenRange range) {
    if (gaps_) {
      gaps_->Insert(lo, hi, range);
    } else {
      scan_->Insert(lo, hi, range);
    }
  }

  // Where `fit` puts a request of `size` at `alignment` above `base` during
  // sections [lo, hi) (FindGap among Taken's ranges), and the work it took.
  Offset Find(int lo, int hi, Bytes size, Bytes alignment, FitPolicy fit,
              Offset base, int64_t* work) {
    if (gaps_ && fit == FitPolicy::kFirstFit && size > 0) {
      const int64_t read = gaps_->ranges_read();
      const Offset at = gaps_->FirstFit(lo, hi, size, alignment, base);
      *work = gaps_->ranges_read() - read;
      return at;
    }
    return FindGap(Taken(lo, hi, work), size, alignment, fit, base);
  }

  // The ranges taken during sections [lo, hi), sorted by offset, and the
  // work it took. Valid until the next call.
  absl::Span<const TakenRange> Taken(int lo, int hi, int64_t* work) {
    if (gaps_) {
      const int64_t read = gaps_->ranges_read();
      const absl::Span<const TakenRange> taken = gaps_->Taken(lo, hi);
      *work = gaps_->ranges_read() - read;
      return taken;
    }
    taken_.clear();
    scan_->ForEachOverlapping(
        lo, hi, [&](const TakenRange& r) { taken_.push_back(r); });
    // By offset alone: FindGap gives the same answer whatever the order of
    // ranges starting at one offset, and one key compares faster.
    SortByOffset(&taken_, &scratch_);
    *work = static_cast<int64_t>(taken_.size());
    return taken_;
  }

 private:
  std::optional<TimeIndex<TakenRange>> scan_;
  std::optional<GapIndex> gaps_;
  std::vector<TakenRange> taken_;    // the scan's answer
  std::vector<TakenRange> scratch_;  // its sort's
};

// One buffer to place, gathered in placement order: the loop then reads
// memory in sequence instead of jumping through the buffers.
struct Request {
  int index;        // in problem.buffers
  int lo, hi;       // its sections
  Bytes size;       // its size
  Bytes alignment;  // its alignment
  Bytes min_size;   // the smallest size here and after in the order
  Bytes min_align;  // the smallest alignment here and after
};

// The buffers of `order` not yet placed (pinned or stacked), in order,
// with the smallest size and alignment from each on: no later request is
// smaller.
std::vector<Request> Requests(const Problem& problem, const Sections& time,
                              const std::vector<int>& order,
                              const std::vector<Offset>& offsets) {
  std::vector<Request> requests;
  requests.reserve(order.size());
  for (int i : order) {
    if (offsets[i] >= 0) continue;
    const Buffer& b = problem.buffers[i];
    requests.push_back(
        {i, time.first[i], time.last[i], b.size, b.alignment, 0, 0});
  }
  Bytes size = std::numeric_limits<Bytes>::max();
  Bytes alignment = std::numeric_limits<Bytes>::max();
  for (size_t k = requests.size(); k-- > 0;) {
    size = std::min(size, requests[k].size);
    alignment = std::min(alignment, requests[k].alignment);
    requests[k].min_size = size;
    requests[k].min_align = alignment;
  }
  return requests;
}

// The arena of the placed buffers (offsets >= 0).
void SetArena(const Problem& problem, Solution* solution) {
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (solution->offsets[i] < 0) continue;
    solution->arena_size = std::max(
        solution->arena_size, solution->offsets[i] + problem.buffers[i].size);
  }
}

// What a greedy placement is asked for, beside the problem and the order.
struct PlaceSettings {
  FitPolicy fit = FitPolicy::kBestFit;
  std::optional<Bytes> capacity;  // skip buffers ending past it
  const base::CancelToken* cancel = nullptr;
  OverlapSearch search = OverlapSearch::kAuto;
  int64_t work_cap = 0;                        // <= 0: none
  base::Parallelism parallel;                  // for the windowed placement
  int buffers_per_window = kBuffersPerWindow;  // windows.h
  // > 0: ABORTED once a buffer would end above it (one pass, not cut into
  // windows; a windowed pass places every buffer).
  Bytes give_up_above = 0;
  // Told the top so far as it grows (one pass; a windowed pass tells
  // nothing, so it never gives up for the race).
  HeuristicRace* race = nullptr;
  int race_slot = 0;
};

// Stacks `spanning` (buffers live over the whole schedule) at the arena's
// base, most aligned first, then largest; returns the stack's top.
Offset StackBuffers(const Problem& problem, std::vector<int> spanning,
                    Solution* solution) {
  const auto& b = problem.buffers;
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

// StackSpanningBuffers for a problem without pinned buffers, finding the
// spanning ones on the threads `parallel` gives (the same offsets).
Offset StackSpanningBuffers(const Problem& problem,
                            const base::Parallelism& parallel,
                            Solution* solution) {
  int64_t count = 0;
  const std::vector<uint8_t> spans = SpanningBuffers(problem, parallel, &count);
  if (count == 0) return 0;
  return StackBuffers(problem,
                      base::KeptInOrder(parallel, spans.size(),
                                        [&](size_t i) { return spans[i]; }),
                      solution);
}

absl::StatusOr<Solution> PlaceWindowed(
    const Problem& problem, const Sections& time, const TimeWindows& windows,
    const std::vector<int>& order, const PlaceSettings& settings, bool dense);

// The least work a greedy pass that scans the placed buffers (not merged
// ranges) counts on `problem` without a capacity, `order` holding every
// buffer: each overlapping pair is read by the later of the two (a request
// crossing windows reads in each of them, and counts every read), except
// pairs of a buffer stacked below (spanning the schedule) and pairs of two
// pinned ones; each request counts kBufferWork.
int64_t ScanWorkAtLeast(const Problem& problem, int64_t overlap_total) {
  const auto span = ScheduleSpan(problem);
  int64_t pinned = 0, spanning = 0;
  for (const Buffer& b : problem.buffers) {
    if (b.fixed_offset.has_value()) {
      ++pinned;
    } else if (SpansAll(b, span)) {
      ++spanning;
    }
  }
  if (pinned > 0) spanning = 0;  // StackSpanningBuffers stacks none then
  const int64_t n = static_cast<int64_t>(problem.buffers.size());
  const int64_t pairs =
      overlap_total / 2 - spanning * (n - 1) - pinned * (pinned - 1) / 2;
  return std::max<int64_t>(pairs, 0) + kBufferWork * (n - pinned - spanning);
}

// The greedy placement proper: fixed buffers where pinned, buffers spanning
// the schedule stacked at the base, the others in `order` into the gap
// `fit` picks among the placed ones they overlap. With `capacity`, buffers
// that would end past it are skipped (offset -1). Large problems are placed
// window by window (windows.h): the same plan, on several threads.
absl::StatusOr<Solution> Place(const Problem& problem, const Sections& time,
                               const std::vector<int>& order,
                               const PlaceSettings& settings) {
  // The overlap total once (an O(n) pass): it says whether placed buffers
  // are read merged and, scanned, the least work the pass counts.
  const int64_t n = static_cast<int64_t>(problem.buffers.size());
  const int64_t overlap_total = settings.search == OverlapSearch::kAuto
                                    ? OverlapTotal(time, settings.parallel)
                                    : 0;
  const bool dense = settings.search == OverlapSearch::kAuto
                         ? MostlyOverlapping(overlap_total, n)
                         : settings.search == OverlapSearch::kMerged;
  const TimeWindows windows = CutTime(time, settings.buffers_per_window);
  // A pass certain to pass its cap is not run: its work would be lost (the
  // plan then comes from the fallback, as it would after the pass).
  if (settings.work_cap > 0 && !settings.capacity.has_value() &&
      settings.search == OverlapSearch::kAuto && !dense &&
      static_cast<int64_t>(order.size()) == n &&
      ScanWorkAtLeast(problem, overlap_total) > settings.work_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "greedy placement would pass its work cap (", settings.work_cap,
        " units): its buffers overlap in more pairs"));
  }
  if (windows.count() > 1) {
    return PlaceWindowed(problem, time, windows, order, settings, dense);
  }
  const FitPolicy fit = settings.fit;
  const std::optional<Bytes> capacity = settings.capacity;
  const base::CancelToken* cancel = settings.cancel;
  const auto& buffers = problem.buffers;
  Solution solution;
  solution.offsets.assign(buffers.size(), -1);
  const Offset base = capacity ? 0 : StackSpanningBuffers(problem, &solution);
  PlacedBuffers placed(time, dense);
  // The top of the buffers placed so far (the stack, then the pinned
  // ones), for the race.
  Offset top = base;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    if (!buffers[i].fixed_offset.has_value()) continue;
    solution.offsets[i] = *buffers[i].fixed_offset;
    placed.Insert(time.first[i], time.last[i],
                  {solution.offsets[i], solution.offsets[i] + buffers[i].size});
    top = std::max(top, solution.offsets[i] + buffers[i].size);
  }
  if (settings.race != nullptr) settings.race->Reached(settings.race_slot, top);
  base::WorkMeter meter(cancel, settings.work_cap);
  const std::vector<Request> requests =
      Requests(problem, time, order, solution.offsets);
  const int64_t total = static_cast<int64_t>(requests.size());
  int64_t done = 0;
  for (const Request& r : requests) {
    placed.SetSmallestRequest(r.min_size, r.min_align);
    int64_t work = 0;
    const Offset offset =
        placed.Find(r.lo, r.hi, r.size, r.alignment, fit, base, &work);
    if (meter.Stop(kBufferWork + work, ++done, total))
      return meter.StopStatus("greedy placement");
    if (capacity && offset + r.size > *capacity) continue;  // left out
    if (settings.give_up_above > 0 &&
        offset + r.size > settings.give_up_above) {
      return absl::AbortedError(
          absl::StrCat("a buffer would end above ", settings.give_up_above));
    }
    solution.offsets[r.index] = offset;
    placed.Insert(r.lo, r.hi, {offset, offset + r.size});
    if (settings.race != nullptr && offset + r.size > top) {
      top = offset + r.size;
      settings.race->Reached(settings.race_slot, top);
    }
  }
  SetArena(problem, &solution);
  return solution;
}

// Work units a window adds up before it adds them to the shared count and
// polls the token.
constexpr int64_t kWindowWorkBatch = 1 << 14;

// One window of a windowed placement: its buffers' sections counted from
// the window's first and cut to it, and the ranges placed during it.
struct PlacementWindow {
  int begin = 0;        // the window's first section
  Sections time;        // per entry of the window's list: its cut range
  std::vector<int> at;  // per buffer of the problem touching it: its entry
  std::optional<PlacedBuffers> placed;
  // Per entry, in order, with its cut range and the smallest request from
  // it on: read in sequence, as Place reads its requests.
  std::vector<Request> requests;
  size_t cursor = 0;                       // the next entry
  int64_t unflushed = 0;                   // work not yet in the shared count
  std::vector<TakenRange> taken, scratch;  // a crossing's ranges
};

// Sets up window w: the cut ranges of its entries and of the pinned
// buffers touching it (placed at once), and the smallest request from each
// entry on. False, the window half set up, once `cancel` (may be null)
// fires: polled every few thousand entries.
bool SetUpWindow(const Problem& problem, const Sections& time,
                 const TimeWindows& windows, const WindowedPass& pass,
                 const std::vector<int>& pinned, const Solution& solution,
                 bool dense, const base::CancelToken* cancel, int w,
                 PlacementWindow* out) {
  const auto& b = problem.buffers;
  const int lo = windows.begin[w], hi = windows.begin[w + 1];
  out->begin = lo;
  out->time.begin.resize(static_cast<size_t>(hi - lo));
  const auto add = [&](int i) {
    out->time.first.push_back(std::max(time.first[i], lo) - lo);
    out->time.last.push_back(std::min(time.last[i], hi) - lo);
  };
  const std::vector<WindowedPass::Entry>& entries = pass.entries(w);
  for (size_t k = 0; k < entries.size(); ++k) {
    if (base::CancelledAt(cancel, k)) return false;
    add(entries[k].buffer);
  }
  std::vector<int> pins;
  for (size_t k = 0; k < pinned.size(); ++k) {
    if (base::CancelledAt(cancel, k)) return false;
    const int i = pinned[k];
    if (time.first[i] < hi && time.last[i] > lo) {
      add(i);
      pins.push_back(i);
    }
  }
  if (cancel != nullptr && cancel->Cancelled()) return false;
  out->placed.emplace(out->time, dense);
  for (size_t k = 0; k < pins.size(); ++k) {
    if (base::CancelledAt(cancel, k)) return false;
    const size_t slot = entries.size() + k;
    const int i = pins[k];
    out->placed->Insert(out->time.first[slot], out->time.last[slot],
                        {solution.offsets[i], solution.offsets[i] + b[i].size});
  }
  auto& requests = out->requests;
  requests.resize(entries.size());
  Bytes size = std::numeric_limits<Bytes>::max();
  Bytes alignment = std::numeric_limits<Bytes>::max();
  for (size_t k = entries.size(); k-- > 0;) {
    if (base::CancelledAt(cancel, k)) return false;
    const int i = entries[k].buffer;
    size = std::min(size, b[i].size);
    alignment = std::min(alignment, b[i].alignment);
    requests[k] = {i,         out->time.first[k], out->time.last[k],
                   b[i].size, b[i].alignment,     size,
                   alignment};
  }
  return true;
}

// Greedy placement window by window (windows.h): the plan Place gives in
// one pass, whatever the threads; `dense`: placed buffers are read merged
// (Place decides, as for one window). The work cap is kept on the total work
// (a count the windows add to): the same outcome on any thread count, as
// the work of each buffer does not depend on them.
absl::StatusOr<Solution> PlaceWindowed(
    const Problem& problem, const Sections& time, const TimeWindows& windows,
    const std::vector<int>& order, const PlaceSettings& settings, bool dense) {
  const auto& b = problem.buffers;
  Solution solution;
  solution.offsets.assign(b.size(), -1);
  // Each a pass over the buffers, in chunks on the threads.
  const base::Parallelism& parallel = settings.parallel;
  const std::vector<int> pinned = base::KeptInOrder(
      parallel, b.size(),
      [&](size_t i) { return b[i].fixed_offset.has_value(); });
  const Offset base = settings.capacity || !pinned.empty()
                          ? 0
                          : StackSpanningBuffers(problem, parallel, &solution);
  for (int i : pinned) solution.offsets[i] = *b[i].fixed_offset;
  std::vector<int> to_place = base::KeptInOrder(
      parallel, order.size(),
      [&](size_t k) { return solution.offsets[order[k]] < 0; },
      [&](size_t k) { return order[k]; });
  WindowedPass pass(time, windows, to_place, settings.parallel);
  std::vector<PlacementWindow> state(windows.count());
  std::atomic<bool> set_up{true};
  base::ParallelFor(settings.parallel, windows.count(), [&](int w) {
    if (!set_up.load(std::memory_order_relaxed)) return;
    if (!SetUpWindow(problem, time, windows, pass, pinned, solution, dense,
                     settings.cancel, w, &state[w])) {
      set_up = false;
    }
  });
  if (!set_up) return Cancelled();
  std::atomic<int64_t> total_work{0};
  std::atomic<bool> capped{false};
  // Adds work to window w's count; false when the pass must stop.
  const auto charge = [&](PlacementWindow& s, int64_t units) {
    if ((s.unflushed += units) < kWindowWorkBatch) return true;
    const int64_t total = total_work.fetch_add(s.unflushed) + s.unflushed;
    s.unflushed = 0;
    if (settings.work_cap > 0 && total > settings.work_cap) {
      capped = true;
      return false;
    }
    return settings.cancel == nullptr || !settings.cancel->Cancelled();
  };
  // Request r at `offset`; -1: it is left out (capacity).
  const auto keep = [&](const Request& r, Offset offset) -> Offset {
    if (settings.capacity && offset + r.size > *settings.capacity) return -1;
    solution.offsets[r.index] = offset;
    return offset;
  };
  const bool done = pass.Run(
      settings.parallel,
      [&](int w, int) {
        PlacementWindow& s = state[w];
        const Request& r = s.requests[s.cursor++];
        s.placed->SetSmallestRequest(r.min_size, r.min_align);
        int64_t work = 0;
        const Offset found = s.placed->Find(r.lo, r.hi, r.size, r.alignment,
                                            settings.fit, base, &work);
        if (!charge(s, kBufferWork + work)) return false;
        const Offset offset = keep(r, found);
        if (offset >= 0)
          s.placed->Insert(r.lo, r.hi, {offset, offset + r.size});
        return true;
      },
      [&](int wa, int wb, int) {
        PlacementWindow& first = state[wa];
        first.taken.clear();
        int64_t work = 0;
        for (int w = wa; w <= wb; ++w) {
          PlacementWindow& s = state[w];
          const Request& r = s.requests[s.cursor];
          s.placed->SetSmallestRequest(r.min_size, r.min_align);
          int64_t read = 0;
          const absl::Span<const TakenRange> taken =
              s.placed->Taken(r.lo, r.hi, &read);
          work += read;  // every window's reads count
          first.taken.insert(first.taken.end(), taken.begin(), taken.end());
        }
        SortByOffset(&first.taken, &first.scratch);
        if (!charge(first, kBufferWork + work)) return false;
        const Request& crossing = first.requests[first.cursor];
        const Offset offset =
            keep(crossing, FindGap(first.taken, crossing.size,
                                   crossing.alignment, settings.fit, base));
        for (int w = wa; w <= wb; ++w) {
          PlacementWindow& s = state[w];
          const Request& r = s.requests[s.cursor++];
          if (offset >= 0) {
            s.placed->Insert(r.lo, r.hi, {offset, offset + r.size});
          }
        }
        return true;
      });
  int64_t total = total_work.load();
  for (const PlacementWindow& s : state) total += s.unflushed;
  if (capped || (done && settings.work_cap > 0 && total > settings.work_cap)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("greedy placement passed its work cap (",
                     settings.work_cap, " units)"));
  }
  if (!done) return Cancelled();
  SetArena(problem, &solution);
  return solution;
}

}  // namespace

Offset StackSpanningBuffers(const Problem& problem, Solution* solution) {
  const auto& b = problem.buffers;
  std::vector<int> spanning;
  const auto span = ScheduleSpan(problem);
  for (int i = 0; i < static_cast<int>(b.size()); ++i) {
    if (b[i].fixed_offset.has_value()) return 0;
    if (SpansAll(b[i], span)) spanning.push_back(i);
  }
  return StackBuffers(problem, std::move(spanning), solution);
}

std::vector<int64_t> CountConflicts(const Problem& problem) {
  return OverlapCounts(*CompressTime(problem));
}

int64_t PlacementWork(const Problem& problem) {
  const std::vector<int64_t> conflicts = CountConflicts(problem);
  return static_cast<int64_t>(problem.buffers.size()) +
         std::accumulate(conflicts.begin(), conflicts.end(), int64_t{0});
}

std::vector<int> GreedyPlacementOrder(const Problem& problem,
                                      GreedyOrder order) {
  return *GreedyPlacementOrder(problem, order, nullptr);
}

absl::StatusOr<std::vector<int>> GreedyPlacementOrder(
    const Problem& problem, GreedyOrder order,
    const base::CancelToken* cancel) {
  return GreedyPlacementOrder(problem, order, cancel, {});
}

absl::StatusOr<std::vector<int>> GreedyPlacementOrder(
    const Problem& problem, GreedyOrder order, const base::CancelToken* cancel,
    const base::Parallelism& parallel) {
  if (!ReadsCompressedTime(order)) {
    return OrderOf(problem, Sections(), order, cancel, parallel);
  }
  absl::StatusOr<Sections> time = CompressTime(problem, cancel, parallel);
  if (!time.ok()) return time.status();
  return OrderOf(problem, *time, order, cancel, parallel);
}

absl::StatusOr<const std::vector<int>*> SizeOrderCache::Get(
    const base::CancelToken* cancel, const base::Parallelism& parallel) {
  absl::MutexLock lock(&mu_);
  if (!order_.has_value()) {
    absl::StatusOr<std::vector<int>> sorted =
        GreedyPlacementOrder(*problem_, GreedyOrder::kSize, cancel, parallel);
    if (!sorted.ok()) return sorted.status();
    order_ = *std::move(sorted);
  }
  return &*order_;
}

absl::StatusOr<const std::vector<int>*> SizeOrder(
    const Problem& problem, SizeOrderCache* cache,
    const base::CancelToken* cancel, const base::Parallelism& parallel,
    std::vector<int>* own) {
  if (cache != nullptr && cache->Holds(problem)) {
    return cache->Get(cancel, parallel);
  }
  absl::StatusOr<std::vector<int>> sorted =
      GreedyPlacementOrder(problem, GreedyOrder::kSize, cancel, parallel);
  if (!sorted.ok()) return sorted.status();
  *own = *std::move(sorted);
  return own;
}

absl::StatusOr<Solution> PlaceInOrder(const Problem& problem,
                                      const std::vector<int>& order,
                                      FitPolicy fit,
                                      const base::CancelToken* cancel) {
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  return Place(problem, *time, order, {fit, std::nullopt, cancel});
}

absl::StatusOr<Solution> PlaceInOrder(const Problem& problem,
                                      const std::vector<int>& order,
                                      FitPolicy fit,
                                      const base::CancelToken* cancel,
                                      OverlapSearch search) {
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  return Place(problem, *time, order, {fit, std::nullopt, cancel, search});
}

absl::StatusOr<Solution> PlaceInOrder(
    const Problem& problem, const std::vector<int>& order, FitPolicy fit,
    const base::CancelToken* cancel, OverlapSearch search,
    int buffers_per_window, const base::Parallelism& parallel) {
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  return Place(
      problem, *time, order,
      {fit, std::nullopt, cancel, search, 0, parallel, buffers_per_window});
}

absl::StatusOr<Solution> PlaceInOrderWithin(const Problem& problem,
                                            const std::vector<int>& order,
                                            Bytes limit, const Sections* time,
                                            const base::CancelToken* cancel) {
  PlaceSettings settings{FitPolicy::kBestFit, std::nullopt, cancel};
  settings.give_up_above = limit;
  if (time != nullptr) return Place(problem, *time, order, settings);
  absl::StatusOr<Sections> computed = CompressTime(problem, cancel);
  if (!computed.ok()) return computed.status();
  return Place(problem, *computed, order, settings);
}

absl::StatusOr<Solution> PlaceWithinCapacity(const Problem& problem,
                                             const std::vector<int>& order,
                                             Bytes capacity,
                                             const base::CancelToken* cancel) {
  absl::StatusOr<Sections> time = CompressTime(problem, cancel);
  if (!time.ok()) return time.status();
  return Place(problem, *time, order, {FitPolicy::kBestFit, capacity, cancel});
}

GreedyStrategy::GreedyStrategy(GreedyOrder order, FitPolicy fit)
    : order_(order), fit_(fit), name_(GreedyStrategyName(order, fit)) {}

absl::StatusOr<Solution> GreedyStrategy::Solve(const Problem& problem,
                                               const SolveContext& ctx) const {
  Sections own;
  absl::StatusOr<const Sections*> time =
      CompressedTime(problem, ctx.time, &own, ctx.cancel);
  if (!time.ok()) return time.status();
  // The size order may come sorted already, from the plan's other stages.
  std::vector<int> own_order;
  absl::StatusOr<const std::vector<int>*> order = &own_order;
  if (order_ == GreedyOrder::kSize) {
    order = SizeOrder(problem, ctx.size_order, ctx.cancel, ctx.parallel,
                      &own_order);
  } else {
    absl::StatusOr<std::vector<int>> sorted =
        OrderOf(problem, **time, order_, ctx.cancel, ctx.parallel);
    if (!sorted.ok()) return sorted.status();
    own_order = *std::move(sorted);
  }
  if (!order.ok()) return order.status();
  // In a race, polled as part of the call's token.
  HeuristicRace* const race = ctx.race;
  const int slot = ctx.race_slot;
  std::optional<base::CancelToken> raced;
  if (race != nullptr) {
    raced.emplace(ctx.cancel, absl::InfiniteFuture(),
                  [race, slot] { return race->GiveUp(slot); });
  }
  PlaceSettings settings{fit_,
                         std::nullopt,
                         raced ? &*raced : ctx.cancel,
                         OverlapSearch::kAuto,
                         ctx.work_cap,
                         ctx.parallel};
  settings.race = race;
  settings.race_slot = slot;
  absl::StatusOr<Solution> s = Place(problem, **time, **order, settings);
  if (s.ok()) UpdateBest(ctx.best_arena, s->arena_size);
  return s;
}

}  // namespace memplan::planner
