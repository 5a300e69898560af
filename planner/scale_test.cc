// Scale and range tests of the planning pipeline (issues 10 and 13): steps
// anywhere in +-2^62, negative included, sparse lifetimes over huge spans.
// Every stage works in compressed time, so these cost what their buffer
// count says; a stage allocating per step would abort here.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/strategy.h"
#include "planner/verifier.h"

namespace memplan::planner {
namespace {

constexpr Step kHuge = Step{1} << 62;

// `n` short buffers scattered over [-2^62, 2^62], a few living 2^62 steps,
// sizes 1..4096 at alignment 64.
Problem HugeSpanProblem(int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  for (int i = 0; i < n; ++i) {
    Buffer b;
    b.name = "b" + std::to_string(i);
    const bool long_lived = i % 50 == 0;
    const Step length =
        long_lived ? kHuge : 1 + static_cast<Step>(rng() % 1000);
    b.start = -kHuge + static_cast<Step>(rng() % static_cast<uint64_t>(kHuge));
    b.end = b.start + length;  // at most 2^62: stays within the range
    b.size = 1 + static_cast<Bytes>(rng() % 4096);
    b.alignment = 64;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

// The peak live bytes by brute force over the event points.
Bytes BruteForcePeak(const Problem& p) {
  Bytes peak = 0;
  for (const Buffer& at : p.buffers) {
    Bytes live = 0;
    for (const Buffer& b : p.buffers) {
      if (b.start <= at.start && at.start < b.end) live += b.size;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(ScaleTest, HugeSpansAndNegativeStepsPlanAndKeepTheUsersSteps) {
  const Problem p = HugeSpanProblem(3000, 1);
  absl::StatusOr<PlanResult> r =
      PlanBuffers(p, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(VerifyAllPairs(r->problem, r->solution).ok());
  EXPECT_EQ(r->unaligned_lower_bound, BruteForcePeak(p));
  EXPECT_GE(r->lower_bound, r->unaligned_lower_bound);
  ASSERT_EQ(r->problem.buffers.size(), p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    EXPECT_EQ(r->problem.buffers[i].start, p.buffers[i].start);
    EXPECT_EQ(r->problem.buffers[i].end, p.buffers[i].end);
  }
  EXPECT_EQ(r->shared_objects.object_of.size(), p.buffers.size());
}

TEST(ScaleTest, EveryHeuristicPlansAHugeSpan) {
  const Problem p = HugeSpanProblem(400, 2);
  for (const std::string& name : HeuristicNames()) {
    PlanOptions options;
    options.strategy = name;
    absl::StatusOr<PlanResult> r = PlanBuffers(p, options, nullptr, nullptr);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_TRUE(VerifyAllPairs(r->problem, r->solution).ok()) << name;
  }
}

TEST(ScaleTest, AStepOf2To62AndOneBefore) {
  // The extremes MiniMalloc's CSV may carry: [-2^62, 0) and [2^62 - 1, 2^62).
  Problem p;
  p.buffers = {{"first", -kHuge, 0, 100},
               {"last", kHuge - 1, kHuge, 20},
               {"cross", -1, 1, 50},
               {"minus_one", -1, 0, 10}};
  absl::StatusOr<PlanResult> r =
      PlanBuffers(p, PlanOptions{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->unaligned_lower_bound, 160);
  EXPECT_TRUE(VerifyAllPairs(r->problem, r->solution).ok());
}

}  // namespace
}  // namespace memplan::planner
