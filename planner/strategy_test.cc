#include "planner/strategy.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/greedy.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

using ::testing::Each;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST(StrategyRegistryTest, EveryRegisteredNameIsValidAndBuildsItself) {
  EXPECT_TRUE(CheckStrategyName("").ok());
  EXPECT_TRUE(CheckStrategyName("auto").ok());
  for (const std::string& name : StrategyNames()) {
    EXPECT_TRUE(CheckStrategyName(name).ok()) << name;
    absl::StatusOr<std::unique_ptr<OffsetStrategy>> s = MakeStrategy(name);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    EXPECT_EQ((*s)->name(), name);
  }
  EXPECT_EQ(StrategyNames().back(), "exact");
}

TEST(StrategyRegistryTest, GreedyNamesComeFromTheRegistry) {
  for (GreedyOrder order :
       {GreedyOrder::kSize, GreedyOrder::kLifetime, GreedyOrder::kArea,
        GreedyOrder::kConflicts, GreedyOrder::kBreadth}) {
    for (FitPolicy fit : {FitPolicy::kBestFit, FitPolicy::kFirstFit}) {
      const GreedyStrategy greedy(order, fit);
      EXPECT_EQ(greedy.name(), GreedyStrategyName(order, fit));
      EXPECT_TRUE(CheckStrategyName(greedy.name()).ok()) << greedy.name();
    }
  }
  EXPECT_EQ(GreedyStrategy(GreedyOrder::kArea, FitPolicy::kFirstFit).name(),
            "first_fit_area");
}

TEST(StrategyRegistryTest, UnknownNameIsInvalidArgumentListingValidNames) {
  const absl::Status s = CheckStrategyName("magic");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown strategy 'magic'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("auto"));
  for (const std::string& name : StrategyNames()) {
    EXPECT_THAT(std::string(s.message()), HasSubstr(name));
  }
  EXPECT_EQ(MakeStrategy("magic").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeStrategy("auto").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StrategyRegistryTest, HugeOrBinaryNamesAreCutAndEscaped) {
  const std::string huge(100'000, 'x');
  const absl::Status s = CheckStrategyName(huge);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 1000u);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(100000 bytes)"));
  const absl::Status binary = CheckStrategyName(std::string("a\0\n\x7f", 4));
  EXPECT_THAT(std::string(binary.message()), HasSubstr("'a\\x00\\n\\x7f'"));
}

TEST(StrategyRegistryTest, AutoExactAndOptimizeResolvedInOnePlace) {
  absl::StatusOr<StrategyChoice> quick = ResolveStrategy("auto", false);
  ASSERT_TRUE(quick.ok());
  EXPECT_THAT(quick->heuristics, ElementsAreArray(QuickHeuristicNames()));
  EXPECT_EQ(quick->search, SearchWhen::kAboveBound);
  EXPECT_THAT(quick->optional, Not(::testing::Contains(true)));

  EXPECT_THAT(quick->later, IsEmpty());
  EXPECT_FALSE(quick->default_steps);

  // --optimize: the quick heuristics, the default plan's steps, then the
  // other heuristics (every heuristic once, in the registry's order).
  absl::StatusOr<StrategyChoice> full = ResolveStrategy("", true);
  ASSERT_TRUE(full.ok());
  EXPECT_THAT(full->heuristics, ElementsAreArray(QuickHeuristicNames()));
  std::vector<std::string> all = full->heuristics;
  all.insert(all.end(), full->later.begin(), full->later.end());
  EXPECT_THAT(all, ElementsAreArray(HeuristicNames()));
  EXPECT_EQ(full->later.back(), "hill_climb");
  EXPECT_TRUE(full->default_steps);
  EXPECT_EQ(full->search, SearchWhen::kAlways);
  ASSERT_EQ(full->optional.size(), full->heuristics.size());
  EXPECT_FALSE(full->optional[0]);  // the plan every request gets
  for (size_t i = 1; i < full->optional.size(); ++i) {
    EXPECT_TRUE(full->optional[i]);
  }

  absl::StatusOr<StrategyChoice> exact = ResolveStrategy("exact", false);
  ASSERT_TRUE(exact.ok());
  EXPECT_THAT(exact->heuristics, ElementsAreArray(QuickHeuristicNames()));
  EXPECT_THAT(exact->optional, Each(false));
  EXPECT_EQ(exact->search, SearchWhen::kAlways);
  EXPECT_TRUE(exact->default_steps);
  EXPECT_THAT(exact->later, IsEmpty());

  absl::StatusOr<StrategyChoice> one = ResolveStrategy("best_fit_area", true);
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(one->heuristics, ElementsAreArray({"best_fit_area"}));
  EXPECT_EQ(one->search, SearchWhen::kNever);

  EXPECT_EQ(ResolveStrategy("exactly", false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StrategyRegistryTest, PlannerChecksTheNameBeforeAnyWork) {
  // The buffer list is malformed too: the strategy error comes first, so
  // no stage ran.
  Problem bad = testing::RandomProblem(10, 1);
  bad.buffers[3].size = 0;
  PlanOptions options;
  options.strategy = std::string(100'000, 'q');
  absl::StatusOr<PlanResult> r = PlanBuffers(bad, options, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown strategy"));
  EXPECT_LT(r.status().message().size(), 1000u);
  Graph g = testing::RandomGraph(5, 1);
  EXPECT_THAT(
      std::string(PlanGraph(g, options, nullptr, nullptr).status().message()),
      HasSubstr("unknown strategy"));
}

}  // namespace
}  // namespace memplan::planner
