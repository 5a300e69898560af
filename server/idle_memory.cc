#include "server/idle_memory.h"

#include <utility>

#include "base/process_memory.h"

namespace memplan::server {

IdleMemoryReturner::IdleMemoryReturner(absl::Duration quiet,
                                       OnEachWorker on_each_worker)
    : quiet_(quiet),
      on_each_worker_(std::move(on_each_worker)),
      thread_([this] { Run(); }) {}

IdleMemoryReturner::~IdleMemoryReturner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IdleMemoryReturner::CallStarted() {
  absl::MutexLock lock(&mu_);
  pending_ = 0;
}

void IdleMemoryReturner::CallsEnded() {
  absl::MutexLock lock(&mu_);
  pending_ = 2;
  idle_since_ = absl::Now();
}

int64_t IdleMemoryReturner::returns() const {
  absl::MutexLock lock(&mu_);
  return returns_;
}

void IdleMemoryReturner::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &IdleMemoryReturner::StoppingOrIdle));
    if (stopping_) return;
    // Due yet? Waking at the due time re-reads the state: a call that
    // started meanwhile cleared pending_, one that also ended moved
    // idle_since_. The second return comes ten quiet times later, for what
    // gRPC freed after the first (a large response still being sent to a
    // slow reader).
    const absl::Time due = idle_since_ + (pending_ == 2 ? quiet_ : 10 * quiet_);
    if (absl::Now() < due) {
      mu_.AwaitWithDeadline(absl::Condition(&stopping_), due);
      continue;
    }
    --pending_;
    mu_.Unlock();
    if (on_each_worker_ != nullptr) {
      base::ReturnFreedMemory(on_each_worker_);
    } else {
      base::ReturnFreedMemory();
    }
    mu_.Lock();
    ++returns_;
  }
}

}  // namespace memplan::server
