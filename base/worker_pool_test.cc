#include "base/worker_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

TEST(WorkerPoolTest, RunOnEachThreadRunsOnceOnEveryThread) {
  WorkerPool pool(4, 8);
  absl::Mutex mu;
  std::multiset<std::thread::id> ran;
  for (int round = 0; round < 3; ++round) {
    ran.clear();
    pool.RunOnEachThread([&] {
      absl::MutexLock lock(&mu);
      ran.insert(std::this_thread::get_id());
    });
    // Returned once all ran: four runs, each on a thread of its own, none
    // on the caller.
    absl::MutexLock lock(&mu);
    EXPECT_EQ(ran.size(), 4u);
    EXPECT_EQ(std::set<std::thread::id>(ran.begin(), ran.end()).size(), 4u);
    EXPECT_EQ(ran.count(std::this_thread::get_id()), 0u);
  }
}

TEST(WorkerPoolTest, RunOnEachThreadWaitsForABusyThread) {
  WorkerPool pool(2, 8);
  absl::Notification started;
  absl::Notification release;
  ASSERT_TRUE(pool.TrySchedule([&started, &release] {
    started.Notify();
    release.WaitForNotification();
  }));
  // (A round posted before a thread took the task would run first.)
  started.WaitForNotification();
  std::atomic<int> runs{0};
  absl::Notification returned;
  std::thread caller([&] {
    pool.RunOnEachThread([&runs] { ++runs; });
    returned.Notify();
  });
  // One thread is held by its task: the call has not returned.
  EXPECT_FALSE(
      returned.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  release.Notify();
  caller.join();
  EXPECT_EQ(runs.load(), 2);
  // The pool still runs tasks afterwards.
  absl::Notification ran;
  ASSERT_TRUE(pool.TrySchedule([&ran] { ran.Notify(); }));
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(WorkerPoolTest, RunOnEachThreadFromSeveralThreadsTakesTurns) {
  WorkerPool pool(3, 8);
  std::atomic<int> runs{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      for (int j = 0; j < 5; ++j) pool.RunOnEachThread([&runs] { ++runs; });
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(runs.load(), 4 * 5 * 3);
}

}  // namespace
}  // namespace memplan::base
