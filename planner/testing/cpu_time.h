// CPU time of the calling thread, for tests that check a time budget: unlike
// wall time it does not grow when a loaded machine (or a sanitizer build)
// leaves the thread waiting, so such a test cannot fail on a busy CI.
#ifndef MEMPLAN_PLANNER_TESTING_CPU_TIME_H_
#define MEMPLAN_PLANNER_TESTING_CPU_TIME_H_

#include <time.h>

#include "absl/time/time.h"

namespace memplan::planner::testing {

inline absl::Duration ThreadCpuTime() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::Seconds(ts.tv_sec) + absl::Nanoseconds(ts.tv_nsec);
}

}  // namespace memplan::planner::testing

#endif  // MEMPLAN_PLANNER_TESTING_CPU_TIME_H_
