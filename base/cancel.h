// A cancellation token fed by a deadline, by an explicit Cancel() (server
// shutdown) and optionally by a probe (is the client still there?). Long
// loops poll Cancelled() every few hundred iterations; the check is a few
// relaxed loads, a clock read and the probe.
//
//   base::CancelToken token(absl::Now() + absl::Seconds(1));
//   for (...) { if (token.Cancelled()) return absl::DeadlineExceededError(..);
//   }
//
// Thread-safe.
#ifndef MEMPLAN_BASE_CANCEL_H_
#define MEMPLAN_BASE_CANCEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memplan::base {

class CancelToken {
 public:
  // A token that never expires unless cancelled.
  CancelToken() = default;
  explicit CancelToken(absl::Time deadline) : deadline_(deadline) {}
  // A child token: cancelled when `parent` is, or when its own deadline
  // passes. `parent` must outlive this token.
  CancelToken(const CancelToken* parent, absl::Time deadline)
      : parent_(parent), deadline_(deadline) {}
  // A child token that is also cancelled once `probe` returns true (e.g. a
  // gRPC call the client cancelled). `probe` must be thread-safe and cheap.
  CancelToken(const CancelToken* parent, absl::Time deadline,
              std::function<bool()> probe)
      : parent_(parent), deadline_(deadline), probe_(std::move(probe)) {}

  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // True once cancelled or past the deadline; stays true.
  bool Cancelled() const {
    if (cancelled_.load(std::memory_order_relaxed)) return true;
    if (parent_ != nullptr && parent_->Cancelled()) return true;
    if ((deadline_ != absl::InfiniteFuture() && absl::Now() >= deadline_) ||
        (probe_ && probe_())) {
      cancelled_.store(true, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  absl::Time deadline() const { return deadline_; }
  // The earliest deadline of this token and its parents: when it will be
  // cancelled at the latest (InfiniteFuture when none has one).
  absl::Time EarliestDeadline() const {
    absl::Time earliest = deadline_;
    for (const CancelToken* p = parent_; p != nullptr; p = p->parent_) {
      earliest = std::min(earliest, p->deadline_);
    }
    return earliest;
  }

 private:
  const CancelToken* parent_ = nullptr;
  absl::Time deadline_ = absl::InfiniteFuture();
  std::function<bool()> probe_;  // may be empty
  mutable std::atomic<bool> cancelled_{false};
};

// Items a loop of cheap steps (a hash insert, a copy) goes through between
// polls: well under a millisecond of work.
inline constexpr int64_t kPollStride = 4096;

// Whether `cancel` (may be null) has fired, asked at item `i` of such a
// loop only when i is a multiple of kPollStride (item 0 included).
//
//   for (size_t i = 0; i < n; ++i) {
//     if (base::CancelledAt(cancel, i)) return Cancelled();
inline bool CancelledAt(const CancelToken* cancel, int64_t i) {
  return i % kPollStride == 0 && cancel != nullptr && cancel->Cancelled();
}

// Counts units of work (a range read, a neighbour visited: about 0.1 us
// each) and polls a token every kUnitsPerPoll of them: a few milliseconds
// apart, whatever the loop's shape. With a cap, also stops once the work
// passes it (capped() then says so): a bound that is the same on every
// machine, unlike a deadline. Thread-compatible.
//
//   WorkMeter meter(cancel);
//   for (...) { if (meter.Stop(units_done)) return Cancelled(); }
class WorkMeter {
 public:
  static constexpr int64_t kUnitsPerPoll = 1 << 16;
  // Items a loop must be through before Stop(units, done, total) forecasts.
  static constexpr int64_t kMinForecast = 4096;

  explicit WorkMeter(const CancelToken* cancel) : cancel_(cancel) {}
  // `cap` <= 0: no cap.
  WorkMeter(const CancelToken* cancel, int64_t cap)
      : cancel_(cancel),
        cap_(cap > 0 ? cap : kNoCap),
        next_poll_(std::min(kUnitsPerPoll, cap_ + 1)) {}

  // Adds `units`; true when the token (may be null) says stop or the work
  // passed the cap.
  bool Stop(int64_t units) {
    work_ += units;
    if (work_ < next_poll_) return false;
    if (work_ > cap_) return true;
    next_poll_ = std::min(work_ + kUnitsPerPoll, cap_ + 1);
    return cancel_ != nullptr && cancel_->Cancelled();
  }
  // Stop(units) for a loop over `total` items of which `done` are through;
  // with a cap, also stops (capped() then true) once at least a sixteenth
  // (and kMinForecast) are through and the work so far, scaled to all the
  // items, passes twice the cap: a greedy pass's items cost no less later
  // than earlier on the whole (each meets more of the items before it), so
  // such a pass would pass the cap anyway, and its fallback is reached
  // without that work. An input whose first items cost far more than the
  // rest can be cut short by it: it then gets the fallback's plan (valid,
  // usually larger). Checked when the token is polled: depends on the work
  // only.
  bool Stop(int64_t units, int64_t done, int64_t total) {
    work_ += units;
    if (work_ < next_poll_) return false;
    if (cap_ < kNoCap && done >= kMinForecast && done * 16 >= total &&
        work_ / done * total > 2 * cap_) {
      forecast_ = true;
      return true;
    }
    return Stop(0);
  }
  // True when Stop() stopped for the cap (passed, or forecast to be).
  bool capped() const { return work_ > cap_ || forecast_; }
  // Why Stop() stopped, for a loop doing `what`: RESOURCE_EXHAUSTED past
  // the cap, else DEADLINE_EXCEEDED ("`what` cancelled").
  absl::Status StopStatus(absl::string_view what) const {
    if (!capped())
      return absl::DeadlineExceededError(absl::StrCat(what, " cancelled"));
    if (work_ <= cap_) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, " is on course to pass its work cap (", cap_,
                       " units; ", work_, " so far)"));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " passed its work cap (", work_, " units)"));
  }
  int64_t work() const { return work_; }

 private:
  static constexpr int64_t kNoCap = INT64_MAX / 2;
  const CancelToken* cancel_;
  int64_t cap_ = kNoCap;
  int64_t work_ = 0;
  int64_t next_poll_ = kUnitsPerPoll;
  bool forecast_ = false;  // stopped by Stop(units, done, total)
};

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_CANCEL_H_
