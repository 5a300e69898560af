// base::HandedTask: a task handed whole to a worker, run by its owner
// when no worker has started it, and within its call's places.
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/parallel.h"
#include "base/testing/threads_at_work.h"
#include "base/worker_pool.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

using ::memplan::base::testing::MostAtOnce;
using ::memplan::base::testing::ThreadsAtWork;

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

// Waits (at most 10 s) until `task` waits for a place of its call.
bool BecomesWaiting(const HandedTask& task) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (!task.Waiting()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Waits (at most 10 s) until a thread has taken `task`. StartedWithin
// alone returns at once while the task waits for a place, which it may
// still do for a moment after a place came free (a worker lists it).
bool StartsWithin10s(HandedTask& task) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (!task.StartedWithin(absl::Milliseconds(1))) {
    if (absl::Now() > until) return false;
  }
  return true;
}

// Runs body(release) on the calling thread, a thread of a call, while a
// side task (RunTogether's thread 1) holds one of the call's places until
// body notifies `release` (at the latest when body returns). `at_work`
// (may be null) counts both threads.
void BesideASideTask(
    WorkerPool* pool, ThreadsAtWork* at_work,
    absl::FunctionRef<void(absl::Notification& release)> body) {
  absl::Notification side_started, release;
  RunTogether({pool, 2}, [&](int thread) {
    std::optional<ThreadsAtWork::Scope> in;
    if (at_work != nullptr) in.emplace(at_work);
    if (thread > 0) {
      side_started.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
      return;
    }
    const bool started =
        side_started.WaitForNotificationWithTimeout(absl::Seconds(10));
    if (started) body(release);
    if (!release.HasBeenNotified()) release.Notify();
    ASSERT_TRUE(started) << "the side task never started";
  });
}

// Made inside a request's budget, a handed task on a worker is one of the
// request's threads: its splits get the places left, and its place comes
// back when it ends.
TEST(HandedTaskTest, InsideABudgetItHoldsOneOfItsPlaces) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 3});  // the caller and 2 places
  int most_in_task = 0;
  std::thread::id ran_on;
  absl::Notification ran;
  HandedTask task(&pool, [&] {
    ran_on = std::this_thread::get_id();
    most_in_task = MostAtOnce({&pool, 8}, 3);
    ran.Notify();
  });
  // The owner at work meanwhile (Join would lend its place).
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  task.Join();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(most_in_task, 2) << "the task and the one place left";
  EXPECT_EQ(MostAtOnce({&pool, 8}, 3), 3) << "the task's place came back";
}

// With every place of its call at work, a worker leaves the task waiting;
// the place the call frees next goes to it, so the call never has more
// threads at work than its budget.
TEST(HandedTaskTest, WaitsForAPlaceAndTakesTheNextOneFreed) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 2});  // the caller and 1 place
  ThreadsAtWork at_work;
  std::thread::id task_on;
  BesideASideTask(&pool, &at_work, [&](absl::Notification& release_side) {
    HandedTask task(&pool, [&] {
      const auto in_task = at_work.Enter();
      task_on = std::this_thread::get_id();
      absl::SleepFor(absl::Milliseconds(5));
    });
    const bool waited = BecomesWaiting(task);
    release_side.Notify();
    EXPECT_TRUE(waited) << "a worker found no place free";
    EXPECT_TRUE(StartsWithin10s(task))
        << "the side task's place, once free, went to it";
    EXPECT_FALSE(task.Waiting());
    task.Join();
    EXPECT_NE(task_on, std::this_thread::get_id());
  });
  EXPECT_EQ(at_work.most(), 2) << "the caller, then the side or the task";
  EXPECT_EQ(MostAtOnce({&pool, 8}, 2), 2) << "the place came back";
}

// The owner may run a waiting task itself; the place freed later is then
// the call's again, not the task's.
TEST(HandedTaskTest, TheOwnerRunsAWaitingTask) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 2});
  std::atomic<int> runs{0};
  std::thread::id ran_on;
  BesideASideTask(&pool, nullptr, [&](absl::Notification& release_side) {
    HandedTask task(&pool, [&] {
      ++runs;
      ran_on = std::this_thread::get_id();
    });
    const bool waited = BecomesWaiting(task);
    EXPECT_TRUE(task.RunHereIfNotStarted());
    release_side.Notify();
    EXPECT_TRUE(waited);
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    task.Join();
  });
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(MostAtOnce({&pool, 8}, 2), 2) << "the freed place is the call's";
}

// A call of one thread has no place for a worker: the task is never
// queued (a worker would only find it waiting) and its owner runs it.
TEST(HandedTaskTest, ACallOfOneThreadKeepsItsTaskOffThePool) {
  WorkerPool pool(1, 8);
  absl::Notification release;
  HoldTheThread(&pool, &release);  // what is queued stays in the queue
  {
    const ThreadBudget threads({&pool, 1});
    std::thread::id ran_on;
    HandedTask task(&pool, [&] { ran_on = std::this_thread::get_id(); });
    EXPECT_EQ(pool.queue_depth(), 0);
    EXPECT_FALSE(task.StartedWithin(absl::Seconds(10)));  // at once
    task.Join();
    EXPECT_EQ(ran_on, std::this_thread::get_id());
  }
  release.Notify();
}

// When the place a call frees cannot go to its waiting tasks (the pool's
// queue is full), they are their owners' to run, and the place is the
// call's again (run under LeakSanitizer too: none is left behind).
TEST(HandedTaskTest, AFullPoolLeavesWaitingTasksToTheirOwners) {
  WorkerPool pool(2, 2);
  const ThreadBudget threads({&pool, 2});  // the caller and 1 place
  absl::Notification release_blockers;
  std::atomic<int> runs{0};
  // The side task holds the place, on one of the pool's threads.
  BesideASideTask(&pool, nullptr, [&](absl::Notification& release_side) {
    HandedTask first(&pool, [&] { ++runs; });
    ASSERT_TRUE(BecomesWaiting(first));  // the other thread looked
    HandedTask second(&pool, [&] { ++runs; });
    ASSERT_TRUE(BecomesWaiting(second));
    // The other thread held, the queue full.
    absl::Notification blocking;
    ASSERT_TRUE(pool.TrySchedule([&] {
      blocking.Notify();
      release_blockers.WaitForNotificationWithTimeout(absl::Seconds(10));
    }));
    ASSERT_TRUE(blocking.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ASSERT_TRUE(pool.TrySchedule([] {}));
    ASSERT_TRUE(pool.TrySchedule([] {}));
    release_side.Notify();
    // The side's worker gives its place back once its call returns: the
    // tasks stay their owner's.
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(first.Waiting());
    EXPECT_TRUE(second.Waiting());
    EXPECT_TRUE(first.RunHereIfNotStarted());
    EXPECT_TRUE(second.RunHereIfNotStarted());
    release_blockers.Notify();
  });
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(MostAtOnce({&pool, 8}, 2), 2) << "the place is the call's again";
}

// A thread that waits for what it handed out lends its place: a task
// waiting for one runs on a worker meanwhile, and the place is the
// thread's again afterwards.
TEST(LendPlaceTest, AWaitingTaskRunsInTheLentPlace) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 2});  // the caller and 1 place
  std::thread::id task_on;
  // The side task holds the one place until the task has run.
  BesideASideTask(&pool, nullptr, [&](absl::Notification& release_side) {
    HandedTask task(&pool, [&] { task_on = std::this_thread::get_id(); });
    const bool waited = BecomesWaiting(task);
    {
      const LendPlace idle;
      EXPECT_TRUE(StartsWithin10s(task));
      task.Join();
    }
    release_side.Notify();
    EXPECT_TRUE(waited);
    EXPECT_NE(task_on, std::this_thread::get_id()) << "ran on a worker";
  });
  EXPECT_EQ(MostAtOnce({&pool, 8}, 3), 2) << "the places are as before";
}

// Taken back while every place is at work, the lent place is waited for:
// a split's workers leave at their next piece, and the call never has
// more threads at work than its budget.
TEST(LendPlaceTest, TakingBackWaitsForAWorkerToLeave) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 2});        // the caller and 1 place
  std::optional<LendPlace> idle(std::in_place);  // 2 places now
  ThreadsAtWork at_work;
  absl::Notification both_in;
  std::atomic<int> in{0};
  std::atomic<bool> taken_back{false}, yielded{false};
  RunTogether({&pool, 3}, [&](int thread) {
    if (thread == 0) {
      // Both the lent and the own place at work: take the lent one back.
      EXPECT_TRUE(both_in.WaitForNotificationWithTimeout(absl::Seconds(10)));
      idle.reset();  // returns once a worker left
      const auto at = at_work.Enter();
      taken_back = true;
      return;
    }
    const auto at = at_work.Enter();
    if (in.fetch_add(1) + 1 == 2) both_in.Notify();
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (!taken_back.load() && absl::Now() < until) {
      if (ShouldYield({&pool, 3}, thread)) {
        yielded = true;
        return;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  EXPECT_TRUE(both_in.HasBeenNotified()) << "two workers joined";
  EXPECT_TRUE(yielded.load()) << "a worker was asked to leave";
  EXPECT_LE(at_work.most(), 2) << "the caller came back once one had left";
  EXPECT_EQ(MostAtOnce({&pool, 8}, 3), 2) << "the places are as before";
}

// An owner blocked in Join lends its place: the task's own split may take
// it. Lent once only, however the lending nests.
TEST(LendPlaceTest, JoinLendsTheOwnersPlaceOnce) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads({&pool, 2});  // the caller and 1 place
  for (bool lent_before : {false, true}) {
    std::optional<LendPlace> idle;
    if (lent_before) idle.emplace();
    std::atomic<bool> joining{false};
    int most = 0;
    HandedTask task(&pool, [&] {
      const absl::Time until = absl::Now() + absl::Seconds(10);
      while (!joining.load() && absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(1));
      }
      most = MostAtOnce({&pool, 8}, 3);
    });
    ASSERT_TRUE(task.StartedWithin(absl::Seconds(10)));
    joining = true;
    task.Join();
    EXPECT_EQ(most, 2) << "the task and the owner's lent place, lent before "
                       << lent_before;
  }
  EXPECT_EQ(MostAtOnce({&pool, 8}, 3), 2) << "the places are as before";
}

// Many calls' handed tasks beside splits, joined or dropped: each runs at
// most once (once when joined), and no call has more threads at work than
// its budget (run under AddressSanitizer too: no task outlives what it
// reads).
TEST(HandedTaskTest, CallsKeepTheirBudgetsUnderRacingTasks) {
  WorkerPool pool(4, 256);
  for (int round = 0; round < 200; ++round) {
    ThreadsAtWork at_work;
    std::atomic<int> runs[3] = {0, 0, 0};
    {
      const ThreadBudget threads({&pool, 2});
      std::optional<HandedTask> tasks[3];
      for (int t = 0; t < 3; ++t) {
        tasks[t].emplace(&pool, [&, t] {
          const auto in_task = at_work.Enter();
          ++runs[t];
          ParallelFor({&pool, 8}, 1 + round % 7, [&](int) {
            const auto in_chunk = at_work.Enter();
            absl::SleepFor(absl::Microseconds(20));
          });
        });
      }
      {
        const auto in = at_work.Enter();  // the caller at work
        ParallelFor({&pool, 8}, round % 5,
                    [&](int) { const auto in_chunk = at_work.Enter(); });
        // Time for workers to take some (or find no place for them).
        absl::SleepFor(absl::Microseconds(100 * (round % 4)));
      }
      // Joined or dropped: run here (at work), or waited for (its place
      // lent, taken back when one is free).
      if (round % 3 != 0) tasks[round % 3]->Join();
      if (round % 2 == 0) tasks[0]->Join();
      // The others are dropped: never run, or waited for.
      for (std::optional<HandedTask>& t : tasks) t.reset();
    }
    for (int t = 0; t < 3; ++t) EXPECT_LE(runs[t].load(), 1) << round;
    if (round % 3 != 0) {
      EXPECT_EQ(runs[round % 3].load(), 1) << round;
    }
    if (round % 2 == 0) {
      EXPECT_EQ(runs[0].load(), 1) << round;
    }
    EXPECT_LE(at_work.most(), 2) << round;
  }
}

}  // namespace
}  // namespace memplan::base
