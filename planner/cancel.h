// A cancellation token fed by a deadline and by an explicit Cancel() (server
// shutdown, client gone). Long loops poll Cancelled() every few hundred
// iterations; the check is two relaxed loads and, past a stride, a clock read.
//
//   planner::CancelToken token(absl::Now() + absl::Seconds(1));
//   for (...) { if (token.Cancelled()) return absl::DeadlineExceededError(..);
//   }
//
// Thread-safe.
#ifndef MEMPLAN_PLANNER_CANCEL_H_
#define MEMPLAN_PLANNER_CANCEL_H_

#include <atomic>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memplan::planner {

class CancelToken {
 public:
  // A token that never expires unless cancelled.
  CancelToken() = default;
  explicit CancelToken(absl::Time deadline) : deadline_(deadline) {}
  // A child token: cancelled when `parent` is, or when its own deadline
  // passes. `parent` must outlive this token.
  CancelToken(const CancelToken* parent, absl::Time deadline)
      : parent_(parent), deadline_(deadline) {}

  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // True once cancelled or past the deadline; stays true.
  bool Cancelled() const {
    if (cancelled_.load(std::memory_order_relaxed)) return true;
    if (parent_ != nullptr && parent_->Cancelled()) return true;
    if (deadline_ != absl::InfiniteFuture() && absl::Now() >= deadline_) {
      cancelled_.store(true, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  absl::Time deadline() const { return deadline_; }

 private:
  const CancelToken* parent_ = nullptr;
  absl::Time deadline_ = absl::InfiniteFuture();
  mutable std::atomic<bool> cancelled_{false};
};

}  // namespace memplan::planner

#endif  // MEMPLAN_PLANNER_CANCEL_H_
