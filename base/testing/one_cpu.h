// Runs the calling thread on one CPU for a scope, as `taskset -c N` would
// run a process: for tests of what follows the affinity mask
// (base::UsableCores). The thread's mask comes back at the scope's end.
//
//   {
//     base::testing::OneCpu one;
//     ASSERT_TRUE(one.ok());
//     EXPECT_EQ(base::UsableCores(), 1);
//   }
#ifndef MEMPLAN_BASE_TESTING_ONE_CPU_H_
#define MEMPLAN_BASE_TESTING_ONE_CPU_H_

#include <sched.h>

namespace memplan::base::testing {

class OneCpu {
 public:
  // Restricts the thread to the first CPU of its mask.
  OneCpu() {
    CPU_ZERO(&all_);
    if (sched_getaffinity(0, sizeof(all_), &all_) != 0) return;
    int first = 0;
    while (!CPU_ISSET(first, &all_)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ok_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~OneCpu() {
    if (ok_) sched_setaffinity(0, sizeof(all_), &all_);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;

  // Whether the thread now runs on one CPU.
  bool ok() const { return ok_; }
  // The CPUs of the mask before.
  int cpus_before() const { return CPU_COUNT(&all_); }

 private:
  cpu_set_t all_;
  bool ok_ = false;
};

}  // namespace memplan::base::testing

#endif  // MEMPLAN_BASE_TESTING_ONE_CPU_H_
