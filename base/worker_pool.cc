#include "base/worker_pool.h"

#include <utility>

namespace memplan::base {

WorkerPool::WorkerPool(int threads, int max_queue) : max_queue_(max_queue) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::TrySchedule(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || static_cast<int>(queue_.size()) >= max_queue_) return false;
  queue_.push_back(std::move(task));
  return true;
}

int WorkerPool::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void WorkerPool::RunOnEachThread(const std::function<void()>& task) {
  absl::MutexLock turn(&each_mu_);
  absl::MutexLock lock(&mu_);
  // Once stopping_ is set threads may have left; before, every thread sees
  // the round before it leaves (Loop).
  if (stopping_) return;
  each_task_ = &task;
  ++each_round_;
  each_left_ = threads();
  mu_.Await(absl::Condition(
      +[](int* left) { return *left == 0; }, &each_left_));
  each_task_ = nullptr;
}

void WorkerPool::Loop() {
  // The last RunOnEachThread round this thread ran: none (rounds start
  // once the constructor has returned).
  uint64_t round = 0;
  while (true) {
    std::function<void()> task;
    const std::function<void()>* each = nullptr;
    {
      absl::MutexLock lock(&mu_);
      const auto woken = [this, &round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty() || each_round_ != round;
      };
      mu_.Await(absl::Condition(&woken));
      if (each_round_ != round) {
        round = each_round_;
        each = each_task_;
      } else if (queue_.empty()) {
        return;  // stopping, and nothing left to run
      } else {
        task = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (each == nullptr) {
      task();
      continue;
    }
    (*each)();
    absl::MutexLock lock(&mu_);
    --each_left_;
  }
}

}  // namespace memplan::base
