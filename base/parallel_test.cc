#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sort.h"
#include "base/testing/one_cpu.h"
#include "base/testing/threads_at_work.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

using ::memplan::base::testing::MostAtOnce;

// Every chunk runs exactly once, whatever the pool.
void ExpectEachChunkOnce(const Parallelism& parallel, int chunks) {
  std::vector<std::atomic<int>> runs(chunks);
  ParallelFor(parallel, chunks, [&](int c) { runs[c].fetch_add(1); });
  for (int c = 0; c < chunks; ++c) EXPECT_EQ(runs[c].load(), 1) << c;
}

TEST(ParallelTest, RunsEachChunkOnceWithAndWithoutWorkers) {
  ExpectEachChunkOnce({nullptr, 8}, 100);
  WorkerPool pool(4, 64);
  ExpectEachChunkOnce({&pool, 1}, 100);
  ExpectEachChunkOnce({&pool, 3}, 100);
  ExpectEachChunkOnce({&pool, 64}, 1000);
  ExpectEachChunkOnce({&pool, 64}, 0);
}

// Ranges cover [0, n) once, cut by the chunk size alone.
TEST(ParallelTest, RangesCoverEachItemOnceInFixedChunks) {
  WorkerPool pool(4, 64);
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{99}, size_t{100}, size_t{1001}}) {
    for (WorkerPool* workers : {(WorkerPool*)nullptr, &pool}) {
      std::vector<std::atomic<int>> seen(n);
      std::vector<std::pair<size_t, size_t>> ranges(ChunkCount(n, 100));
      ParallelForRange({workers, 4}, n, 100,
                       [&](int c, size_t begin, size_t end) {
                         ranges[c] = {begin, end};
                         for (size_t i = begin; i < end; ++i) ++seen[i];
                       });
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
      for (size_t c = 0; c < ranges.size(); ++c) {
        EXPECT_EQ(ranges[c].first, c * 100);
        EXPECT_EQ(ranges[c].second, std::min(n, c * 100 + 100));
      }
    }
  }
}

TEST(ParallelTest, HelpersAreBoundedByTheLimitAndThePool) {
  WorkerPool pool(4, 64);
  EXPECT_EQ((Parallelism{&pool, 1}).helpers(), 0);
  EXPECT_EQ((Parallelism{&pool, 3}).helpers(), 2);
  EXPECT_EQ((Parallelism{&pool, 16}).helpers(), 4);
  EXPECT_EQ((Parallelism{nullptr, 16}).helpers(), 0);
}

TEST(UsableCoresTest, FollowsTheAffinityMask) {
  const int cores = UsableCores();
  EXPECT_GE(cores, 1);
  {
    testing::OneCpu one;
    ASSERT_TRUE(one.ok());
    EXPECT_LE(cores, one.cpus_before());
    EXPECT_EQ(UsableCores(), 1);
  }
  EXPECT_EQ(UsableCores(), cores);
}

TEST(UsableCoresTest, ReadsACgroupCpuQuota) {
  EXPECT_EQ(internal::CoresOfCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(internal::CoresOfCpuMax("150000 100000"), 2);  // 1.5 CPUs
  EXPECT_EQ(internal::CoresOfCpuMax("50000 100000"), 1);
  EXPECT_EQ(internal::CoresOfCpuMax("max 100000\n"), 0);  // no limit
  for (const char* bad : {"", "100000", "-1 100000", "1 0", "a b", "1 2 3"}) {
    EXPECT_EQ(internal::CoresOfCpuMax(bad), 0) << bad;
  }
}

TEST(UsableCoresTest, TakesTheFewestCoresAlongTheCgroupPath) {
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / "usable_cores_cgroup";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "pod" / "box");
  std::filesystem::create_directories(root / "free");
  const auto write = [](const std::filesystem::path& path, const char* text) {
    std::ofstream(path) << text;
  };
  write(root / "cpu.max", "max 100000\n");
  write(root / "pod" / "cpu.max", "300000 100000\n");
  write(root / "pod" / "box" / "cpu.max", "max 100000\n");
  write(root / "free" / "cpu.max", "max 100000\n");
  const std::string r = root.string();
  // The limit two levels up holds; cgroup v1 lines are passed over.
  EXPECT_EQ(internal::CgroupQuotaCores(r, "1:name=systemd:/x\n0::/pod/box\n"),
            3);
  write(root / "pod" / "box" / "cpu.max", "100000 100000\n");
  EXPECT_EQ(internal::CgroupQuotaCores(r, "0::/pod/box\n"), 1);
  EXPECT_EQ(internal::CgroupQuotaCores(r, "0::/free\n"), 0);
  EXPECT_EQ(internal::CgroupQuotaCores(r, "0::/missing/group\n"), 0);
  EXPECT_EQ(internal::CgroupQuotaCores(r, "1:cpu:/pod/box\n"), 0);  // no v2
  write(root / "cpu.max", "200000 100000\n");  // a container's own group
  EXPECT_EQ(internal::CgroupQuotaCores(r, "0::/\n"), 2);
  std::filesystem::remove_all(root);
}

TEST(ParallelTest, NoMoreThreadsAtOnceThanTheLimit) {
  WorkerPool pool(8, 64);
  std::atomic<int> inside{0}, most{0};
  ParallelFor({&pool, 3}, 200, [&](int) {
    const int now = inside.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    for (volatile int spin = 0; spin < 20000; ++spin) {
    }
    inside.fetch_sub(1);
  });
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 1);
}

// Splits inside splits (a sort inside one of two stages run at once) take
// their threads from the outermost call's: never more at once than it
// allows, however many workers are idle and whatever the inner ones ask.
TEST(ParallelTest, NestedCallsShareTheOutermostCallsThreads) {
  WorkerPool pool(8, 256);
  std::atomic<int> inside{0}, most{0};
  std::atomic<int> runs{0};
  ParallelFor({&pool, 3}, 4, [&](int) {
    ParallelFor({&pool, 8}, 20, [&](int) {
      const int now = inside.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      absl::SleepFor(absl::Milliseconds(1));  // time for helpers to join
      inside.fetch_sub(1);
      runs.fetch_add(1);
    });
  });
  EXPECT_EQ(runs.load(), 80);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 1);
  // The places come back: a later call has its helpers again.
  std::atomic<int> later{0};
  ParallelFor({&pool, 3}, 100, [&](int) { later.fetch_add(1); });
  EXPECT_EQ(later.load(), 100);
}

// A request's budget holds across a side task: a split made beside it
// (RunTogether of 2 threads, the side task on the worker) takes the
// budget's other places, never more.
TEST(ParallelTest, ABudgetGivesTheMainWorkThePlacesTheSideTaskLeaves) {
  WorkerPool pool(8, 256);
  for (bool budget : {false, true}) {
    std::optional<ThreadBudget> threads;
    if (budget) threads.emplace(Parallelism{&pool, 4});  // caller and 3
    absl::Notification side_started;
    std::atomic<bool> side_done{false};
    int most = 0;
    RunTogether({&pool, 2}, [&](int thread) {
      if (thread > 0) {  // the side task, until the split is done
        side_started.Notify();
        while (!side_done.load()) absl::SleepFor(absl::Milliseconds(1));
        return;
      }
      // The side task holds its place before the split asks for any.
      const bool started =
          side_started.WaitForNotificationWithTimeout(absl::Seconds(10));
      if (started) most = MostAtOnce({&pool, 8}, 3);
      side_done = true;
      ASSERT_TRUE(started);
    });
    if (budget) {
      EXPECT_EQ(most, 3) << "the caller and the 2 places left";
    } else {
      EXPECT_EQ(most, 1) << "the outermost call's one place is the side's";
    }
  }
}

// A split that starts while its request's one place is a side task's
// runs on the caller alone; with Recruit::kAsPlacesFree it takes the place
// once the side task ends (the way ParallelFor and the windowed passes
// split), with kAtStart it never does.
TEST(ParallelTest, ASplitTakesAPlaceThatComesFreeWhileItRuns) {
  WorkerPool pool(4, 64);
  const ThreadBudget threads(Parallelism{&pool, 2});  // the caller and 1
  for (Recruit recruit : {Recruit::kAtStart, Recruit::kAsPlacesFree}) {
    absl::Notification side_started;
    std::atomic<bool> split_started{false};
    std::atomic<int> next{0};
    absl::Mutex mu;
    std::set<int> seen;  // the split's thread numbers
    RunTogether({&pool, 2}, [&](int thread) {
      if (thread > 0) {  // the side task: ends once the split has begun
        side_started.Notify();
        while (!split_started.load()) absl::SleepFor(absl::Milliseconds(1));
        return;
      }
      if (!side_started.WaitForNotificationWithTimeout(absl::Seconds(10))) {
        split_started = true;  // a side task starting late ends at once
        FAIL() << "the side task never started";
      }
      const Parallelism split{&pool, 2};
      RunTogether(
          split,
          [&](int t) {
            while (!ShouldYield(split, t)) {
              if (next.fetch_add(1) >= 300) return;  // at most 600 ms
              split_started = true;
              {
                absl::MutexLock lock(&mu);
                seen.insert(t);
              }
              absl::SleepFor(absl::Milliseconds(2));
            }
          },
          recruit);
    });
    if (recruit == Recruit::kAtStart) {
      EXPECT_EQ(seen, std::set<int>({0})) << "no place was free at its start";
    } else {
      EXPECT_EQ(seen, std::set<int>({0, 1})) << "the side's place, once free";
    }
  }
}

TEST(ParallelTest, FullPoolRunsEverythingOnTheCaller) {
  WorkerPool pool(1, 1);
  absl::Notification release, started;
  ASSERT_TRUE(pool.TrySchedule([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  ASSERT_TRUE(pool.TrySchedule([] {}));  // the queue is now full
  ExpectEachChunkOnce({&pool, 4}, 50);
  release.Notify();
}

TEST(ParallelTest, NestedCallsFromWorkersDoNotDeadlock) {
  WorkerPool pool(2, 4);
  std::atomic<int> total{0};
  ParallelFor({&pool, 8}, 16, [&](int) {
    ParallelFor({&pool, 8}, 16, [&](int) { total.fetch_add(1); });
  });
  EXPECT_EQ(total.load(), 256);
}

TEST(ParallelTest, WorkersStartingLateRunNothing) {
  WorkerPool pool(1, 8);
  absl::Notification release, started;
  ASSERT_TRUE(pool.TrySchedule([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  // The only worker is busy: the helper queued now starts after the call.
  int calls = 0;
  RunTogether({&pool, 2}, [&](int thread) {
    EXPECT_EQ(thread, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  release.Notify();
}

// The parallel radix sort gives the order of the plain one (stable).
TEST(ParallelTest, RadixSortOnWorkersIsTheStableOrder) {
  std::vector<std::pair<int64_t, int>> items(300000);
  uint64_t state = 1;
  for (size_t i = 0; i < items.size(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    items[i] = {static_cast<int64_t>(state >> 40) % 5000 - 2500,
                static_cast<int>(i)};
  }
  const auto key = [](const std::pair<int64_t, int>& p) {
    return SignedKey(p.first);
  };
  std::vector<std::pair<int64_t, int>> want = items;
  ASSERT_TRUE(RadixSortOrCancel(&want, key, nullptr));
  ASSERT_TRUE(std::is_sorted(want.begin(), want.end()));  // ties by index
  WorkerPool pool(3, 64);
  std::vector<std::pair<int64_t, int>> got = items;
  ASSERT_TRUE(RadixSortOrCancel(&got, key, nullptr, {&pool, 4}));
  EXPECT_EQ(got, want);
}

// Around the length where RadixSortOrCancel moves from std::stable_sort
// to the radix passes, and at the lengths of small requests, the order is
// the stable one: by key, ties in their first order (keys of one byte,
// of two, and negative).
TEST(ParallelTest, RadixSortOfShortListsIsTheStableOrder) {
  uint64_t state = 7;
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, kRadixSortFrom - 1,
                   kRadixSortFrom, kRadixSortFrom + 1, size_t{193}, size_t{255},
                   size_t{256}, size_t{600}}) {
    for (int64_t range : {int64_t{7}, int64_t{300}, int64_t{70000}}) {
      std::vector<std::pair<int64_t, int>> items(n);
      for (size_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        items[i] = {static_cast<int64_t>(state >> 33) % range - range / 3,
                    static_cast<int>(i)};
      }
      std::vector<std::pair<int64_t, int>> got = items;
      ASSERT_TRUE(RadixSortOrCancel(
          &got, [](const auto& p) { return SignedKey(p.first); }, nullptr));
      // (key, first position) pairs are distinct: sorting them whole is
      // the stable order by key.
      std::sort(items.begin(), items.end());
      ASSERT_EQ(got, items) << n << " items, keys in " << range;
    }
  }
}

}  // namespace
}  // namespace memplan::base
