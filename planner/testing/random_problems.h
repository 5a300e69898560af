// Random problems and graphs for property tests and benchmarks: sizes and
// lifetimes drawn like real graphs (many small short-lived tensors, a few
// large long-lived ones). Deterministic for a given seed.
#ifndef MEMPLAN_PLANNER_TESTING_RANDOM_PROBLEMS_H_
#define MEMPLAN_PLANNER_TESTING_RANDOM_PROBLEMS_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/graph.h"
#include "planner/problem.h"

namespace memplan::planner::testing {

// A hand-written problem: one buffer "b<i>" per (start, end half-open,
// size) row.
inline Problem ProblemOf(
    const std::vector<std::tuple<Step, Step, Bytes>>& rows) {
  Problem problem;
  for (const auto& [start, end, size] : rows) {
    Buffer b;
    b.name = absl::StrCat("b", problem.buffers.size());
    b.start = start;
    b.end = end;
    b.size = size;
    problem.buffers.push_back(std::move(b));
  }
  return problem;
}

// `n` buffers over about n/2 steps; most live a few steps, one in 50 lives
// long (up to 1000 steps, like a skip connection or a cached activation);
// sizes from 64 B to 1 MiB, skewed small. As in real graphs, how many
// buffers are live at once does not grow with n.
inline Problem RandomProblem(int n, uint32_t seed, Bytes alignment = 1) {
  std::mt19937_64 rng(seed);
  const Step steps = std::max<Step>(2, n / 2);
  Problem p;
  p.buffers.reserve(n);
  for (int i = 0; i < n; ++i) {
    Buffer b;
    b.name = absl::StrCat("b", i);
    b.start = static_cast<Step>(rng() % steps);
    const bool long_lived = rng() % 50 == 0;
    const Step length =
        long_lived ? 1 + static_cast<Step>(rng() % std::min<Step>(steps, 1000))
                   : 1 + static_cast<Step>(rng() % 8);
    b.end = std::min(steps + 8, b.start + length);
    const int shift = static_cast<int>(rng() % 15);  // 2^6 .. 2^20
    b.size = (Bytes{64} << shift) / (1 + static_cast<Bytes>(rng() % 4));
    b.alignment = alignment;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

// A harder, dense problem: `n` buffers over n/8 steps, lifetimes from one
// step to a third of the schedule, sizes uniform in [1, 1000] bytes, so
// about n/6 buffers are live at once and sizes do not let a greedy order
// stack them neatly (like MiniMalloc's challenging instances).
inline Problem DenseProblem(int n, uint32_t seed, Bytes alignment = 1) {
  std::mt19937_64 rng(seed);
  const Step steps = std::max<Step>(4, n / 8);
  Problem p;
  p.buffers.reserve(n);
  for (int i = 0; i < n; ++i) {
    Buffer b;
    b.name = absl::StrCat("d", i);
    b.start = static_cast<Step>(rng() % steps);
    const Step length = 1 + static_cast<Step>(rng() % (steps / 3 + 1));
    b.end = std::min(steps, b.start + length);
    if (b.end <= b.start) b.end = b.start + 1;
    b.size = 1 + static_cast<Bytes>(rng() % 1000);
    b.alignment = alignment;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

// Sizes as in RandomProblem: 64 B to 1 MiB, skewed small.
inline Bytes GraphLikeSize(std::mt19937_64& rng) {
  const int shift = static_cast<int>(rng() % 15);  // 2^6 .. 2^20
  return (Bytes{64} << shift) / (1 + static_cast<Bytes>(rng() % 4));
}

// `n` buffers over n steps (at least 10) named prefix + index, sizes as in
// RandomProblem; lifetime(rng, steps) draws each one's {start, end}, before
// its size.
template <typename LifetimeFn>
Problem LongLifetimes(int n, uint32_t seed, Bytes alignment, const char* prefix,
                      LifetimeFn lifetime) {
  std::mt19937_64 rng(seed);
  const Step steps = std::max<Step>(10, n);
  Problem p;
  p.buffers.reserve(n);
  for (int i = 0; i < n; ++i) {
    Buffer b;
    b.name = absl::StrCat(prefix, i);
    std::tie(b.start, b.end) = lifetime(rng, steps);
    b.size = GraphLikeSize(rng);
    b.alignment = alignment;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

// Long dense lifetimes: each buffer starts in the first tenth of the
// schedule and ends in the last tenth, so all of them are live across the
// middle 80% at once (long-lived activations, KV caches, optimizer state).
// Every buffer overlaps every other: a scan of overlaps is quadratic here.
inline Problem LongDenseProblem(int n, uint32_t seed, Bytes alignment = 64) {
  return LongLifetimes(n, seed, alignment, "l", [](auto& rng, Step steps) {
    const Step start = static_cast<Step>(rng() % (steps / 10));
    const Step end = steps - static_cast<Step>(rng() % (steps / 10));
    return std::make_pair(start, end);
  });
}

// Long staggered lifetimes, harder: starting anywhere in the first 60% and
// living 40% to 100% of the schedule (cut at its end), so starts and ends
// interleave and the set of live buffers changes at almost every step
// while most buffers overlap most others.
inline Problem StaggeredProblem(int n, uint32_t seed, Bytes alignment = 64) {
  return LongLifetimes(n, seed, alignment, "s", [](auto& rng, Step steps) {
    const Step start = static_cast<Step>(rng() % (steps * 6 / 10));
    const Step end =
        std::min<Step>(steps, start + steps * 4 / 10 +
                                  static_cast<Step>(rng() % (steps * 6 / 10)));
    return std::make_pair(start, end);
  });
}

// Mixed lifetimes like the IOPDDL-derived traces: 70% live one to a few
// dozen steps (activations), 30% live 10% to 100% of the schedule from a
// random start (cut at its end: saved activations, optimizer state). The
// long ones overlap one another densely but at staggered addresses, so the
// ranges taken during a lifetime do not merge: the hardest case for gap
// search.
inline Problem MixedLongProblem(int n, uint32_t seed, Bytes alignment = 64) {
  return LongLifetimes(n, seed, alignment, "m", [](auto& rng, Step steps) {
    const Step start = static_cast<Step>(rng() % steps);
    const Step length =
        rng() % 10 < 3
            ? steps / 10 + static_cast<Step>(rng() % (steps * 9 / 10))
            : 1 + static_cast<Step>(rng() % 40);
    return std::make_pair(start, std::min<Step>(steps, start + length));
  });
}

// A random DAG in execution order: each op reads 1-3 earlier tensors (or
// graph inputs/weights) and writes 1-2 new ones.
inline Graph RandomGraph(int ops, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.name = absl::StrCat("random", seed);
  auto add = [&](const std::string& name) {
    g.tensors.push_back(
        {name, Bytes{4} * (1 + static_cast<Bytes>(rng() % 4096)), 0});
    return name;
  };
  g.inputs.push_back(add("input"));
  add("weight");
  for (int i = 0; i < ops; ++i) {
    Op op;
    op.name = absl::StrCat("op", i);
    const int reads = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < reads; ++r) {
      // Prefer recent tensors, as real graphs do.
      const int n = static_cast<int>(g.tensors.size());
      const int back = static_cast<int>(rng() % std::min(n, 6));
      op.inputs.push_back(g.tensors[n - 1 - back].name);
    }
    const int writes = 1 + static_cast<int>(rng() % 2);
    for (int w = 0; w < writes; ++w) {
      op.outputs.push_back(add(absl::StrCat("t", i, "_", w)));
    }
    g.ops.push_back(std::move(op));
  }
  g.outputs.push_back(g.tensors.back().name);
  return g;
}

}  // namespace memplan::planner::testing

#endif  // MEMPLAN_PLANNER_TESTING_RANDOM_PROBLEMS_H_
