// The work caps of the plan every request gets: how much the first
// heuristics may do before they give way to the O(n log n) fallbacks
// (planner/sweep.h), in base::WorkMeter units, and how many nodes the exact
// search may try after them when they end above the lower bound.
//
//   base::WorkMeter meter(&cancel, planner::FirstPlanWorkCap(n));
//   exact.max_nodes = planner::TightSearchNodes(n);
#ifndef MEMPLAN_PLANNER_WORK_CAP_H_
#define MEMPLAN_PLANNER_WORK_CAP_H_

#include <algorithm>
#include <cstdint>

namespace memplan::planner {

// log2 of n rounded up, at least 1.
inline int64_t CeilLog2(int64_t n) {
  int64_t log2n = 1;
  while ((int64_t{1} << log2n) < n) ++log2n;
  return log2n;
}

// The work the first heuristics (the plan every request gets) may do on n
// buffers, together, before they give way to an O(n log n) one: 8 n log2 n
// units, and never below 16 million (about a quarter of a second of gap
// search). `auto` shares it between its two heuristics (8 million each at
// least). Random graph-like buffer lists take about 2 n log2 n per
// heuristic, the real traces of bench/data/traces 5-16 n log2 n (S_1, the
// densest, 6.5 million: under the share); dense staggered lifetimes grow
// like n^2. Shared-object coloring gets four times this (its units are
// cheaper). A pass that scans the placed buffers reads every overlapping
// pair once at least, so one whose pairs alone pass its share is not run
// (its plan would be lost at the cap anyway).
inline int64_t FirstPlanWorkCap(int64_t n) {
  return std::max<int64_t>(int64_t{16'000'000}, 8 * n * CeilLog2(n));
}

// A heuristic asked for by name (--strategy=best_fit_size) is the whole
// plan of its request, so it may do more: this many times
// FirstPlanWorkCap, 256 million units at least, before it too gives way
// to the O(n log n) fallback (the skyline's units cost more than the gap
// search's: 40,000 buffers sharing one step reach the cap in 3.7 s, 20,000
// staggered ones in 6 s; the real traces stay far below it: S_1 by
// skyline_area keeps its own plan). Without a cap a dense problem ran for
// hours: skyline_area on those 40,000, 45 s and growing as n^2.2.
inline constexpr int64_t kNamedHeuristicWorkFactor = 16;

// The nodes (placements tried) the exact search of the default plan may
// try when the first heuristics end above the aligned lower bound: 4 per
// buffer, and at least kSmallSearchNodes on problems of up to
// kSmallSearchBuffers buffers. A node cap, not a time limit, so that the
// plan depends on the input only. The search's set-up costs about as much
// as planning with the heuristics, each node about half a microsecond on
// 200 buffers and ten on 1000 dense ones (a real trace). Where the search
// closes the gap on the models of BENCHMARKS.md, it does so within 1 to 3
// nodes per buffer (its first dives: ConvNeXt-T 477 buffers in 477 nodes;
// the resnet50 trace, 1042 buffers, in 1045; G_1, 816, in 2447), except
// Silero VAD (about 85 buffers), whose exports need 4,000-10,000 nodes: the
// floor, at most about 8 ms where the gap stays open (silero_vad_16k_op15).
// Problems over ExactOptions::max_buffers are not searched.
inline constexpr int64_t kSmallSearchBuffers = 512;
inline constexpr int64_t kSmallSearchNodes = 16384;
inline int64_t TightSearchNodes(int64_t n) {
  return n <= kSmallSearchBuffers ? std::max<int64_t>(4 * n, kSmallSearchNodes)
                                  : 4 * n;
}

// The work (base::WorkMeter units) the skyline pass (skyline.h) may do in
// the default plan, where it runs before the search on problems the search
// takes: 64 n log2 n, about 8 n log2 n buffers taken from its queue. It
// takes each buffer once per rise of its floor while queued: about once
// on the graph of bench/rps_bench, 180 times on the trace S_1 (28,526
// buffers, 0.8 s: the reason it is not run on every size).
inline int64_t SkylineWorkCap(int64_t n) { return 64 * n * CeilLog2(n); }

// The default plan over 4096 buffers (planner.cc's ClimbAboveBound): the
// peak window's variants (peak_window.h's PeakWindowWork each), then two
// more best-fit orders and up to kTightClimbMoves hill-climb moves, each
// one best-fit placement of every buffer, all within kTightClimbWork
// units of placement work, a placement counted as n plus the buffers'
// conflicts (CountConflicts: each reads the placed buffers it overlaps).
// 150 million units are about 0.25-0.45 s here (1.5-3 ns a unit), what
// DESIGN.md's 0.5 s for a trace leaves after the first heuristics. On the
// traces of bench/data/traces: pangu_2.6B (18,692 buffers, 24.4 million
// units a placement) reaches its bound with the second variant (its climb,
// before the peak window, reached it in 2-4 moves from the order by
// breadth); S_1 (28,526 buffers, 86.5 million a placement: about
// 0.13-0.19 s each) gets one variant, which reaches its bound (its orders
// and 8 moves would take it 1.0158 -> 1.0012 in 0.5 s more).
inline constexpr int64_t kTightClimbMoves = 8;
inline constexpr int64_t kTightClimbWork = 150'000'000;

// The moves the default plan's climb may make when one placement costs
// `placement_work` units, `orders` placements come first and `spent` units
// went before (the peak window's variants): 0 when they and one move would
// pass kTightClimbWork (the climb is then not begun).
inline int64_t TightClimbMoves(int64_t placement_work, int64_t orders,
                               int64_t spent = 0) {
  const int64_t placements = std::max<int64_t>(kTightClimbWork - spent, 0) /
                             std::max<int64_t>(placement_work, 1);
  return std::clamp<int64_t>(placements - orders, 0, kTightClimbMoves);
}

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_WORK_CAP_H_
