// Time windows: compressed time (sections.h) cut into consecutive ranges,
// so that a pass over the buffers in one fixed order (greedy placement,
// shared-object coloring) runs window by window on several threads and
// gives exactly what the one pass gives. A buffer's step in such a pass
// reads only the buffers its lifetime overlaps that came before it in the
// order; those all touch one of its windows. So each window takes the
// buffers touching it in the pass order; a buffer inside one window is
// handled by that window's thread alone, and one crossing several windows
// waits until each of them has handled every buffer before it, then is
// handled once, with all of them at hand.
//
// The cut depends on the problem only (never on the thread count), so a
// pass gives the same result on any number of threads, one included.
//
//   planner::TimeWindows windows = planner::CutTime(time);
//   planner::WindowedPass pass(time, windows, order);
//   bool done = pass.Run(parallel,
//       [&](int w, int i) { ...; return true; },           // i in window w
//       [&](int wa, int wb, int i) { ...; return true; });  // in wa..wb
//
// Thread-compatible; Run is the only part that uses threads.
#ifndef MEMPLAN_PLANNER_WINDOWS_H_
#define MEMPLAN_PLANNER_WINDOWS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/parallel.h"
#include "planner/sections.h"

namespace memplan::planner {

// About this many buffers start in each window.
inline constexpr int kBuffersPerWindow = 16384;
// At most this many windows.
inline constexpr int kMaxWindows = 64;
static_assert(kMaxWindows <= 256, "TimeWindows::window_of holds bytes");

// Consecutive section ranges covering compressed time.
struct TimeWindows {
  // Per window, its first section; then one past the last section.
  std::vector<int> begin;
  // Per section, its window (kMaxWindows fit a byte); empty for one window.
  std::vector<uint8_t> window_of;

  int count() const { return static_cast<int>(begin.size()) - 1; }
  // The window holding `section`. REQUIRES 0 <= section < begin.back().
  int WindowOf(int section) const {
    return window_of.empty() ? 0 : window_of[section];
  }
};

// Cuts `time` into windows in which about `buffers_per_window` buffers
// start each (at most kMaxWindows; one window for fewer than twice that).
// O(n + sections).
TimeWindows CutTime(const Sections& time,
                    int buffers_per_window = kBuffersPerWindow);

// The first sections of the windows after the first, as CutTime(time,
// buffers_per_window) cuts the sections of `n` buffers, from their starts
// in time order: section_of_start(m) is the section the m-th start (from
// 0) falls in. O(windows): for the sweep that numbers the sections, which
// has its starts sorted (Sections::window_cuts).
std::vector<int> CutsFromSortedStarts(
    int64_t n, int sections, absl::FunctionRef<int(int64_t)> section_of_start,
    int buffers_per_window = kBuffersPerWindow);

// A pass over buffers in a fixed order, window by window.
class WindowedPass {
 public:
  // `order`: positions of `time` (buffers), each at most once, in pass
  // order. `time` and `windows` must outlive the pass. The lists are
  // built in chunks on the threads `parallel` gives (the same lists).
  WindowedPass(const Sections& time, const TimeWindows& windows,
               const std::vector<int>& order,
               const base::Parallelism& parallel = {});

  // One entry of a window's list.
  struct Entry {
    int buffer;  // position in `time`
    int cross;   // -1: inside this window alone; else its crossing's index
  };
  // The buffers touching window w, in pass order.
  const std::vector<Entry>& entries(int w) const { return lists_[w]; }

  // Calls inside(w, i) for each buffer i lying in window w alone, after
  // every buffer before it in w's list, and across(wa, wb, i) for each
  // buffer i touching windows wa..wb (wa < wb) once every one of them has
  // passed every buffer before i in its list. While across() runs, no
  // other call touches windows wa..wb. Either returns false to stop the
  // pass: Run then returns false once every thread has left. On the
  // threads `parallel` gives (the caller always works too).
  bool Run(const base::Parallelism& parallel,
           absl::FunctionRef<bool(int w, int i)> inside,
           absl::FunctionRef<bool(int wa, int wb, int i)> across);

 private:
  // A buffer touching several windows.
  struct Crossing {
    int first;  // its first window
    int last;   // its last window
  };

  const TimeWindows& windows_;
  std::vector<std::vector<Entry>> lists_;  // per window
  std::vector<Crossing> crossings_;
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_WINDOWS_H_
