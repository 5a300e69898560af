// The CLI's flag rules that no single command shows quickly: the plan
// call's deadline, which a long time budget extends unless --deadline is
// given (a 40 s budget would otherwise need a test of 40 s).
#include "client/cli_flags.h"

#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

namespace memplan::client {
namespace {

// Parses `args` as the words after "memplan plan".
void Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"memplan", "plan"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ASSERT_TRUE(
      ParseFlags(static_cast<int>(args.size()), argv.data(), /*first=*/2).ok());
}

TEST(PlanDeadlineTest, ThirtySecondsUnlessTheBudgetNeedsMore) {
  absl::FlagSaver saver;
  Parse({"model.onnx"});
  EXPECT_EQ(PlanDeadline(0), absl::Seconds(30));
  EXPECT_EQ(PlanDeadline(1000), absl::Seconds(30));
  EXPECT_EQ(PlanDeadline(20'000), absl::Seconds(30));
  // Longer budgets get the budget and 10 s: not cut by a deadline nobody
  // asked for.
  EXPECT_EQ(PlanDeadline(40'000), absl::Seconds(50));
  // Counted up to an hour (a budget of years is not a deadline).
  EXPECT_EQ(PlanDeadline(int64_t{1} << 50), absl::Seconds(3610));
}

TEST(PlanDeadlineTest, AGivenDeadlineHoldsWhateverTheBudget) {
  absl::FlagSaver saver;
  Parse({"--deadline=5s", "model.onnx"});
  EXPECT_EQ(PlanDeadline(1000), absl::Seconds(5));
  EXPECT_EQ(PlanDeadline(40'000), absl::Seconds(5));
  Parse({"--deadline", "2m", "model.onnx"});
  EXPECT_EQ(PlanDeadline(40'000), absl::Minutes(2));
  EXPECT_EQ(PlanDeadline(600'000), absl::Minutes(2));
}

}  // namespace
}  // namespace memplan::client
