// Cancellation of the long loops of the heuristics, the indexes and the
// verifier (issue 10): a call cancelled mid-run returns DEADLINE_EXCEEDED
// soon after, set-up (sorting, index building) included. Inputs are sized
// to run for seconds uncancelled; the margins are generous (a loaded
// 2-core machine), the promise being 50 ms.
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sort.h"
#include "base/worker_pool.h"
#include "gtest/gtest.h"
#include "planner/greedy.h"
#include "planner/interference.h"
#include "planner/liveness.h"
#include "planner/shared_objects.h"
#include "planner/testing/random_problems.h"
#include "planner/validate.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

// Cancels `token` after `delay` from a thread, and remembers when.
class Canceller {
 public:
  Canceller(base::CancelToken* token, absl::Duration delay)
      : thread_([this, token, delay] {
          absl::SleepFor(delay);
          at_ = absl::Now();
          token->Cancel();
          done_ = true;
        }) {}
  ~Canceller() {
    if (thread_.joinable()) thread_.join();
  }
  // How long after the cancellation `now` is (zero if not cancelled yet).
  absl::Duration Since(absl::Time now) {
    thread_.join();
    return done_ ? now - at_ : absl::ZeroDuration();
  }

 private:
  absl::Time at_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Generous: the promise is 50 ms on an idle machine (the merged placement
// below stops in 4-6 ms in release, 30-60 ms under ASan).
constexpr absl::Duration kMargin = absl::Milliseconds(500);

// `n` buffers sharing one lifetime (not the whole schedule, which would
// stack them): quadratic for a scan of overlaps.
Problem OneLifetime(int n) {
  Problem p;
  p.buffers.reserve(n + 1);
  for (int i = 0; i < n; ++i) {
    p.buffers.push_back({"b" + std::to_string(i), 0, 10, 64 + 64 * (i % 5)});
  }
  p.buffers.push_back({"after", 10, 11, 64});
  return p;
}

// Long lifetimes with staggered ends: many sections, heavy overlap.
Problem Staggered(int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  p.buffers.reserve(n);
  for (int i = 0; i < n; ++i) {
    const Step start = static_cast<Step>(rng() % (n * 6 / 10));
    const Step end = std::min<Step>(
        n, start + n * 4 / 10 + static_cast<Step>(rng() % (n * 6 / 10)));
    p.buffers.push_back({"s" + std::to_string(i), start, end,
                         1 + static_cast<Bytes>(rng() % 4096), 64});
  }
  return p;
}

TEST(CancelTest, ScanPlacementStopsSoonAfterCancel) {
  const Problem p = OneLifetime(40000);  // seconds of scanning
  const std::vector<int> order = GreedyPlacementOrder(p, GreedyOrder::kSize);
  base::CancelToken token;
  Canceller canceller(&token, absl::Milliseconds(50));
  absl::StatusOr<Solution> s =
      PlaceInOrder(p, order, FitPolicy::kBestFit, &token, OverlapSearch::kScan);
  const absl::Duration late = canceller.Since(absl::Now());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(late, kMargin);
}

TEST(CancelTest, MergedPlacementStopsSoonAfterCancel) {
  const Problem p = Staggered(150000, 3);
  const std::vector<int> order = GreedyPlacementOrder(p, GreedyOrder::kSize);
  base::CancelToken token;
  Canceller canceller(&token, absl::Milliseconds(50));
  absl::StatusOr<Solution> s = PlaceInOrder(p, order, FitPolicy::kFirstFit,
                                            &token, OverlapSearch::kMerged);
  const absl::Duration late = canceller.Since(absl::Now());
  std::printf("  stopped %s after the cancel\n",
              absl::FormatDuration(late).c_str());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(late, kMargin);
}

TEST(CancelTest, SharedObjectColoringStopsSoonAfterCancel) {
  const Problem p = Staggered(150000, 4);
  base::CancelToken token;
  Canceller canceller(&token, absl::Milliseconds(50));
  absl::StatusOr<SharedObjects> objects = ColorSharedObjects(p, &token);
  const absl::Duration late = canceller.Since(absl::Now());
  EXPECT_EQ(objects.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(late, kMargin);
}

TEST(CancelTest, SortingStopsSoonAfterCancel) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> values(4'000'000);
  for (uint64_t& v : values) v = rng();
  base::CancelToken token;
  Canceller canceller(&token, absl::Milliseconds(20));
  const bool sorted =
      base::SortOrCancel(values.begin(), values.end(), std::less<>(), &token);
  const absl::Duration late = canceller.Since(absl::Now());
  EXPECT_FALSE(sorted);  // 4M values take longer than 20 ms to sort
  EXPECT_LT(late, kMargin);
}

TEST(CancelTest, EveryStageReturnsAtOnceWhenAlreadyCancelled) {
  const Problem p = Staggered(4000, 6);
  base::CancelToken token;
  token.Cancel();
  EXPECT_EQ(
      GreedyPlacementOrder(p, GreedyOrder::kBreadth, &token).status().code(),
      absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kSize),
                         FitPolicy::kBestFit, &token)
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ColorSharedObjects(p, &token).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // The stage is named: the coloring's order comes from greedy placement's
  // sort, whose own error would name the placement.
  const absl::Status colored =
      ColorSharedObjects(p, *BuildInterferenceGraph(p, 1 << 30), &token)
          .status();
  EXPECT_EQ(colored.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(colored.message().find("shared object coloring"),
            std::string_view::npos)
      << colored;
  EXPECT_EQ(BuildInterferenceGraph(p, 1 << 30, &token).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  const absl::StatusOr<Solution> plan =
      PlaceInOrder(p, GreedyPlacementOrder(p, GreedyOrder::kSize),
                   FitPolicy::kBestFit, nullptr);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(Verify(p, *plan).ok());
  EXPECT_EQ(Verify(p, *plan, &token).code(),
            absl::StatusCode::kDeadlineExceeded);
  // A cached plan's checks and a buffer list's, each polled on its own.
  const absl::StatusOr<SharedObjects> objects = ColorSharedObjects(p);
  ASSERT_TRUE(objects.ok());
  EXPECT_TRUE(VerifySharedObjects(p, *objects).ok());
  EXPECT_EQ(VerifySharedObjects(p, *objects, &token).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(ValidateProblem(p, {}, nullptr).ok());
  EXPECT_EQ(ValidateProblem(p, {}, &token).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(CancelTest, GraphLivenessReturnsAtOnceWhenAlreadyCancelled) {
  const Graph g = testing::RandomGraph(400, 9);
  base::CancelToken token;
  token.Cancel();
  EXPECT_TRUE(
      AnalyzeLiveness(g, 64, nullptr, IoPolicy::kRuntime, nullptr).ok());
  EXPECT_EQ(AnalyzeLiveness(g, 64, nullptr, IoPolicy::kRuntime, &token)
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
}

// On the request's threads (a graph large enough to split: the two name
// sets at once, the lookups and the buffers in chunks) a call cancelled
// mid-liveness returns DEADLINE_EXCEEDED soon after, and at once when
// cancelled before.
TEST(CancelTest, GraphLivenessOnThreadsStopsSoonAfterTheCancel) {
  const Graph g = testing::RandomGraph(300000, 4);
  base::WorkerPool pool(3, 64);
  {
    base::CancelToken token;
    Canceller canceller(&token, absl::Milliseconds(5));
    const absl::StatusOr<Problem> p =
        AnalyzeLiveness(g, 64, nullptr, IoPolicy::kRuntime, &token, {&pool, 4});
    const absl::Time end = absl::Now();
    EXPECT_EQ(p.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_LT(canceller.Since(end), kMargin);
  }
  base::CancelToken cancelled;
  cancelled.Cancel();
  EXPECT_EQ(AnalyzeLiveness(g, 64, nullptr, IoPolicy::kRuntime, &cancelled,
                            {&pool, 4})
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace memplan::planner
