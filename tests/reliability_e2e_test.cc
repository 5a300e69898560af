// Reliability end to end, as a hostile or unlucky client would find it: a
// real memplan-server on 127.0.0.1:0, requests that are cancelled, expire,
// ask for too much, or would echo too much, and checks of what the server
// process does afterwards (its CPU time and resident memory, from /proc).
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

// Whether this build (and so the server it tests) runs under
// AddressSanitizer.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

using ::testing::AnyOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// MiniMalloc's instance D (213 buffers) with the search asked to minimize
// for a minute: far more work than any test deadline allows.
v1::PlanRequest LongSearch() {
  return testing::MinimallocSearch("D.1048576.csv", 60000);
}

class ReliabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // In a sanitized build, AddressSanitizer keeps freed memory in a
    // quarantine (256 MiB by default) before the system gets it back, which
    // the memory checks below would read as kept by the server. Its server
    // gives memory back at once (an unsanitized one ignores the variable).
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string options =
        absl::StrCat(asan == nullptr ? "" : asan, asan == nullptr ? "" : ":",
                     "quarantine_size_mb=0");
    setenv("ASAN_OPTIONS", options.c_str(), /*overwrite=*/1);
    server_ = new testing::ServerProcess(
        MEMPLAN_SERVER_PATH,
        // No plan cache: it keeps plans (up to --cache_bytes) on purpose,
        // and the memory checks below are about what the calls leave.
        {"--address=127.0.0.1:0", "--worker_threads=2",
         "--max_time_budget_ms=60000", "--max_benchmark_bytes=1200000000",
         "--cache=off"});
    ASSERT_GT(server_->port(), 0) << server_->first_line();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // a plan of 200,000 buffers is ~9 MB
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateCustomChannel(
        server_->address(), grpc::InsecureChannelCredentials(), args));
  }
  static void TearDownTestSuite() {
    delete channel_;
    const int status = server_->Stop(SIGTERM, 20);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }

  static grpc::Status Plan(const v1::PlanRequest& request,
                           v1::PlanResponse* out, int deadline_ms) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(deadline_ms));
    return v1::MemoryPlanner::NewStub(*channel_)->Plan(&context, request, out);
  }

  static grpc::Status Benchmark(const v1::BenchmarkRequest& request,
                                v1::BenchmarkResponse* out,
                                int deadline_ms = 120000) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(deadline_ms));
    return v1::MemoryPlanner::NewStub(*channel_)->Benchmark(&context, request,
                                                            out);
  }

  // CPU seconds the server spends from now (a call just ended) through
  // the second after, three under AddressSanitizer. A stopped call's
  // stages end within one stage (30-40 ms of CPU in release; with UBSan
  // about 8 times as long, 0.3-0.4 CPU-s), then what it built is freed;
  // work that went on (the heuristics' 3 s, 22 s sanitized; a 60 s
  // search) would burn a core through the whole window, 1 or 3 CPU-s.
  // All of that clean-up is counted, from the call's end: a window that
  // starts after a wait (100 or 600 ms before) guesses when it ends,
  // which a loaded or slower machine delays.
  static double CpuAfterTheCall() {
    const double before = testing::ProcessCpuSeconds(server_->pid());
    std::this_thread::sleep_for(
        std::chrono::seconds(kAddressSanitizer ? 3 : 1));
    const double after = testing::ProcessCpuSeconds(server_->pid()) - before;
    std::printf("  server CPU after the call: %.2f s\n", after);
    return after;
  }
  static constexpr double kMaxCpuAfter = kAddressSanitizer ? 1.0 : 0.25;

  static testing::ServerProcess* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
};

testing::ServerProcess* ReliabilityTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* ReliabilityTest::channel_ = nullptr;

// A call whose deadline passes in the plan every request gets (the
// heuristics of 300,000 buffers, no search; 3 s of work, 22 s under
// AddressSanitizer and UBSan): DEADLINE_EXCEEDED, and nothing runs on.
TEST_F(ReliabilityTest, AnExpiredCallLeavesNoWorkRunning) {
  v1::PlanRequest request;
  uint64_t x = 12345;
  for (int i = 0; i < 300000; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat("b", i));
    const int64_t start = static_cast<int64_t>((x >> 20) % 100000);
    b->set_start(start);
    b->set_end(start + 1 + static_cast<int64_t>((x >> 40) % 500));
    b->set_size(1 + static_cast<int64_t>((x >> 8) % 4096));
  }
  // gRPC parses a request whole before the handler runs, and a parse
  // cannot stop midway: a deadline that passes while the server parses
  // leaves it parsing (bounded by --max_request_bytes). This test is about
  // the planning, so its deadline lands after the parse: 200 ms past three
  // parses of these bytes in this build (the client's serializing, the
  // transfer, the server's parse), timed here.
  const std::string bytes = request.SerializeAsString();
  const Clock::time_point parse_start = Clock::now();
  v1::PlanRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  const int parse_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                           Clock::now() - parse_start)
                           .count());
  v1::PlanResponse response;
  const grpc::Status s =
      Plan(request, &response, /*deadline_ms=*/200 + 3 * parse_ms);
  EXPECT_EQ(s.error_code(), grpc::DEADLINE_EXCEEDED)
      << s.error_message() << " (parse " << parse_ms << " ms)";
  // Had the heuristics gone on, a worker would burn a whole core.
  EXPECT_LT(CpuAfterTheCall(), kMaxCpuAfter);
}

// A search given 60 s in a call given 1 s: its budget ends before the
// deadline (what follows the search keeps 100 ms), so the call gets the
// best plan so far, saying so, not DEADLINE_EXCEEDED; nothing runs on.
// Under AddressSanitizer the call gets 3 s (300 ms kept), as BudgetTest's
// in-process call does: what follows the search is several times slower
// there, beside another test.
TEST_F(ReliabilityTest, ABudgetPastTheDeadlineEndsWithAPlanAndNoWorkRunning) {
  v1::PlanResponse response;
  const grpc::Status s = Plan(LongSearch(), &response,
                              /*deadline_ms=*/kAddressSanitizer ? 3000 : 1000);
  ASSERT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
  EXPECT_TRUE(response.time_limited());
  EXPECT_GT(response.arena_size_bytes(), 0);
  // Had the search gone on, a worker would burn a whole core.
  EXPECT_LT(CpuAfterTheCall(), kMaxCpuAfter);
}

TEST_F(ReliabilityTest, ACancelledCallLeavesNoWorkRunning) {
  grpc::ClientContext context;
  v1::PlanResponse response;
  std::thread cancel([&context] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    context.TryCancel();
  });
  const grpc::Status s = v1::MemoryPlanner::NewStub(*channel_)->Plan(
      &context, LongSearch(), &response);
  cancel.join();
  EXPECT_EQ(s.error_code(), grpc::CANCELLED) << s.error_message();
  EXPECT_LT(CpuAfterTheCall(), kMaxCpuAfter);
}

TEST_F(ReliabilityTest, AllOverlappingBuffersPlanWithoutQuadraticTime) {
  // 200,000 buffers sharing one lifetime: each must sit above all others.
  v1::PlanRequest request;
  for (int i = 0; i < 200000; ++i) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat(i));
    b->set_start(0);
    b->set_end(2);
    b->set_size(16 + i % 7);
  }
  v1::PlanResponse response;
  const grpc::Status s = Plan(request, &response, /*deadline_ms=*/60000);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.arena_size_bytes(), response.lower_bound_bytes());
}

TEST_F(ReliabilityTest, HugeTimeSpansCostNoMemoryPerStep) {
  // A few short lifetimes spread over 2^62 steps, and one spanning them all.
  v1::PlanRequest request;
  for (int i = 0; i < 100; ++i) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat("short", i));
    b->set_start(int64_t{i} << 55);
    b->set_end((int64_t{i} << 55) + 1);
    b->set_size(64);
  }
  v1::Buffer* b = request.add_buffers();
  b->set_id("long");
  b->set_start(-5);
  b->set_end((int64_t{1} << 62) - 5);  // the longest lifetime there may be
  b->set_size(64);
  const int64_t rss_before = testing::ProcessRssBytes(server_->pid());
  v1::PlanResponse response;
  const grpc::Status s = Plan(request, &response, /*deadline_ms=*/20000);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.arena_size_bytes(), 128);
  EXPECT_EQ(response.assignments(100).first_step(), -5);  // the user's steps
  EXPECT_LT(testing::ProcessRssBytes(server_->pid()) - rss_before,
            int64_t{64} << 20);
}

TEST_F(ReliabilityTest, OverlappingPinsAreTheUsersError) {
  v1::PlanRequest request;
  for (const char* id : {"a", "b"}) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(id);
    b->set_start(0);
    b->set_end(4);
    b->set_size(64);
    b->set_alignment(1);
    b->set_fixed_offset(id[0] == 'a' ? 0 : 32);
  }
  v1::PlanResponse response;
  const grpc::Status s = Plan(request, &response, 20000);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("'a'"));
  EXPECT_THAT(s.error_message(), HasSubstr("'b'"));
}

TEST_F(ReliabilityTest, EchoedInputIsCut) {
  v1::PlanRequest request;
  v1::Buffer* b = request.add_buffers();
  b->set_id(std::string(100000, 'n'));
  b->set_start(3);
  b->set_end(1);  // invalid: the message names the buffer
  b->set_size(8);
  request.mutable_options()->set_strategy(std::string(100000, 's'));
  v1::PlanResponse response;
  grpc::Status s = Plan(request, &response, 20000);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("unknown strategy"));
  EXPECT_LT(s.error_message().size(), 4096u);
  request.mutable_options()->clear_strategy();
  s = Plan(request, &response, 20000);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
  EXPECT_LT(s.error_message().size(), 4096u);
}

TEST_F(ReliabilityTest, OverLimitWorkloadsAreRefusedBeforeAnyWork) {
  for (const char* workload : {"larson", "allocation_delayed"}) {
    v1::BenchmarkRequest request;
    request.set_workload(workload);
    request.set_workload_size(5000000);
    const double cpu = testing::ProcessCpuSeconds(server_->pid());
    const auto start = Clock::now();
    v1::BenchmarkResponse response;
    const grpc::Status s = Benchmark(request, &response);
    EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << workload;
    // Over the buffers a plan may hold (max_tensors) and the work the
    // Benchmark may do (max_benchmark_ops): the first check refuses it.
    EXPECT_THAT(s.error_message(), AnyOf(HasSubstr("max_tensors"),
                                         HasSubstr("max_benchmark_ops")));
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << workload;
    EXPECT_LT(testing::ProcessCpuSeconds(server_->pid()) - cpu, 0.5);
  }
}

TEST_F(ReliabilityTest, MemoryIsGivenBackWhenABenchmarkEnds) {
  v1::PlanResponse warm;
  v1::PlanRequest small;
  *small.mutable_graph() = testing::UniformChain(2, 1024);
  ASSERT_TRUE(Plan(small, &warm, 20000).ok());
  const int64_t baseline = testing::ProcessRssBytes(server_->pid());
  v1::BenchmarkRequest request;
  *request.mutable_graph() =
      testing::UniformChain(2, int64_t{256} << 20);  // 512 MiB live
  request.add_allocators("bfc");
  request.add_allocators("static_plan");
  v1::BenchmarkResponse response;
  const grpc::Status s = Benchmark(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.rows_size(), 2);
  // The static plan's arena held every byte of both tensors while they
  // lived; all of it is back with the system now (a sanitized server may
  // keep the shadow of what it touched: a byte per 8).
  const int64_t touched = int64_t{512} << 20;
  EXPECT_LT(testing::ProcessRssBytes(server_->pid()) - baseline,
            (int64_t{64} << 20) + (kAddressSanitizer ? touched / 8 : 0));
}

// Plans 400,000 buffers through `channel` and expects the server `pid` to
// hold less than 64 MB more than before once idle for a while.
void ExpectMemoryGivenBackOnceIdle(
    pid_t pid, const std::shared_ptr<grpc::Channel>& channel) {
  // 400,000 buffers: a plan whose stages hold a few hundred MB; glibc alone
  // kept most of it resident after the call (worker arenas shrink only from
  // the top).
  v1::PlanRequest big = testing::LargeBufferList(400000);
  const int64_t baseline = testing::ProcessRssBytes(pid);
  v1::PlanResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(120));
  const grpc::Status s =
      v1::MemoryPlanner::NewStub(channel)->Plan(&context, big, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  big.Clear();
  // Idle for half a second, the server gives what its calls freed back. A
  // sanitized server frees large blocks at once (no quarantine here) and
  // keeps the shadow of what it touched, which no purge returns: there,
  // the check is only that being idle costs nothing more.
  const int64_t held = testing::ProcessRssBytes(pid) - baseline;
  const int64_t bound =
      kAddressSanitizer ? held + (int64_t{16} << 20) : int64_t{64} << 20;
  const auto until = Clock::now() + std::chrono::seconds(10);
  int64_t grown = held;
  while (grown >= bound && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grown = testing::ProcessRssBytes(pid) - baseline;
  }
  EXPECT_LT(grown, bound) << "right after the call: " << held;
}

TEST_F(ReliabilityTest, MemoryIsGivenBackOnceTheServerIsIdle) {
  ExpectMemoryGivenBackOnceIdle(server_->pid(), *channel_);
}

// As the container image runs it (GLIBC_TUNABLES=glibc.malloc.hugetlb=1):
// the server then grows malloc's heaps 64 MiB at a time, each of which
// would keep that much after a large call, and gives the heaps' tops back
// itself (the call's thread once its response is freed, the workers once
// idle).
TEST(ReliabilityOnHugePagesTest, MemoryIsGivenBackOnceTheServerIsIdle) {
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before == nullptr ? "" : before;
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", /*overwrite=*/1);
  testing::ServerProcess server(MEMPLAN_SERVER_PATH,
                                {"--address=127.0.0.1:0", "--worker_threads=2",
                                 "--cache=off", "--metrics_address="});
  if (before == nullptr) {
    unsetenv("GLIBC_TUNABLES");
  } else {
    setenv("GLIBC_TUNABLES", saved.c_str(), /*overwrite=*/1);
  }
  ASSERT_GT(server.port(), 0) << server.first_line();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  const std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), args);
  ExpectMemoryGivenBackOnceIdle(server.pid(), channel);
  const int status = server.Stop(SIGTERM, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ReliabilityTest, ConcurrentBenchmarksEachGetTheirOwnArena) {
  v1::BenchmarkRequest big;
  *big.mutable_graph() = testing::UniformChain(4, int64_t{128} << 20);
  big.add_allocators("static_plan");
  v1::BenchmarkRequest small;
  *small.mutable_graph() = testing::UniformChain(3, 16384);
  small.add_allocators("static_plan");
  grpc::Status big_status;
  std::thread first([&] {
    v1::BenchmarkResponse response;
    big_status = Benchmark(big, &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 5; ++i) {
    v1::BenchmarkResponse response;
    const grpc::Status s = Benchmark(small, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  first.join();
  EXPECT_TRUE(big_status.ok()) << big_status.error_message();
}

TEST_F(ReliabilityTest, BenchmarkWithMemoryPoolsReplaysEachPool) {
  v1::BenchmarkRequest request;
  std::ifstream in(std::string(MEMPLAN_SOURCE_DIR) +
                   "/examples/transformer_encoder.json");
  std::string json((std::istreambuf_iterator<char>(in)), {});
  v1::PlanRequest example;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &example).ok());
  *request.mutable_graph() = example.graph();
  v1::MemoryPool* s = request.mutable_options()->add_memory_pools();
  s->set_name("s");
  s->set_capacity_bytes(65536);
  request.mutable_options()->add_memory_pools()->set_name("d");
  request.add_allocators("static_plan");
  v1::BenchmarkResponse response;
  const grpc::Status status = Benchmark(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(response.rows(0).allocations(), 0);
}

// A server whose Benchmark calls may take 0.3 s. Stopped by that limit,
// not by the call's deadline, the call is over a limit (the same request
// would stop again: not a "retry later").
TEST(ReliabilityLimitsTest, TheTimeLimitHoldsForStaticPlanReplays) {
  testing::ServerProcess server(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=", "--worker_threads=1",
       "--max_benchmark_seconds=0.3"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  v1::BenchmarkRequest request;
  // Eight tensors of 128 MiB written and checked in turn: seconds of work.
  *request.mutable_graph() = testing::UniformChain(8, int64_t{128} << 20);
  request.add_allocators("static_plan");
  grpc::ClientContext context;
  v1::BenchmarkResponse response;
  const auto start = Clock::now();
  const grpc::Status s = v1::MemoryPlanner::NewStub(channel)->Benchmark(
      &context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr("the Benchmark ran past its time limit of 300ms "
                        "(memplan-server --max_benchmark_seconds)"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  const int status = server.Stop(SIGTERM, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace memplan
