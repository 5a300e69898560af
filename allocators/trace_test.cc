#include "allocators/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allocators/bfc_allocator.h"
#include "allocators/buffer_allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

using ::testing::HasSubstr;

// "A3" for an alloc of id 3, "F3" for a free: a compact view of a trace.
std::vector<std::string> Compact(const Trace& trace) {
  std::vector<std::string> out;
  for (const TraceEvent& e : trace.events) {
    out.push_back((e.kind == EventKind::kAlloc ? "A" : "F") +
                  std::to_string(e.id));
  }
  return out;
}

// The trace of a small graph: input(0) and weight(1) feed conv, which
// writes hidden(2) and an unused side output(3); relu reads hidden and
// writes output(4). Input, weight and output live to the end.
Trace SmallTrace() {
  Trace trace;
  trace.names = {"input", "weight", "hidden", "side", "output"};
  const int64_t sizes[] = {1000, 2000, 3000, 100, 1000};
  for (const char* event :
       {"A0", "A1", "A2", "A3", "F3", "A4", "F2", "F0", "F1", "F4"}) {
    const int id = event[1] - '0';
    trace.events.push_back(
        {event[0] == 'A' ? EventKind::kAlloc : EventKind::kFree, id,
         sizes[id]});
  }
  return trace;
}

TEST(TraceTest, NamesAndIds) {
  const Trace trace = SmallTrace();
  EXPECT_EQ(trace.NumIds(), 5);
  EXPECT_EQ(trace.TensorName(2), "tensor 'hidden' (2)");
  EXPECT_THAT(Compact(trace),
              ::testing::ElementsAre("A0", "A1", "A2", "A3", "F3", "A4", "F2",
                                     "F0", "F1", "F4"));
}

// Each id is allocated once and freed once, after it was allocated.
void ExpectWellFormed(const Trace& trace) {
  std::vector<int> state(static_cast<size_t>(trace.NumIds()), 0);
  for (const TraceEvent& e : trace.events) {
    int& s = state[static_cast<size_t>(e.id)];
    ASSERT_EQ(s, e.kind == EventKind::kAlloc ? 0 : 1) << "id " << e.id;
    ++s;
  }
  for (int s : state) EXPECT_EQ(s, 2);
}

TEST(WorkloadTest, AllocationWorkloadFreesRightAway) {
  const Trace trace = AllocationWorkload(100, 5);
  ExpectWellFormed(trace);
  ASSERT_EQ(trace.events.size(), 200u);
  for (size_t i = 0; i < 200; i += 2) {
    EXPECT_EQ(trace.events[i + 1].id, trace.events[i].id);
    EXPECT_EQ(trace.events[i + 1].kind, EventKind::kFree);
  }
  EXPECT_EQ(Compact(AllocationWorkload(100, 5)), Compact(trace));
}

TEST(WorkloadTest, DelayedFreeWorkloadFreesAfterDelay) {
  const Trace trace = DelayedFreeWorkload(50, 10);
  ExpectWellFormed(trace);
  int allocs_seen = 0;
  std::vector<int> born_at(50);
  for (const TraceEvent& e : trace.events) {
    if (e.kind == EventKind::kAlloc) {
      born_at[e.id] = allocs_seen++;
    } else if (allocs_seen < 50) {
      EXPECT_EQ(allocs_seen - born_at[e.id], 10) << "id " << e.id;
    }
  }
}

TEST(WorkloadTest, LarsonKeepsAtMostSlotsLive) {
  const Trace trace = LarsonWorkload(1000, 16, 64, 4096, 3);
  ExpectWellFormed(trace);
  int live = 0, peak = 0;
  for (const TraceEvent& e : trace.events) {
    live += e.kind == EventKind::kAlloc ? 1 : -1;
    peak = std::max(peak, live);
    EXPECT_GE(e.size, 64);
    EXPECT_LE(e.size, 4096);
  }
  EXPECT_EQ(peak, 16);
}

// The largest sum of sizes live at once.
int64_t PeakLiveBytes(const Trace& trace) {
  int64_t live = 0, peak = 0;
  for (const TraceEvent& e : trace.events) {
    live += e.kind == EventKind::kAlloc ? e.size : -e.size;
    peak = std::max(peak, live);
  }
  return peak;
}

class ReplayEveryAllocatorTest : public ::testing::TestWithParam<std::string> {
};

TEST_P(ReplayEveryAllocatorTest, ReplaysLarsonWorkload) {
  auto allocator = MakeAllocator(GetParam());
  ASSERT_TRUE(allocator.ok());
  const Trace trace = LarsonWorkload(2000, 32, 16, 65536, 9);
  absl::StatusOr<ReplayResult> r = ReplayTrace(trace, **allocator);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->allocations, 2032);
  EXPECT_EQ(r->failures, 0);
  EXPECT_GE(r->peak_bytes_in_use, PeakLiveBytes(trace));
  EXPECT_GE(r->peak_bytes_reserved, r->peak_bytes_in_use);
  EXPECT_LE(r->alloc_p50_ns, r->alloc_p99_ns);
  EXPECT_LE(r->free_p50_ns, r->free_p99_ns);
  EXPECT_GT(r->total_ns, 0);
  EXPECT_EQ((*allocator)->GetStats().bytes_in_use, 0);
}

INSTANTIATE_TEST_SUITE_P(Names, ReplayEveryAllocatorTest,
                         ::testing::ValuesIn(AllocatorNames()));

TEST(ReplayTraceTest, CountsFailuresAndSkipsTheirFrees) {
  BfcAllocator::Options options;
  options.memory_limit = 1 << 20;
  BfcAllocator bfc(options);
  Trace trace;
  trace.events = {{EventKind::kAlloc, 0, 768 << 10, 64},
                  {EventKind::kAlloc, 1, 768 << 10, 64},
                  {EventKind::kFree, 1, 768 << 10, 64},
                  {EventKind::kFree, 0, 768 << 10, 64}};
  absl::StatusOr<ReplayResult> r = ReplayTrace(trace, bfc);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allocations, 1);
  EXPECT_EQ(r->failures, 1);
  // The 1 MiB region is less than twice 768 KiB: BFC hands out all of it.
  EXPECT_EQ(r->peak_bytes_in_use, 1 << 20);
}

TEST(ReplayTraceTest, RejectsMalformedTraces) {
  BufferAllocator buffers;
  Trace twice;
  twice.events = {{EventKind::kAlloc, 0, 64, 64},
                  {EventKind::kAlloc, 0, 64, 64}};
  EXPECT_EQ(ReplayTrace(twice, buffers).status().code(),
            absl::StatusCode::kInvalidArgument);
  Trace early;
  early.events = {{EventKind::kFree, 0, 64, 64}};
  EXPECT_EQ(ReplayTrace(early, buffers).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffers.GetStats().bytes_in_use, 0);  // cleaned up
}

// A hostile trace is refused before any table is sized by its ids: an id
// of INT64_MAX overflowed NumIds (SIGSEGV), a free of id 2^40 made a
// 2^40-entry table (std::bad_alloc), an offset near INT64_MAX passed the
// arena check (SIGSEGV writing past it).
TEST(ReplayTraceTest, HostileTracesAreInvalidArgumentsBeforeAnyWork) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::pair<std::vector<TraceEvent>, std::string> cases[] = {
      {{{EventKind::kAlloc, kMax, 64, 64}}, "has an id past twice"},
      {{{EventKind::kAlloc, 0, 64, 64},
        {EventKind::kFree, int64_t{1} << 40, 64, 64}},
       "has an id past twice"},
      {{{EventKind::kAlloc, -1, 64, 64}}, "has a negative id"},
      {{{EventKind::kAlloc, 0, 0, 64}}, "has size 0"},
      {{{EventKind::kAlloc, 0, -5, 64}}, "has size -5"},
      {{{EventKind::kAlloc, 0, 64, 3}}, "has alignment 3, not a power of two"},
      {{{EventKind::kAlloc, 0, 64, 0}}, "has alignment 0"},
  };
  for (const auto& [events, message] : cases) {
    Trace trace;
    trace.events = events;
    BufferAllocator buffers;
    absl::Status dynamic = ReplayTrace(trace, buffers).status();
    EXPECT_EQ(dynamic.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(dynamic.message(), HasSubstr(message));
    EXPECT_EQ(buffers.GetStats().num_allocs, 0) << message;
    BfcAllocator bfc(BfcAllocator::Options{});
    absl::Status planned = ReplayStaticPlan(trace, {0, 0}, 4096, bfc).status();
    EXPECT_EQ(planned.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(planned.message(), HasSubstr(message));
  }
  // An offset whose end passes INT64_MAX is out of the arena.
  Trace one;
  one.events = {{EventKind::kAlloc, 0, 128, 1}, {EventKind::kFree, 0, 128, 1}};
  BfcAllocator bfc(BfcAllocator::Options{});
  absl::Status far = ReplayStaticPlan(one, {kMax - 64}, 4096, bfc).status();
  EXPECT_EQ(far.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(far.message(), HasSubstr("do not fit an arena of 4096 bytes"));
  // A free's own size is not what the replay reads: the allocation's is.
  one.events[1].size = kMax;
  EXPECT_TRUE(ReplayStaticPlan(one, {0}, 4096, bfc).ok());
}

// A correct plan for SmallGraph: input, weight and hidden are live
// together; side dies at conv, so output (born at relu) may reuse its bytes.
std::vector<int64_t> GoodOffsets() {
  // input [0, 1000), weight [1024, 3024), hidden [3072, 6072),
  // side [6144, 6244), output [6144, 7144) over side.
  return {0, 1024, 3072, 6144, 6144};
}

TEST(ReplayStaticPlanTest, CorrectPlanPasses) {
  const std::optional<Trace> trace = SmallTrace();
  BfcAllocator bfc(BfcAllocator::Options{});
  for (bool thorough : {false, true}) {
    StaticReplayOptions options;
    options.check_all_live_at_each_event = thorough;
    absl::StatusOr<ReplayResult> r =
        ReplayStaticPlan(*trace, GoodOffsets(), 7168, bfc, options);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->allocations, 5);
    EXPECT_EQ(r->peak_bytes_in_use, 7168);
  }
  EXPECT_EQ(bfc.GetStats().bytes_in_use, 0);  // arena returned
}

TEST(ReplayStaticPlanTest, OverlappingLiveTensorsAreCaught) {
  const std::optional<Trace> trace = SmallTrace();
  std::vector<int64_t> broken = GoodOffsets();
  broken[4] = 3072;  // output on hidden's bytes while hidden is read
  BfcAllocator bfc(BfcAllocator::Options{});
  for (bool thorough : {false, true}) {
    StaticReplayOptions options;
    options.check_all_live_at_each_event = thorough;
    absl::StatusOr<ReplayResult> r =
        ReplayStaticPlan(*trace, broken, 7168, bfc, options);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(r.status().message(), HasSubstr("'hidden'"));
    EXPECT_THAT(r.status().message(), HasSubstr("by tensor 'output'"));
  }
}

TEST(ReplayStaticPlanTest, SameOffsetForTwoLiveGraphInputsIsCaught) {
  const std::optional<Trace> trace = SmallTrace();
  std::vector<int64_t> broken = GoodOffsets();
  broken[1] = 0;  // weight on top of input: both live for the whole run
  BfcAllocator bfc(BfcAllocator::Options{});
  absl::StatusOr<ReplayResult> r = ReplayStaticPlan(*trace, broken, 7168, bfc);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("'input'"));
}

TEST(ReplayStaticPlanTest, RejectsBadPlacementsAndTooLargeArenas) {
  const std::optional<Trace> trace = SmallTrace();
  BfcAllocator::Options small;
  small.memory_limit = 4096;
  BfcAllocator bfc(small);
  std::vector<int64_t> offsets = GoodOffsets();
  offsets[4] = 6200;  // past the end of a 7168-byte arena
  EXPECT_THAT(ReplayStaticPlan(*trace, offsets, 7168, bfc).status().message(),
              HasSubstr("'output'"));
  offsets[4] = 6145;  // misaligned for 64
  EXPECT_EQ(ReplayStaticPlan(*trace, offsets, 7168, bfc).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplayStaticPlan(*trace, {0, 1024}, 7168, bfc).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplayStaticPlan(*trace, GoodOffsets(), 7168, bfc).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A stop hook that says "stop" from its `after`-th poll on.
ReplayOptions StopAfter(int after, int* polls) {
  ReplayOptions options;
  options.should_stop = [after, polls] { return ++*polls > after; };
  return options;
}

TEST(ReplayStopTest, DynamicReplayStopsAndFreesWhatIsLive) {
  const Trace trace = LarsonWorkload(10000, 64, 16, 4096);
  BfcAllocator bfc(BfcAllocator::Options{});
  int polls = 0;
  absl::StatusOr<ReplayResult> r =
      ReplayTrace(trace, bfc, StopAfter(2, &polls));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(polls, 3);  // stopped at the third poll
  EXPECT_EQ(bfc.GetStats().bytes_in_use, 0);
}

// An allocator that takes 2 ms per allocation (as an allocation of a huge
// alignment can under ASan).
class SlowAllocator final : public Allocator {
 public:
  void* Allocate(size_t size, size_t alignment) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return inner_.Allocate(size, alignment);
  }
  absl::Status Deallocate(void* p) override { return inner_.Deallocate(p); }
  AllocatorStats GetStats() const override { return inner_.GetStats(); }
  std::string_view Name() const override { return "slow"; }

 private:
  BufferAllocator inner_;
};

// The hook is polled every 10 ms too, not only every 1024 events: 500
// slow allocations (1 s) stopped only at their end.
TEST(ReplayStopTest, SlowAllocationsAreStoppedWithinMilliseconds) {
  Trace trace;
  for (int i = 0; i < 500; ++i) {
    trace.events.push_back({EventKind::kAlloc, i, 64, 64});
    trace.events.push_back({EventKind::kFree, i, 64, 64});
  }
  SlowAllocator slow;
  int polls = 0;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ReplayResult> r =
      ReplayTrace(trace, slow, StopAfter(1, &polls));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(polls, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
}

TEST(ReplayStopTest, StaticReplayStopsInsideAHugeTensor) {
  // One 64 MiB tensor: the hook is polled every 16 MiB of it.
  Trace trace;
  trace.events = {{EventKind::kAlloc, 0, int64_t{64} << 20},
                  {EventKind::kFree, 0, int64_t{64} << 20}};
  BfcAllocator bfc(BfcAllocator::Options{});
  StaticReplayOptions options;
  int polls = 0;
  options.replay = StopAfter(1, &polls);
  absl::StatusOr<ReplayResult> r =
      ReplayStaticPlan(trace, {0}, int64_t{64} << 20, bfc, options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("while writing"));
  EXPECT_EQ(polls, 2);  // event 0, then 16 MiB into the tensor
  EXPECT_EQ(bfc.GetStats().bytes_in_use, 0);  // the arena went back
}

TEST(ReplaySeriesTest, SamplesEvenlyAndEndsWithTheLastEvent) {
  const Trace trace = AllocationWorkload(1000, 3);  // 2000 events
  BfcAllocator bfc(BfcAllocator::Options{});
  ReplayOptions options;
  options.series_points = 10;
  absl::StatusOr<ReplayResult> r = ReplayTrace(trace, bfc, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->series.size(), 10u);
  EXPECT_EQ(r->series.front().event, 199);
  EXPECT_EQ(r->series.back().event, 1999);
  EXPECT_EQ(r->series.back().bytes_in_use, 0);  // all freed by the end
  for (const SeriesPoint& p : r->series) {
    EXPECT_LE(p.bytes_in_use, p.bytes_reserved);
  }
}

TEST(QuantileTest, RanksOfTheSortedSamples) {
  EXPECT_EQ(Quantile({}, 0.5), 0);
  EXPECT_EQ(Quantile({5, 1, 4, 2, 3}, 0.5), 3);
  EXPECT_EQ(Quantile({5, 1, 4, 2, 3}, 0.0), 1);
  EXPECT_EQ(Quantile({5, 1, 4, 2, 3}, 1.0), 5);
  EXPECT_EQ(Quantile({5, 1, 4, 2, 3}, 0.99), 5);
}

}  // namespace
}  // namespace memplan::allocators
