// Gives the memory the server's calls freed back to the system once no call
// has been in progress for a moment.
//
// glibc gives back little of what a worker thread frees: a thread's arena
// shrinks only from its top, so a server that planned a million buffers
// once held about 900 MB resident while idle, and more after the next big
// call. When the last call in progress ends, and no call starts for `quiet`,
// one thread calls base::ReturnFreedMemory() (malloc_trim, and each
// worker's heap top, which malloc_trim does not reach), and once more after
// ten times `quiet` for what gRPC freed later (a large response is freed
// once a slow reader has taken it): idle, the process goes back to tens of
// megabytes. Under steady load nothing is returned and nothing is
// lost: freed memory is reused by the next calls.
//
//   IdleMemoryReturner returner(absl::Milliseconds(500));
//   returner.CallStarted();   // in_flight went 0 -> 1
//   returner.CallsEnded();    // in_flight went 1 -> 0
//
// Thread-safe. The destructor stops the thread (without a last return).
#ifndef MEMPLAN_SERVER_IDLE_MEMORY_H_
#define MEMPLAN_SERVER_IDLE_MEMORY_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace memplan::server {

class IdleMemoryReturner {
 public:
  // `on_each_worker` (optional) runs the function it is given once on each
  // thread that plans (base::WorkerPool::RunOnEachThread): their heaps'
  // free tops go back too (base::ReturnFreedMemory).
  using OnEachWorker = std::function<void(const std::function<void()>&)>;
  explicit IdleMemoryReturner(absl::Duration quiet,
                              OnEachWorker on_each_worker = nullptr);
  ~IdleMemoryReturner();
  IdleMemoryReturner(const IdleMemoryReturner&) = delete;
  IdleMemoryReturner& operator=(const IdleMemoryReturner&) = delete;

  // A call started while none was in progress: a pending return waits.
  void CallStarted();
  // The last call in progress ended: memory goes back after `quiet` and
  // again after 10 x `quiet`, unless a call starts first.
  void CallsEnded();
  // How many times memory was given back.
  int64_t returns() const;

 private:
  void Run();
  bool StoppingOrIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || pending_ > 0;
  }

  const absl::Duration quiet_;
  const OnEachWorker on_each_worker_;
  mutable absl::Mutex mu_;
  // Returns still due in this idle period (2, 1, 0), counted from
  // `idle_since_`: at `quiet_` and at 10 x `quiet_`.
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time idle_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t returns_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts once the fields above are set
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_IDLE_MEMORY_H_
