#include "planner/exact/pq_sweep.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "planner/exact/hole_groups.h"
#include "planner/sections.h"

namespace memplan::planner {
namespace {

// A start time with more ended (or starting) buffers than these is not
// split: the problem is left to the branch and bound (kNotApplicable). The
// fills of a hole are found among the 2^16 subsets of the starting ones.
constexpr size_t kMaxEnded = 12;
constexpr size_t kMaxStarting = 16;

// A PQ-tree over the live buffers. A P-node's children may come in any
// order, a Q-node's in the order given or reversed; a leaf is a buffer. The
// frontier (leaves left to right) is a memory order, bottom first. Nodes
// are appended as the tree is rebuilt; Compact() drops the unreachable.
enum class Kind : uint8_t { kLeaf, kP, kQ };

struct Node {
  Kind kind = Kind::kLeaf;
  int leaf = -1;  // kLeaf: the buffer
  int first = 0;  // children: kids[first, first + count)
  int count = 0;
};

struct Tree {
  std::vector<Node> nodes;
  std::vector<int> kids;
  int root = -1;  // -1: nothing live
};

int AddNode(Tree& t, Kind kind, const std::vector<int>& children) {
  Node n;
  n.kind = kind;
  n.first = static_cast<int>(t.kids.size());
  n.count = static_cast<int>(children.size());
  t.kids.insert(t.kids.end(), children.begin(), children.end());
  t.nodes.push_back(n);
  return static_cast<int>(t.nodes.size()) - 1;
}

int AddLeaf(Tree& t, int buffer) {
  Node n;
  n.leaf = buffer;
  t.nodes.push_back(n);
  return static_cast<int>(t.nodes.size()) - 1;
}

// Any order of `children` (one child stands for itself).
int MakeP(Tree& t, const std::vector<int>& children) {
  return children.size() == 1 ? children[0] : AddNode(t, Kind::kP, children);
}

// `children` in this order or reversed (two children: either order, a
// P-node).
int MakeQ(Tree& t, const std::vector<int>& children) {
  if (children.size() == 1) return children[0];
  return AddNode(t, children.size() == 2 ? Kind::kP : Kind::kQ, children);
}

// A P-node of new leaves for `buffers`.
int NewBlock(Tree& t, const std::vector<int>& buffers) {
  std::vector<int> leaves;
  for (int b : buffers) leaves.push_back(AddLeaf(t, b));
  return MakeP(t, leaves);
}

void Frontier(const Tree& t, int n, std::vector<int>& out) {
  const Node& node = t.nodes[n];
  if (node.kind == Kind::kLeaf) {
    out.push_back(node.leaf);
    return;
  }
  for (int k = 0; k < node.count; ++k) Frontier(t, t.kids[node.first + k], out);
}

// Copies the tree reachable from the root into a fresh one, `from` replaced
// by `to` (-1: no replacement).
void CopyNode(const Tree& t, int n, int from, int to, Tree& out, int& copied) {
  if (n == from) n = to;
  const Node& node = t.nodes[n];
  if (node.kind == Kind::kLeaf) {
    copied = AddLeaf(out, node.leaf);
    return;
  }
  std::vector<int> children(node.count);
  for (int k = 0; k < node.count; ++k) {
    CopyNode(t, t.kids[node.first + k], from, to, out, children[k]);
  }
  copied = AddNode(out, node.kind, children);
}

Tree Compact(const Tree& t, int from = -1, int to = -1) {
  Tree out;
  out.nodes.reserve(t.nodes.size());
  out.kids.reserve(t.kids.size());
  if (t.root >= 0) CopyNode(t, t.root, from, to, out, out.root);
  return out;
}

// Where a set of leaves lies once it is consecutive: all the leaves of
// `node`, or the children [lo, hi) of the Q-node `node`.
struct Span {
  int node = -1;
  int lo = -1, hi = -1;  // -1: the whole node
};

// One reduction: makes the leaves marked in `in_set` consecutive in every
// frontier, keeping every frontier where they already were (Booth and
// Lueker's templates, applied recursively from the pertinent root down).
class Reduction {
 public:
  Reduction(Tree& t, const std::vector<char>& in_set, int set_size)
      : t_(t), in_set_(in_set), set_size_(set_size) {}

  // False when no frontier has the set consecutive.
  bool Run(Span& span) {
    hit_.assign(t_.nodes.size(), 0);
    total_.assign(t_.nodes.size(), 0);
    Count(t_.root);
    int root = t_.root;
    for (bool descended = true; descended;) {  // the pertinent root
      descended = false;
      const Node& node = t_.nodes[root];
      for (int k = 0; k < node.count && !descended; ++k) {
        const int child = t_.kids[node.first + k];
        if (hit_[child] == set_size_) root = child, descended = true;
      }
    }
    if (hit_[root] == total_[root]) {  // already the leaves of one node
      span = {root, -1, -1};
      return true;
    }
    const int reduced = ReduceRoot(root);
    if (reduced < 0) return false;
    t_ = Compact(t_, root, reduced);
    // Compaction renumbers: find the span's node again by its leaves.
    return Locate(span);
  }

 private:
  enum Label { kEmpty, kFull, kPartial };

  Label LabelOf(int n) const {
    return hit_[n] == 0 ? kEmpty : hit_[n] == total_[n] ? kFull : kPartial;
  }

  void Count(int n) {
    const Node& node = t_.nodes[n];
    if (node.kind == Kind::kLeaf) {
      total_[n] = 1;
      hit_[n] = in_set_[node.leaf] ? 1 : 0;
      return;
    }
    for (int k = 0; k < node.count; ++k) {
      const int child = t_.kids[node.first + k];
      Count(child);
      total_[n] += total_[child];
      hit_[n] += hit_[child];
    }
  }

  std::vector<int> Children(int n) const {
    const Node& node = t_.nodes[n];
    return std::vector<int>(t_.kids.begin() + node.first,
                            t_.kids.begin() + node.first + node.count);
  }

  // Appends to `out` a partial node's subtree as a sequence of empty and
  // full nodes, empty ones first, such that it is consecutive with its full
  // end at the right. False when impossible.
  bool EndSequence(int n, std::vector<int>& out) {
    const std::vector<int> children = Children(n);
    if (t_.nodes[n].kind == Kind::kP) {
      std::vector<int> empty, full, partial;
      for (int c : children) {
        const Label l = LabelOf(c);
        (l == kEmpty ? empty : l == kFull ? full : partial).push_back(c);
      }
      if (partial.size() > 1) return false;
      if (!empty.empty()) out.push_back(MakeP(t_, empty));
      if (!partial.empty() && !EndSequence(partial[0], out)) return false;
      if (!full.empty()) out.push_back(MakeP(t_, full));
      return true;
    }
    // Q-node: empty* partial? full*, in one of its two directions.
    std::vector<int> order = children;
    if (!Monotone(order)) {
      std::reverse(order.begin(), order.end());
      if (!Monotone(order)) return false;
    }
    for (int c : order) {
      if (LabelOf(c) == kPartial) {
        if (!EndSequence(c, out)) return false;
      } else {
        out.push_back(c);
      }
    }
    return true;
  }

  // Labels of `order` read empty*, then at most one partial, then full*.
  bool Monotone(const std::vector<int>& order) const {
    int stage = 0;  // 0 empty, 1 partial seen, 2 full
    for (int c : order) {
      const Label l = LabelOf(c);
      if (l == kEmpty) {
        if (stage != 0) return false;
      } else if (l == kPartial) {
        if (stage != 0) return false;
        stage = 1;
      } else {
        stage = 2;
      }
    }
    return true;
  }

  // The pertinent root rebuilt with the set consecutive; -1 if impossible.
  int ReduceRoot(int n) {
    const std::vector<int> children = Children(n);
    std::vector<int> sequence;
    if (t_.nodes[n].kind == Kind::kP) {
      std::vector<int> empty, full, partial;
      for (int c : children) {
        const Label l = LabelOf(c);
        (l == kEmpty ? empty : l == kFull ? full : partial).push_back(c);
      }
      if (partial.size() > 2) return -1;
      if (!partial.empty() && !EndSequence(partial[0], sequence)) return -1;
      if (!full.empty()) sequence.push_back(MakeP(t_, full));
      if (partial.size() == 2) {
        std::vector<int> right;
        if (!EndSequence(partial[1], right)) return -1;
        sequence.insert(sequence.end(), right.rbegin(), right.rend());
      }
      const int block = MakeQ(t_, sequence);
      if (empty.empty()) return block;
      empty.push_back(block);
      return MakeP(t_, empty);
    }
    // Q-node: the non-empty children consecutive, full inside, partial at
    // the two ends at most.
    int first = -1, last = -1;
    for (size_t k = 0; k < children.size(); ++k) {
      if (LabelOf(children[k]) == kEmpty) continue;
      if (first < 0) first = static_cast<int>(k);
      last = static_cast<int>(k);
    }
    for (int k = first + 1; k < last; ++k) {
      if (LabelOf(children[k]) != kFull) return -1;
    }
    for (int k = 0; k < static_cast<int>(children.size()); ++k) {
      const int c = children[k];
      if (LabelOf(c) != kPartial) {
        sequence.push_back(c);
      } else if (k == first) {
        if (!EndSequence(c, sequence)) return -1;
      } else {
        std::vector<int> right;
        if (!EndSequence(c, right)) return -1;
        sequence.insert(sequence.end(), right.rbegin(), right.rend());
      }
    }
    return MakeQ(t_, sequence);
  }

  // After compaction: the node whose leaves are the set, or the Q-node
  // whose consecutive children hold exactly the set.
  bool Locate(Span& span) {
    hit_.assign(t_.nodes.size(), 0);
    total_.assign(t_.nodes.size(), 0);
    Count(t_.root);
    int n = t_.root;
    for (bool descended = true; descended;) {
      descended = false;
      const Node& node = t_.nodes[n];
      for (int k = 0; k < node.count && !descended; ++k) {
        const int child = t_.kids[node.first + k];
        if (hit_[child] == set_size_) n = child, descended = true;
      }
    }
    if (hit_[n] == total_[n]) {
      span = {n, -1, -1};
      return true;
    }
    const Node& node = t_.nodes[n];
    if (node.kind != Kind::kQ) return false;  // cannot happen once reduced
    int lo = -1, hi = -1;
    for (int k = 0; k < node.count; ++k) {
      const Label l = LabelOf(t_.kids[node.first + k]);
      if (l == kPartial) return false;
      if (l == kFull) {
        if (lo < 0) lo = k;
        if (hi >= 0 && hi != k) return false;
        hi = k + 1;
      }
    }
    span = {n, lo, hi};
    return true;
  }

  Tree& t_;
  const std::vector<char>& in_set_;
  const int set_size_;
  std::vector<int> hit_, total_;  // per node: set leaves, all leaves
};

// One hole of a split: ended buffers (consecutive in memory) and the
// starting buffers that fill their place.
struct Hole {
  std::vector<int> ended, starting;
};
using Split = std::vector<Hole>;

// How one hole was filled, for reading a plan back: the ended buffers in
// the tree's order, and (when they were children of a Q-node) a sibling's
// leaf and whether that sibling came before them, which fixes the
// direction their order is read in.
struct Fill {
  std::vector<int> ended_order;
  std::vector<int> starting;
  int reference = -1;  // a buffer; -1: the order is free to reverse
  bool reference_before = false;
};

// Makes `buffers` (live, two or more) consecutive in `t`; `span` gets
// where they lie. False when no frontier has them consecutive. `mark` is
// all zero before and after.
bool Consecutive(Tree& t, const std::vector<int>& buffers,
                 std::vector<char>& mark, Span& span) {
  for (int b : buffers) mark[b] = 1;
  Reduction reduction(t, mark, static_cast<int>(buffers.size()));
  const bool ok = reduction.Run(span);
  for (int b : buffers) mark[b] = 0;
  return ok;
}

// Applies one hole: the ended buffers made consecutive, then replaced by a
// P-node of the starting ones. False when they cannot be consecutive.
bool ApplyHole(Tree& t, const Hole& hole, std::vector<char>& mark, Fill& fill) {
  fill.starting = hole.starting;
  Span span;
  if (hole.ended.size() == 1) {
    for (size_t n = 0; n < t.nodes.size(); ++n) {
      if (t.nodes[n].kind == Kind::kLeaf && t.nodes[n].leaf == hole.ended[0]) {
        span = {static_cast<int>(n), -1, -1};
      }
    }
  } else if (!Consecutive(t, hole.ended, mark, span)) {
    return false;
  }
  const int block = NewBlock(t, hole.starting);
  if (span.lo < 0) {
    Frontier(t, span.node, fill.ended_order);
    t = Compact(t, span.node, block);
    return true;
  }
  const Node q = t.nodes[span.node];
  std::vector<int> children;
  for (int k = 0; k < q.count; ++k) {
    const int c = t.kids[q.first + k];
    if (k >= span.lo && k < span.hi) {
      Frontier(t, c, fill.ended_order);
      if (k == span.lo) children.push_back(block);
    } else {
      children.push_back(c);
    }
  }
  const bool before = span.lo > 0;
  const int sibling = t.kids[q.first + (before ? span.lo - 1 : span.hi)];
  std::vector<int> leaves;
  Frontier(t, sibling, leaves);
  fill.reference = leaves[0];
  fill.reference_before = before;
  const int replaced = MakeQ(t, children);
  t = Compact(t, span.node, replaced);
  return true;
}

// The splits of one start time, finest first: every partition of `ended`
// into holes paired with a partition of `starting` of equal sums; among
// identical starting buffers (same size, start and end) the first free ones
// are taken first. (Only starting ones: nothing has told them apart yet,
// so a plan with two of them swapped is a plan of the same search state.
// Ended ones have been placed differently by then; breaking their symmetry
// too could exclude a plan and its mirror image both.)
class SplitFinder {
 public:
  SplitFinder(const Problem& p, const std::vector<int>& ended,
              const std::vector<int>& starting, int64_t max_splits)
      : p_(p), ended_(ended), starting_(starting), max_splits_(max_splits) {}

  // Nothing when there are too many buffers to split. Past `max_splits`,
  // the finer ones found so far (truncated() then says so).
  std::optional<std::vector<Split>> Find() {
    if (ended_.size() > kMaxEnded || starting_.size() > kMaxStarting) {
      return std::nullopt;
    }
    starting_twin_ = Twins(starting_);
    // Every subset's sum from a smaller one's: one addition each.
    const uint32_t all = (uint32_t{1} << starting_.size()) - 1;
    fills_.resize(all + 1);
    fills_[0] = {0, 0};
    for (uint32_t fill = 1; fill <= all; ++fill) {
      fills_[fill] = {fills_[fill & (fill - 1)].first +
                          p_.buffers[starting_[__builtin_ctz(fill)]].size,
                      fill};
    }
    fills_.erase(fills_.begin());  // the empty fill
    std::sort(fills_.begin(), fills_.end());
    Split current;
    truncated_ = !Recurse(0, 0, current);
    std::stable_sort(
        splits_.begin(), splits_.end(),
        [](const Split& a, const Split& b) { return a.size() > b.size(); });
    return std::move(splits_);
  }

  bool truncated() const { return truncated_; }

 private:
  // Per position, the previous identical buffer's position, or -1.
  std::vector<int> Twins(const std::vector<int>& list) const {
    std::vector<int> twin(list.size(), -1);
    for (size_t i = 0; i < list.size(); ++i) {
      const Buffer& a = p_.buffers[list[i]];
      for (size_t j = i; j-- > 0;) {
        const Buffer& b = p_.buffers[list[j]];
        if (a.size == b.size && a.start == b.start && a.end == b.end) {
          twin[i] = static_cast<int>(j);
          break;
        }
      }
    }
    return twin;
  }

  // Every member's earlier twin is taken already or with it.
  static bool Canonical(uint32_t mask, uint32_t taken,
                        const std::vector<int>& twin) {
    for (size_t i = 0; i < twin.size(); ++i) {
      if ((mask >> i & 1) && twin[i] >= 0 &&
          ((mask | taken) >> twin[i] & 1) == 0) {
        return false;
      }
    }
    return true;
  }

  Bytes Sum(uint32_t mask, const std::vector<int>& list) const {
    Bytes sum = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (mask >> i & 1) sum += p_.buffers[list[i]].size;
    }
    return sum;
  }

  std::vector<int> Members(uint32_t mask, const std::vector<int>& list) const {
    std::vector<int> members;
    for (size_t i = 0; i < list.size(); ++i) {
      if (mask >> i & 1) members.push_back(list[i]);
    }
    return members;
  }

  // False once there are too many splits.
  bool Recurse(uint32_t ended_taken, uint32_t starting_taken, Split& current) {
    const uint32_t all_ended = (uint32_t{1} << ended_.size()) - 1;
    const uint32_t all_starting = (uint32_t{1} << starting_.size()) - 1;
    if (ended_taken == all_ended) {
      if (starting_taken != all_starting) return true;
      if (static_cast<int64_t>(splits_.size()) >= max_splits_) return false;
      splits_.push_back(current);
      return true;
    }
    const uint32_t lowest =
        (~ended_taken & all_ended) & (~(~ended_taken & all_ended) + 1);
    const uint32_t ended_free = all_ended & ~ended_taken & ~lowest;
    const uint32_t starting_free = all_starting & ~starting_taken;
    // The hole holding the lowest free ended buffer: `lowest` plus any
    // subset of the other free ended ones, smallest first (so that, cut
    // short, the splits kept are the finer ones).
    for (uint32_t rest = 0;; rest = (rest - ended_free) & ended_free) {
      const uint32_t hole = lowest | rest;
      const Bytes size = Sum(hole, ended_);
      for (auto it = std::lower_bound(fills_.begin(), fills_.end(),
                                      std::pair<Bytes, uint32_t>{size, 0});
           it != fills_.end() && it->first == size; ++it) {
        const uint32_t fill = it->second;
        if ((fill & ~starting_free) != 0 ||
            !Canonical(fill, starting_taken, starting_twin_)) {
          continue;
        }
        current.push_back({Members(hole, ended_), Members(fill, starting_)});
        const bool ok =
            Recurse(ended_taken | hole, starting_taken | fill, current);
        current.pop_back();
        if (!ok) return false;
      }
      if (rest == ended_free) break;
    }
    return true;
  }

  const Problem& p_;
  const std::vector<int>& ended_;
  const std::vector<int>& starting_;
  const int64_t max_splits_;
  std::vector<int> starting_twin_;
  std::vector<std::pair<Bytes, uint32_t>> fills_;  // (sum, mask), sorted
  std::vector<Split> splits_;
  bool truncated_ = false;
};

// Reads a plan back from the fills of the path found (`trees[e]`: the tree
// before start time e). From the last tree's frontier, each fill undone in
// reverse turns the order after it into the order before it; the starting
// buffers' offsets are read from the order after their fill.
std::vector<Offset> ReadPlan(const Problem& problem,
                             const std::vector<Tree>& trees,
                             const std::vector<std::vector<Fill>>& fills) {
  std::vector<Offset> offsets(problem.buffers.size(), 0);
  std::vector<char> starting(problem.buffers.size(), 0);
  std::vector<int> order;
  const auto frontier = [&](const Tree& t) {
    order.clear();
    if (t.root >= 0) Frontier(t, t.root, order);
  };
  frontier(trees.back());
  for (size_t e = fills.size(); e-- > 0;) {
    for (size_t f = fills[e].size(); f-- > 0;) {
      const Fill& fill = fills[e][f];
      for (int b : fill.starting) starting[b] = 1;
      // The starting buffers are consecutive in `order`.
      size_t lo = 0;
      while (!starting[order[lo]]) ++lo;
      const size_t hi = lo + fill.starting.size();
      Offset at = 0;
      for (size_t k = 0; k < lo; ++k) at += problem.buffers[order[k]].size;
      for (size_t k = lo; k < hi; ++k) {
        offsets[order[k]] = at;
        at += problem.buffers[order[k]].size;
      }
      for (int b : fill.starting) starting[b] = 0;
      if (fill.ended_order.empty()) {  // a cleared arena: nothing stayed
        frontier(trees[e]);
        continue;
      }
      std::vector<int> ended = fill.ended_order;
      if (fill.reference >= 0) {
        const size_t ref =
            std::find(order.begin(), order.end(), fill.reference) -
            order.begin();
        if ((ref < lo) != fill.reference_before) {
          std::reverse(ended.begin(), ended.end());
        }
      }
      std::vector<int> before(order.begin(), order.begin() + lo);
      before.insert(before.end(), ended.begin(), ended.end());
      before.insert(before.end(), order.begin() + hi, order.end());
      order = std::move(before);
    }
  }
  return offsets;
}

// One direction of time, ready to search: the start times and their
// splits, and the holes made consecutive early.
struct Prepared {
  Problem problem;   // the input, or the input with time reversed
  size_t count = 0;  // start times
  std::vector<std::vector<Split>> splits;  // per start time, finest first
  std::vector<std::vector<std::vector<int>>> early;  // per start time
  // False when some start time had more splits than max_splits: the
  // search may still find a plan, but cannot refute one.
  bool complete = true;
};

// What Prepare found: the prepared sweep, or an outcome without search
// (kStopped: cancelled before the splits were all found).
struct Preparation {
  std::optional<Prepared> prepared;
  PqSweepOutcome outcome = PqSweepOutcome::kNotApplicable;
};

Preparation Prepare(Problem problem, Bytes capacity, int64_t max_splits,
                    const base::CancelToken* cancel) {
  Preparation result;
  const std::optional<ZeroSlackEvents> events =
      FindZeroSlackEvents(problem, capacity);
  if (!events) return result;
  Prepared p;
  p.count = events->times.size();
  // Every start time's splits (a cleared arena has one: any order).
  p.splits.resize(p.count);
  for (size_t e = 0; e < p.count; ++e) {
    // A start time's splits take at most a few milliseconds (max_splits);
    // all of them, up to 0.2 s at 4,000 buffers.
    if (cancel != nullptr && cancel->Cancelled()) {
      result.outcome = PqSweepOutcome::kStopped;
      return result;
    }
    if (e == 0 || events->cleared[e]) {
      p.splits[e] = {{Hole{{}, events->starting[e]}}};
      continue;
    }
    SplitFinder finder(problem, events->ending[e], events->starting[e],
                       max_splits);
    std::optional<std::vector<Split>> found = finder.Find();
    if (!found) {
      // Too many to split: only the coarsest, one hole of all the ended
      // buffers filled by all the starting ones (a cut across time). A
      // plan may still be found; none is refuted.
      found.emplace();
      found->push_back({Hole{events->ending[e], events->starting[e]}});
      p.complete = false;
    }
    if (finder.truncated()) p.complete = false;
    if (found->empty()) {  // no split at all: the sizes cannot match
      result.outcome = PqSweepOutcome::kInfeasible;
      return result;
    }
    p.splits[e] = *std::move(found);
  }
  // Look-ahead: a hole of two or more buffers that every split of its start
  // time has must be consecutive then, and so already from the start time
  // at which its last member began (they all keep their offsets in
  // between, and cover the same memory). It is made consecutive there.
  std::vector<int> start_event(problem.buffers.size(), 0);
  for (size_t e = 0; e < p.count; ++e) {
    for (int b : events->starting[e]) start_event[b] = static_cast<int>(e);
  }
  p.early.resize(p.count);
  for (size_t e = 1; e < p.count; ++e) {
    if (events->cleared[e]) continue;
    std::vector<std::vector<int>> common;
    for (const Hole& h : p.splits[e][0]) {
      if (h.ended.size() >= 2) common.push_back(h.ended);
    }
    for (size_t k = 1; k < p.splits[e].size() && !common.empty(); ++k) {
      std::vector<std::vector<int>> kept;
      for (const std::vector<int>& h : common) {
        for (const Hole& other : p.splits[e][k]) {
          if (other.ended == h) kept.push_back(h);
        }
      }
      common = std::move(kept);
    }
    for (std::vector<int>& h : common) {
      int ready = 0;
      for (int b : h) ready = std::max(ready, start_event[b]);
      p.early[ready].push_back(std::move(h));
    }
  }
  p.problem = std::move(problem);
  result.prepared = std::move(p);
  return result;
}

}  // namespace

// One direction of time, prepared.
struct PqSweeper::Direction {
  Prepared prepared;
  bool exhausted = false;  // incomplete, and searched through
};

// One depth-first search of a prepared direction, resumable: each start
// time's splits of equal fineness in an order shuffled by a seed (0: as
// found).
struct PqSweeper::Run {
  Run(const Prepared& prepared, uint64_t seed, bool coarse_first,
      int64_t length)
      : p(prepared),
        length(length),
        order(p.count),
        trees(p.count + 1),
        next(p.count, 0),
        fills(p.count),
        mark(p.problem.buffers.size(), 0) {
    for (size_t e = 0; e < p.count; ++e) {
      const std::vector<Split>& splits = p.splits[e];
      order[e].resize(splits.size());
      for (size_t k = 0; k < splits.size(); ++k) {
        order[e][k] = static_cast<int>(k);
      }
      if (seed == 0) continue;
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + e);
      for (size_t lo = 0; lo < splits.size();) {
        size_t hi = lo;
        while (hi < splits.size() && splits[hi].size() == splits[lo].size()) {
          ++hi;
        }
        for (size_t i = hi - lo; i > 1; --i) {
          std::swap(order[e][lo + i - 1], order[e][lo + rng() % i]);
        }
        lo = hi;
      }
    }
    if (coarse_first) {
      for (std::vector<int>& o : order) std::reverse(o.begin(), o.end());
    }
  }

  // Searches on for at most `budget` nodes (added to `nodes`); kStopped
  // when the budget or the run's length ran out (length: used >= length),
  // or `cancel` says stop.
  PqSweepOutcome Step(int64_t budget, const base::CancelToken* cancel,
                      int64_t& nodes, std::vector<Offset>& offsets) {
    for (int64_t spent = 0;;) {
      if (e == p.count) {
        offsets = ReadPlan(p.problem, trees, fills);
        return PqSweepOutcome::kFound;
      }
      if (next[e] == order[e].size()) {  // every split failed: back up
        if (e == 0) return PqSweepOutcome::kInfeasible;
        next[e] = 0;
        --e;
        continue;
      }
      if (spent == budget || used == length) return PqSweepOutcome::kStopped;
      ++spent;
      ++used;
      ++nodes;
      if (cancel != nullptr && nodes % 256 == 0 && cancel->Cancelled()) {
        return PqSweepOutcome::kStopped;
      }
      const Split& split = p.splits[e][order[e][next[e]++]];
      Tree t = trees[e];
      fills[e].assign(split.size(), Fill{});
      bool ok = true;
      if (split[0].ended.empty()) {  // cleared: any order of the new ones
        t = Tree{};
        t.root = NewBlock(t, split[0].starting);
        fills[e][0].starting = split[0].starting;
      } else {
        for (size_t h = 0; h < split.size() && ok; ++h) {
          ok = ApplyHole(t, split[h], mark, fills[e][h]);
        }
      }
      for (size_t h = 0; h < p.early[e].size() && ok; ++h) {
        Span span;
        ok = Consecutive(t, p.early[e][h], mark, span);
      }
      if (!ok) continue;
      trees[e + 1] = std::move(t);
      ++e;
    }
  }

  bool Spent() const { return used == length; }

  const Prepared& p;
  const int64_t length;  // nodes before the restart
  int64_t used = 0;
  std::vector<std::vector<int>> order;   // per start time: splits' order
  std::vector<Tree> trees;               // trees[e]: before start time e
  std::vector<size_t> next;              // per start time: next in order
  std::vector<std::vector<Fill>> fills;  // per start time on the path
  std::vector<char> mark;
  size_t e = 0;  // the start time being decided
};

namespace {

// The Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, ...: the length of restart i
// (from 1) in units.
int64_t Luby(int64_t i) {
  for (int64_t k = 1;; ++k) {
    const int64_t full = (int64_t{1} << k) - 1;
    if (i == full) return int64_t{1} << (k - 1);
    if (i < full) return Luby(i - (int64_t{1} << (k - 1)) + 1);
  }
}

// Adds to `problem` a filler buffer for every section (sections.h, kAll:
// between two consecutive event times) whose live bytes are below
// `capacity`, of the difference, so every step from the first start to the
// last end is full. False if some section's live bytes exceed the capacity.
bool AddSlackFillers(Bytes capacity, Problem& problem) {
  const Sections sections = SweepSections(problem);
  const std::vector<Bytes> live =
      SectionTotals(sections, [&](int i) { return problem.buffers[i].size; });
  for (int k = 0; k < sections.size(); ++k) {
    if (live[k] > capacity) return false;
    if (live[k] == capacity) continue;
    Buffer filler;
    filler.name = "slack";
    filler.start = sections.begin[k];
    filler.end = sections.end[k];
    filler.size = capacity - live[k];
    problem.buffers.push_back(std::move(filler));
  }
  return true;
}

}  // namespace

PqSweeper::PqSweeper(const Problem& problem, Bytes capacity,
                     const PqSweepOptions& options,
                     const base::CancelToken* cancel)
    : problem_(problem), capacity_(capacity), options_(options) {
  for (const Buffer& b : problem.buffers) {
    if (b.fixed_offset) return;  // kNotApplicable
  }
  Problem forward = problem;
  if (options.fill_slack) {
    if (!AddSlackFillers(capacity, forward)) {
      outcome_ = PqSweepOutcome::kInfeasible;  // a step exceeds the capacity
      return;
    }
    filled_ = forward.buffers.size() > problem.buffers.size();
  }
  // Both directions of time: a plan of the reversed problem (every
  // lifetime [s, e) turned into [-e, -s)) is a plan of the problem. Which
  // one the sweep solves sooner varies with the problem.
  Problem reversed = forward;
  for (Buffer& b : reversed.buffers) {
    const Step start = b.start;
    b.start = -b.end;
    b.end = -start;
  }
  // One direction may have a start time with too many buffers to split
  // (many start together where few end): the other is searched alone.
  Preparation prepared[2] = {
      Prepare(std::move(forward), capacity, options.max_splits, cancel),
      Prepare(std::move(reversed), capacity, options.max_splits, cancel)};
  for (int d = 0; d < 2; ++d) {
    if (prepared[d].outcome == PqSweepOutcome::kStopped) {
      // Cancelled: kStopped with no direction, never searched.
      directions_[0].reset();
      directions_[1].reset();
      outcome_ = PqSweepOutcome::kStopped;
      return;
    }
    if (prepared[d].outcome == PqSweepOutcome::kInfeasible) {
      // Sizes cannot match; with fillers, only at one free run per step.
      outcome_ = filled_ ? PqSweepOutcome::kNotApplicable
                         : PqSweepOutcome::kInfeasible;
      return;
    }
    if (prepared[d].prepared) {
      directions_[d] = std::make_unique<Direction>(
          Direction{*std::move(prepared[d].prepared), false});
      outcome_ = PqSweepOutcome::kStopped;
    }
  }
}

bool PqSweeper::Searchable(int direction) const {
  return directions_[direction] != nullptr &&
         !directions_[direction]->exhausted;
}

PqSweeper::~PqSweeper() = default;

PqSweepAnswer PqSweeper::Continue(int64_t max_nodes,
                                  const base::CancelToken* cancel) {
  PqSweepAnswer answer;
  answer.outcome = outcome_;
  // kStopped without a direction: cancelled while preparing.
  if (outcome_ != PqSweepOutcome::kStopped ||
      (directions_[0] == nullptr && directions_[1] == nullptr)) {
    return answer;
  }
  // Restarts of Luby-sequence lengths, alternating the direction; the
  // first two runs keep the splits as found, later ones shuffle them.
  const int64_t unit = std::max<int64_t>(options_.restart_nodes, 1);
  while (max_nodes <= 0 || answer.nodes < max_nodes) {
    if (cancel != nullptr && cancel->Cancelled()) break;
    if (run_ == nullptr || run_->Spent()) {
      ++runs_;
      const int64_t length = runs_ <= 2 ? unit : unit * Luby((runs_ + 1) / 2);
      const int turn = runs_ % 2 == 1 ? 0 : 1;
      const int d = Searchable(turn) ? turn : 1 - turn;
      // Runs 1-4 keep the splits as found, finest first (1, 2) and then
      // coarsest first (3, 4); later ones shuffle, alternating the two.
      const bool coarse_first = (runs_ - 1) / 2 % 2 == 1;
      run_ = std::make_unique<Run>(directions_[d]->prepared,
                                   runs_ <= 4 && d == turn ? 0 : runs_,
                                   coarse_first, length);
      run_direction_ = d;
    }
    const int64_t budget = max_nodes <= 0 ? std::numeric_limits<int64_t>::max()
                                          : max_nodes - answer.nodes;
    const PqSweepOutcome outcome =
        run_->Step(budget, cancel, answer.nodes, answer.offsets);
    if (outcome == PqSweepOutcome::kStopped) continue;
    if (outcome == PqSweepOutcome::kInfeasible &&
        !directions_[run_direction_]->prepared.complete) {
      // Every split kept failed, but some were not kept: this direction
      // has nothing more to find (in any order); the other may.
      directions_[run_direction_]->exhausted = true;
      run_.reset();
      if (!Searchable(0) && !Searchable(1)) {
        answer.outcome = PqSweepOutcome::kNotApplicable;
        break;
      }
      continue;
    }
    // With fillers, no plan of one free run per step says nothing of others.
    answer.outcome = outcome == PqSweepOutcome::kInfeasible && filled_
                         ? PqSweepOutcome::kNotApplicable
                         : outcome;
    break;
  }
  if (answer.outcome == PqSweepOutcome::kFound) {
    answer.offsets.resize(problem_.buffers.size());  // the fillers' go
    for (size_t i = 0; i < problem_.buffers.size(); ++i) {
      if (answer.offsets[i] % problem_.buffers[i].alignment != 0) {
        // Gap-free plans only: another may align; nothing concluded.
        answer.outcome = PqSweepOutcome::kNotApplicable;
        answer.offsets.clear();
        break;
      }
    }
  }
  if (answer.outcome != PqSweepOutcome::kStopped) {
    outcome_ = answer.outcome;
    run_.reset();
  }
  return answer;
}

PqSweepAnswer PqSweep(const Problem& problem, Bytes capacity,
                      const PqSweepOptions& options,
                      const base::CancelToken* cancel) {
  PqSweeper sweeper(problem, capacity, options, cancel);
  return sweeper.Continue(options.max_nodes, cancel);
}

}  // namespace memplan::planner
