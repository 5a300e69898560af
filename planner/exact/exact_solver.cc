#include "planner/exact/exact_solver.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cancel.h"
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
  // Per local buffer, the local buffers it overlaps in time, by first
  // section (sec_lo, non-decreasing).
  std::vector<std::vector<int>> neighbors;
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

// A bound no plan can beat: peak live bytes, any fixed top, any one size.
Bytes StrongLowerBound(const Problem& problem) {
  Bytes bound = LowerBound(problem);
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
// Pairs are found in order of sec_lo, so each list is sorted by it.
// False once `cancel` (may be null) says stop: up to max_overlaps (2^22)
// pairs take about 50 ms.
bool BuildNeighbors(Model& model, const base::CancelToken* cancel) {
  const int m = static_cast<int>(model.ids.size());
  std::vector<int> by_lo(m);
  for (int i = 0; i < m; ++i) by_lo[i] = i;
  std::sort(by_lo.begin(), by_lo.end(),
            [&](int a, int b) { return model.sec_lo[a] < model.sec_lo[b]; });
  for (int x = 0; x < m; ++x) {
    if (x % 64 == 0 && cancel != nullptr && cancel->Cancelled()) return false;
    const int a = by_lo[x];
    for (int y = x + 1; y < m; ++y) {
      const int b = by_lo[y];
      if (model.sec_lo[b] >= model.sec_hi[a]) break;
      model.neighbors[a].push_back(b);
      model.neighbors[b].push_back(a);
    }
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
  model.neighbors.resize(m);
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
  if (fixed.empty()) model.full_at = FullAt(problem);
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

  // Offsets of the local buffers after Run returned kFound.
  const std::vector<Offset>& offsets() const { return solution_; }
  int64_t nodes() const { return total_nodes_; }

 private:
  void Reset();
  Outcome SolveParts(const std::vector<Part>& parts);
  Outcome SubSolve(const Part& part);
  void RankPart(const Part& part);
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
  memo_.StartRun(ordering, seed);
  node_limit_ = node_limit;
  Reset();
  for (size_t s = 0; s < floor_.size(); ++s) {
    if (floor_[s] + total_[s] > capacity_) return Outcome::kNotFound;
  }
  Part all;
  all.hi = static_cast<int>(model_.sections.size());
  for (int b = 0; b < static_cast<int>(model_.ids.size()); ++b) {
    all.buffers.push_back(b);
  }
  return SolveParts(cuts_.Split(all, placed_, model_.sec_lo));
}

// Independent parts: all must succeed; the first failure ends the call.
Outcome Search::SolveParts(const std::vector<Part>& parts) {
  for (const Part& p : parts) {
    const Outcome outcome = SubSolve(p);
    if (outcome != Outcome::kFound) return outcome;
  }
  return Outcome::kFound;
}

// Orders a part's buffers by the run's static ordering (descending keys).
// Keys are long double: width x size needs more than 64 bits, and every
// 64-bit value is exact in x86's 64-bit mantissa.
void Search::RankPart(const Part& part) {
  std::vector<std::pair<std::vector<long double>, int>> keyed;
  for (int b : part.buffers) {
    Bytes section_total = 0;
    for (int s = model_.sec_lo[b]; s < model_.sec_hi[b]; ++s) {
      section_total = std::max(section_total, total_[s]);
    }
    const auto width = static_cast<long double>(model_.width[b]);
    const auto size = static_cast<long double>(model_.size[b]);
    const auto total = static_cast<long double>(section_total);
    const long double scale = KeyScale(seed_, b);
    std::vector<long double> key;
    for (char c : ordering_) {
      if (c == 'W') key.push_back(-width * scale);
      if (c == 'A') key.push_back(-width * size * scale);
      if (c == 'T') key.push_back(-total * scale);
      if (c == 'Z') key.push_back(-size * scale);
    }
    keyed.emplace_back(std::move(key), b);
  }
  std::sort(keyed.begin(), keyed.end());
  for (size_t r = 0; r < keyed.size(); ++r) {
    rank_[keyed[r].second] = static_cast<int>(r);
  }
}

// Searches one part from scratch with its own ordering; restores the ranks
// the enclosing part uses.
Outcome Search::SubSolve(const Part& part) {
  std::vector<int> saved(part.buffers.size());
  for (size_t i = 0; i < part.buffers.size(); ++i) {
    saved[i] = rank_[part.buffers[i]];
  }
  RankPart(part);
  const Hash128 saved_key = memo_.EnterPart(part.lo, part.hi);
  const Outcome outcome = Dfs(part, 0, -1);
  memo_.LeavePart(saved_key);
  for (size_t i = 0; i < part.buffers.size(); ++i) {
    rank_[part.buffers[i]] = saved[i];
  }
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
    const Offset o = min_offset_[b];
    min_height = std::min(min_height, o + model_.size[b]);
    if (o < last_offset || (o == last_offset && rank_[b] < last_rank)) {
      continue;
    }
    candidates_.push_back(b);
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
  const Offset limit = std::min(min_height, capacity_ - max_total + 1);
  candidates_.erase(
      std::remove_if(candidates_.begin() + base, candidates_.end(),
                     [&](int b) { return min_offset_[b] >= limit; }),
      candidates_.end());
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
  for (int n : model_.neighbors[b]) {
    if (placed_[n]) continue;
    has_hat = true;
    if (min_offset_[n] >= top) continue;
    offset_log_.emplace_back(n, min_offset_[n]);
    min_offset_[n] = Lift(n, top);
    raised_spans_.emplace_back(model_.sec_lo[n], model_.sec_hi[n]);
  }
  // The sections of the raised buffers, each once: the union of their
  // section spans (long-lived neighbours share most of theirs), ascending
  // as the spans come in order of their first section (Model::neighbors).
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
      cuts_.Remove(lo, hi)
          ? SolveParts(cuts_.Split(part, placed_, model_.sec_lo))
          : Dfs(part, offset, rank);
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

// Round robin over orderings first, first + stride, ... with doubling node
// limits up to `max_limit` (MiniMalloc's scheme): an easy ordering answers
// early, and a run that proves infeasibility under any ordering settles the
// question. Above the bound, each round then dives (ExactOptions::dives):
// the first ordering perturbed, at the first round's limit, dive d of the
// call on thread d % stride. kAborted when every run hit `max_limit`.
CapacityAnswer RoundRobin(const Model& model, const Problem& problem,
                          Bytes capacity, const ExactOptions& options,
                          const base::CancelToken* cancel, int64_t* effort_left,
                          int64_t max_limit, size_t first, size_t stride,
                          PqSweeper* sweeper) {
  CapacityAnswer answer;
  answer.outcome = Outcome::kAborted;
  Search search(model, capacity, cancel, effort_left,
                options.remember_failures);
  const std::vector<std::string>& orderings =
      OrderingsFor(model, capacity, options);
  // At the sweep's capacity (zero slack, or the bound with the slack
  // filled) the PQ-tree sweep goes first in every round, continued where
  // the previous round (or probe) left it.
  bool sweeping =
      sweeper != nullptr && first == 0 && capacity == sweeper->capacity();
  int64_t sweep_nodes = 0;
  int64_t limit = options.first_round_nodes > 0
                      ? options.first_round_nodes
                      : std::max<int64_t>(1024, 2 * model.ids.size());
  const int64_t dive_limit = limit;
  // Above the bound there is slack (full_at, if any, is the bound).
  const bool diving = options.dives && capacity > model.bound;
  uint64_t dive = 0;  // dives of this call so far
  // Runs ordering k (perturbed by a nonzero `seed`) for `nodes`; true when
  // that settled the question (answer.outcome is set).
  const auto settled = [&](size_t k, int64_t nodes, uint64_t seed) {
    const Outcome outcome = search.Run(orderings[k], nodes, seed);
    answer.nodes = sweep_nodes + search.nodes();
    if (outcome == Outcome::kAborted) return false;
    answer.outcome = outcome;
    if (outcome == Outcome::kFound) {
      answer.offsets = FullOffsets(problem, model, search.offsets());
    }
    return true;
  };
  // Dives differ from one capacity and call to the next (a later round of
  // kMinimize probing the same capacity dives elsewhere); the capacity in
  // grains, so a problem in KiB dives as the same one in bytes.
  const uint64_t salt = Mix(static_cast<uint64_t>(capacity / model.grain)) ^
                        Mix(static_cast<uint64_t>(max_limit) + 1);
  while (limit <= max_limit) {
    if (sweeping) {
      const int64_t before = answer.nodes;
      const int64_t share = sweeper->filled() ? kFilledSweepShare : kSweepShare;
      const std::optional<Outcome> outcome =
          ContinueSweep(*sweeper, share * limit, cancel, effort_left, answer);
      sweep_nodes += answer.nodes - before;
      if (outcome == Outcome::kCancelled) {
        answer.outcome = Outcome::kCancelled;
        return answer;
      }
      if (outcome && Conclusive(*outcome)) {
        answer.outcome = *outcome;
        return answer;
      }
      sweeping = outcome.has_value();
    }
    for (size_t k = first; k < orderings.size(); k += stride) {
      if (settled(k, limit, 0)) return answer;
    }
    const uint64_t dives =
        diving ? orderings.size() * (limit / dive_limit) * kDiveShare : 0;
    for (uint64_t d = 0; d < dives; ++d, ++dive) {
      if (dive % stride != first) continue;
      const uint64_t seed = Mix(salt ^ dive);
      if (settled(0, dive_limit, seed == 0 ? 1 : seed)) return answer;
    }
    limit *= 2;
  }
  return answer;
}

// Runs the round robin on one or two threads (orderings split between them);
// the first conclusive answer wins and stops the other thread.
CapacityAnswer SearchCapacity(const Model& model, const Problem& problem,
                              Bytes capacity, const ExactOptions& options,
                              const base::CancelToken* cancel,
                              int64_t* effort_left, int64_t max_limit,
                              PqSweeper* sweeper) {
  if (options.threads <= 1 ||
      OrderingsFor(model, capacity, options).size() < 2) {
    return RoundRobin(model, problem, capacity, options, cancel, effort_left,
                      max_limit, 0, 1, sweeper);
  }
  base::CancelToken stop(cancel, absl::InfiniteFuture());
  CapacityAnswer answers[2];
  // Each thread spends at most the effort left (max_nodes is per thread).
  int64_t helper_effort = effort_left != nullptr ? *effort_left : 0;
  auto run = [&](size_t first) {
    int64_t* effort =
        first == 0 || effort_left == nullptr ? effort_left : &helper_effort;
    answers[first] = RoundRobin(model, problem, capacity, options, &stop,
                                effort, max_limit, first, 2, sweeper);
    if (Conclusive(answers[first].outcome)) stop.Cancel();
  };
  std::thread helper(run, 1);
  run(0);
  helper.join();
  CapacityAnswer& winner =
      Conclusive(answers[0].outcome) ? answers[0] : answers[1];
  winner.nodes = answers[0].nodes + answers[1].nodes;
  return std::move(winner);
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
        job.effort_left, std::numeric_limits<int64_t>::max() / 4, job.sweeper);
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
  CapacityAnswer answer =
      SearchCapacity(job.model, job.problem, capacity, job.options,
                     job.ctx.cancel, job.effort_left, budget, job.sweeper);
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

// One round of kMinimize at a node budget: the bound `lo` first (with a
// larger budget: finding it ends the search), then a binary search over
// multiples of `grain` above it. A proof raises `lo`; an inconclusive probe
// only moves this round's search upward. Returns false once cancelled.
bool MinimizeRound(const Job& job, int64_t budget, Bytes grain, Bytes& lo,
                   ExactResult& result) {
  Bytes round_lo = lo;  // this round's probes stay at or above it
  while (round_lo < ProbeCeiling(job, result)) {
    const Bytes hi = ProbeCeiling(job, result);
    const bool bound = round_lo == lo;
    const Bytes middle = round_lo + (hi - round_lo) / 2;
    const Bytes mid = bound ? lo : std::max(round_lo, middle - middle % grain);
    const Outcome outcome =
        Probe(job, mid, bound ? budget * kBoundProbeWeight : budget, result);
    if (outcome == Outcome::kCancelled) return false;
    if (outcome == Outcome::kNotFound) lo = RoundUp(mid + 1, grain);
    if (outcome != Outcome::kFound) round_lo = RoundUp(mid + 1, grain);
    round_lo = std::max(round_lo, lo);
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
  const Job job{problem,
                options,
                ctx,
                model,
                options.max_nodes > 0 ? &effort_left : nullptr,
                sweeper ? &*sweeper : nullptr};
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
