// A fixed set of threads with a bounded queue: the one place planning work
// runs. A full queue refuses new work at once (TrySchedule returns false)
// instead of queueing without end; callers then run the task themselves or
// answer RESOURCE_EXHAUSTED.
//
//   base::WorkerPool pool(/*threads=*/2, /*max_queue=*/64);
//   if (!pool.TrySchedule([] { Work(); })) Work();
//
// Thread-safe.
#ifndef MEMPLAN_BASE_WORKER_POOL_H_
#define MEMPLAN_BASE_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace memplan::base {

class WorkerPool {
 public:
  // REQUIRES: threads >= 1, max_queue >= 1.
  WorkerPool(int threads, int max_queue);
  // Runs every task already queued, then joins the threads.
  ~WorkerPool();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`; false when the queue is full or the pool is stopping.
  bool TrySchedule(std::function<void()> task);

  // Runs `task` once on each of the pool's threads, before the tasks still
  // queued, and returns once every thread has run it: housekeeping that
  // only a thread can do for itself (its malloc arena,
  // base/process_memory.h). A thread busy with a task runs it after that
  // task, so this blocks for as long. Nothing runs once the pool is being
  // destroyed. Calls from several threads take turns.
  void RunOnEachThread(const std::function<void()>& task);

  // Tasks waiting for a thread (not those running).
  int queue_depth() const;
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  const int max_queue_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // RunOnEachThread: one round at a time (each_mu_), numbered; the threads
  // that have not yet run the round's task.
  absl::Mutex each_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  const std::function<void()>* each_task_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t each_round_ ABSL_GUARDED_BY(mu_) = 0;
  int each_left_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_WORKER_POOL_H_
