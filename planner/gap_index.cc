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

template <typename Ranges>
bool CoversIn(const Ranges& ranges, TakenRange r) {
  auto it = FirstAbove(ranges, r.offset);
  if (it == ranges.begin()) return false;
  return std::prev(it)->top >= r.top;
}

template <typename Ranges, typename DeadFn>
TakenRange AddTo(Ranges* ranges, TakenRange r, DeadFn dead) {
  const Ranges& in = *ranges;
  auto first = FirstAbove(in, r.offset);
  if (first != in.begin()) {
    auto prev = std::prev(first);
    if (prev->top >= r.offset || dead(prev->top, r.offset)) {
      if (prev->top >= r.top) return *prev;
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

bool GapIndex::RangeSet::Covers(TakenRange r) const {
  return large_ ? CoversIn(*large_, r) : CoversIn(small_, r);
}

template <typename DeadFn>
TakenRange GapIndex::RangeSet::Add(TakenRange r, DeadFn dead) {
  if (large_) return AddTo(large_.get(), r, dead);
  const TakenRange added = AddTo(&small_, r, dead);
  if (small_.size() > kMaxSmall) {
    large_ = std::make_unique<Large>(small_.begin(), small_.end());
    small_ = std::vector<TakenRange>();
  }
  return added;
}

void GapIndex::RangeSet::AppendTo(std::vector<TakenRange>* out) const {
  if (large_) {
    out->insert(out->end(), large_->begin(), large_->end());
  } else {
    out->insert(out->end(), small_.begin(), small_.end());
  }
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
  r = SetAt(&own_, node).Add(r, dead);
  // Subtree sets grow toward the root: once one covers r, all above do.
  for (int v = node; v >= 1; v /= 2) {
    if (sub_[v] >= 0 && sets_[sub_[v]].Covers(r)) break;
    r = SetAt(&sub_, v).Add(r, dead);
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

const std::vector<TakenRange>& GapIndex::Taken(int lo, int hi) {
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
  taken_.clear();
  runs_.clear();
  for (const RangeSet* set : reading_) {
    set->AppendTo(&taken_);
    runs_.push_back(taken_.size());
  }
  ranges_read_ += static_cast<int64_t>(taken_.size());
  if (reading_.size() > 1) {
    MergeRuns();
    // Merge overlapping and touching ranges in place.
    size_t kept = 0;
    for (size_t i = 1; i < taken_.size(); ++i) {
      if (taken_[i].offset <= taken_[kept].top) {
        taken_[kept].top = std::max(taken_[kept].top, taken_[i].top);
      } else {
        taken_[++kept] = taken_[i];
      }
    }
    taken_.resize(taken_.empty() ? 0 : kept + 1);
  }
  return taken_;
}

void GapIndex::MergeRuns() {
  // Pairwise merges of the sorted runs, log(runs) passes through scratch_.
  while (runs_.size() > 1) {
    scratch_.resize(taken_.size());
    std::vector<size_t> merged_runs;
    size_t lo = 0;
    for (size_t k = 0; k < runs_.size(); k += 2) {
      const size_t mid = runs_[k];
      const size_t hi = k + 1 < runs_.size() ? runs_[k + 1] : mid;
      std::merge(taken_.begin() + lo, taken_.begin() + mid,
                 taken_.begin() + mid, taken_.begin() + hi,
                 scratch_.begin() + lo);
      merged_runs.push_back(hi);
      lo = hi;
    }
    taken_.swap(scratch_);
    runs_.swap(merged_runs);
  }
}

int64_t GapIndex::stored_ranges() const {
  int64_t total = 0;
  for (const RangeSet& s : sets_) total += static_cast<int64_t>(s.size());
  return total;
}

}  // namespace memplan::planner
