// Counting the threads at work on one call at once, for tests of its
// thread budget (base/parallel.h).
//
//   base::testing::ThreadsAtWork at_work;
//   ParallelFor(parallel, chunks, [&](int) { auto in = at_work.Enter(); });
//   EXPECT_LE(at_work.most(), 2);
#ifndef MEMPLAN_BASE_TESTING_THREADS_AT_WORK_H_
#define MEMPLAN_BASE_TESTING_THREADS_AT_WORK_H_

#include <atomic>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/parallel.h"

namespace memplan::base::testing {

// The most distinct threads between Enter() and the end of its scope at
// once (a thread entering again inside counts once). One instance in use
// at a time per process.
class ThreadsAtWork {
 public:
  class Scope {
   public:
    explicit Scope(ThreadsAtWork* at) : at_(at) {
      if (depth()++ > 0) return;
      const int now = at_->inside_.fetch_add(1) + 1;
      int seen = at_->most_.load();
      while (now > seen && !at_->most_.compare_exchange_weak(seen, now)) {
      }
    }
    ~Scope() {
      if (--depth() == 0) at_->inside_.fetch_sub(1);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    static int& depth() {
      thread_local int d = 0;
      return d;
    }
    ThreadsAtWork* at_;
  };

  [[nodiscard]] Scope Enter() { return Scope(this); }
  int most() const { return most_.load(); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<int> most_{0};
};

// The most threads inside one split at once, each chunk holding its thread
// for a millisecond, until `enough` were seen or 300 chunks ran.
inline int MostAtOnce(const Parallelism& parallel, int enough) {
  std::atomic<int> inside{0}, most{0};
  ParallelFor(parallel, 300, [&](int) {
    if (most.load() >= enough) return;
    const int now = inside.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    absl::SleepFor(absl::Milliseconds(1));
    inside.fetch_sub(1);
  });
  return most.load();
}

}  // namespace memplan::base::testing

#endif  // MEMPLAN_BASE_TESTING_THREADS_AT_WORK_H_
