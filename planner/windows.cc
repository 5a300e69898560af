#include "planner/windows.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace memplan::planner {

namespace {

// The windows CutTime cuts for `n` buffers.
int WindowCount(int64_t n, int buffers_per_window) {
  return static_cast<int>(
      std::clamp<int64_t>(n / std::max(1, buffers_per_window), 1, kMaxWindows));
}

}  // namespace

TimeWindows CutTime(const Sections& time, int buffers_per_window) {
  const int64_t n = static_cast<int64_t>(time.first.size());
  const int sections = time.size();
  const int count = WindowCount(n, buffers_per_window);
  TimeWindows windows;
  windows.begin.push_back(0);
  if (count > 1 && buffers_per_window == kBuffersPerWindow &&
      time.window_cuts.has_value()) {
    windows.begin.insert(windows.begin.end(), time.window_cuts->begin(),
                         time.window_cuts->end());
  } else if (count > 1) {
    // Buffers starting in each section, then cuts at equal shares of them.
    std::vector<int64_t> starts(sections + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++starts[time.first[i]];
    int64_t seen = 0;
    int next = 1;  // the next cut to place
    for (int k = 0; k < sections && next < count; ++k) {
      seen += starts[k];
      if (seen * count >= next * n && k + 1 < sections &&
          k + 1 > windows.begin.back()) {
        windows.begin.push_back(k + 1);
        ++next;
      }
    }
  }
  windows.begin.push_back(std::max(sections, windows.begin.back() + 1));
  if (windows.count() > 1) {
    windows.window_of.resize(windows.begin.back());
    for (int w = 0; w < windows.count(); ++w) {
      std::fill(windows.window_of.begin() + windows.begin[w],
                windows.window_of.begin() + windows.begin[w + 1],
                static_cast<uint8_t>(w));
    }
  }
  return windows;
}

std::vector<int> CutsFromSortedStarts(
    int64_t n, int sections, absl::FunctionRef<int(int64_t)> section_of_start,
    int buffers_per_window) {
  // CutTime's cut for window `next` comes after the first section by which
  // next * n / count buffers have started (the section of that start), and
  // after the cut before it: one cut a section at most.
  const int count = WindowCount(n, buffers_per_window);
  std::vector<int> cuts;
  int previous = 0;
  for (int next = 1; next < count; ++next) {
    const int64_t started = (next * n + count - 1) / count;  // at least
    const int cut = std::max(section_of_start(started - 1), previous) + 1;
    if (cut >= sections) break;
    cuts.push_back(cut);
    previous = cut;
  }
  return cuts;
}

WindowedPass::WindowedPass(const Sections& time, const TimeWindows& windows,
                           const std::vector<int>& order,
                           const base::Parallelism& parallel)
    : windows_(windows), lists_(windows.count()) {
  // In chunks of the order: each chunk's entries per window and its
  // crossings are counted, then written where the one pass would put them
  // (chunk after chunk), so the lists are the same on any threads.
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t n = order.size();
  const int chunks = base::ChunkCount(n, kChunk);
  const int count = windows.count();
  std::vector<std::pair<uint8_t, uint8_t>> span(n);  // first, last window
  std::vector<size_t> at(static_cast<size_t>(chunks) * count, 0);
  std::vector<size_t> cross_at(chunks + 1, 0);
  base::ParallelForRange(
      parallel, n, kChunk, [&](int c, size_t begin, size_t end) {
        size_t* entries = &at[static_cast<size_t>(c) * count];
        for (size_t p = begin; p < end; ++p) {
          const int i = order[p];
          const int first = windows.WindowOf(time.first[i]);
          const int last = windows.WindowOf(time.last[i] - 1);
          span[p] = {static_cast<uint8_t>(first), static_cast<uint8_t>(last)};
          if (first != last) ++cross_at[c + 1];
          for (int w = first; w <= last; ++w) ++entries[w];
        }
      });
  for (int w = 0; w < count; ++w) {
    size_t sum = 0;
    for (int c = 0; c < chunks; ++c) {
      const size_t entries = at[static_cast<size_t>(c) * count + w];
      at[static_cast<size_t>(c) * count + w] = sum;
      sum += entries;
    }
    lists_[w].resize(sum);
  }
  for (int c = 0; c < chunks; ++c) cross_at[c + 1] += cross_at[c];
  crossings_.resize(cross_at[chunks]);
  base::ParallelForRange(parallel, n, kChunk,
                         [&](int c, size_t begin, size_t end) {
                           size_t* next = &at[static_cast<size_t>(c) * count];
                           int cross = static_cast<int>(cross_at[c]);
                           for (size_t p = begin; p < end; ++p) {
                             const auto [first, last] = span[p];
                             if (first == last) {
                               lists_[first][next[first]++] = {order[p], -1};
                               continue;
                             }
                             crossings_[cross] = {first, last};
                             for (int w = first; w <= last; ++w) {
                               lists_[w][next[w]++] = {order[p], cross};
                             }
                             ++cross;
                           }
                         });
}

namespace {

// What the threads of one Run share.
struct PassState {
  absl::Mutex mu;
  std::vector<int> runnable ABSL_GUARDED_BY(mu);  // windows free to go on
  int finished ABSL_GUARDED_BY(mu) = 0;           // windows at their end
  std::vector<int> arrived ABSL_GUARDED_BY(mu);   // per crossing
  // Per window, its next entry: changed by the thread running the window,
  // or under mu while it waits at a crossing.
  std::vector<size_t> next;
  std::atomic<bool> stopped{false};

  bool Stopped() const { return stopped.load(std::memory_order_relaxed); }
  void Stop() {
    absl::MutexLock lock(&mu);
    stopped.store(true, std::memory_order_relaxed);
  }
};

}  // namespace

bool WindowedPass::Run(const base::Parallelism& parallel,
                       absl::FunctionRef<bool(int w, int i)> inside,
                       absl::FunctionRef<bool(int wa, int wb, int i)> across) {
  const int count = windows_.count();
  PassState state;
  state.next.assign(count, 0);
  {
    absl::MutexLock lock(&state.mu);
    state.arrived.assign(crossings_.size(), 0);
    for (int w = count; w-- > 0;) state.runnable.push_back(w);
  }
  // Runs window w until its end, a crossing not every window has reached,
  // or a stop.
  const auto run_window = [&](int w) {
    const std::vector<Entry>& list = lists_[w];
    for (size_t p = state.next[w]; p < list.size(); ++p) {
      if (state.Stopped()) return;
      const Entry& e = list[p];
      if (e.cross < 0) {
        if (!inside(w, e.buffer)) return state.Stop();
        continue;
      }
      const Crossing& c = crossings_[e.cross];
      {
        absl::MutexLock lock(&state.mu);
        if (++state.arrived[e.cross] <= c.last - c.first) {
          state.next[w] = p;  // the last window to arrive goes on
          return;
        }
      }
      if (!across(c.first, c.last, e.buffer)) return state.Stop();
      absl::MutexLock lock(&state.mu);
      for (int v = c.first; v <= c.last; ++v) {
        if (v == w) continue;
        ++state.next[v];
        state.runnable.push_back(v);
      }
    }
    absl::MutexLock lock(&state.mu);
    ++state.finished;
  };
  base::RunTogether(
      parallel,
      [&](int thread) {
        while (!base::ShouldYield(parallel, thread)) {
          int w;
          {
            absl::MutexLock lock(&state.mu);
            state.mu.Await(absl::Condition(
                +[](PassState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
                  return !s->runnable.empty() || s->Stopped() ||
                         s->finished == static_cast<int>(s->next.size());
                },
                &state));
            if (state.runnable.empty()) return;  // stopped or finished
            w = state.runnable.back();
            state.runnable.pop_back();
          }
          run_window(w);
        }
      },
      base::Recruit::kAsPlacesFree);
  return !state.Stopped();
}

}  // namespace memplan::planner
