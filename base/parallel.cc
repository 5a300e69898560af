#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace memplan::base {
namespace {

// What the caller and its workers share. Workers hold it by shared_ptr: a
// worker task may start after the caller has returned, and then only reads
// `closed`.
struct Team {
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // the caller's call returned
  int active ABSL_GUARDED_BY(mu) = 0;       // workers inside work()
  // The caller's function: called only while !closed (the caller is then
  // still inside RunTogether).
  const absl::FunctionRef<void(int)>* work = nullptr;
};

// Helper tasks queued in any pool and not started yet: a worker leaves
// for other work, not for another helper.
std::atomic<int> queued_helpers{0};

}  // namespace

int Parallelism::helpers() const {
  if (workers == nullptr || max_threads <= 1) return 0;
  return std::min(max_threads - 1, workers->threads());
}

bool ShouldYield(const Parallelism& parallel, int thread) {
  return thread > 0 && parallel.workers != nullptr &&
         parallel.workers->queue_depth() >
             queued_helpers.load(std::memory_order_relaxed);
}

void RunTogether(const Parallelism& parallel,
                 absl::FunctionRef<void(int thread)> work) {
  const int helpers = parallel.helpers();
  if (helpers == 0) {
    work(0);
    return;
  }
  auto team = std::make_shared<Team>();
  team->work = &work;
  for (int h = 1; h <= helpers; ++h) {
    queued_helpers.fetch_add(1, std::memory_order_relaxed);
    const bool queued = parallel.workers->TrySchedule([team, h] {
      queued_helpers.fetch_sub(1, std::memory_order_relaxed);
      {
        absl::MutexLock lock(&team->mu);
        if (team->closed) return;
        ++team->active;
      }
      (*team->work)(h);
      absl::MutexLock lock(&team->mu);
      --team->active;
    });
    if (!queued) {  // the pool is full: fewer helpers
      queued_helpers.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
  work(0);
  absl::MutexLock lock(&team->mu);
  team->closed = true;
  team->mu.Await(absl::Condition(
      +[](Team* t)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) { return t->active == 0; },
      team.get()));
}

void ParallelFor(const Parallelism& parallel, int chunks,
                 absl::FunctionRef<void(int chunk)> fn) {
  if (chunks <= 0) return;
  if (chunks == 1 || parallel.helpers() == 0) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  std::atomic<int> next{0};
  RunTogether(parallel, [&](int thread) {
    while (!ShouldYield(parallel, thread)) {
      const int c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      fn(c);
    }
  });
}

void ParallelForRange(
    const Parallelism& parallel, size_t n, size_t chunk_size,
    absl::FunctionRef<void(int chunk, size_t begin, size_t end)> fn) {
  ParallelFor(parallel, ChunkCount(n, chunk_size), [&](int c) {
    const size_t begin = static_cast<size_t>(c) * chunk_size;
    fn(c, begin, std::min(n, begin + chunk_size));
  });
}

}  // namespace memplan::base
