#include "base/worker_pool.h"

#include <atomic>
#include <memory>
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

// Holds `pool`'s one thread until `release` is notified (at most 10 s).
void HoldTheThread(WorkerPool* pool, absl::Notification* release) {
  absl::Notification held;
  ASSERT_TRUE(pool->TrySchedule([&held, release] {
    held.Notify();
    release->WaitForNotificationWithTimeout(absl::Seconds(10));
  }));
  held.WaitForNotification();
}

// Whether `pool`'s one thread ran every task queued before this call
// (within 10 s).
bool Drained(WorkerPool* pool) {
  auto drained = std::make_shared<absl::Notification>();  // may outlive this
  return pool->TrySchedule([drained] { drained->Notify(); }) &&
         drained->WaitForNotificationWithTimeout(absl::Seconds(10));
}

TEST(HandedTaskTest, AnIdleWorkerRunsItAndJoinWaitsForIt) {
  WorkerPool pool(1, 8);
  absl::Notification started, finish;
  std::thread::id ran_on;
  HandedTask task(&pool, [&] {
    ran_on = std::this_thread::get_id();
    started.Notify();
    finish.WaitForNotificationWithTimeout(absl::Seconds(10));
  });
  started.WaitForNotification();
  EXPECT_FALSE(task.RunHereIfNotStarted());  // the worker has it
  std::thread finisher([&finish] {
    absl::SleepFor(absl::Milliseconds(50));
    finish.Notify();
  });
  task.Join();  // returns only once the worker's run ended
  EXPECT_TRUE(finish.HasBeenNotified());
  EXPECT_NE(ran_on, std::this_thread::get_id());
  finisher.join();
}

TEST(HandedTaskTest, ABusyPoolsTaskRunsOnTheOwnerOnce) {
  WorkerPool pool(1, 8);
  absl::Notification release;
  HoldTheThread(&pool, &release);
  std::atomic<int> runs{0};
  std::thread::id ran_on;
  {
    HandedTask task(&pool, [&] {
      ++runs;
      ran_on = std::this_thread::get_id();
    });
    task.Join();  // not the 10 s the pool's thread is held
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    EXPECT_FALSE(release.HasBeenNotified());
  }
  release.Notify();
  // The queued copy, once the thread is free, finds the task taken.
  ASSERT_TRUE(Drained(&pool));
  EXPECT_EQ(runs.load(), 1);
}

TEST(HandedTaskTest, StartedWithinTellsWhetherAWorkerTookIt) {
  WorkerPool pool(1, 8);
  {
    absl::Notification release;
    HoldTheThread(&pool, &release);
    HandedTask task(&pool, [] {});
    EXPECT_FALSE(task.StartedWithin(absl::Milliseconds(20)));
    release.Notify();
    EXPECT_TRUE(task.StartedWithin(absl::Seconds(10)));  // the thread is free
    EXPECT_FALSE(task.RunHereIfNotStarted());
  }
  HandedTask unqueued(nullptr, [] {});
  const absl::Time asked = absl::Now();
  EXPECT_FALSE(unqueued.StartedWithin(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));  // nothing to wait for
  EXPECT_TRUE(unqueued.RunHereIfNotStarted());
  EXPECT_TRUE(unqueued.StartedWithin(absl::ZeroDuration()));
}

TEST(HandedTaskTest, WithoutAPoolJoinRunsIt) {
  int runs = 0;
  HandedTask task(nullptr, [&runs] { ++runs; });
  task.Join();
  task.Join();  // once only
  EXPECT_EQ(runs, 1);
}

TEST(HandedTaskTest, DestroyedUnstartedItNeverRuns) {
  WorkerPool pool(1, 8);
  absl::Notification release;
  HoldTheThread(&pool, &release);
  std::atomic<int> runs{0};
  {
    HandedTask task(&pool, [&runs] { ++runs; });
  }
  release.Notify();
  ASSERT_TRUE(Drained(&pool));
  EXPECT_EQ(runs.load(), 0);
}

TEST(HandedTaskTest, DestroyedStartedItIsWaitedFor) {
  WorkerPool pool(1, 8);
  absl::Notification started;
  std::atomic<bool> ended{false};
  {
    HandedTask task(&pool, [&] {
      started.Notify();
      absl::SleepFor(absl::Milliseconds(50));
      ended = true;
    });
    started.WaitForNotification();
  }
  EXPECT_TRUE(ended.load());  // the destructor waited: the task was done
}

}  // namespace
}  // namespace memplan::base
