// Splitting one call's work over the workers. The calling thread always
// works too, and workers only join in: a worker task that cannot be queued
// (the pool is full), or that starts after the work is done, costs nothing,
// so these never deadlock, also when called from a worker thread. At most
// Parallelism::max_threads threads work on one call at once, nested calls
// included (they share the outermost call's threads), and a worker
// leaves between chunks once other tasks (not such workers) wait in the
// pool's queue, so one large request cannot keep the workers from the
// small ones.
//
//   base::Parallelism parallel{&workers, /*max_threads=*/8};
//   base::ParallelFor(parallel, chunks, [&](int chunk) { Work(chunk); });
//
// What is computed must never depend on which thread ran a chunk, or on
// how many did: chunks are fixed by the input, never by the thread count.
// Thread-safe.
#ifndef MEMPLAN_BASE_PARALLEL_H_
#define MEMPLAN_BASE_PARALLEL_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/worker_pool.h"

namespace memplan::base {

// The threads one call may put to work at once.
struct Parallelism {
  // Where the other threads come from; null: the caller alone.
  WorkerPool* workers = nullptr;
  // Threads working on the call at once, the caller included (so at most
  // max_threads - 1 workers). <= 1: the caller alone.
  int max_threads = 1;

  // The workers the call may ask for: min(max_threads - 1, the pool's
  // threads), 0 without a pool.
  int helpers() const;
};

// The cores this process may run on at once: the CPUs in the calling
// thread's affinity mask (`taskset`, a container's cpuset), fewer where the
// CPU quota of its cgroup or of one above it allows less (cgroup v2
// `cpu.max`: a quota of 1.5 CPUs is 2 cores). At least 1. The mask is read
// on each call (one system call); the quota once per process. More threads
// than this on one call only queue for the cores: each split of the work
// then waits for a thread the kernel has set aside.
int UsableCores();

namespace internal {

// The cores a cgroup v2 `cpu.max` text allows ("QUOTA PERIOD", in
// microseconds: QUOTA / PERIOD rounded up, at least 1), or 0 where it sets
// no limit ("max ...") or is not such text.
int CoresOfCpuMax(absl::string_view cpu_max);

// The fewest cores a `cpu.max` allows along the cgroup v2 path that
// `self_cgroup` (the text of /proc/self/cgroup, its "0::PATH" line) names
// and the groups above it, read under `root` (/sys/fs/cgroup); 0 where
// none sets a limit or there is no such line.
int CgroupQuotaCores(const std::string& root, absl::string_view self_cgroup);

// The free helper places of one call (parallel.cc).
struct CallPlaces;

}  // namespace internal

// The threads one call (a request) may have at work at once, across all
// of its splits however they nest: while a ThreadBudget lives, the
// RunTogether calls made on its thread, and on the workers they recruit,
// take their helpers from its parallel.helpers() places. A side task run
// beside the main work (RunTogether with 2 threads) then takes one place,
// and the main work's splits the others; so does a HandedTask made
// inside it while a worker runs it. Without a budget the outermost
// RunTogether's helpers() are the places; a ThreadBudget made inside a
// budget or a RunTogether adds none.
//
//   const base::ThreadBudget threads({&workers, 16});  // a request's entry
class ThreadBudget {
 public:
  explicit ThreadBudget(const Parallelism& parallel);
  ~ThreadBudget();
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

 private:
  // Shared with the handed tasks made inside the call (HandedTask).
  std::shared_ptr<internal::CallPlaces> places_;
};

// A task handed whole to a worker while its owner goes on, which the
// owner runs itself when no worker has started it by the time the owner
// needs it: the owner never waits for a busy pool (its threads held by
// another request's long task), only for a worker already running the
// task.
//
//   base::HandedTask coloring(&pool, [&] { Color(); });
//   AssignOffsets();
//   coloring.Join();  // Color() has run: on a worker, or here
//
// Made inside a call (a ThreadBudget, or the work of a RunTogether), the
// task is one of the call's threads: a worker runs it only in a free place
// of the call, held until the task returns, and the task's own splits
// recruit into the call's places. A worker that finds no place free
// leaves the task waiting (Waiting()): the next place the call frees goes
// to it (a side task or a split's worker ending), unless the owner runs it
// first. So a call never has more threads at work than its budget, side
// tasks and portfolio members included. Outside a call, a worker runs the
// task as soon as it can.
//
// The task runs exactly once, or not at all when the HandedTask is
// destroyed before any thread started it. The HandedTask must not outlive
// the call it was made in. Join and the destructor must be called from one
// thread (the owner's).
class HandedTask {
 public:
  // Queues `task` on `pool`; with no pool, or its queue full, nothing is
  // queued and Join() runs it.
  HandedTask(WorkerPool* pool, std::function<void()> task);
  // Waits for the task if a worker started it; else it never runs.
  ~HandedTask();
  HandedTask(const HandedTask&) = delete;
  HandedTask& operator=(const HandedTask&) = delete;

  // Whether a thread has taken the task (started it), waiting up to
  // `wait` for one to (a worker just woken takes a moment to start); no
  // wait where nothing was queued, nor once the task waits for a place.
  bool StartedWithin(absl::Duration wait);
  // Whether a worker found no place of the call free for the task and it
  // has not started since: the owner, itself one of the call's threads,
  // may as well run it (RunHereIfNotStarted).
  bool Waiting() const;
  // Whether a thread is running the task now (started, not yet ended).
  bool Running() const;
  // Runs the task on the calling thread if no worker has started it, and
  // returns whether it did.
  bool RunHereIfNotStarted();
  // Returns once the task has run: here if no worker started it. While
  // it waits for a worker's run, the calling thread lends its place
  // (LendPlace).
  void Join();

  // Shared with the worker tasks queued for it, which may start after
  // this object is gone: they then only read that the task was taken.
  struct Shared;

 private:
  // Waits for the run a worker started, lending this thread's place.
  void WaitDone();

  std::shared_ptr<Shared> shared_;
  bool queued_ = false;  // a worker task was queued
};

// When a RunTogether asks for its workers.
enum class Recruit {
  // Once, as it starts: for work whose threads have roles (thread 1 runs a
  // side task).
  kAtStart,
  // As it starts, and again whenever one of its threads calls ShouldYield
  // while a place of the call is free (a side task beside it ended): for
  // work whose threads all take pieces from one store until none is left.
  // The thread numbers of workers that join later go on counting.
  kAsPlacesFree,
};

// While it lives, the calling thread (one of its call's threads, about to
// block until work it handed out ends: HandedTask::Join) lends its place
// to the call, so that a task waiting for a place runs meanwhile. On its
// end the thread takes a place back, waiting for one where every place is
// at work (a split's worker then leaves at its next piece: ShouldYield;
// the next place given back is the thread's before any waiting task's),
// so the call never has more threads at work than its budget. Outside a
// call, in one of one thread, or while the thread's place is lent
// already, it does nothing.
//
//   base::LendPlace idle;  // the members run on workers; this thread waits
//   for (base::HandedTask& member : members) member.Join();
class LendPlace {
 public:
  LendPlace();
  ~LendPlace();
  LendPlace(const LendPlace&) = delete;
  LendPlace& operator=(const LendPlace&) = delete;

 private:
  std::shared_ptr<internal::CallPlaces> places_;  // null: nothing lent
};

// Runs work(thread) on the calling thread (thread 0) and on up to
// parallel.helpers() workers (threads 1, 2, ...) at once, and returns once
// every call that started has returned. A worker that starts after the
// caller's call has returned runs nothing, so `work` must finish the whole
// job when called alone: each call takes pieces from shared state until
// none is left. Called inside another RunTogether's work (on its caller or
// a worker), the workers it recruits take places the outermost call left
// free, never more than its parallel.helpers(): with none free, the
// calling thread works alone (until a place comes free, with
// Recruit::kAsPlacesFree).
void RunTogether(const Parallelism& parallel,
                 absl::FunctionRef<void(int thread)> work,
                 Recruit recruit = Recruit::kAtStart);

// True when a worker (thread > 0 of RunTogether) should leave: tasks other
// than such workers wait in the pool's queue (a small request's, say), or
// a thread of its call waits to take back the place it lent (LendPlace).
// Called on any thread of a RunTogether with Recruit::kAsPlacesFree, it
// also asks for a worker when a place of the call is free.
bool ShouldYield(const Parallelism& parallel, int thread);

// Calls fn(chunk) once for each chunk in [0, chunks), in any order and on
// any of the threads RunTogether gives (Recruit::kAsPlacesFree), and
// returns once all have returned.
void ParallelFor(const Parallelism& parallel, int chunks,
                 absl::FunctionRef<void(int chunk)> fn);

// The chunks of `chunk_size` items that cover n items.
inline int ChunkCount(size_t n, size_t chunk_size) {
  return static_cast<int>((n + chunk_size - 1) / chunk_size);
}

// ParallelFor over items [0, n) cut into ChunkCount(n, chunk_size) chunks
// of `chunk_size` (the last one shorter: the cut depends on n alone):
// fn(chunk, begin, end) for each.
void ParallelForRange(
    const Parallelism& parallel, size_t n, size_t chunk_size,
    absl::FunctionRef<void(int chunk, size_t begin, size_t end)> fn);

// The values value(k) for the k in [0, n) where keep(k), in order of k:
// chunk by chunk of 2^16 on the threads `parallel` gives, each chunk
// counting its values, then writing them where the one pass would (the
// same list on any thread count). Only the calling thread allocates: what
// workers allocate can stay with their threads' heaps.
template <typename Keep, typename Value>
std::vector<int> KeptInOrder(const Parallelism& parallel, size_t n, Keep keep,
                             Value value) {
  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<size_t> at(ChunkCount(n, kChunk) + 1, 0);
  ParallelForRange(parallel, n, kChunk, [&](int c, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) at[c + 1] += keep(k) ? 1 : 0;
  });
  for (size_t c = 1; c < at.size(); ++c) at[c] += at[c - 1];
  std::vector<int> out(at.back());
  ParallelForRange(parallel, n, kChunk, [&](int c, size_t begin, size_t end) {
    size_t next = at[c];
    for (size_t k = begin; k < end; ++k) {
      if (keep(k)) out[next++] = value(k);
    }
  });
  return out;
}

// The k in [0, n) where keep(k), ascending, found as above.
template <typename Keep>
std::vector<int> KeptInOrder(const Parallelism& parallel, size_t n, Keep keep) {
  return KeptInOrder(parallel, n, keep,
                     [](size_t k) { return static_cast<int>(k); });
}

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_PARALLEL_H_
