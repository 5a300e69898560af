#include "engine/benchmark.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::engine {
namespace {

using ::testing::HasSubstr;

// x -> a -> b -> y with a weight: a and b can share, so the static plan
// beats allocators that keep what they have freed.
v1::BenchmarkRequest ChainGraph() {
  v1::BenchmarkRequest r;
  v1::Graph* g = r.mutable_graph();
  g->set_name("chain");
  const char* names[] = {"x", "w", "a", "b", "c", "y"};
  const int sizes[] = {4096, 1024, 65536, 65536, 65536, 4096};
  for (int i = 0; i < 6; ++i) {
    v1::Tensor* t = g->add_tensors();
    t->set_name(names[i]);
    t->set_size_bytes(sizes[i]);
  }
  auto op = [&](const char* name, std::vector<const char*> in,
                const char* out) {
    v1::Op* o = g->add_ops();
    o->set_name(name);
    for (const char* i : in) o->add_inputs(i);
    o->add_outputs(out);
  };
  op("f", {"x", "w"}, "a");
  op("g", {"a"}, "b");
  op("h", {"b"}, "c");
  op("k", {"c"}, "y");
  g->add_inputs("x");
  g->add_outputs("y");
  return r;
}

// The static plan alone, in a "fast" pool of `fast_bytes` and an
// unbounded "slow" one.
void StaticPlanInTwoPools(v1::BenchmarkRequest* r, int64_t fast_bytes) {
  r->add_allocators("static_plan");
  v1::MemoryPool* fast = r->mutable_options()->add_memory_pools();
  fast->set_name("fast");
  fast->set_capacity_bytes(fast_bytes);
  r->mutable_options()->add_memory_pools()->set_name("slow");
}

class BenchmarkTest : public ::testing::Test {
 protected:
  absl::StatusOr<v1::BenchmarkResponse> Run(const v1::BenchmarkRequest& r,
                                            BenchmarkLimits limits = {}) {
    std::vector<std::string> seen;
    figures_.clear();
    auto result = RunBenchmark(
        r, limits, nullptr, &cancel_,
        [&](const std::string& name, const allocators::ReplayResult& f) {
          seen.push_back(name);
          figures_[name] = f;
        });
    observed_ = seen;
    return result;
  }
  // What the metrics get (the observer) is what the response says.
  void ExpectObservedAsTheRows(const v1::BenchmarkResponse& r) {
    EXPECT_EQ(observed_.size(), static_cast<size_t>(r.rows_size()));
    for (const v1::AllocatorFigures& row : r.rows()) {
      const allocators::ReplayResult& f = figures_[row.allocator()];
      EXPECT_EQ(f.peak_bytes_in_use, row.peak_bytes_in_use())
          << row.allocator();
      EXPECT_EQ(f.peak_bytes_reserved, row.peak_bytes_reserved())
          << row.allocator();
      EXPECT_DOUBLE_EQ(f.fragmentation_at_peak, row.fragmentation_at_peak())
          << row.allocator();
      EXPECT_EQ(f.allocations, row.allocations()) << row.allocator();
    }
  }
  base::CancelToken cancel_;
  std::vector<std::string> observed_;
  std::map<std::string, allocators::ReplayResult> figures_;
};

TEST_F(BenchmarkTest, GraphRowsForEveryAllocatorAndTheStaticPlan) {
  absl::StatusOr<v1::BenchmarkResponse> r = Run(ChainGraph());
  ASSERT_TRUE(r.ok()) << r.status();
  const int rows = static_cast<int>(DefaultBenchmarkAllocators().size());
  ASSERT_EQ(r->rows_size(), rows);
  // The weight w stays in the model: 5 allocations, 5 frees.
  EXPECT_EQ(r->trace_events(), 10);
  // Live at once at most: two of a, b, c (x dies after f at step 0, y is
  // born at k at step 3, each beside one of them).
  EXPECT_EQ(r->lower_bound_bytes(), 2 * 65536);
  const v1::AllocatorFigures& plan = r->rows(rows - 1);
  EXPECT_EQ(plan.allocator(), "static_plan");
  EXPECT_EQ(plan.peak_bytes_reserved(), r->arena_size_bytes());
  EXPECT_EQ(plan.allocations(), 5);
  EXPECT_EQ(r->arena_allocator(), "bfc");
  for (const v1::AllocatorFigures& row : r->rows()) {
    EXPECT_EQ(row.failures(), 0) << row.allocator();
    EXPECT_EQ(row.allocations(), 5) << row.allocator();
    EXPECT_GE(row.peak_bytes_in_use(), r->lower_bound_bytes())
        << row.allocator();
    EXPECT_GE(row.peak_bytes_reserved(), r->arena_size_bytes())
        << row.allocator();
  }
  EXPECT_EQ(observed_.size(), static_cast<size_t>(rows));
  ExpectObservedAsTheRows(*r);
  // With memory pools the static plan is one row, observed once, with
  // every pool's arena (the metrics held the last pool's alone).
  v1::BenchmarkRequest pools = ChainGraph();
  StaticPlanInTwoPools(&pools, 65536);
  absl::StatusOr<v1::BenchmarkResponse> pooled = Run(pools);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  ASSERT_EQ(pooled->rows_size(), 1);
  ExpectObservedAsTheRows(*pooled);
  EXPECT_EQ(pooled->rows(0).peak_bytes_reserved(), pooled->arena_size_bytes());
  // A pool holding the last buffer alone replays a trace of 2 events with
  // id 39: ids are the problem's, not the pool's.
  v1::BenchmarkRequest spill;
  for (int i = 0; i < 40; ++i) {
    v1::Buffer* b = spill.add_buffers();
    b->set_id(absl::StrCat("t", i));
    b->set_start(i);
    b->set_end(i + 1);
    b->set_size(i == 39 ? 8192 : 1024);
  }
  StaticPlanInTwoPools(&spill, 4096);
  absl::StatusOr<v1::BenchmarkResponse> spilled = Run(spill);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_EQ(spilled->rows(0).allocations(), 40);
  ExpectObservedAsTheRows(*spilled);
}

// The static plan's arena can come from each arena source.
TEST_F(BenchmarkTest, StaticPlanReplaysOnEveryArenaSource) {
  for (const std::string& source : ArenaAllocatorNames()) {
    v1::BenchmarkRequest r = ChainGraph();
    r.add_allocators("static_plan");
    r.set_arena_allocator(source);
    absl::StatusOr<v1::BenchmarkResponse> out = Run(r);
    ASSERT_TRUE(out.ok()) << source << ": " << out.status();
    EXPECT_EQ(out->arena_allocator(), source);
    ASSERT_EQ(out->rows_size(), 1);
    EXPECT_EQ(out->rows(0).allocations(), 5) << source;
  }
}

TEST_F(BenchmarkTest, WeightsInTheArenaWhenAsked) {
  v1::BenchmarkRequest r = ChainGraph();
  r.mutable_options()->set_weights("arena");
  absl::StatusOr<v1::BenchmarkResponse> out = Run(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->trace_events(), 12);
  EXPECT_EQ(out->lower_bound_bytes(), 1024 + 2 * 65536);  // w whole run
}

TEST_F(BenchmarkTest, SyntheticWorkloadsRunWithAStaticPlanToo) {
  for (const char* workload : {"allocation", "allocation_delayed", "larson"}) {
    v1::BenchmarkRequest r;
    r.set_workload(workload);
    r.set_workload_size(500);
    r.add_allocators("bfc");
    r.add_allocators("static_plan");
    r.set_repetitions(3);
    absl::StatusOr<v1::BenchmarkResponse> out = Run(r);
    ASSERT_TRUE(out.ok()) << workload << ": " << out.status();
    ASSERT_EQ(out->rows_size(), 2);
    EXPECT_GT(out->rows(0).allocations(), 0);
    EXPECT_GT(out->rows(0).p99_ns(), 0);
    EXPECT_GE(out->rows(0).p99_ns(), out->rows(0).p50_ns());
    EXPECT_LE(out->arena_size_bytes(), out->rows(0).peak_bytes_reserved())
        << workload;
  }
}

TEST_F(BenchmarkTest, BadRequestsAreInvalid) {
  v1::BenchmarkRequest r = ChainGraph();
  r.add_allocators("tcmalloc");
  EXPECT_THAT(std::string(Run(r).status().message()),
              HasSubstr("unknown allocator 'tcmalloc'"));
  v1::BenchmarkRequest neither;
  EXPECT_EQ(Run(neither).status().code(), absl::StatusCode::kInvalidArgument);
  v1::BenchmarkRequest unknown;
  unknown.set_workload("random");
  EXPECT_THAT(std::string(Run(unknown).status().message()),
              HasSubstr("unknown workload 'random'"));
  v1::BenchmarkRequest negative;
  negative.set_workload("allocation");
  negative.set_workload_size(-5);
  EXPECT_THAT(std::string(Run(negative).status().message()),
              HasSubstr("workload_size -5 is negative"));
  v1::BenchmarkRequest bad_graph = ChainGraph();
  bad_graph.mutable_graph()->mutable_ops(1)->set_inputs(0, "zz");
  EXPECT_THAT(std::string(Run(bad_graph).status().message()),
              HasSubstr("unknown tensor 'zz'"));
}

TEST_F(BenchmarkTest, OverTheLimitsBeforeAnyMemoryIsTaken) {
  BenchmarkLimits limits;
  limits.max_bytes = 100000;
  absl::StatusOr<v1::BenchmarkResponse> r = Run(ChainGraph(), limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("100000"));
  EXPECT_TRUE(observed_.empty());
  limits = {};
  limits.max_ops = 20;
  EXPECT_EQ(Run(ChainGraph(), limits).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BenchmarkTest, AnAllocatorListedManyTimesRunsOnce) {
  v1::BenchmarkRequest r = ChainGraph();
  for (int i = 0; i < 20; ++i) r.add_allocators("static_plan");
  r.add_allocators("bfc");
  r.add_allocators("static_plan");
  r.add_allocators("bfc");
  absl::StatusOr<v1::BenchmarkResponse> out = Run(r);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->rows_size(), 2);
  EXPECT_EQ(out->rows(0).allocator(), "static_plan");
  EXPECT_EQ(out->rows(1).allocator(), "bfc");
  EXPECT_EQ(observed_, (std::vector<std::string>{"static_plan", "bfc"}));
}

TEST_F(BenchmarkTest, WorkloadSizeOverMaxTensorsIsRefusedBeforeAnyWork) {
  v1::BenchmarkRequest r;
  r.set_workload("allocation");
  r.set_workload_size(4999999);
  r.add_allocators("static_plan");
  BenchmarkLimits limits;
  limits.max_ops = int64_t{1} << 40;  // only the tensor limit applies
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::BenchmarkResponse> out = Run(r, limits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("max_tensors"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("4999999"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_TRUE(observed_.empty());
  limits.plan.max_tensors = 100;
  r.set_workload_size(101);
  EXPECT_EQ(Run(r, limits).status().code(),
            absl::StatusCode::kResourceExhausted);
  r.set_workload_size(100);
  EXPECT_TRUE(Run(r, limits).ok());
}

// A call whose token has fired makes no workload (issue 31: making it and
// finding its peak never looked at the token).
TEST_F(BenchmarkTest, ACancelledCallMakesNoWorkload) {
  for (const char* workload : {"allocation", "allocation_delayed", "larson"}) {
    v1::BenchmarkRequest r;
    r.set_workload(workload);
    r.set_workload_size(100000);
    cancel_.Cancel();
    absl::StatusOr<v1::BenchmarkResponse> result = Run(r);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
        << workload;
    EXPECT_THAT(result.status().message(),
                HasSubstr("making the workload cancelled"));
    EXPECT_TRUE(observed_.empty());
  }
}

}  // namespace
}  // namespace memplan::engine
