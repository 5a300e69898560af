#include "planner/gap_index.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>

namespace memplan::planner {

namespace {

using Large = absl::btree_set<TakenRange>;

// Ranges are disjoint: by (offset, top) is by offset, and this key is
// above every range starting at `offset` or below it.
TakenRange Above(Offset offset) {
  return {offset, std::numeric_limits<Offset>::max()};
}

// The first range of `ranges` (sorted) starting above `offset`.
std::vector<TakenRange>::const_iterator FirstAbove(
    const std::vector<TakenRange>& ranges, Offset offset) {
  return std::upper_bound(ranges.begin(), ranges.end(), Above(offset));
}
Large::const_iterator FirstAbove(const Large& ranges, Offset offset) {
  return ranges.upper_bound(Above(offset));
}

// Adds r to `ranges` (see RangeSet::Add); sets *covered when one range
// already held it whole (nothing changed then).
template <typename Ranges, typename DeadFn>
TakenRange AddTo(Ranges* ranges, TakenRange r, DeadFn dead, bool* covered) {
  const Ranges& in = *ranges;
  auto first = FirstAbove(in, r.offset);
  if (first != in.begin()) {
    auto prev = std::prev(first);
    if (prev->top >= r.offset || dead(prev->top, r.offset)) {
      if (prev->top >= r.top) {
        *covered = true;
        return *prev;
      }
      r.offset = prev->offset;
      first = prev;
    }
  }
  // Swallow every range starting at or below the top, then a dead gap.
  auto last = first;
  while (last != in.end() &&
         (last->offset <= r.top || dead(r.top, last->offset))) {
    r.top = std::max(r.top, last->top);
    ++last;
  }
  ranges->insert(ranges->erase(first, last), r);
  return r;
}

}  // namespace

template <typename DeadFn>
TakenRange GapIndex::RangeSet::Add(TakenRange r, DeadFn dead, bool* covered) {
  *covered = false;
  if (large_) return AddTo(large_.get(), r, dead, covered);
  const TakenRange added = AddTo(&small_, r, dead, covered);
  if (small_.size() > kMaxSmall) {
    large_ = std::make_unique<Large>(small_.begin(), small_.end());
    small_ = std::vector<TakenRange>();
  }
  return added;
}

absl::Span<const TakenRange> GapIndex::RangeSet::Ranges(
    std::vector<TakenRange>* copy) const {
  if (!large_) return small_;
  copy->assign(large_->begin(), large_->end());
  return *copy;
}

GapIndex::GapIndex(int sections) {
  while (leaves_ < sections) leaves_ *= 2;
  own_.assign(2 * leaves_, -1);
  sub_.assign(2 * leaves_, -1);
}

GapIndex::RangeSet& GapIndex::SetAt(std::vector<int>* slots, int node) {
  int& slot = (*slots)[node];
  if (slot < 0) {
    slot = static_cast<int>(sets_.size());
    sets_.emplace_back();
  }
  return sets_[slot];
}

void GapIndex::AddAt(int node, TakenRange r) {
  const auto dead = [this](Offset from, Offset to) { return Dead(from, to); };
  bool covered = false;
  r = SetAt(&own_, node).Add(r, dead, &covered);
  // Subtree sets grow toward the root: once one covers r, all above do.
  for (int v = node; v >= 1; v /= 2) {
    const TakenRange grown = SetAt(&sub_, v).Add(r, dead, &covered);
    if (covered) break;
    r = grown;
  }
}

void GapIndex::Insert(int lo, int hi, TakenRange range) {
  for (int l = lo + leaves_, r = hi + leaves_; l < r; l /= 2, r /= 2) {
    if (l & 1) AddAt(l++, range);
    if (r & 1) AddAt(--r, range);
  }
}

void GapIndex::Read(const std::vector<int>& slots, int node) {
  if (slots[node] >= 0 && !sets_[slots[node]].empty()) {
    reading_.push_back(&sets_[slots[node]]);
  }
}

namespace {

// Appends `r` to the union ending at `out[-1]` (out > begin: joined with
// it when they overlap or touch); returns the new end.
TakenRange* Join(TakenRange* begin, TakenRange* out, const TakenRange& r) {
  if (out != begin && r.offset <= out[-1].top) {
    out[-1].top = std::max(out[-1].top, r.top);
    return out;
  }
  *out = r;
  return out + 1;
}

// Makes `v` hold at least `n` ranges, never fewer than it had: the answer
// buffers are written before they are read, so they are not cleared (a
// resize to each query's size value-initialized its ranges every time).
void GrowTo(std::vector<TakenRange>* v, size_t n) {
  if (v->size() < n) v->resize(std::max(n, 2 * v->size()));
}

// The union of the sorted ranges [a, a_end) and [b, b_end), written from
// `out`; returns its end. Reads each range once and writes only the union
// (the ranges of one set often lie inside another's).
TakenRange* UnionOf(const TakenRange* a, const TakenRange* a_end,
                    const TakenRange* b, const TakenRange* b_end,
                    TakenRange* out) {
  TakenRange* const begin = out;
  while (a != a_end && b != b_end) {
    out = Join(begin, out, a->offset <= b->offset ? *a++ : *b++);
  }
  for (; a != a_end; ++a) out = Join(begin, out, *a);
  for (; b != b_end; ++b) out = Join(begin, out, *b);
  return out;
}

}  // namespace

bool GapIndex::Gather(int lo, int hi) {
  reading_.clear();
  for (int l = lo + leaves_, r = hi + leaves_; l < r; l /= 2, r /= 2) {
    if (l & 1) Read(sub_, l++);
    if (r & 1) Read(sub_, --r);
  }
  // Own sets of the ancestors of the tiling nodes: the two boundary paths.
  for (int a = (lo + leaves_) / 2, b = (hi - 1 + leaves_) / 2; a >= 1;
       a /= 2, b /= 2) {
    Read(own_, a);
    if (b != a) Read(own_, b);
  }
  bool tree = false;
  for (const RangeSet* set : reading_) {
    ranges_read_ += static_cast<int64_t>(set->size());
    tree = tree || set->tree();
  }
  return tree;
}

absl::Span<const TakenRange> GapIndex::Taken(int lo, int hi) {
  Gather(lo, hi);
  return Union();
}

absl::Span<const TakenRange> GapIndex::Union() {
  // The first pass of the pairwise unions reads the sets where they are
  // (a copy of every range first cost a twentieth of a placement).
  runs_.clear();
  size_t total = 0;
  for (const RangeSet* set : reading_) total += set->size();
  GrowTo(&taken_, total);
  TakenRange* out = taken_.data();
  for (size_t k = 0; k < reading_.size(); k += 2) {
    const absl::Span<const TakenRange> a = reading_[k]->Ranges(&large_copy_[0]);
    const absl::Span<const TakenRange> b =
        k + 1 < reading_.size() ? reading_[k + 1]->Ranges(&large_copy_[1])
                                : absl::Span<const TakenRange>();
    out = UnionOf(a.data(), a.data() + a.size(), b.data(), b.data() + b.size(),
                  out);
    runs_.push_back(static_cast<size_t>(out - taken_.data()));
  }
  if (runs_.empty()) return {};
  const size_t length = runs_.size() > 1 ? MergeRuns() : runs_.back();
  return absl::Span<const TakenRange>(taken_.data(), length);
}

Offset GapIndex::FirstFit(int lo, int hi, Bytes size, Bytes alignment,
                          Offset base) {
  const auto whole = [&] {
    return FindGap(Union(), size, alignment, FitPolicy::kFirstFit, base);
  };
  if (Gather(lo, hi)) return whole();  // a tree set: rare, merged whole
  unread_.clear();
  int64_t total = 0;
  for (const RangeSet* set : reading_) {
    unread_.push_back(set->Ranges(nullptr));
    total += static_cast<int64_t>(set->size());
  }
  // Each pass looks at every set still holding ranges; past twice the
  // ranges in all, the union is merged whole instead (a chain of ranges
  // alternating between sets moves the cursor one range a pass; on S_1's
  // trace first fit takes about 4 passes a query, and 1 query in 65 more
  // than the budget allows).
  int64_t budget = 2 * total;
  // The least cursor (from `base`) that no range starting below its
  // candidate's end reaches above: FindGap's answer (its cursor, at the
  // gap it returns, is the least such point). Every range read starts
  // below the end of a candidate at or below the answer, so its top is at
  // most the answer's cursor: the sets are read only up to there.
  Offset cursor = base;
  Offset end = AlignUp(cursor, alignment) + size;
  for (;;) {
    budget -= static_cast<int64_t>(unread_.size());
    if (budget < 0) return whole();
    bool moved = false;
    for (size_t s = 0; s < unread_.size();) {
      absl::Span<const TakenRange>& ranges = unread_[s];
      size_t k = 0;
      for (; k < ranges.size() && ranges[k].offset < end; ++k) {
        if (ranges[k].top > cursor) {
          cursor = ranges[k].top;
          end = AlignUp(cursor, alignment) + size;
          moved = true;
        }
      }
      ranges.remove_prefix(k);
      if (ranges.empty()) {  // read to its end: no pass needs it again
        ranges = unread_.back();
        unread_.pop_back();
      } else {
        ++s;
      }
    }
    if (!moved) return AlignUp(cursor, alignment);
  }
}

size_t GapIndex::MergeRuns() {
  // Pairwise unions of the runs, log(runs) passes through scratch_; each
  // pass writes only the unions, so the later ones move fewer ranges.
  while (runs_.size() > 1) {
    GrowTo(&scratch_, runs_.back());
    merged_runs_.clear();
    const TakenRange* const in = taken_.data();
    TakenRange* out = scratch_.data();
    size_t lo = 0;
    for (size_t k = 0; k < runs_.size(); k += 2) {
      const size_t mid = runs_[k];
      const size_t hi = k + 1 < runs_.size() ? runs_[k + 1] : mid;
      out = UnionOf(in + lo, in + mid, in + mid, in + hi, out);
      merged_runs_.push_back(static_cast<size_t>(out - scratch_.data()));
      lo = hi;
    }
    taken_.swap(scratch_);
    runs_.swap(merged_runs_);
  }
  return runs_.back();
}

int64_t GapIndex::stored_ranges() const {
  int64_t total = 0;
  for (const RangeSet& s : sets_) total += static_cast<int64_t>(s.size());
  return total;
}

}  // namespace memplan::planner
