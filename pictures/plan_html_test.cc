#include "pictures/plan_html.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pictures/testing/text.h"
#include "planner/planner.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

planner::PlanResult SmallPlan() {
  planner::Problem problem;
  problem.buffers.push_back({.name = "a", .start = 0, .end = 2, .size = 64});
  problem.buffers.push_back({.name = "b", .start = 1, .end = 3, .size = 128});
  problem.buffers.push_back({.name = "c", .start = 2, .end = 4, .size = 64});
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanBuffers(problem, {}, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

// A plan of n buffers stacked without reuse: the emitter does not plan, so
// the largest pictures can be made without the planner's cost.
planner::PlanResult SyntheticPlan(int n) {
  planner::PlanResult plan;
  std::mt19937 rng(7);
  planner::Offset offset = 0;
  for (int i = 0; i < n; ++i) {
    const planner::Step start = static_cast<planner::Step>(rng() % 20000);
    const planner::Bytes size = 64 + static_cast<planner::Bytes>(rng() % 65536);
    plan.problem.buffers.push_back(
        {.name = absl::StrCat("buffer", i),
         .start = start,
         .end = start + 1 + static_cast<planner::Step>(rng() % 200),
         .size = size});
    plan.solution.offsets.push_back(offset);
    plan.shared_objects.object_of.push_back(i % 600);
    offset += size;
  }
  plan.solution.arena_size = offset;
  plan.lower_bound = offset / 2;
  plan.strategy = "synthetic";
  return plan;
}

TEST(PlanHtmlTest, IsOneFileThatLoadsNothing) {
  const std::string html = PlanHtml(SmallPlan(), {}, {.title = "small"});
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("<style>"));
  EXPECT_THAT(html, HasSubstr("<script>"));
  // Clip paths refer to their own document (url(#clip)); nothing else.
  EXPECT_EQ(testing::Occurrences(html, "url("),
            testing::Occurrences(html, "url(#"));
  for (const char* fetch : {" src=", " href=", "@import", "fetch(",
                            "XMLHttpRequest", "<link", "<iframe", "<img"}) {
    EXPECT_THAT(html, Not(HasSubstr(fetch))) << fetch;
  }
  // The only address is the SVG namespace, which is a name, not a load.
  EXPECT_EQ(testing::Occurrences(html, "http"),
            testing::Occurrences(html, "http://www.w3.org/2000/svg"));
}

TEST(PlanHtmlTest, EmbedsEveryTensorAsColumns) {
  const planner::PlanResult plan = SmallPlan();
  const std::string html = PlanHtml(plan, {}, {.title = "small"});
  EXPECT_THAT(html, HasSubstr("\"names\":[\"a\",\"b\",\"c\"]"));
  EXPECT_THAT(html, HasSubstr("\"s\":[0,1,2]"));
  EXPECT_THAT(html, HasSubstr("\"l\":[2,2,2]"));
  EXPECT_THAT(html,
              HasSubstr(absl::StrCat(
                  "\"o\":[", absl::StrJoin(plan.solution.offsets, ","), "]")));
  EXPECT_THAT(html, HasSubstr("\"z\":[64,128,64]"));
  EXPECT_THAT(html, HasSubstr(absl::StrCat("\"svg_limit\":", kSvgRectLimit)));
  EXPECT_THAT(html,
              HasSubstr(absl::StrCat("[", plan.solution.arena_size, ",\"arena ",
                                     HumanBytes(plan.solution.arena_size),
                                     "\",\"arena\"]")));
  EXPECT_THAT(html, HasSubstr("<h1 id=\"title\">small</h1>"));
  EXPECT_THAT(html, HasSubstr(absl::StrCat("strategy ", plan.strategy)));
}

TEST(PlanHtmlTest, MemoryPoolsCarryTheirBasesAndObjects) {
  planner::Problem problem;
  problem.buffers.push_back({.name = "a", .start = 0, .end = 2, .size = 64});
  problem.buffers.push_back({.name = "b", .start = 1, .end = 3, .size = 64});
  problem.buffers.push_back({.name = "c", .start = 0, .end = 3, .size = 1024});
  planner::PlanOptions options;
  options.memory_spaces = {{"sram", 128}, {"dram", 0}};
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(problem, options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string html = PlanHtml(*plan, options, {});
  // Hover cards give offsets within a pool: the page subtracts its base.
  EXPECT_THAT(html, HasSubstr("\"bases\":[0,128]"));
  EXPECT_THAT(html, HasSubstr("\"color_names\":[\"sram\",\"dram\"]"));
  EXPECT_THAT(html, HasSubstr("\"c\":[0,0,1]"));
  EXPECT_THAT(html,
              HasSubstr(absl::StrCat("\"o\":[", plan->solution.offsets[0], ",",
                                     plan->solution.offsets[1], ",",
                                     128 + plan->solution.offsets[2], "]")));
  EXPECT_THAT(html, HasSubstr("\"obj\":["));
}

TEST(PlanHtmlTest, NamesCannotBreakOutOfTheData) {
  planner::Problem problem;
  problem.buffers.push_back({.name = "</script><script>alert(1)</script>",
                             .start = 0,
                             .end = 1,
                             .size = 8});
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(problem, {}, nullptr, nullptr);
  ASSERT_TRUE(plan.ok());
  const std::string html =
      PlanHtml(*plan, {}, {.title = "</script><b>title</b>"});
  EXPECT_EQ(testing::Occurrences(html, "</script>"),
            2);  // the data's and the code's own
  EXPECT_THAT(html, HasSubstr("&lt;/script&gt;&lt;b&gt;title"));
}

TEST(PlanHtmlTest, HundredThousandRectanglesStayWithinTheSizeBudget) {
  // 100k rectangles are drawn on a canvas from compact column arrays: at
  // most 80 bytes each.
  const std::string html = PlanHtml(SyntheticPlan(100'000), {}, {});
  EXPECT_LT(html.size(), size_t{100'000} * 80);
  EXPECT_THAT(html, HasSubstr("\"buffer99999\""));
  EXPECT_GT(100'000, kSvgRectLimit);  // so the page draws on its canvas
}

}  // namespace
}  // namespace memplan::formats
