#include "planner/exact/exact_solver.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "planner/exact/failure_memo.h"
#include "planner/exact/hole_groups.h"
#include "planner/exact/hole_state.h"
#include "planner/exact/parts.h"
#include "planner/exact/pq_sweep.h"
#include "planner/exact/state_hash.h"
#include "planner/greedy.h"
#include "planner/sections.h"
#include "planner/validate.h"

namespace memplan::planner {
namespace {

using exact_internal::Cuts;
using exact_internal::FailureMemo;
using exact_internal::Hash128;
using exact_internal::HoleState;
using exact_internal::Mix;
using exact_internal::Part;
using exact_internal::PlacedView;

constexpr Offset kInfinity = std::numeric_limits<Offset>::max() / 4;
constexpr int64_t kCancelStride = 256;    // nodes between deadline checks
constexpr int64_t kBoundProbeWeight = 4;  // budget of the lower-bound probe,
                                          // in per-probe budgets

// A dive's perturbation of a static ordering: every key of buffer b is
// scaled by a factor in [1, 1 + kKeyPerturbation) drawn from (seed, b); seed
// 0 scales nothing. Buffers of near-equal keys trade places, large ones
// stay ahead of small ones. Ties in the first key vanish, so a perturbed
// ordering sorts by its first letter alone (WAT: a noisy W order; TAW and
// TWA: the same noisy T order). On MiniMalloc's D at 994 KiB, dives of 1024
// nodes found a plan 4 times in 2000 at 10% and 5 at 20%, none at 3% or
// 40%; J at 995 KiB 3 times at 10%, none at 20%.
constexpr long double kKeyPerturbation = 0.1L;

long double KeyScale(uint64_t seed, int b) {
  if (seed == 0) return 1;
  const uint64_t draw = Mix(Mix(seed) ^ static_cast<uint64_t>(b)) >> 11;
  return 1 + kKeyPerturbation * static_cast<long double>(draw) /
                 static_cast<long double>(uint64_t{1} << 53);
}

// A fixed buffer seen as an obstacle by a searched buffer.
struct Obstacle {
  Offset offset = 0;  // where the fixed buffer starts
  Offset top = 0;     // offset + size
};

// Static facts about the searched (not fixed) buffers, built once.
struct Model {
  std::vector<int> ids;      // local index -> index in problem.buffers
  std::vector<Bytes> size;   // per local buffer
  std::vector<Bytes> align;  // per local buffer, a power of two
  std::vector<Step> width;   // end - start, per local buffer
  std::vector<int> sec_lo;   // first section a buffer is live in
  std::vector<int> sec_hi;   // one past its last section
  std::vector<std::vector<int>> sections;  // live local buffers per section
  // Per local buffer b, the local buffers it overlaps in time, by first
  // section (sec_lo, non-decreasing): Neighbors(b), b's range of
  // neighbor_list, [neighbor_start[b], neighbor_start[b + 1]).
  std::vector<int> neighbor_start;
  std::vector<int> neighbor_list;
  struct Range {
    const int* first;
    const int* last;
    const int* begin() const { return first; }
    const int* end() const { return last; }
  };
  Range Neighbors(int b) const {
    return {neighbor_list.data() + neighbor_start[b],
            neighbor_list.data() + neighbor_start[b + 1]};
  }
  std::vector<std::vector<Obstacle>> obstacles;  // fixed ones, by offset
  // Zero slack only (hole_groups.h at full_at): buffers that lie within
  // one span in every plan, and per local buffer the groups it is in.
  std::vector<HoleGroup> groups;
  std::vector<std::vector<int>> groups_of;
  // The capacity at which every section is exactly full (zero slack: every
  // section's live bytes are 0 or this), or -1 (also with fixed buffers).
  Bytes full_at = -1;
  // The lower bound (a whole number of grains) and the sizes' grain
  // (Granularity). No dives at the bound: a search there has a section
  // that must be filled to the top (or a fixed buffer's top at it), which
  // the plain orderings' bounds use best.
  Bytes bound = 0;
  Bytes grain = 1;
};

// The outcome of one search (or sub-search).
enum class Outcome { kFound, kNotFound, kAborted, kCancelled };

// A bound no plan can beat: peak live bytes with the padding alignment
// forces (PaddedLowerBound), any fixed top, any one size. Without the
// padding a search of aligned buffers probes arenas no plan can have, and
// proves nothing, until its time ends (Silero VAD: 9,264 against 9,356).
Bytes StrongLowerBound(const Problem& problem) {
  Bytes bound = PaddedLowerBound(problem);
  for (const Buffer& b : problem.buffers) {
    bound = std::max(bound, b.size);
    if (b.fixed_offset) bound = std::max(bound, *b.fixed_offset + b.size);
  }
  return bound;
}

// A quick valid plan used when the caller gives no seed: the greedy best
// fit by size (greedy.h), fixed buffers first.
absl::StatusOr<Solution> GreedySeed(const Problem& problem) {
  return PlaceInOrder(problem,
                      GreedyPlacementOrder(problem, GreedyOrder::kSize),
                      FitPolicy::kBestFit, nullptr);
}

// Fills sections (maximal sets of simultaneously live buffers, in time
// order) and each buffer's section span, by one sweep over the lifetimes.
void BuildSections(const Problem& problem, Model& model) {
  SectionOptions options;
  options.kind = SectionKind::kMaximal;
  options.list_live = true;
  options.subset = &model.ids;
  Sections sections = SweepSections(problem, options);
  model.sec_lo = std::move(sections.first);
  model.sec_hi = std::move(sections.last);
  model.sections = std::move(sections.live);
}

// Two local buffers overlap in time exactly when their section spans meet.
// Pairs are found in order of sec_lo, so each list is sorted by it: one
// pass counts them, a second files them, in the same order, into one flat
// list. False once `cancel` (may be null) says stop: up to max_overlaps
// (2^22) pairs take about 50 ms.
bool BuildNeighbors(Model& model, const base::CancelToken* cancel) {
  const int m = static_cast<int>(model.ids.size());
  std::vector<int> by_lo(m);
  for (int i = 0; i < m; ++i) by_lo[i] = i;
  std::sort(by_lo.begin(), by_lo.end(),
            [&](int a, int b) { return model.sec_lo[a] < model.sec_lo[b]; });
  // Calls pair(a, b) for every overlapping pair, a before b in by_lo.
  const auto each_pair = [&](const auto& pair) {
    for (int x = 0; x < m; ++x) {
      if (x % 64 == 0 && cancel != nullptr && cancel->Cancelled()) {
        return false;
      }
      const int a = by_lo[x];
      for (int y = x + 1; y < m; ++y) {
        const int b = by_lo[y];
        if (model.sec_lo[b] >= model.sec_hi[a]) break;
        pair(a, b);
      }
    }
    return true;
  };
  std::vector<int>& start = model.neighbor_start;
  start.assign(m + 1, 0);
  if (!each_pair([&](int a, int b) {
        ++start[a + 1];
        ++start[b + 1];
      })) {
    return false;
  }
  for (int b = 0; b < m; ++b) start[b + 1] += start[b];
  model.neighbor_list.resize(start[m]);
  std::vector<int> next(start.begin(), start.end() - 1);
  return each_pair([&](int a, int b) {
    model.neighbor_list[next[a]++] = b;
    model.neighbor_list[next[b]++] = a;
  });
}

// Whether the maximal sections' nonzero live totals are all equal: when
// not, neither are all sections' (the maximal ones are among them), and
// FullAt is -1 without its sweep.
bool MaximalTotalsEqual(const Model& model) {
  Bytes full = -1;
  for (const std::vector<int>& live : model.sections) {
    Bytes total = 0;
    for (int b : live) total += model.size[b];
    if (total == 0) continue;
    if (full >= 0 && total != full) return false;
    full = total;
  }
  return true;
}

// The one nonzero live total of every section, if they are all equal (a
// zero-slack problem at that capacity), or -1.
Bytes FullAt(const Problem& problem) {
  const Sections sections = SweepSections(problem);
  const std::vector<Bytes> totals =
      SectionTotals(sections, [&](int i) { return problem.buffers[i].size; });
  Bytes full = -1;
  for (Bytes total : totals) {
    if (total == 0) continue;
    if (full >= 0 && total != full) return -1;
    full = total;
  }
  return full;
}

// Builds the Model: searched buffers, sections, neighbours, obstacles.
// Nothing once `cancel` (may be null) says stop.
std::optional<Model> BuildModel(const Problem& problem,
                                const base::CancelToken* cancel) {
  Model model;
  std::vector<int> fixed;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    (b.fixed_offset ? fixed : model.ids).push_back(static_cast<int>(i));
  }
  const int m = static_cast<int>(model.ids.size());
  model.sec_lo.resize(m);
  model.sec_hi.resize(m);
  model.obstacles.resize(m);
  for (int i = 0; i < m; ++i) {
    const Buffer& b = problem.buffers[model.ids[i]];
    model.size.push_back(b.size);
    model.align.push_back(b.alignment);
    model.width.push_back(b.end - b.start);
    for (int f : fixed) {
      const Buffer& fb = problem.buffers[f];
      if (!LifetimesOverlap(b, fb)) continue;
      model.obstacles[i].push_back(
          {*fb.fixed_offset, *fb.fixed_offset + fb.size});
    }
    std::sort(model.obstacles[i].begin(), model.obstacles[i].end(),
              [](const Obstacle& x, const Obstacle& y) {
                return x.offset < y.offset;
              });
  }
  BuildSections(problem, model);
  if (!BuildNeighbors(model, cancel)) return std::nullopt;
  if (fixed.empty() && MaximalTotalsEqual(model)) {
    model.full_at = FullAt(problem);
  }
  if (model.full_at > 0) {
    // No fixed buffers: local indices are the problem's.
    model.groups = FindHoleGroups(problem, model.full_at, cancel).groups;
    if (cancel != nullptr && cancel->Cancelled()) return std::nullopt;
    if (!model.groups.empty()) model.groups_of.resize(m);
    for (size_t g = 0; g < model.groups.size(); ++g) {
      for (int b : model.groups[g].members) {
        model.groups_of[b].push_back(static_cast<int>(g));
      }
    }
  }
  return model;
}

// Fixed buffers must not collide with each other; no search can fix that.
absl::Status CheckFixed(const Problem& problem) {
  std::vector<int> fixed;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (problem.buffers[i].fixed_offset) fixed.push_back(static_cast<int>(i));
  }
  for (size_t x = 0; x < fixed.size(); ++x) {
    for (size_t y = x + 1; y < fixed.size(); ++y) {
      const Buffer& a = problem.buffers[fixed[x]];
      const Buffer& b = problem.buffers[fixed[y]];
      if (LifetimesOverlap(a, b) &&
          *a.fixed_offset < *b.fixed_offset + b.size &&
          *b.fixed_offset < *a.fixed_offset + a.size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fixed buffers '", a.name, "' and '", b.name, "' overlap"));
      }
    }
  }
  return absl::OkStatus();
}

// The depth-first search for a plan within `capacity`. Keeps all its state
// in flat arrays with undo logs, so one node costs O(buffers + sections).
// It holds one each of the classes that keep the rest: the boundaries no
// unplaced buffer crosses (Cuts, parts.h), the hole groups' state
// (HoleState, hole_state.h) and the failed states (FailureMemo,
// failure_memo.h).
// Thread-compatible: one search thread owns it.
class Search {
 public:
  // `effort_left`, when not null, counts down one per node; at zero the
  // search stops as if cancelled (ExactOptions::max_nodes).
  // `remember_failures`: ExactOptions::remember_failures.
  Search(const Model& model, Bytes capacity, const base::CancelToken* cancel,
         int64_t* effort_left, bool remember_failures)
      : model_(model),
        capacity_(capacity),
        cancel_(cancel),
        effort_left_(effort_left),
        groups_(model.groups, model.groups_of, model.size,
                capacity == model.full_at && !model.groups_of.empty()),
        memo_(remember_failures && capacity == model.full_at) {}

  // Searches with one static ordering until found, proven absent, out of
  // `node_limit` nodes (kAborted) or cancelled. A nonzero `seed` perturbs
  // the ordering's keys (KeyScale): a dive that starts elsewhere.
  Outcome Run(const std::string& ordering, int64_t node_limit,
              uint64_t seed = 0);

  // Counts the nodes of the next runs down from *effort_left (null: no
  // bound), as the constructor's.
  void set_effort(int64_t* effort_left) { effort_left_ = effort_left; }

  // Offsets of the local buffers after Run returned kFound.
  const std::vector<Offset>& offsets() const { return solution_; }
  int64_t nodes() const { return total_nodes_; }

 private:
  void Reset();
  Outcome SolveParts(const Part& part);
  Outcome SubSolve(const Part& part);
  void RankPart(const Part& part);
  void RankStatic();
  long double Key(char letter, int b, long double scale) const;
  bool KeysBefore(size_t x, size_t y, size_t letters) const;
  Outcome Dfs(const Part& part, Offset last_offset, int last_rank);
  size_t CollectCandidates(const Part& part, Offset last_offset, int last_rank);
  Outcome TryCandidate(const Part& part, int b, bool forced, bool* hatless);
  bool NarrowToHole(const Part& part, size_t base);
  void FlushFirst(const Part& part, size_t base, Offset level);
  bool Place(int b, Offset offset);
  void RaiseFloors(int b, Offset top);
  void Undo(int b, size_t offset_mark, size_t floor_mark);
  bool Check(size_t floor_mark);
  bool Stackable(int s);
  bool Coverable(const Part& part, int b, size_t offset_mark);
  // Section s's unplaced buffers must fill all above its floor exactly.
  bool TightHole(int s) const {
    return total_[s] > 0 && floor_[s] + total_[s] == capacity_;
  }
  bool CoverLevel(const Part& part, Offset level);
  Outcome Decompose(const Part& part, int b, Offset offset, int rank);
  Offset Lift(int b, Offset offset) const;
  // After CollectCandidates (reads lowest_hole_).
  Hash128 NodeKey(Offset last_offset, int last_rank) const;

  const Model& model_;
  const Bytes capacity_;
  const base::CancelToken* cancel_;
  int64_t* effort_left_;     // nodes the whole call may still try, or null
  std::string ordering_;     // the static ordering of this run (letters)
  bool holes_ = false;       // hole branching at every tight hole (h)
  uint64_t seed_ = 0;        // the keys' perturbation (KeyScale), 0: none
  size_t prefix_ = 0;        // ordering_'s letters before its first 'T'
  int64_t node_limit_ = 0;   // nodes allowed in this run
  int64_t nodes_ = 0;        // placements tried in this run
  int64_t total_nodes_ = 0;  // placements tried over all runs

  std::vector<char> placed_;        // per local buffer
  std::vector<Offset> min_offset_;  // lowest canonical offset, per buffer
  std::vector<int> rank_;           // position in the current part's ordering
  std::vector<Offset> solution_;    // offsets along the latest success
  std::vector<Offset> floor_;       // per section: no unplaced buffer below
  std::vector<Bytes> total_;        // per section: unplaced bytes
  Cuts cuts_;                       // boundaries unplaced buffers cross
  std::vector<std::pair<int, Offset>> offset_log_;  // undo: min_offset_
  std::vector<std::pair<int, Offset>> floor_log_;   // undo: floor_
  std::vector<int> touched_;  // sections to refresh after a placement
  std::vector<std::pair<int, int>> raised_spans_;  // Place's scratch
  std::vector<int> candidates_;  // a stack of per-node candidate lists
  std::vector<std::pair<Offset, Bytes>> stack_;  // Stackable's scratch
  std::vector<Offset> levels_;                   // Coverable's scratch
  std::vector<Offset> holes_at_;                 // Coverable's scratch
  std::vector<char> reach_;                      // CoverLevel's scratch
  std::vector<std::vector<int>> starting_;       // CoverLevel's scratch
  std::vector<int> covering_;                    // NarrowToHole's scratch
  std::vector<std::pair<int, int>> flush_;       // FlushFirst's scratch
  std::vector<long double> keys_;                // RankPart's scratch
  std::vector<int> by_key_;                      // RankPart's scratch
  // RankStatic's ranks, per local buffer, for this ordering and seed.
  std::vector<int> static_rank_;
  std::vector<char> static_tied_;  // another buffer has the same rank
  std::string static_ordering_;
  uint64_t static_seed_ = 0;
  bool static_valid_ = false;
  std::vector<int> saved_ranks_;          // SubSolve's stack
  Part all_;                              // Run's: every buffer
  std::deque<std::vector<Part>> pieces_;  // SolveParts's, per nesting level
  size_t depth_ = 0;                      // SolveParts's nesting level
  Offset lowest_hole_ = 0;   // CollectCandidates: lowest tight floor
  bool all_placed_ = false;  // CollectCandidates: the part is done

  // Hole groups, checked at zero slack when some were found.
  HoleState groups_;
  // Failed states (zero slack only; see Dfs). Kept across runs, so a
  // restart with a larger node limit, or with the other ordering, skips
  // what the last one finished; only rank-restricted keys name the
  // ordering.
  FailureMemo memo_;
};

// Clears the state for a fresh run.
void Search::Reset() {
  const int m = static_cast<int>(model_.ids.size());
  const int s = static_cast<int>(model_.sections.size());
  placed_.assign(m, 0);
  rank_.assign(m, 0);
  solution_.assign(m, -1);
  min_offset_.resize(m);
  for (int b = 0; b < m; ++b) min_offset_[b] = Lift(b, 0);
  floor_.assign(s, kInfinity);
  total_.assign(s, 0);
  cuts_.Reset(model_.sec_lo, model_.sec_hi, s);
  groups_.Reset();
  for (int b = 0; b < m; ++b) {
    for (int x = model_.sec_lo[b]; x < model_.sec_hi[b]; ++x) {
      total_[x] += model_.size[b];
      floor_[x] = std::min(floor_[x], min_offset_[b]);
    }
  }
  nodes_ = 0;
}

Outcome Search::Run(const std::string& ordering, int64_t node_limit,
                    uint64_t seed) {
  holes_ = !ordering.empty() && ordering.back() == 'h';
  ordering_ = holes_ ? ordering.substr(0, ordering.size() - 1) : ordering;
  seed_ = seed;
  prefix_ = std::min(ordering_.find('T'), ordering_.size());
  memo_.StartRun(ordering, seed);
  node_limit_ = node_limit;
  Reset();
  for (size_t s = 0; s < floor_.size(); ++s) {
    if (floor_[s] + total_[s] > capacity_) return Outcome::kNotFound;
  }
  all_.lo = 0;
  all_.hi = static_cast<int>(model_.sections.size());
  all_.buffers.resize(model_.ids.size());
  std::iota(all_.buffers.begin(), all_.buffers.end(), 0);
  return SolveParts(all_);
}

// The independent pieces of `part` (Cuts): all must succeed; the first
// failure ends the call. The pieces of nested calls lie in pieces_, one
// vector per level, reused from run to run.
Outcome Search::SolveParts(const Part& part) {
  if (depth_ == pieces_.size()) pieces_.emplace_back();
  std::vector<Part>& pieces = pieces_[depth_];  // a deque: stays in place
  const size_t count = cuts_.SplitInto(part, placed_, model_.sec_lo, &pieces);
  ++depth_;
  Outcome outcome = Outcome::kFound;
  for (size_t k = 0; k < count && outcome == Outcome::kFound; ++k) {
    outcome = SubSolve(pieces[k]);
  }
  --depth_;
  return outcome;
}

// One letter's key of local buffer b (descending: negated), with b's
// perturbation `scale` (KeyScale). Keys are long double: width x size needs
// more than 64 bits, and every 64-bit value is exact in x86's 64-bit
// mantissa. 'T' reads the sections' unplaced bytes as they are now.
long double Search::Key(char letter, int b, long double scale) const {
  const auto width = static_cast<long double>(model_.width[b]);
  const auto size = static_cast<long double>(model_.size[b]);
  switch (letter) {
    case 'W':
      return -width * scale;
    case 'A':
      return -width * size * scale;
    case 'T': {
      Bytes section_total = 0;
      for (int s = model_.sec_lo[b]; s < model_.sec_hi[b]; ++s) {
        section_total = std::max(section_total, total_[s]);
      }
      return -static_cast<long double>(section_total) * scale;
    }
    default:  // 'Z' (ValidOrderings)
      return -size * scale;
  }
}

// Whether keys_ rows x and y (`letters` each) are in ascending order,
// lexicographically; equal rows are not.
bool Search::KeysBefore(size_t x, size_t y, size_t letters) const {
  const long double* kx = &keys_[x * letters];
  const long double* ky = &keys_[y * letters];
  for (size_t l = 0; l < letters; ++l) {
    if (kx[l] < ky[l]) return true;
    if (ky[l] < kx[l]) return false;
  }
  return false;
}

// The ordering's letters before its first 'T' do not change during a run:
// ranks every buffer by them once per (ordering, seed), equal keys alike,
// in static_rank_.
void Search::RankStatic() {
  if (static_valid_ && static_ordering_ == ordering_ && static_seed_ == seed_) {
    return;
  }
  const size_t letters = prefix_;
  const int m = static_cast<int>(model_.ids.size());
  keys_.resize(static_cast<size_t>(m) * letters);
  by_key_.resize(m);
  for (int b = 0; b < m; ++b) {
    const long double scale = KeyScale(seed_, b);
    for (size_t l = 0; l < letters; ++l) {
      keys_[b * letters + l] = Key(ordering_[l], b, scale);
    }
    by_key_[b] = b;
  }
  std::sort(by_key_.begin(), by_key_.end(), [&](int x, int y) {
    if (KeysBefore(x, y, letters)) return true;
    return !KeysBefore(y, x, letters) && x < y;
  });
  static_rank_.resize(m);
  static_tied_.assign(m, 0);
  for (int r = 0; r < m; ++r) {
    const bool tie = r > 0 && !KeysBefore(by_key_[r - 1], by_key_[r], letters);
    static_rank_[by_key_[r]] = tie ? static_rank_[by_key_[r - 1]] : r;
    if (tie) static_tied_[by_key_[r - 1]] = static_tied_[by_key_[r]] = 1;
  }
  static_ordering_ = ordering_;
  static_seed_ = seed_;
  static_valid_ = true;
}

// Orders a part's buffers by the run's static ordering (descending keys,
// ties by buffer index): by the letters before the first 'T' (RankStatic),
// then by the rest, computed now where they can matter (no other buffer
// has the same first letters: the rest is never compared). Those lie flat
// in keys_ (one row per buffer of the part), sorted through indices: no
// allocation once the scratch has grown.
void Search::RankPart(const Part& part) {
  if (prefix_ > 0) RankStatic();
  const size_t letters = ordering_.size() - prefix_;
  const size_t k = part.buffers.size();
  keys_.resize(k * letters);
  by_key_.resize(k);
  for (size_t i = 0; i < k; ++i) {
    const int b = part.buffers[i];
    if (letters > 0 && (prefix_ == 0 || static_tied_[b])) {
      const long double scale = KeyScale(seed_, b);
      for (size_t l = 0; l < letters; ++l) {
        keys_[i * letters + l] = Key(ordering_[prefix_ + l], b, scale);
      }
    }
    by_key_[i] = static_cast<int>(i);
  }
  std::sort(by_key_.begin(), by_key_.end(), [&](int x, int y) {
    const int bx = part.buffers[x], by = part.buffers[y];
    if (prefix_ > 0 && static_rank_[bx] != static_rank_[by]) {
      return static_rank_[bx] < static_rank_[by];
    }
    if (KeysBefore(x, y, letters)) return true;
    return !KeysBefore(y, x, letters) && bx < by;
  });
  for (size_t r = 0; r < k; ++r) {
    rank_[part.buffers[by_key_[r]]] = static_cast<int>(r);
  }
}

// Searches one part from scratch with its own ordering; restores the ranks
// the enclosing part uses (kept on saved_ranks_, a stack over the nested
// parts).
Outcome Search::SubSolve(const Part& part) {
  const size_t mark = saved_ranks_.size();
  for (int b : part.buffers) saved_ranks_.push_back(rank_[b]);
  RankPart(part);
  const Hash128 saved_key = memo_.EnterPart(part.lo, part.hi);
  const Outcome outcome = Dfs(part, 0, -1);
  memo_.LeavePart(saved_key);
  for (size_t i = 0; i < part.buffers.size(); ++i) {
    rank_[part.buffers[i]] = saved_ranks_[mark + i];
  }
  saved_ranks_.resize(mark);
  return outcome;
}

// Pushes the canonical, undominated candidates of this node on the stack,
// sorted by (offset, rank); returns where they start. Sets all_placed_.
size_t Search::CollectCandidates(const Part& part, Offset last_offset,
                                 int last_rank) {
  // No buffer may start at or above the lowest top some unplaced buffer
  // could reach: that buffer would fit below, a dominated choice. One pass
  // finds that top and the buffers the rank restriction admits; the limit
  // filters them below.
  const size_t base = candidates_.size();
  Offset min_height = kInfinity;
  for (int b : part.buffers) {
    if (placed_[b]) continue;
    min_height = std::min(min_height, min_offset_[b] + model_.size[b]);
  }
  all_placed_ = min_height == kInfinity;
  // Whatever goes next at offset o, every section's unplaced bytes stack
  // above o: o + total(s) <= capacity for all s.
  Bytes max_total = 0;
  lowest_hole_ = kInfinity;  // the lowest floor of a tight section
  for (int s = part.lo; s < part.hi; ++s) {
    max_total = std::max(max_total, total_[s]);
    if (TightHole(s)) lowest_hole_ = std::min(lowest_hole_, floor_[s]);
  }
  // A second pass takes the few under the limit (the sort below orders
  // them whatever order they come in: ranks differ within a part).
  const Offset limit = std::min(min_height, capacity_ - max_total + 1);
  for (int b : part.buffers) {
    if (placed_[b]) continue;
    const Offset o = min_offset_[b];
    if (o >= limit || o < last_offset ||
        (o == last_offset && rank_[b] < last_rank)) {
      continue;
    }
    candidates_.push_back(b);
  }
  std::sort(candidates_.begin() + base, candidates_.end(), [&](int a, int b) {
    if (min_offset_[a] != min_offset_[b]) {
      return min_offset_[a] < min_offset_[b];
    }
    return rank_[a] < rank_[b];
  });
  return base;
}

// One node: branch over the candidates; kFound at a full placement.
Outcome Search::Dfs(const Part& part, Offset last_offset, int last_rank) {
  // At zero slack a node that failed fails again wherever another order of
  // placements reaches its state (failure_memo.h says why): the restarts of
  // the round robin walk again what the last run finished, and hole
  // branching reaches some sets twice.
  const size_t base = CollectCandidates(part, last_offset, last_rank);
  if (all_placed_) {
    candidates_.resize(base);
    return Outcome::kFound;
  }
  Hash128 key;
  if (memo_.enabled()) {
    key = NodeKey(last_offset, last_rank);
    if (memo_.Failed(key)) {
      candidates_.resize(base);
      return Outcome::kNotFound;
    }
  }
  // Not after a canonical placement at this level (last_rank >= 0): those
  // enumerate subsets in rank order, which hole branching would repeat.
  const bool fresh = base == candidates_.size() ||
                     min_offset_[candidates_[base]] > last_offset ||
                     last_rank < 0;
  const bool forced = fresh && NarrowToHole(part, base);
  Outcome outcome = Outcome::kNotFound;
  for (size_t i = base; i < candidates_.size(); ++i) {
    bool hatless = false;
    outcome = TryCandidate(part, candidates_[i], forced, &hatless);
    if (outcome != Outcome::kNotFound || (hatless && !forced)) break;
  }
  candidates_.resize(base);
  if (memo_.enabled() && outcome == Outcome::kNotFound) memo_.Remember(key);
  return outcome;
}

// The failure memo's key of this node.
Hash128 Search::NodeKey(Offset last_offset, int last_rank) const {
  // Every section with unplaced bytes is tight at zero slack, so the
  // candidates all sit at the lowest of their floors (lowest_hole_, from
  // CollectCandidates). Above the last offset (or after a reset, last_rank
  // < 0) the restriction admits all of them: the node is the same
  // whatever (last_offset, last_rank), and whatever the ordering.
  const bool any_order = last_rank < 0 || lowest_hole_ > last_offset;
  const std::optional<uint64_t> open_groups =
      groups_.active() ? std::optional<uint64_t>(groups_.open_key())
                       : std::nullopt;
  return memo_.Key(open_groups, any_order, last_offset, last_rank);
}

// A tight section (floor + unplaced bytes == capacity: its unplaced
// buffers fill everything above its floor) whose floor is the lowest
// candidate offset has exactly one buffer of any completion starting at its
// floor, among the candidates there. Of those holes, takes the one with the
// fewest candidates: none ends the node; one is a forced move; with hole
// branching (ordering suffix 'h') its candidates are the only branches,
// alternatives instead of a subset enumeration. Returns whether it narrowed
// the candidates (their placements then start a new rank sequence).
bool Search::NarrowToHole(const Part& part, size_t base) {
  // A tight hole caps every candidate at its floor (the offset term of
  // CollectCandidates): only the lowest one can be at the candidates' level.
  if (base == candidates_.size() ||
      min_offset_[candidates_[base]] != lowest_hole_) {
    return false;
  }
  const Offset level = lowest_hole_;
  size_t end = base;  // candidates at the level: [base, end)
  while (end < candidates_.size() && min_offset_[candidates_[end]] == level) {
    ++end;
  }
  covering_.assign(part.hi - part.lo + 1, 0);  // difference array
  for (size_t i = base; i < end; ++i) {
    ++covering_[model_.sec_lo[candidates_[i]] - part.lo];
    --covering_[model_.sec_hi[candidates_[i]] - part.lo];
  }
  int best = -1, best_count = 0, count = 0;
  for (int s = part.lo; s < part.hi; ++s) {
    count += covering_[s - part.lo];
    if (floor_[s] != level || !TightHole(s)) continue;
    if (best < 0 || count < best_count) {
      best = s;
      best_count = count;
    }
  }
  if (best < 0 || (best_count > 1 && !holes_)) return false;
  size_t kept = base;
  for (size_t i = base; i < end; ++i) {
    const int c = candidates_[i];
    if (model_.sec_lo[c] <= best && best < model_.sec_hi[c]) {
      candidates_[kept++] = c;
    }
  }
  candidates_.resize(kept);
  if (holes_) FlushFirst(part, base, level);
  return true;
}

// Hole branching's order among the alternatives: first those whose top
// meets the floor just before or just after their lifetime (the skyline
// stays flat there, as in a cut of the rectangle), then by rank.
void Search::FlushFirst(const Part& part, size_t base, Offset level) {
  flush_.clear();
  for (size_t i = base; i < candidates_.size(); ++i) {
    const int c = candidates_[i];
    const Offset top = level + model_.size[c];
    const int before = model_.sec_lo[c] - 1, after = model_.sec_hi[c];
    const int meets = (before >= part.lo && floor_[before] == top ? 1 : 0) +
                      (after < part.hi && floor_[after] == top ? 1 : 0);
    flush_.emplace_back(-meets, c);
  }
  // Stable: the candidates are in rank order already.
  std::stable_sort(
      flush_.begin(), flush_.end(),
      [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t i = 0; i < flush_.size(); ++i) {
    candidates_[base + i] = flush_[i].second;
  }
}

// Places `b` at its canonical offset, checks the bounds, recurses, undoes.
// `hatless` tells the caller that no unplaced buffer sits on `b`: then no
// later sibling can succeed where this one failed.
Outcome Search::TryCandidate(const Part& part, int b, bool forced,
                             bool* hatless) {
  if (++nodes_ >= node_limit_) return Outcome::kAborted;
  if (effort_left_ != nullptr && --*effort_left_ < 0) {
    *effort_left_ = 0;
    return Outcome::kCancelled;
  }
  ++total_nodes_;
  if (nodes_ % kCancelStride == 0 && cancel_ != nullptr &&
      cancel_->Cancelled()) {
    return Outcome::kCancelled;
  }
  const Offset offset = min_offset_[b];
  const size_t offset_mark = offset_log_.size();
  const size_t floor_mark = floor_log_.size();
  *hatless = !Place(b, offset);
  Outcome outcome = Outcome::kNotFound;
  if (Check(floor_mark) &&
      groups_.Hold(b, offset_log_, offset_mark,
                   PlacedView{placed_, solution_, min_offset_}) &&
      (!holes_ || Coverable(part, b, offset_mark))) {
    outcome = Decompose(part, b, offset, forced ? -1 : rank_[b]);
  }
  Undo(b, offset_mark, floor_mark);
  return outcome;
}

// The lowest offset >= `offset` (aligned) clear of b's fixed obstacles.
Offset Search::Lift(int b, Offset offset) const {
  const Bytes size = model_.size[b];
  offset = AlignUp(offset, model_.align[b]);
  for (const Obstacle& o : model_.obstacles[b]) {
    if (o.offset >= offset + size) break;
    if (o.top > offset) offset = AlignUp(o.top, model_.align[b]);
  }
  return offset;
}

// Marks `b` placed and raises its neighbours' minimum offsets and the section
// floors. Returns whether some unplaced neighbour exists.
bool Search::Place(int b, Offset offset) {
  placed_[b] = 1;
  memo_.Toggle(b);
  solution_[b] = offset;
  groups_.Place(b, offset);
  const Offset top = offset + model_.size[b];
  bool has_hat = false;
  raised_spans_.clear();
  for (int n : model_.Neighbors(b)) {
    if (placed_[n]) continue;
    has_hat = true;
    if (min_offset_[n] >= top) continue;
    offset_log_.emplace_back(n, min_offset_[n]);
    min_offset_[n] = Lift(n, top);
    raised_spans_.emplace_back(model_.sec_lo[n], model_.sec_hi[n]);
  }
  // The sections of the raised buffers, each once: the union of their
  // section spans (long-lived neighbours share most of theirs), ascending
  // as the spans come in order of their first section (Model::Neighbors).
  touched_.clear();
  int next = 0;  // sections below it are in touched_ already
  for (const auto& [lo, hi] : raised_spans_) {
    for (int s = std::max(lo, next); s < hi; ++s) touched_.push_back(s);
    next = std::max(next, hi);
  }
  RaiseFloors(b, top);
  return has_hat;
}

// Section floors: at least b's top where b lives, and at least the lowest
// minimum offset of the unplaced buffers wherever those minimums rose.
void Search::RaiseFloors(int b, Offset top) {
  for (int s = model_.sec_lo[b]; s < model_.sec_hi[b]; ++s) {
    total_[s] -= model_.size[b];
    if (floor_[s] >= top) continue;
    floor_log_.emplace_back(s, floor_[s]);
    floor_[s] = top;
  }
  // A section keeps its floor when some unplaced buffer live there sits at
  // or below it (its witness). touched_ is ascending, so a section's witness
  // (the lowest, then the longest-lived such buffer) is tried first for the
  // sections after it: on long lifetimes one answers for a run of sections
  // without a scan of their buffers (MiniMalloc's D: 2-3x fewer seconds per
  // node).
  int witness = -1;
  for (int s : touched_) {
    if (witness >= 0 && model_.sec_hi[witness] > s &&
        min_offset_[witness] <= floor_[s]) {
      continue;
    }
    witness = -1;
    Offset lowest = kInfinity;
    for (int n : model_.sections[s]) {
      if (placed_[n]) continue;
      lowest = std::min(lowest, min_offset_[n]);
      if (min_offset_[n] <= floor_[s] &&
          (witness < 0 || min_offset_[n] < min_offset_[witness] ||
           (min_offset_[n] == min_offset_[witness] &&
            model_.sec_hi[n] > model_.sec_hi[witness]))) {
        witness = n;
      }
    }
    if (lowest == kInfinity || lowest <= floor_[s]) continue;
    floor_log_.emplace_back(s, floor_[s]);
    floor_[s] = lowest;
  }
}

// Reverses Place(b).
void Search::Undo(int b, size_t offset_mark, size_t floor_mark) {
  while (floor_log_.size() > floor_mark) {
    floor_[floor_log_.back().first] = floor_log_.back().second;
    floor_log_.pop_back();
  }
  while (offset_log_.size() > offset_mark) {
    min_offset_[offset_log_.back().first] = offset_log_.back().second;
    offset_log_.pop_back();
  }
  for (int s = model_.sec_lo[b]; s < model_.sec_hi[b]; ++s) {
    total_[s] += model_.size[b];
  }
  placed_[b] = 0;
  memo_.Toggle(b);
  groups_.Remove(b, solution_[b]);
}

// The cross-section bound: in every section the unplaced buffers stack above
// its floor. Only sections whose floor rose since `floor_mark` can newly
// fail: the others kept floor + total <= capacity, and the offset term
// offset + total <= capacity was ensured when the candidate was chosen.
bool Search::Check(size_t floor_mark) {
  for (size_t k = floor_mark; k < floor_log_.size(); ++k) {
    const int s = floor_log_[k].first;
    if (floor_[s] + total_[s] > capacity_) return false;
  }
  if (!holes_) return true;  // the zero-slack bounds: only worth it there
  for (int s : touched_) {
    if (!Stackable(s)) return false;
  }
  return true;
}

// The release-date bound (one machine, release dates, makespan): in
// section s the unplaced buffers stack above their minimum offsets, so for
// every offset o, o plus the sizes of those whose minimum offset is >= o
// must fit in the capacity. Only sections where a minimum offset rose can
// newly fail.
bool Search::Stackable(int s) {
  // Releases at or below the floor add nothing beyond floor + total, which
  // Check tests first.
  stack_.clear();
  for (int n : model_.sections[s]) {
    if (!placed_[n] && min_offset_[n] > floor_[s]) {
      stack_.emplace_back(min_offset_[n], model_.size[n]);
    }
  }
  if (stack_.empty()) return true;
  // Every term is at most the highest release plus all the sizes.
  Offset highest = 0;
  Bytes sizes = 0;
  for (const auto& [offset, size] : stack_) {
    highest = std::max(highest, offset);
    sizes += size;
  }
  if (highest + sizes <= capacity_) return true;
  std::sort(stack_.begin(), stack_.end(),
            [](const auto& x, const auto& y) { return x.first > y.first; });
  Bytes above = 0;
  for (const auto& [offset, size] : stack_) {
    above += size;
    if (offset + above > capacity_) return false;
  }
  return true;
}

// Zero-slack holes: in a section whose unplaced buffers must fill
// everything above its floor (floor + total == capacity), some buffer
// starts exactly at the floor, and its minimum offset is that floor
// already (minimum offsets only rise). Buffers at one offset never overlap
// in time, so at each level the tight sections whose floor is the level
// must be covered by time-disjoint buffers whose minimum offset is the
// level. Checked for the levels this placement changed: b's top, and the
// old minimum offsets of the buffers it raised.
bool Search::Coverable(const Part& part, int b, size_t offset_mark) {
  levels_.clear();
  levels_.push_back(solution_[b] + model_.size[b]);
  for (size_t k = offset_mark; k < offset_log_.size(); ++k) {
    levels_.push_back(offset_log_[k].second);
  }
  std::sort(levels_.begin(), levels_.end());
  levels_.erase(std::unique(levels_.begin(), levels_.end()), levels_.end());
  // A tight hole at one of these levels lies in b's sections (their floor
  // is b's top) or in a raised buffer's (touched_).
  holes_at_.clear();
  const auto consider = [&](int s) {
    if (TightHole(s) &&
        std::binary_search(levels_.begin(), levels_.end(), floor_[s])) {
      holes_at_.push_back(floor_[s]);
    }
  };
  for (int s = model_.sec_lo[b]; s < model_.sec_hi[b]; ++s) consider(s);
  for (int s : touched_) consider(s);
  std::sort(holes_at_.begin(), holes_at_.end());
  holes_at_.erase(std::unique(holes_at_.begin(), holes_at_.end()),
                  holes_at_.end());
  for (Offset level : holes_at_) {
    if (!CoverLevel(part, level)) return false;
  }
  return true;
}

// One level of Coverable: an interval cover of the part's sections, left to
// right (reach_[k]: the tight holes before section k can be covered).
bool Search::CoverLevel(const Part& part, Offset level) {
  const int n = part.hi - part.lo;
  if (static_cast<int>(starting_.size()) < n) starting_.resize(n);
  for (int k = 0; k < n; ++k) starting_[k].clear();
  for (int x : part.buffers) {
    if (!placed_[x] && min_offset_[x] == level) {
      starting_[model_.sec_lo[x] - part.lo].push_back(model_.sec_hi[x] -
                                                      part.lo);
    }
  }
  reach_.assign(n + 1, 0);
  reach_[0] = 1;
  for (int k = 0; k < n; ++k) {
    if (!reach_[k]) continue;
    const int s = part.lo + k;
    if (floor_[s] != level || !TightHole(s)) reach_[k + 1] = 1;
    for (int end : starting_[k]) reach_[end] = 1;
  }
  return reach_[n] != 0;
}

// After placing `b`: continue in this part, or, if b was the last buffer
// crossing some boundary, solve the pieces on each side independently.
Outcome Search::Decompose(const Part& part, int b, Offset offset, int rank) {
  const int lo = model_.sec_lo[b], hi = model_.sec_hi[b];
  const Outcome outcome =
      cuts_.Remove(lo, hi) ? SolveParts(part) : Dfs(part, offset, rank);
  cuts_.Restore(lo, hi);
  return outcome;
}

// What a capacity search over all orderings concluded.
struct CapacityAnswer {
  Outcome outcome = Outcome::kCancelled;  // kFound, kNotFound or kCancelled
  std::vector<Offset> offsets;            // full plan when kFound
  int64_t nodes = 0;                      // placements tried
};

// A full plan from the fixed offsets and the searched local offsets.
std::vector<Offset> FullOffsets(const Problem& problem, const Model& model,
                                const std::vector<Offset>& local) {
  std::vector<Offset> offsets(problem.buffers.size(), 0);
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& fixed = problem.buffers[i].fixed_offset;
    if (fixed) offsets[i] = *fixed;
  }
  for (size_t l = 0; l < model.ids.size(); ++l)
    offsets[model.ids[l]] = local[l];
  return offsets;
}

// The orderings for a capacity: the zero-slack ones where every section is
// exactly full at it.
const std::vector<std::string>& OrderingsFor(const Model& model, Bytes capacity,
                                             const ExactOptions& options) {
  return capacity == model.full_at ? options.zero_slack_orderings
                                   : options.orderings;
}

// Found or proven absent (not out of nodes or time).
bool Conclusive(Outcome outcome) {
  return outcome == Outcome::kFound || outcome == Outcome::kNotFound;
}

// The PQ-tree sweep's nodes per round of the round robin, in units of the
// round's node limit: its nodes cost about half an ordering's, and on cuts
// over time it decides what the orderings do not.
constexpr int64_t kSweepShare = 4;
// The same with the slack filled (at the bound of a problem with slack):
// one ordering's share. The orderings find most such plans too; on
// MiniMalloc's suite (capacity = bound, slack elsewhere) 4 times this made
// E and F take 2.4 times the nodes they took without the sweep (1.3 times
// at this share), while A and B went from 187k and 303k nodes to 130 and
// 7k (13k at this share).
constexpr int64_t kFilledSweepShare = 1;

// Continues the PQ-tree sweep (pq_sweep.h) for `limit` nodes within the
// effort left; its nodes are added to `answer`, and its plan put there when
// found. kAborted: out of nodes; nothing when the sweep does not apply.
std::optional<Outcome> ContinueSweep(PqSweeper& sweeper, int64_t limit,
                                     const base::CancelToken* cancel,
                                     int64_t* effort_left,
                                     CapacityAnswer& answer) {
  if (effort_left != nullptr) limit = std::min(limit, *effort_left);
  if (limit <= 0) return Outcome::kCancelled;
  PqSweepAnswer swept = sweeper.Continue(limit, cancel);
  answer.nodes += swept.nodes;
  if (effort_left != nullptr) *effort_left -= swept.nodes;
  switch (swept.outcome) {
    case PqSweepOutcome::kFound:
      answer.offsets = std::move(swept.offsets);
      return Outcome::kFound;
    case PqSweepOutcome::kInfeasible:
      return Outcome::kNotFound;
    case PqSweepOutcome::kStopped:
      if ((cancel != nullptr && cancel->Cancelled()) ||
          (effort_left != nullptr && *effort_left <= 0)) {
        return Outcome::kCancelled;
      }
      return Outcome::kAborted;
    case PqSweepOutcome::kNotApplicable:
      break;
  }
  return std::nullopt;
}

// Dives per round of the round robin, in units of the orderings' nodes in
// that round (ExactOptions::dives). At a fixed effort of 5M nodes (median
// over three other seed streams) 2 took D to 1025024 and J to 1020928, 4
// to 1025024 and 1019904, against 1031168 and 1035264 without dives; 4
// took J to 1005568 at 15M, but doubled capacity mode's nodes where the
// plain orderings answer (C and E-K). Dives rarely prove a capacity
// infeasible: above the bound a refutation now takes about three times
// the nodes.
constexpr int64_t kDiveShare = 2;

// One piece of a capacity search's work: a run of one ordering at a node
// limit (perturbed by a seed: a dive), or a step of the PQ-tree sweep. The
// round robin (MiniMalloc's scheme, with the dives and the sweep added) is a
// fixed sequence of them per capacity: round after round with doubling
// limits, each round the sweep's step (at its capacity, until a step does
// not apply), every ordering at the round's limit, then above the bound the
// dives. The sequence is the same on any thread count; threads only run its
// tasks at once. At zero slack the orderings' runs share one failure memo,
// as on one thread: they run on one Search (the lane), one at a time, in
// sequence order (no dives there: the sweep's steps run beside them).
struct SearchTask {
  enum class State { kPending, kRunning, kDone };
  bool sweep = false;   // a step of the PQ-tree sweep, else a run
  bool lane = false;    // a run on the capacity's failure memo (stateful)
  size_t ordering = 0;  // the run's ordering (index into the list)
  int64_t limit = 0;    // the run's node limit, or the sweep's nodes
  uint64_t seed = 0;    // the run's perturbation (KeyScale), 0: none
  int64_t cap = 0;      // the most nodes it takes without an answer
  State state = State::kPending;
  bool committed = false;               // its nodes and outcome were taken in
  int64_t effort = -1;                  // the effort it ran with (-1: none)
  Outcome outcome = Outcome::kAborted;  // once done
  bool swept = false;                   // sweep: the sweep applied (went on)
  int64_t nodes = 0;                    // nodes it took
  std::vector<Offset> offsets;          // full plan when kFound
};

// No effort bound: the effort a task may take when max_nodes is 0.
constexpr int64_t kNoEffort = std::numeric_limits<int64_t>::max() / 4;
// Tasks a capacity search lays out ahead of its first uncommitted one, in
// nodes: this many times the threads and the larger of that task's and the
// first round's. Threads take the first task that can start, so those
// ahead only run on threads that would idle: the longest runs (a later
// round's orderings, each twice the last round's) then start while the
// earlier rounds go on instead of after them. With max_nodes they are the
// speculation that the earlier runs give no answer. At 2 (about two rounds
// ahead) 16 threads kept 6.0 cores busy on MiniMalloc's D and J, at 8 6.9
// (BENCHMARKS.md).
constexpr int64_t kAheadFactor = 8;
// And at most this many tasks, whatever their nodes.
constexpr size_t kMaxAhead = 1 << 16;

// A search thread's own Search, for the runs without a failure memo (they
// keep no state from one run to the next): made again for every capacity.
struct SearchSlot {
  uint64_t probe = 0;  // the capacity search it was made for (its serial)
  std::unique_ptr<Search> search;
};

// One capacity search (kCapacity's, or one probe of kMinimize) run by a
// team of threads: its task sequence, laid out as the threads need it, and
// what was concluded. Every member is guarded by the team's mutex, except
// the constants and what a running task owns.
//
// Results never depend on the thread count when `ordered`: the tasks are
// taken in, in sequence order, and the first one with an answer (found,
// proven absent, or out of effort) is the answer; later ones that ran on
// speculation are dropped. Under max_nodes each task runs with the effort
// left if every task before it takes its `cap` (an under-estimate); a run
// that ran out of that effort but would have had more is run again once
// everything before it was taken in. Runs on the failure memo and the
// sweep's steps change state, so they start only where the effort cannot
// cut them (or once everything before them was taken in), in order. Without
// `ordered` (a time budget and no effort: timing decides anyway) the first
// answer any task gives wins.
class CapacitySearch {
 public:
  CapacitySearch(const Model& model, const Problem& problem, Bytes capacity,
                 const ExactOptions& options, const base::CancelToken* cancel,
                 int64_t* effort_left, int64_t max_limit, PqSweeper* sweeper,
                 uint64_t serial, int threads)
      : model_(model),
        problem_(problem),
        capacity_(capacity),
        orderings_(OrderingsFor(model, capacity, options)),
        stop_(cancel, absl::InfiniteFuture()),
        serial_(serial),
        threads_(threads),
        effort_left_(effort_left),
        ordered_(effort_left != nullptr || cancel == nullptr),
        memo_(options.remember_failures && capacity == model.full_at),
        sweeper_(sweeper != nullptr && capacity == sweeper->capacity()
                     ? sweeper
                     : nullptr),
        sweeping_(sweeper_ != nullptr),
        diving_(options.dives && capacity > model.bound),
        max_limit_(max_limit),
        limit_(options.first_round_nodes > 0
                   ? options.first_round_nodes
                   : std::max<int64_t>(1024, 2 * model.ids.size())),
        dive_limit_(limit_),
        // Dives differ from one capacity and call to the next (a later
        // round of kMinimize probing the same capacity dives elsewhere);
        // the capacity in grains, so a problem in KiB dives as the same one
        // in bytes.
        salt_(Mix(static_cast<uint64_t>(capacity / model.grain)) ^
              Mix(static_cast<uint64_t>(max_limit) + 1)) {
    if (effort_left_ != nullptr) committed_effort_ = *effort_left_;
  }

  bool finished() const { return finished_; }
  int running() const { return running_; }
  CapacityAnswer& answer() { return answer_; }

  // The index of the next task to run, marked running, or -1 when none
  // can start now. REQUIRES the team's mutex.
  int64_t Pick();
  // Runs task `index` (from Pick) with the team's mutex `mu` released, then
  // records its result and takes in what can be (it, or with `ordered_`
  // the tasks done in sequence order). REQUIRES `mu` held.
  void Execute(int64_t index, SearchSlot& slot, absl::Mutex& mu);

 private:
  SearchTask& task(int64_t index) { return tasks_[index - base_]; }
  int64_t end() const { return base_ + static_cast<int64_t>(tasks_.size()); }
  // Appends the sequence's next task; false when the sequence ended.
  bool Generate();
  void Append(SearchTask t);  // lays out t
  // Counts done task `index`'s nodes and effort; an answer ends the search.
  void TakeIn(int64_t index);
  void PopFront();  // the first task, taken in, leaves tasks_
  void Finish(Outcome outcome, std::vector<Offset> offsets);
  // Runs task t; on `search` when a run (null for a sweep step).
  void RunTask(SearchTask& t, Search* search);

  const Model& model_;
  const Problem& problem_;
  const Bytes capacity_;
  const std::vector<std::string>& orderings_;
  base::CancelToken stop_;  // the caller's token, and the answer found
  const uint64_t serial_;   // tells a thread's SearchSlot to renew
  const int threads_;
  int64_t* const effort_left_;  // the call's, updated as tasks are taken in
  const bool ordered_;
  const bool memo_;  // runs keep failures: all of them on one Search (lane)
  PqSweeper* const sweeper_;  // at this capacity, or null
  // No sweep step ended without applying (kNotApplicable): the rounds laid
  // out from now on get a step. One laid out before such an answer, in a
  // later round, does nothing when it runs (sweep steps run one at a time,
  // in order): as if the round had none.
  bool sweeping_;
  bool sweep_busy_ = false;  // a sweep step runs
  const bool diving_;
  const int64_t max_limit_;
  int64_t limit_;  // the limit of the round being laid out
  const int64_t dive_limit_;
  const uint64_t salt_;

  // The sequence laid out so far: tasks_[k] is task base_ + k.
  std::deque<SearchTask> tasks_;
  int64_t base_ = 0;
  // Pick's start: the tasks before it have all started. Of those, the ones
  // not taken in: their caps' sum and number.
  int64_t scan_from_ = 0;
  int64_t cap_before_scan_ = 0;
  int64_t open_before_scan_ = 0;
  int64_t open_cap_ = 0;    // caps of the tasks not taken in
  int64_t open_count_ = 0;  // tasks not taken in
  // With ordered_: the first task done with an answer (the tasks after it
  // are not needed), or -1.
  int64_t answer_at_ = -1;
  // Where the layout is: within the round, 0 before its sweep's step, 1 at
  // the orderings (next_ordering_), 2 at the dives (next_dive_ of dives_).
  int phase_ = 0;
  size_t next_ordering_ = 0;
  uint64_t next_dive_ = 0, dives_ = 0;
  uint64_t dive_ = 0;  // dives laid out in this capacity search
  int64_t committed_effort_ = kNoEffort;  // effort left after those taken
  std::unique_ptr<Search> lane_;          // the runs on the failure memo
  bool lane_busy_ = false;
  int running_ = 0;
  bool finished_ = false;
  CapacityAnswer answer_;
};

bool CapacitySearch::Generate() {
  for (;;) {
    if (limit_ > max_limit_) return false;
    if (phase_ == 0) {
      phase_ = 1;
      next_ordering_ = 0;
      if (sweeping_) {
        SearchTask t;
        t.sweep = true;
        t.limit =
            (sweeper_->filled() ? kFilledSweepShare : kSweepShare) * limit_;
        t.cap = t.limit;
        Append(std::move(t));
        return true;
      }
    }
    if (phase_ == 1) {
      if (next_ordering_ < orderings_.size()) {
        SearchTask t;
        t.lane = memo_;
        t.ordering = next_ordering_++;
        t.limit = limit_;
        t.cap = limit_ - 1;
        Append(std::move(t));
        return true;
      }
      phase_ = 2;
      next_dive_ = 0;
      dives_ = diving_ ? orderings_.size() *
                             static_cast<uint64_t>(limit_ / dive_limit_) *
                             kDiveShare
                       : 0;
    }
    if (next_dive_ < dives_) {
      ++next_dive_;
      const uint64_t seed = Mix(salt_ ^ dive_++);
      SearchTask t;
      t.ordering = 0;
      t.limit = dive_limit_;
      t.seed = seed == 0 ? 1 : seed;
      t.cap = dive_limit_ - 1;
      Append(std::move(t));
      return true;
    }
    phase_ = 0;
    limit_ *= 2;
  }
}

int64_t CapacitySearch::Pick() {
  if (finished_) return -1;
  const bool bounded = effort_left_ != nullptr;
  for (;;) {
    // Past the tasks already taken (none of them waits to start).
    while (scan_from_ < end() &&
           task(scan_from_).state != SearchTask::State::kPending) {
      const SearchTask& t = task(scan_from_);
      if (!t.committed) {
        cap_before_scan_ += t.cap;
        ++open_before_scan_;
      }
      ++scan_from_;
    }
    int64_t assumed = committed_effort_ - cap_before_scan_;
    bool lane_blocked = lane_busy_;
    bool sweep_blocked = sweep_busy_;
    for (int64_t i = scan_from_; i < end(); ++i) {
      if (answer_at_ >= 0 && i > answer_at_) return -1;  // not needed
      SearchTask& t = task(i);
      if (t.committed) continue;
      if (t.state == SearchTask::State::kPending) {
        // Everything before it taken in: its effort is the one left.
        const bool first = i == scan_from_ && open_before_scan_ == 0;
        bool ok = !(t.lane && lane_blocked) && !(t.sweep && sweep_blocked);
        if (bounded && !first) {
          // Stateful tasks only where the effort cannot cut them.
          ok = ok && assumed > 0 && (!(t.lane || t.sweep) || assumed > t.cap);
        }
        if (ok) {
          t.effort = bounded ? assumed : -1;
          t.state = SearchTask::State::kRunning;
          if (t.lane) lane_busy_ = true;
          if (t.sweep) sweep_busy_ = true;
          ++running_;
          return i;
        }
        if (t.lane) lane_blocked = true;
        if (t.sweep) sweep_blocked = true;
      }
      assumed -= t.cap;
    }
    if (answer_at_ >= 0) return -1;  // the answer is laid out already
    // Lay out more only within the window, and (effort) while some is
    // left for it.
    const int64_t unit =
        std::max(dive_limit_, tasks_.empty() ? 0 : tasks_.front().cap);
    if (open_cap_ >= kAheadFactor * threads_ * unit ||
        tasks_.size() >= kMaxAhead ||
        (bounded && committed_effort_ - open_cap_ <= 0 && open_count_ > 0)) {
      return -1;
    }
    if (!Generate()) {
      // Every round ran out of nodes: kAborted.
      if (open_count_ == 0 && running_ == 0) {
        Finish(Outcome::kAborted, {});
      }
      return -1;
    }
  }
}

void CapacitySearch::RunTask(SearchTask& t, Search* search) {
  int64_t effort = t.effort;
  int64_t* effort_ptr = t.effort >= 0 ? &effort : nullptr;
  if (t.sweep) {
    CapacityAnswer swept;
    const std::optional<Outcome> outcome =
        ContinueSweep(*sweeper_, t.limit, &stop_, effort_ptr, swept);
    t.swept = outcome.has_value();
    t.outcome = outcome.value_or(Outcome::kAborted);
    t.nodes = swept.nodes;
    t.offsets = std::move(swept.offsets);
    return;
  }
  search->set_effort(effort_ptr);
  const int64_t before = search->nodes();
  t.outcome = search->Run(orderings_[t.ordering], t.limit, t.seed);
  t.nodes = search->nodes() - before;
  if (t.outcome == Outcome::kFound) {
    t.offsets = FullOffsets(problem_, model_, search->offsets());
  }
}

void CapacitySearch::Execute(int64_t index, SearchSlot& slot, absl::Mutex& mu) {
  SearchTask* t = &task(index);
  Search* search = nullptr;
  if (t->lane) {
    if (lane_ == nullptr) {
      lane_ =
          std::make_unique<Search>(model_, capacity_, &stop_, nullptr, memo_);
    }
    search = lane_.get();
  } else if (!t->sweep) {
    if (slot.search == nullptr || slot.probe != serial_) {
      slot.search =
          std::make_unique<Search>(model_, capacity_, &stop_, nullptr, memo_);
      slot.probe = serial_;
    }
    search = slot.search.get();
  }
  SearchTask work = *t;  // runs outside the lock: tasks_ may grow meanwhile
  // A sweep step after one that did not apply: none (0 nodes, no answer).
  const bool skip = work.sweep && !sweeping_;
  mu.Unlock();
  if (!skip) RunTask(work, search);
  mu.Lock();
  t = &task(index);  // a deque keeps its elements in place as it grows
  --running_;
  if (t->lane) lane_busy_ = false;
  if (t->sweep) {
    sweep_busy_ = false;
    sweeping_ = sweeping_ && work.swept;
  }
  *t = std::move(work);
  t->state = SearchTask::State::kDone;
  if (finished_) {
    if (!ordered_) answer_.nodes += t->nodes;  // the work done, all of it
    return;
  }
  if (!ordered_) {
    TakeIn(index);
  } else {
    if (Conclusive(t->outcome) && (answer_at_ < 0 || index < answer_at_)) {
      answer_at_ = index;
    }
    // In sequence order, from the first task not taken in.
    while (!tasks_.empty() && !finished_) {
      SearchTask& first = tasks_.front();
      if (first.state != SearchTask::State::kDone) break;
      if (first.outcome == Outcome::kCancelled && first.effort >= 0 &&
          first.effort < committed_effort_ && !stop_.Cancelled()) {
        // Out of the effort it was given, not of the effort it has: run
        // again, now with all of it.
        first.state = SearchTask::State::kPending;
        first.nodes = 0;
        first.offsets.clear();
        scan_from_ = base_;
        cap_before_scan_ = 0;
        open_before_scan_ = 0;
        break;
      }
      TakeIn(base_);
      PopFront();
    }
  }
  while (!tasks_.empty() && tasks_.front().committed) PopFront();
}

void CapacitySearch::PopFront() {
  tasks_.pop_front();
  ++base_;
  scan_from_ = std::max(scan_from_, base_);
}

void CapacitySearch::Append(SearchTask t) {
  open_cap_ += t.cap;
  ++open_count_;
  tasks_.push_back(std::move(t));
}

void CapacitySearch::TakeIn(int64_t index) {
  SearchTask& t = task(index);
  t.committed = true;
  open_cap_ -= t.cap;
  --open_count_;
  if (index < scan_from_) {
    cap_before_scan_ -= t.cap;
    --open_before_scan_;
  }
  answer_.nodes += t.nodes;
  if (effort_left_ != nullptr) {
    committed_effort_ = std::max<int64_t>(0, committed_effort_ - t.nodes);
    *effort_left_ = committed_effort_;
  }
  if (t.outcome == Outcome::kCancelled || Conclusive(t.outcome)) {
    Finish(t.outcome, std::move(t.offsets));
  }
}

void CapacitySearch::Finish(Outcome outcome, std::vector<Offset> offsets) {
  finished_ = true;
  answer_.outcome = outcome;
  answer_.offsets = std::move(offsets);
  stop_.Cancel();
}

// The threads of one SolveExact call: the caller and up to threads - 1
// helpers (on ExactOptions::workers where it has room, else threads of
// their own), which take tasks from the capacity search in progress. A
// helper the pool has not started by the time the call ends does nothing
// when it starts: the call never waits for a pool thread to free up.
class SearchTeam {
 public:
  SearchTeam(int threads, base::WorkerPool* workers);
  // Stops the helpers and waits for those running.
  ~SearchTeam();
  SearchTeam(const SearchTeam&) = delete;
  SearchTeam& operator=(const SearchTeam&) = delete;

  int threads() const { return threads_; }
  // A fresh serial for a CapacitySearch.
  uint64_t NextSerial() { return ++serial_; }
  // Runs `search` to its answer on the caller and the helpers; returns
  // once no task of it runs.
  void Run(CapacitySearch& search);

 private:
  struct Shared {
    absl::Mutex mu;
    absl::CondVar changed;  // a task ended, a search began, or shutdown
    CapacitySearch* search ABSL_GUARDED_BY(mu) = nullptr;
    bool shutdown ABSL_GUARDED_BY(mu) = false;
    int helpers ABSL_GUARDED_BY(mu) = 0;  // helpers running
    int queued ABSL_GUARDED_BY(mu) = 0;   // helpers in the pool's queue
  };
  static void Help(const std::shared_ptr<Shared>& shared,
                   base::WorkerPool* workers);

  const int threads_;
  uint64_t serial_ = 0;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<std::thread> own_;  // helpers not on the pool
  SearchSlot slot_;               // the caller's
};

SearchTeam::SearchTeam(int threads, base::WorkerPool* workers)
    : threads_(std::max(threads, 1)) {
  for (int i = 1; i < threads_; ++i) {
    std::shared_ptr<Shared> shared = shared_;
    if (workers != nullptr) {
      {
        absl::MutexLock lock(&shared->mu);
        ++shared->queued;
      }
      // Full: one thread fewer (the caller runs what is left).
      if (!workers->TrySchedule([shared, workers] { Help(shared, workers); })) {
        absl::MutexLock lock(&shared->mu);
        --shared->queued;
        break;
      }
    } else {
      own_.emplace_back([shared] { Help(shared, nullptr); });
    }
  }
}

SearchTeam::~SearchTeam() {
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->shutdown = true;
    shared_->changed.SignalAll();
    while (shared_->helpers > 0) shared_->changed.Wait(&shared_->mu);
  }
  for (std::thread& t : own_) t.join();
}

// A helper on a pool leaves between tasks once other tasks wait in the
// pool's queue (base::ShouldYield's rule): a long search does not keep the
// workers from the small requests. The others, the caller at least, go on.
void SearchTeam::Help(const std::shared_ptr<Shared>& shared,
                      base::WorkerPool* workers) {
  SearchSlot slot;
  absl::MutexLock lock(&shared->mu);
  --shared->queued;
  if (shared->shutdown) return;  // started after the call ended
  ++shared->helpers;
  // Other tasks than this search's helpers wait for a pool thread.
  const auto others_wait = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) {
    return workers != nullptr && workers->queue_depth() > shared->queued;
  };
  while (!shared->shutdown && !others_wait()) {
    CapacitySearch* search = shared->search;
    const int64_t index = search != nullptr ? search->Pick() : -1;
    if (index >= 0) {
      search->Execute(index, slot, shared->mu);
      shared->changed.SignalAll();
      continue;
    }
    if (search != nullptr && search->finished()) {
      shared->changed.SignalAll();  // the caller may be waiting for it
    }
    shared->changed.Wait(&shared->mu);
  }
  --shared->helpers;
  shared->changed.SignalAll();
}

void SearchTeam::Run(CapacitySearch& search) {
  Shared& shared = *shared_;
  absl::MutexLock lock(&shared.mu);
  shared.search = &search;
  shared.changed.SignalAll();
  for (;;) {
    if (search.finished()) {
      if (search.running() == 0) break;
      shared.changed.Wait(&shared.mu);
      continue;
    }
    const int64_t index = search.Pick();
    if (index >= 0) {
      search.Execute(index, slot_, shared.mu);
      shared.changed.SignalAll();
      continue;
    }
    if (!search.finished()) shared.changed.Wait(&shared.mu);
  }
  shared.search = nullptr;
}

// A plan within `capacity` (or a proof there is none) by the round robin
// with limits up to `max_limit`, on the team's threads.
CapacityAnswer SearchCapacity(const Model& model, const Problem& problem,
                              Bytes capacity, const ExactOptions& options,
                              const base::CancelToken* cancel,
                              int64_t* effort_left, int64_t max_limit,
                              PqSweeper* sweeper, SearchTeam& team) {
  CapacitySearch search(model, problem, capacity, options, cancel, effort_left,
                        max_limit, sweeper, team.NextSerial(), team.threads());
  team.Run(search);
  return std::move(search.answer());
}

// Everything one SolveExact call shares among its steps.
struct Job {
  const Problem& problem;       // the input
  const ExactOptions& options;  // the settings
  const SolveContext& ctx;      // cancel token, shared incumbent
  const Model& model;           // the searched buffers
  int64_t* effort_left;         // nodes left under max_nodes, or null
  // The PQ-tree sweep at its capacity (model.full_at, or else the lower
  // bound with every step's slack a filler), shared by every probe there
  // (its restarts go on where the last probe stopped), or null.
  PqSweeper* sweeper;
  SearchTeam& team;  // the threads that search
};

// kCapacity: is there a plan within `capacity`?
// The search runs at `searched`: the capacity rounded down to the grain,
// which admits the same pushed-down plans (and lets a capacity a few bytes
// above a zero-slack height be searched as zero slack).
ExactResult SolveCapacity(const Job& job, Bytes capacity, Bytes searched,
                          ExactResult result) {
  if (result.lower_bound > capacity) {
    result.capacity_status = CapacityStatus::kInfeasible;
  } else if (result.solution.arena_size <= capacity) {
    result.capacity_status = CapacityStatus::kFeasible;
  } else {
    CapacityAnswer answer = SearchCapacity(
        job.model, job.problem, searched, job.options, job.ctx.cancel,
        job.effort_left, std::numeric_limits<int64_t>::max() / 4, job.sweeper,
        job.team);
    result.nodes += answer.nodes;
    if (answer.outcome == Outcome::kFound) {
      result.solution.arena_size = ArenaOf(job.problem, answer.offsets);
      result.solution.offsets = std::move(answer.offsets);
      result.capacity_status = CapacityStatus::kFeasible;
    } else if (answer.outcome == Outcome::kNotFound) {
      result.capacity_status = CapacityStatus::kInfeasible;
    }
  }
  result.feasible = result.capacity_status == CapacityStatus::kFeasible;
  result.proven_optimal = result.solution.arena_size == result.lower_bound;
  UpdateBest(job.ctx.best_arena, result.solution.arena_size);
  return result;
}

// One probe of kMinimize: a plan within `capacity` in at most about
// `budget` nodes per ordering. Adopts a found plan as the incumbent.
Outcome Probe(const Job& job, Bytes capacity, int64_t budget,
              ExactResult& result) {
  CapacityAnswer answer = SearchCapacity(
      job.model, job.problem, capacity, job.options, job.ctx.cancel,
      job.effort_left, budget, job.sweeper, job.team);
  result.nodes += answer.nodes;
  if (answer.outcome == Outcome::kFound) {
    result.solution.arena_size = ArenaOf(job.problem, answer.offsets);
    result.solution.offsets = std::move(answer.offsets);
    UpdateBest(job.ctx.best_arena, result.solution.arena_size);
  }
  return answer.outcome;
}

// The incumbent arena, or a smaller one another strategy already holds.
Bytes ProbeCeiling(const Job& job, const ExactResult& result) {
  Bytes hi = result.solution.arena_size;
  if (job.ctx.best_arena != nullptr) {
    hi = std::min(hi, job.ctx.best_arena->load(std::memory_order_relaxed));
  }
  return hi;
}

// Every arena of a pushed-down plan is a multiple of this. A pushed-down
// offset is 0, a fixed offset, or another buffer's end rounded up to an
// alignment; multiples of g are closed under that when every size and fixed
// offset is one and every alignment divides g or is a multiple of it. An
// alignment that is neither (3 KiB sizes at 2 KiB) shrinks g to their gcd,
// until none is left. An alignment of 1 changes nothing: a MiniMalloc CSV
// with sizes in KiB keeps a grain of 1024.
Bytes Granularity(const Problem& problem) {
  Bytes g = 0;
  for (const Buffer& b : problem.buffers) {
    g = std::gcd(g, b.size);
    if (b.fixed_offset) g = std::gcd(g, *b.fixed_offset);
  }
  if (g == 0) return 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (const Buffer& b : problem.buffers) {
      if (g % b.alignment != 0 && b.alignment % g != 0) {
        g = std::gcd(g, b.alignment);
        changed = true;
      }
    }
  }
  return g;
}

// The smallest multiple of `grain` >= `value`.
Bytes RoundUp(Bytes value, Bytes grain) {
  return (value + grain - 1) / grain * grain;
}

// The grains past the bound a bound probe skips after `walk` bound probes
// in a row were proved impossible: none for the first two (the bound and
// the next grain, as most searches need), then 1, 3, 7, ... (an
// exponential search up from the bound).
int64_t BoundSkip(int walk) {
  return walk < 2 ? 0 : (int64_t{1} << std::min(walk - 1, 62)) - 1;
}

// One round of kMinimize at a node budget: the bound `lo` first (with a
// larger budget: finding it ends the search), then a binary search over
// multiples of `grain` above it. A proof raises `lo`; an inconclusive probe
// only moves this round's search upward. Bound probes proved impossible
// one after another move up exponentially (BoundSkip): one grain at a time,
// a problem whose bound probes each fail without a node (two buffers, one
// pinned a gigabyte up) walked 15 million grains, never polling the
// token. Returns false once cancelled.
bool MinimizeRound(const Job& job, int64_t budget, Bytes grain, Bytes& lo,
                   ExactResult& result) {
  Bytes round_lo = lo;  // this round's probes stay at or above it
  int walk = 0;         // bound probes proved impossible in a row
  while (round_lo < ProbeCeiling(job, result)) {
    if (job.ctx.cancel != nullptr && job.ctx.cancel->Cancelled()) {
      return false;
    }
    const Bytes hi = ProbeCeiling(job, result);
    const int64_t skip = BoundSkip(walk);
    const bool bound = round_lo == lo && skip <= (hi - lo - 1) / grain;
    const Bytes middle = round_lo + (hi - round_lo) / 2;
    const Bytes mid =
        bound ? lo + skip * grain : std::max(round_lo, middle - middle % grain);
    const Outcome outcome =
        Probe(job, mid, bound ? budget * kBoundProbeWeight : budget, result);
    if (outcome == Outcome::kCancelled) return false;
    if (outcome == Outcome::kNotFound) lo = RoundUp(mid + 1, grain);
    if (outcome != Outcome::kFound) round_lo = RoundUp(mid + 1, grain);
    round_lo = std::max(round_lo, lo);
    walk = bound && outcome == Outcome::kNotFound ? walk + 1 : 0;
  }
  return true;
}

// kMinimize: rounds of probes with doubling node budgets, so easy
// improvements come first and hard probes get more time each round.
ExactResult SolveMinimize(const Job& job, ExactResult result) {
  const Bytes grain = job.model.grain;
  // Every arena below lo is impossible.
  Bytes lo = job.model.bound;
  int64_t budget = std::max<int64_t>(job.options.probe_nodes, 1);
  while (lo < ProbeCeiling(job, result) &&
         MinimizeRound(job, budget, grain, lo, result)) {
    budget =
        budget > std::numeric_limits<int64_t>::max() / 64 ? budget : budget * 2;
  }
  result.proven_optimal = lo >= result.solution.arena_size;
  result.feasible = true;
  return result;
}

// The starting incumbent: the caller's seed when it fits the problem, else
// the built-in greedy.
absl::StatusOr<Solution> StartingPlan(const Problem& problem,
                                      const ExactOptions& options,
                                      const SolveContext& ctx) {
  const size_t n = problem.buffers.size();
  if (ctx.seed != nullptr && ctx.seed->offsets.size() == n) {
    return Solution{ctx.seed->offsets, ArenaOf(problem, ctx.seed->offsets)};
  }
  if (static_cast<int64_t>(n) > options.max_buffers) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact solver: ", n, " buffers exceed max_buffers ",
                     options.max_buffers, " and no seed was given"));
  }
  return GreedySeed(problem);
}

// Non-empty, and each ordering letters of "WATZ" with an optional 'h'.
bool ValidOrderings(const std::vector<std::string>& orderings) {
  if (orderings.empty()) return false;
  for (const std::string& o : orderings) {
    const size_t letters =
        !o.empty() && o.back() == 'h' ? o.size() - 1 : o.size();
    if (letters == 0 || o.find_first_not_of("WATZ") < letters) {
      return false;
    }
  }
  return true;
}

// The capacity kCapacity works against, or an error if none was given.
absl::StatusOr<Bytes> CapacityOf(const Problem& problem,
                                 const ExactOptions& options) {
  if (options.capacity) return *options.capacity;
  if (problem.capacity) return *problem.capacity;
  return absl::InvalidArgumentError(
      "exact solver: capacity mode needs options.capacity or "
      "problem.capacity");
}

// Small enough to search: at most max_buffers buffers and max_overlaps
// overlapping pairs, which bound the model's memory and set-up time.
bool Searchable(const Problem& problem, const ExactOptions& options) {
  if (static_cast<int64_t>(problem.buffers.size()) > options.max_buffers) {
    return false;
  }
  // The search's heights (a buffer's lowest offset plus its size, at most
  // the highest fixed top plus every size) must stay below kInfinity, its
  // "no buffer" mark: a pin at 3 EB under a buffer of 3 EB passed for a
  // plan with that buffer unplaced. (Validation caps the sizes' sum and
  // each fixed top at 2^62; kInfinity is about 2^61.) Such a problem keeps
  // its starting plan.
  Bytes reach = 0;
  for (const Buffer& b : problem.buffers) {
    if (b.fixed_offset) reach = std::max(reach, *b.fixed_offset + b.size);
  }
  if (reach >= kInfinity) return false;
  for (const Buffer& b : problem.buffers) {
    reach += b.size + b.alignment - 1;  // its padding too (at most 2^32)
    if (reach >= kInfinity) return false;
  }
  const std::vector<int64_t> conflicts = CountConflicts(problem);
  return std::accumulate(conflicts.begin(), conflicts.end(), int64_t{0}) / 2 <=
         options.max_overlaps;
}

// Too large to search, or cancelled while the search was set up: report on
// the starting plan as it is.
ExactResult Unsearched(const ExactOptions& options, Bytes capacity,
                       ExactResult result) {
  result.proven_optimal = result.solution.arena_size == result.lower_bound;
  if (options.mode == ExactMode::kMinimize) {
    result.feasible = true;
    return result;
  }
  result.feasible = result.solution.arena_size <= capacity;
  result.capacity_status = result.feasible ? CapacityStatus::kFeasible
                           : result.lower_bound > capacity
                               ? CapacityStatus::kInfeasible
                               : CapacityStatus::kUnknown;
  return result;
}

}  // namespace

absl::StatusOr<ExactResult> SolveExact(const Problem& problem,
                                       const ExactOptions& options,
                                       const SolveContext& ctx) {
  if (absl::Status s = ValidateBuffers(problem); !s.ok()) return s;
  if (!ValidOrderings(options.orderings) ||
      !ValidOrderings(options.zero_slack_orderings)) {
    return absl::InvalidArgumentError(
        "exact solver: orderings must be non-empty lists of letters from "
        "WATZ, each optionally followed by h");
  }
  Bytes capacity = 0;
  if (options.mode == ExactMode::kCapacity) {
    absl::StatusOr<Bytes> c = CapacityOf(problem, options);
    if (!c.ok()) return c.status();
    capacity = *c;
  }
  absl::StatusOr<Solution> seed = StartingPlan(problem, options, ctx);
  if (!seed.ok()) return seed.status();
  ExactResult result;
  result.solution = *std::move(seed);
  result.lower_bound = StrongLowerBound(problem);
  if (!Searchable(problem, options)) {
    return Unsearched(options, capacity, std::move(result));
  }
  if (absl::Status s = CheckFixed(problem); !s.ok()) return s;
  std::optional<Model> built = BuildModel(problem, ctx.cancel);
  if (!built) return Unsearched(options, capacity, std::move(result));
  // Pushed-down plans have arenas in whole grains: a capacity between two
  // is searched at the lower one.
  const Bytes grain = Granularity(problem);
  built->grain = grain;
  built->bound = result.lower_bound;  // whole grains (sizes, fixed tops)
  const Model& model = *built;
  int64_t effort_left = options.max_nodes;
  const Bytes searched = capacity - capacity % grain;
  std::optional<PqSweeper> sweeper;
  const Bytes target =
      options.mode == ExactMode::kMinimize ? result.lower_bound : capacity;
  if (!options.pq_sweep || result.solution.arena_size <= target) {
    // Nothing to sweep for: the seed is the answer.
  } else if (model.full_at > 0 && (options.mode == ExactMode::kMinimize ||
                                   searched == model.full_at)) {
    sweeper.emplace(problem, model.full_at, PqSweepOptions{}, ctx.cancel);
  } else if (model.full_at < 0) {
    // Slack: at the bound (the first probe of kMinimize, or a capacity
    // within one grain of it) a plan with one free run per step proves the
    // bound; the sweep searches those.
    const Bytes height =
        options.mode == ExactMode::kMinimize ? model.bound : searched;
    if (height == model.bound) {
      sweeper.emplace(problem, height, PqSweepOptions{.fill_slack = true},
                      ctx.cancel);
    }
  }
  // The request's workers (SolveContext::parallel) unless the options name
  // threads of their own.
  SearchTeam team(
      std::max(options.threads, ctx.parallel.helpers() + 1),
      options.workers != nullptr ? options.workers : ctx.parallel.workers);
  const Job job{problem,
                options,
                ctx,
                model,
                options.max_nodes > 0 ? &effort_left : nullptr,
                sweeper ? &*sweeper : nullptr,
                team};
  if (options.mode == ExactMode::kCapacity) {
    return SolveCapacity(job, capacity, searched, std::move(result));
  }
  return SolveMinimize(job, std::move(result));
}

absl::StatusOr<Solution> ExactSolver::Solve(const Problem& problem,
                                            const SolveContext& ctx) const {
  ExactOptions options = options_;
  if (options.max_nodes <= 0) options.max_nodes = ctx.effort;
  absl::StatusOr<ExactResult> result = SolveExact(problem, options, ctx);
  if (!result.ok()) return result.status();
  return std::move(result->solution);
}

}  // namespace memplan::planner
