// AdoptGraphPlan / AdoptBuffersPlan: a plan's choices, kept apart from its
// problem (what the plan cache stores), give back the very plan for the
// same request, under any names, and are refused (DATA_LOSS) as soon as
// anything in them is wrong.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

// Every field a response reports, compared.
void ExpectSamePlan(const PlanResult& a, const PlanResult& b) {
  EXPECT_EQ(a.solution.offsets, b.solution.offsets);
  EXPECT_EQ(a.solution.arena_size, b.solution.arena_size);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.proven_optimal, b.proven_optimal);
  EXPECT_EQ(a.lower_bound, b.lower_bound);
  EXPECT_EQ(a.unaligned_lower_bound, b.unaligned_lower_bound);
  EXPECT_EQ(a.naive_bytes, b.naive_bytes);
  EXPECT_EQ(a.weights_bytes, b.weights_bytes);
  EXPECT_EQ(a.shared_objects.object_of, b.shared_objects.object_of);
  EXPECT_EQ(a.shared_objects.size, b.shared_objects.size);
  EXPECT_EQ(a.memory_space_of, b.memory_space_of);
  ASSERT_EQ(a.memory_spaces.size(), b.memory_spaces.size());
  for (size_t k = 0; k < a.memory_spaces.size(); ++k) {
    EXPECT_EQ(a.memory_spaces[k].arena_size, b.memory_spaces[k].arena_size);
    EXPECT_EQ(a.memory_spaces[k].lower_bound, b.memory_spaces[k].lower_bound);
    EXPECT_EQ(a.memory_spaces[k].strategy, b.memory_spaces[k].strategy);
    EXPECT_EQ(a.memory_spaces[k].buffers, b.memory_spaces[k].buffers);
  }
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    EXPECT_EQ(a.tensors[t].kind, b.tensors[t].kind);
    EXPECT_EQ(a.tensors[t].buffer, b.tensors[t].buffer);
    EXPECT_EQ(a.tensors[t].start, b.tensors[t].start);
    EXPECT_EQ(a.tensors[t].end, b.tensors[t].end);
  }
  EXPECT_FALSE(b.time_limited);
}

// A random graph with some ops writing in place.
Graph GraphWithInPlace(int ops, uint32_t seed) {
  Graph g = testing::RandomGraph(ops, seed);
  for (size_t i = 0; i < g.ops.size(); i += 3) g.ops[i].in_place = true;
  return g;
}

// The options the plans below are made with: each changes the plan.
std::vector<PlanOptions> OptionVariants() {
  std::vector<PlanOptions> out(9);
  out[1].strategy = "best_fit_lifetime";
  out[2].optimize = true;
  out[2].effort = 2000;
  out[2].time_budget = absl::Seconds(60);
  out[3].strategy = "sweep_best_fit";
  out[4].weights_in_arena = true;
  out[4].io = IoPolicy::kKeepInputs;
  out[5].io = IoPolicy::kExclude;
  out[5].alignment = 256;
  out[6].memory_spaces = {{"sram", 64 << 10}, {"dram", 0}};
  out[7].strategy = "hill_climb";
  out[7].effort = 500;
  out[7].time_budget = absl::Seconds(60);
  out[8].memory_spaces = {{"all", 0}};  // one pool: it may reach the bound
  return out;
}

TEST(AdoptTest, GraphChoicesGiveTheSamePlan) {
  int compared = 0, pools_at_the_bound = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const Graph graph = GraphWithInPlace(40 + 10 * seed, seed);
    for (const PlanOptions& options : OptionVariants()) {
      absl::StatusOr<PlanResult> planned =
          PlanGraph(graph, options, nullptr, nullptr);
      ASSERT_TRUE(planned.ok()) << planned.status();
      ASSERT_FALSE(planned->time_limited);
      absl::StatusOr<PlanResult> adopted =
          AdoptGraphPlan(graph, options, ChoicesOf(*planned), nullptr);
      ASSERT_TRUE(adopted.ok()) << adopted.status() << " seed " << seed;
      ExpectSamePlan(*planned, *adopted);
      ++compared;
      if (!options.memory_spaces.empty() && planned->proven_optimal) {
        ++pools_at_the_bound;
      }
    }
  }
  EXPECT_EQ(compared, 12 * 9);
  // Pools at the bound are proven optimal, planned or adopted alike (a
  // cached plan's flag is the planned one's).
  EXPECT_GT(pools_at_the_bound, 0);
}

TEST(AdoptTest, BufferChoicesGiveTheSamePlan) {
  for (uint32_t seed = 0; seed < 10; ++seed) {
    Problem problem = seed % 2 ? testing::DenseProblem(120, seed, 8)
                               : testing::RandomProblem(300, seed, 64);
    problem.buffers[3].fixed_offset = 0;
    problem.buffers[3].start = 0;
    problem.buffers[3].end = 1;
    for (const PlanOptions& options : OptionVariants()) {
      if (!options.memory_spaces.empty()) continue;  // not with pins
      absl::StatusOr<PlanResult> planned =
          PlanBuffers(problem, options, nullptr, nullptr);
      ASSERT_TRUE(planned.ok()) << planned.status();
      absl::StatusOr<PlanResult> adopted =
          AdoptBuffersPlan(problem, options, ChoicesOf(*planned), nullptr);
      ASSERT_TRUE(adopted.ok()) << adopted.status() << " seed " << seed;
      ExpectSamePlan(*planned, *adopted);
    }
  }
}

// A list large enough for the workers (the stages' parallel size): on
// three of them the adopted plan is the same, and a plan two of whose
// buffers overlap is still refused.
TEST(AdoptTest, LargeListsAreCheckedOnTheWorkers) {
  const Problem problem = testing::RandomProblem(40000, 5, 64);
  PlanOptions options;
  options.strategy = "best_fit_size";
  options.max_threads = kDefaultMaxThreads;  // 3 workers on any machine
  base::WorkerPool workers(3, 16);
  absl::StatusOr<PlanResult> planned =
      PlanBuffers(problem, options, &workers, nullptr);
  ASSERT_TRUE(planned.ok()) << planned.status();
  absl::StatusOr<PlanResult> adopted = AdoptBuffersPlan(
      problem, options, ChoicesOf(*planned), nullptr, &workers);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ExpectSamePlan(*planned, *adopted);
  // Two buffers live together, one moved onto the other.
  const auto live_together = [&](size_t x, size_t y) {
    return problem.buffers[x].start < problem.buffers[y].end &&
           problem.buffers[y].start < problem.buffers[x].end;
  };
  size_t a = 0, b = 1;
  while (b + 1 < problem.buffers.size() && !live_together(a, b)) ++b;
  ASSERT_TRUE(live_together(a, b));
  PlanChoices bad = ChoicesOf(*planned);
  bad.solution.offsets[b] = bad.solution.offsets[a];
  absl::StatusOr<PlanResult> refused =
      AdoptBuffersPlan(problem, options, std::move(bad), nullptr, &workers);
  EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
}

// A renamed copy of the graph (same structure, other names) takes the same
// choices and reports its own names.
TEST(AdoptTest, RenamedGraphKeepsItsNames) {
  const Graph graph = GraphWithInPlace(60, 7);
  Graph renamed = graph;
  auto rename = [](std::string* name) { *name = "renamed/" + *name; };
  for (Tensor& t : renamed.tensors) rename(&t.name);
  for (Op& op : renamed.ops) {
    rename(&op.name);
    for (std::string& n : op.inputs) rename(&n);
    for (std::string& n : op.outputs) rename(&n);
  }
  for (std::string& n : renamed.inputs) rename(&n);
  for (std::string& n : renamed.outputs) rename(&n);
  const PlanOptions options;
  absl::StatusOr<PlanResult> planned =
      PlanGraph(graph, options, nullptr, nullptr);
  ASSERT_TRUE(planned.ok());
  absl::StatusOr<PlanResult> adopted =
      AdoptGraphPlan(renamed, options, ChoicesOf(*planned), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ExpectSamePlan(*planned, *adopted);
  for (size_t t = 0; t < adopted->tensors.size(); ++t) {
    EXPECT_EQ(adopted->tensors[t].name, renamed.tensors[t].name);
    if (!planned->tensors[t].in_place_of.empty()) {
      EXPECT_EQ(adopted->tensors[t].in_place_of,
                "renamed/" + planned->tensors[t].in_place_of);
    }
  }
}

// Two buffers live together, for the poisoning tests below.
std::pair<int, int> LiveTogether(const PlanResult& plan) {
  const auto& b = plan.problem.buffers;
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (LifetimesOverlap(b[i], b[j])) {
        return {static_cast<int>(i), static_cast<int>(j)};
      }
    }
  }
  return {-1, -1};
}

class PoisonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    problem_ = testing::RandomProblem(200, 3, 64);
    absl::StatusOr<PlanResult> planned =
        PlanBuffers(problem_, options_, nullptr, nullptr);
    ASSERT_TRUE(planned.ok());
    plan_ = *std::move(planned);
    good_ = ChoicesOf(plan_);
    pair_ = LiveTogether(plan_);
    ASSERT_GE(pair_.first, 0);
  }
  // The status of adopting `choices` for the same problem.
  absl::Status Adopt(PlanChoices choices) {
    return AdoptBuffersPlan(problem_, options_, std::move(choices), nullptr)
        .status();
  }

  Problem problem_;
  PlanOptions options_;
  PlanResult plan_;
  PlanChoices good_;
  std::pair<int, int> pair_;
};

TEST_F(PoisonTest, GoodChoicesPass) { EXPECT_TRUE(Adopt(good_).ok()); }

TEST_F(PoisonTest, OverlappingTensorsAreRefused) {
  // A consistent forgery: the smaller of two buffers live together moved
  // onto the larger, the arena fitted to the result.
  PlanChoices bad = good_;
  auto [big, small] = pair_;
  if (problem_.buffers[small].size > problem_.buffers[big].size) {
    std::swap(big, small);
  }
  bad.solution.offsets[small] = bad.solution.offsets[big];
  bad.solution.arena_size = 0;
  for (size_t i = 0; i < problem_.buffers.size(); ++i) {
    bad.solution.arena_size =
        std::max(bad.solution.arena_size,
                 bad.solution.offsets[i] + problem_.buffers[i].size);
  }
  absl::Status s = Adopt(bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
}

TEST_F(PoisonTest, MisalignedOffsetIsRefused) {
  PlanChoices bad = good_;
  bad.solution.offsets[0] += 8;
  EXPECT_TRUE(absl::IsDataLoss(Adopt(bad)));
}

TEST_F(PoisonTest, OffsetsOutOfRangeAreRefusedWithoutOverflow) {
  for (Offset o : {Offset{-64}, std::numeric_limits<Offset>::max() - 63,
                   std::numeric_limits<Offset>::min()}) {
    PlanChoices bad = good_;
    bad.solution.offsets[1] = o;
    EXPECT_TRUE(absl::IsDataLoss(Adopt(bad))) << o;
  }
  PlanChoices huge = good_;
  huge.solution.arena_size = std::numeric_limits<Bytes>::max();
  EXPECT_TRUE(absl::IsDataLoss(Adopt(huge)));
}

TEST_F(PoisonTest, WrongArenaOrCountsAreRefused) {
  PlanChoices bigger = good_;
  bigger.solution.arena_size += 64;
  EXPECT_TRUE(absl::IsDataLoss(Adopt(bigger)));
  PlanChoices truncated = good_;
  truncated.solution.offsets.pop_back();
  EXPECT_TRUE(absl::IsDataLoss(Adopt(truncated)));
  PlanChoices objects = good_;
  objects.shared_objects.object_of.pop_back();
  EXPECT_TRUE(absl::IsDataLoss(Adopt(objects)));
}

TEST_F(PoisonTest, SharedObjectsOfLiveTogetherBuffersAreRefused) {
  PlanChoices bad = good_;
  SharedObjects& o = bad.shared_objects;
  const int moved_from = o.object_of[pair_.second];
  o.object_of[pair_.second] = o.object_of[pair_.first];
  // Keep every object used and as large as its largest member, so that
  // only the lifetimes are wrong: renumber past an object left empty.
  if (std::count(o.object_of.begin(), o.object_of.end(), moved_from) == 0) {
    for (int& p : o.object_of) p -= p > moved_from;
    o.size.erase(o.size.begin() + moved_from);
  }
  std::fill(o.size.begin(), o.size.end(), 0);
  for (size_t i = 0; i < o.object_of.size(); ++i) {
    o.size[o.object_of[i]] =
        std::max(o.size[o.object_of[i]], problem_.buffers[i].size);
  }
  absl::Status s = Adopt(bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("live together"));
}

TEST_F(PoisonTest, UnknownStrategyIsRefused) {
  PlanChoices bad = good_;
  bad.strategy = "attacker_label";
  EXPECT_TRUE(absl::IsDataLoss(Adopt(bad)));
}

TEST_F(PoisonTest, CapacityIsKept) {
  options_.capacity = plan_.solution.arena_size - 1;
  EXPECT_TRUE(absl::IsDataLoss(Adopt(good_)));
}

TEST(AdoptTest, MalformedRequestIsInvalidNotDataLoss) {
  Graph graph = testing::RandomGraph(10, 1);
  const PlanOptions options;
  absl::StatusOr<PlanResult> planned =
      PlanGraph(graph, options, nullptr, nullptr);
  ASSERT_TRUE(planned.ok());
  graph.ops[2].inputs.push_back("nowhere");
  EXPECT_TRUE(absl::IsInvalidArgument(
      AdoptGraphPlan(graph, options, ChoicesOf(*planned), nullptr).status()));
}

}  // namespace
}  // namespace memplan::planner
