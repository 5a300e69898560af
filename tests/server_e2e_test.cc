// End to end: the real memplan-server on 127.0.0.1 with port 0, called
// through the generated stub.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

v1::PlanRequest Example(const std::string& name) {
  v1::PlanRequest request;
  auto status = google::protobuf::util::JsonStringToMessage(
      ReadFile(std::string(MEMPLAN_SOURCE_DIR) + "/examples/" + name),
      &request);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return request;
}

// A small valid graph: x -> f -> h -> g -> y.
v1::PlanRequest SmallGraph() {
  v1::PlanRequest r;
  *r.mutable_graph() =
      testing::ChainGraph({{"x", 64}, {"h", 128}, {"y", 64}}, {"f", "g"});
  r.mutable_graph()->set_name("small");
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess(
        MEMPLAN_SERVER_PATH,
        {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
         "--max_tensors=5000", "--worker_threads=2",
         "--max_benchmark_bytes=150000000"});
    ASSERT_GT(server_->port(), 0) << server_->first_line();
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    // A clean stop: SIGTERM, exit 0.
    const int status = server_->Stop(SIGTERM, 10);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }

  grpc::Status Plan(const v1::PlanRequest& request, v1::PlanResponse* out,
                    int deadline_ms = 20000) {
    auto stub = v1::MemoryPlanner::NewStub(*channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(deadline_ms));
    return stub->Plan(&context, request, out);
  }

  static testing::ServerProcess* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
};

testing::ServerProcess* ServerTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* ServerTest::channel_ = nullptr;

TEST_F(ServerTest, PlansTheResNetExample) {
  v1::PlanResponse response;
  grpc::Status s = Plan(Example("resnet50.json"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // 231 tensors: 123 planned, the 108 weights kept in the model.
  EXPECT_EQ(response.assignments_size(), 123);
  EXPECT_EQ(response.unplanned_size(), 108);
  for (const v1::UnplannedTensor& u : response.unplanned()) {
    EXPECT_EQ(u.kind(), "weight") << u.name();
  }
  EXPECT_GT(response.weights_bytes(), 0);
  EXPECT_GE(response.arena_size_bytes(), response.lower_bound_bytes());
  EXPECT_LT(response.arena_size_bytes(), response.naive_bytes());
  EXPECT_GT(response.pools_size(), 0);
  for (const v1::Assignment& a : response.assignments()) {
    EXPECT_EQ(a.offset() % 64, 0) << a.name();
    EXPECT_LE(a.offset() + a.size(), response.arena_size_bytes());
  }
}

TEST_F(ServerTest, PlansBuffersLikeMiniMalloc) {
  v1::PlanRequest request;
  const int rows[5][3] = {
      {0, 3, 4}, {3, 9, 4}, {0, 9, 4}, {9, 21, 4}, {0, 21, 4}};
  for (int i = 0; i < 5; ++i) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat("b", i + 1));
    b->set_start(rows[i][0]);
    b->set_end(rows[i][1]);
    b->set_size(rows[i][2]);
    b->set_alignment(1);
  }
  v1::PlanResponse response;
  ASSERT_TRUE(Plan(request, &response).ok());
  EXPECT_EQ(response.lower_bound_bytes(), 12);
  EXPECT_EQ(response.arena_size_bytes(), 12);
  EXPECT_TRUE(response.proven_optimal());
}

TEST_F(ServerTest, HealthIsServingForServerAndService) {
  auto stub = grpc::health::v1::Health::NewStub(*channel_);
  for (const char* service : {"", "memplan.v1.MemoryPlanner"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(stub->Check(&context, request, &response).ok()) << service;
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

struct BadRequest {
  const char* label;
  void (*mutate)(v1::PlanRequest*);
  grpc::StatusCode code;
  const char* message;
};

class BadRequestTest : public ServerTest,
                       public ::testing::WithParamInterface<BadRequest> {};

TEST_P(BadRequestTest, ClearErrorAndTheServerKeepsServing) {
  v1::PlanRequest request = SmallGraph();
  GetParam().mutate(&request);
  v1::PlanResponse response;
  grpc::Status s = Plan(request, &response);
  EXPECT_EQ(s.error_code(), GetParam().code) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr(GetParam().message));
  // The next good request is served.
  ASSERT_TRUE(Plan(SmallGraph(), &response).ok());
  EXPECT_EQ(response.arena_size_bytes(), 192);  // x + h, then h + y
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadRequestTest,
    ::testing::Values(
        BadRequest{"UnknownTensor",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_ops(1)->set_inputs(0, "nope");
                   },
                   grpc::INVALID_ARGUMENT,
                   "op 'g' reads unknown tensor 'nope'"},
        BadRequest{"DuplicateTensor",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->add_tensors()->set_name("h");
                   },
                   grpc::INVALID_ARGUMENT, "duplicate tensor name 'h'"},
        BadRequest{"DuplicateOp",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_ops(1)->set_name("f");
                   },
                   grpc::INVALID_ARGUMENT, "duplicate op name 'f'"},
        BadRequest{"ProducedTwice",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_ops(1)->set_outputs(0, "h");
                   },
                   grpc::INVALID_ARGUMENT, "tensor 'h' is produced twice"},
        BadRequest{"ConsumedBeforeProduced",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_ops()->SwapElements(0, 1);
                   },
                   grpc::INVALID_ARGUMENT,
                   "op 'g' (step 0) reads tensor 'h' before op 'f'"},
        BadRequest{"Cycle",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_ops(0)->set_inputs(0, "h");
                   },
                   grpc::INVALID_ARGUMENT,
                   "cycle: op 'f' reads its own output"},
        BadRequest{"ZeroSize",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_tensors(1)->set_size_bytes(0);
                   },
                   grpc::INVALID_ARGUMENT, "tensor 'h' has size 0"},
        BadRequest{"NegativeSize",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_tensors(1)->set_size_bytes(-8);
                   },
                   grpc::INVALID_ARGUMENT, "tensor 'h' has size -8"},
        BadRequest{"Overflow",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->mutable_tensors(1)->set_size_bytes(
                         9'000'000'000'000'000'000);
                     r->mutable_graph()->mutable_tensors(2)->set_size_bytes(
                         9'000'000'000'000'000'000);
                   },
                   grpc::INVALID_ARGUMENT, "sizes overflow 64 bits"},
        BadRequest{
            "BadAlignment",
            [](v1::PlanRequest* r) { r->mutable_options()->set_alignment(24); },
            grpc::INVALID_ARGUMENT, "alignment 24 is not a power of two"},
        BadRequest{"EmptyGraph", [](v1::PlanRequest* r) { r->clear_graph(); },
                   grpc::INVALID_ARGUMENT, "no graph, buffers or model"},
        BadRequest{"GraphWithoutTensors",
                   [](v1::PlanRequest* r) {
                     r->mutable_graph()->clear_tensors();
                     r->mutable_graph()->clear_ops();
                   },
                   grpc::INVALID_ARGUMENT, "graph 'small' has no tensors"},
        BadRequest{"StartAfterEnd",
                   [](v1::PlanRequest* r) {
                     r->clear_graph();
                     v1::Buffer* b = r->add_buffers();
                     b->set_id("late");
                     b->set_start(5);
                     b->set_end(2);
                     b->set_size(8);
                   },
                   grpc::INVALID_ARGUMENT,
                   "buffer 'late' has start 5 >= end 2"},
        BadRequest{"StepPast2To62",
                   [](v1::PlanRequest* r) {
                     r->clear_graph();
                     v1::Buffer* b = r->add_buffers();
                     b->set_id("far");
                     b->set_start(-1);  // negative steps are fine
                     b->set_end((int64_t{1} << 62) + 1);
                     b->set_size(8);
                   },
                   grpc::INVALID_ARGUMENT, "steps must lie within +-2^62"},
        BadRequest{"UnknownStrategy",
                   [](v1::PlanRequest* r) {
                     r->mutable_options()->set_strategy("magic");
                   },
                   grpc::INVALID_ARGUMENT, "unknown strategy 'magic'"},
        BadRequest{
            "CapacityTooSmall",
            [](v1::PlanRequest* r) { r->mutable_options()->set_capacity(100); },
            grpc::FAILED_PRECONDITION, "infeasible"},
        BadRequest{"OverTensorLimit",
                   [](v1::PlanRequest* r) {
                     for (int i = 0; i < 5000; ++i) {
                       r->mutable_graph()->add_tensors()->set_name(
                           absl::StrCat("extra", i));
                     }
                   },
                   grpc::RESOURCE_EXHAUSTED,
                   "at most 5000 are planned (max_tensors"}),
    [](const auto& info) { return std::string(info.param.label); });

TEST_F(ServerTest, ClientDeadlineIsHonoured) {
  // 4000 buffers under six strategies cannot be planned within 1 ms.
  v1::PlanRequest request;
  for (int i = 0; i < 4000; ++i) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat(i));
    b->set_start(i % 97);
    b->set_end(i % 97 + 1 + i % 13);
    b->set_size(64 + i % 1000);
  }
  v1::PlanResponse response;
  grpc::Status s = Plan(request, &response, /*deadline_ms=*/1);
  EXPECT_EQ(s.error_code(), grpc::DEADLINE_EXCEEDED) << s.error_message();
  ASSERT_TRUE(Plan(SmallGraph(), &response).ok());
}

// The server's /metrics, fetched with curl.
std::string Scrape(int port) {
  testing::CommandResult r = testing::RunCommand(
      "/usr/bin/curl",
      {"-sf", "http://127.0.0.1:" + std::to_string(port) + "/metrics"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The value of the first sample line starting with `series` (0 if none).
double Sample(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

// Whether a call shows in the server's queue depth before `done` turns
// true or `seconds` pass (polled every 20 ms: bounded in count and time).
bool ShowsInTheQueue(int metrics_port, const std::atomic<bool>& done,
                     int seconds) {
  const absl::Time until = absl::Now() + absl::Seconds(seconds);
  while (!done && absl::Now() < until) {
    if (Sample(Scrape(metrics_port), "memplan_planner_queue_depth") >= 1) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_F(ServerTest, BenchmarkComparesAllocatorsAndMovesTheMetrics) {
  const int metrics_port = testing::MetricsPort(server_->first_line());
  ASSERT_GT(metrics_port, 0) << server_->first_line();
  const std::string before = Scrape(metrics_port);
  // Every allocator's counters are there from the start, at 0 (mmap is
  // in no default Benchmark): increase() sees a first replay too.
  EXPECT_THAT(
      before,
      HasSubstr("\nmemplan_allocator_allocs_total{allocator=\"mmap\"} 0"));
  v1::BenchmarkRequest request;
  *request.mutable_graph() = Example("transformer_encoder.json").graph();
  request.set_repetitions(2);
  auto stub = v1::MemoryPlanner::NewStub(*channel_);
  grpc::ClientContext context;
  v1::BenchmarkResponse response;
  grpc::Status s = stub->Benchmark(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // bfc, pool, pool_indexed, buffer, aligned, recurse, mmap, static_plan.
  ASSERT_EQ(response.rows_size(), 7);  // every allocator but mmap, and the plan
  EXPECT_EQ(response.rows(6).allocator(), "static_plan");
  for (const v1::AllocatorFigures& row : response.rows()) {
    EXPECT_GE(row.peak_bytes_reserved(), response.arena_size_bytes())
        << row.allocator();
    EXPECT_EQ(row.failures(), 0);
  }
  const std::string after = Scrape(metrics_port);
  const std::string handled =
      "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Benchmark\","
      "grpc_service=\"memplan.v1.MemoryPlanner\",grpc_type=\"unary\"}";
  EXPECT_EQ(Sample(after, handled), Sample(before, handled) + 1);
  const std::string bfc_allocs =
      "memplan_allocator_allocs_total{allocator=\"bfc\"}";
  EXPECT_EQ(Sample(after, bfc_allocs),
            Sample(before, bfc_allocs) + 2 * response.rows(0).allocations());
  EXPECT_GT(Sample(after,
                   "memplan_allocator_peak_bytes_in_use{allocator="
                   "\"static_plan\"}"),
            0);
  EXPECT_THAT(after, HasSubstr("memplan_allocator_op_seconds_bucket{"
                               "allocator=\"pool_indexed\""));
  EXPECT_THAT(after, HasSubstr("memplan_allocator_fragmentation_ratio{"
                               "allocator=\"bfc\"}"));
}

TEST_F(ServerTest, PlanMovesThePlannerMetrics) {
  const int metrics_port = testing::MetricsPort(server_->first_line());
  v1::PlanResponse response;
  ASSERT_TRUE(Plan(SmallGraph(), &response).ok());
  const std::string text = Scrape(metrics_port);
  // x (64) dies after f and y (64) is born at g: x + h = h + y = 192
  // bytes (inputs and outputs held for the whole run took 256).
  EXPECT_EQ(Sample(text, "memplan_plan_arena_bytes"), 192);
  EXPECT_EQ(Sample(text, "memplan_plan_efficiency_ratio"), 1);
  EXPECT_GE(Sample(text,
                   "memplan_plan_strategy_wins_total{strategy=\"best_"
                   "fit_size\"}"),
            1);
  EXPECT_THAT(
      text, HasSubstr("memplan_plan_stage_seconds_count{stage=\"liveness\"}"));
  EXPECT_THAT(text, HasSubstr("memplan_planner_queue_depth "));
  EXPECT_THAT(text, HasSubstr("grpc_server_handling_seconds_bucket{grpc_method="
                              "\"Plan\""));
}

TEST_F(ServerTest, PlansTheClockCutAreCountedAndSaySo) {
  const int metrics_port = testing::MetricsPort(server_->first_line());
  const std::string before = Scrape(metrics_port);
  EXPECT_THAT(before, HasSubstr("\nmemplan_plan_time_limited_total "));
  // MiniMalloc's D: no search proves it, so 50 ms cut it.
  v1::PlanRequest cut = testing::MinimallocSearch("D.1048576.csv", 50);
  v1::PlanResponse response;
  ASSERT_TRUE(Plan(cut, &response).ok());
  EXPECT_TRUE(response.time_limited());
  // An effort stops the same search first: the same plan anywhere.
  v1::PlanRequest bounded = testing::MinimallocSearch("D.1048576.csv", 60000);
  bounded.mutable_options()->set_effort(2000);
  ASSERT_TRUE(Plan(bounded, &response, 60000).ok());
  EXPECT_FALSE(response.time_limited());
  EXPECT_FALSE(response.proven_optimal());
  const std::string after = Scrape(metrics_port);
  EXPECT_EQ(Sample(after, "memplan_plan_time_limited_total"),
            Sample(before, "memplan_plan_time_limited_total") + 1);
}

TEST_F(ServerTest, BenchmarkOverTheByteLimitIsResourceExhausted) {
  // One 200 MB activation: over this server's 150000000-byte limit.
  v1::BenchmarkRequest request;
  *request.mutable_graph() = testing::ChainGraph(
      {{"x", 4}, {"big", 200'000'000}, {"y", 4}}, {"f", "h"});
  auto stub = v1::MemoryPlanner::NewStub(*channel_);
  grpc::ClientContext context;
  v1::BenchmarkResponse response;
  grpc::Status s = stub->Benchmark(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("150000000"));
  v1::PlanResponse plan;
  EXPECT_TRUE(Plan(SmallGraph(), &plan).ok());
}

// Separate servers with small limits.
TEST(ServerLimitsTest, BusyServerAnswersResourceExhaustedAtOnce) {
  testing::ServerProcess server(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
       "--max_in_flight=1", "--max_tensors=2000000"});
  ASSERT_GT(server.port(), 0);
  const int metrics_port = testing::MetricsPort(server.first_line());
  ASSERT_GT(metrics_port, 0) << server.first_line();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the big plan is ~10 MB
  auto channel = grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), args);
  // A large request that keeps the only slot busy for a second or more.
  v1::PlanRequest big = testing::LargeBufferList(400000);
  grpc::Status big_status;
  std::atomic<bool> big_done{false};
  std::thread slow([&] {
    auto stub = v1::MemoryPlanner::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(120));
    v1::PlanResponse response;
    big_status = stub->Plan(&context, big, &response);
    big_done = true;
  });
  // The small request goes only once the big one holds the slot (the
  // server's queue depth shows it), so it cannot take the slot first; the
  // wait is bounded in count and time.
  const bool big_admitted = ShowsInTheQueue(metrics_port, big_done, 60);
  grpc::Status small_status;
  if (big_admitted) {
    auto stub = v1::MemoryPlanner::NewStub(channel);
    grpc::ClientContext context;
    v1::PlanResponse response;
    small_status = stub->Plan(&context, SmallGraph(), &response);
  }
  slow.join();
  ASSERT_TRUE(big_admitted) << "the big request never showed in the queue";
  EXPECT_EQ(small_status.error_code(), grpc::RESOURCE_EXHAUSTED)
      << small_status.error_message();
  EXPECT_THAT(small_status.error_message(), HasSubstr("busy"));
  EXPECT_TRUE(big_status.ok()) << big_status.error_message();
  // Once the slot is free again, the server takes work.
  v1::PlanResponse response;
  grpc::ClientContext context;
  EXPECT_TRUE(v1::MemoryPlanner::NewStub(channel)
                  ->Plan(&context, SmallGraph(), &response)
                  .ok());
  EXPECT_TRUE(WIFEXITED(server.Stop(SIGTERM, 10)));
}

// Benchmark calls replay at most --max_benchmarks at once (each may touch
// --max_benchmark_bytes and map a file per block): one more is busy at
// once, while Plan calls go on.
TEST(ServerLimitsTest, BenchmarksBeyondTheirLimitAreBusy) {
  testing::ServerProcess server(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
       "--max_benchmarks=1", "--max_benchmark_ops=1000000000",
       "--max_benchmark_seconds=600", "--max_benchmark_bytes=4000000000"});
  ASSERT_GT(server.port(), 0);
  const int metrics_port = testing::MetricsPort(server.first_line());
  ASSERT_GT(metrics_port, 0) << server.first_line();
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  v1::BenchmarkRequest slow;  // minutes, unless its deadline ends it
  slow.set_workload("allocation");
  slow.set_workload_size(999'999);
  slow.set_repetitions(10);
  grpc::Status slow_status;
  std::atomic<bool> slow_done{false};
  grpc::ClientContext slow_context;
  slow_context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(60));
  std::thread first([&] {
    v1::BenchmarkResponse response;
    slow_status = v1::MemoryPlanner::NewStub(channel)->Benchmark(
        &slow_context, slow, &response);
    slow_done = true;
  });
  const bool running = ShowsInTheQueue(metrics_port, slow_done, 15);
  grpc::Status second;
  grpc::Status plan;
  if (running) {
    v1::BenchmarkRequest small;
    small.set_workload("allocation");
    small.set_workload_size(100);
    grpc::ClientContext context;
    v1::BenchmarkResponse response;
    second = v1::MemoryPlanner::NewStub(channel)->Benchmark(&context, small,
                                                            &response);
    grpc::ClientContext plan_context;
    v1::PlanResponse plan_response;
    plan = v1::MemoryPlanner::NewStub(channel)->Plan(
        &plan_context, SmallGraph(), &plan_response);
  }
  slow_context.TryCancel();
  first.join();
  ASSERT_TRUE(running) << "the slow Benchmark never showed in the queue";
  EXPECT_EQ(second.error_code(), grpc::RESOURCE_EXHAUSTED)
      << second.error_message();
  EXPECT_THAT(second.error_message(),
              HasSubstr("1 Benchmark calls in progress (--max_benchmarks)"));
  EXPECT_TRUE(plan.ok()) << plan.error_message();
  EXPECT_EQ(slow_status.error_code(), grpc::CANCELLED);
  EXPECT_TRUE(WIFEXITED(server.Stop(SIGTERM, 10)));
}

// memplan_planner_queue_depth counts every call running, when calls start
// at once, and comes back to 0 once they have ended. (Two calls admitted at
// the same moment once left it at 1 with 2 running: each set the gauge from
// the count it had made, and the older one was set last.)
TEST(ServerLimitsTest, QueueDepthCountsCallsStartedTogether) {
  testing::ServerProcess server(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
       "--max_benchmarks=6", "--max_benchmark_ops=1000000000",
       "--max_benchmark_seconds=600", "--max_benchmark_bytes=4000000000"});
  ASSERT_GT(server.port(), 0);
  const int metrics_port = testing::MetricsPort(server.first_line());
  ASSERT_GT(metrics_port, 0) << server.first_line();
  constexpr int kCalls = 6;
  v1::BenchmarkRequest request;
  request.set_workload("allocation");
  request.set_workload_size(999'999);
  request.set_repetitions(10);
  std::vector<grpc::ClientContext> contexts(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> clients;
  for (int i = 0; i < kCalls; ++i) {
    contexts[i].set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(120));
    clients.emplace_back([&, i] {
      grpc::ChannelArguments args;
      args.SetInt("memplan.test.client", i);  // a connection of its own
      auto stub = v1::MemoryPlanner::NewStub(grpc::CreateCustomChannel(
          server.address(), grpc::InsecureChannelCredentials(), args));
      v1::BenchmarkResponse response;
      statuses[i] = stub->Benchmark(&contexts[i], request, &response);
    });
  }
  // Bounded waits: at most 60 s for the calls to show, 30 s to leave.
  double most = 0;
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (most < kCalls && absl::Now() < until) {
    most = std::max(
        most, Sample(Scrape(metrics_port), "memplan_planner_queue_depth"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (grpc::ClientContext& context : contexts) context.TryCancel();
  for (std::thread& t : clients) t.join();
  EXPECT_GE(most, kCalls);
  for (const grpc::Status& s : statuses) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  }
  double depth = -1;
  const absl::Time left_by = absl::Now() + absl::Seconds(30);
  while (depth != 0 && absl::Now() < left_by) {
    depth = Sample(Scrape(metrics_port), "memplan_planner_queue_depth");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(depth, 0) << "calls that ended are still counted";
  EXPECT_TRUE(WIFEXITED(server.Stop(SIGTERM, 20)));
}

TEST(ServerLimitsTest, MetricsPortInUseIsAClearStartupError) {
  testing::ServerProcess first(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"});
  const int taken = testing::MetricsPort(first.first_line());
  ASSERT_GT(taken, 0);
  testing::CommandResult second = testing::RunCommand(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0",
       "--metrics_address=127.0.0.1:" + std::to_string(taken)},
      "", 20);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("cannot serve metrics on 127.0.0.1:" +
                                    std::to_string(taken)));
  first.Stop(SIGTERM, 10);
}

// gRPC's default SO_REUSEPORT would let a second server start on the port
// and take part of the first one's calls without a word.
TEST(ServerLimitsTest, PortInUseIsAClearStartupError) {
  testing::ServerProcess first(MEMPLAN_SERVER_PATH, {"--address=127.0.0.1:0"});
  ASSERT_GT(first.port(), 0);
  testing::CommandResult second = testing::RunCommand(
      MEMPLAN_SERVER_PATH, {"--address=" + first.address()}, "", 20);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("cannot listen on " + first.address()));
  first.Stop(SIGTERM, 10);
}

// A value no server can run with is refused at start, naming the flag:
// nan seconds drained for the whole grace, a negative Benchmark limit
// failed every Benchmark with DEADLINE_EXCEEDED.
TEST(ServerLimitsTest, UnusableFlagValuesAreStartupErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--drain_seconds=nan", "--drain_seconds must be"},
      {"--grace_seconds=-1", "--grace_seconds must be"},
      {"--max_benchmark_seconds=-1", "--max_benchmark_seconds must be"},
      {"--max_benchmark_bytes=0", "--max_benchmark_bytes must be above 0"},
      {"--worker_threads=-2", "--worker_threads must be"},
      // A limit of 0 refused every Plan call (max_tensors) or was taken
      // as 1 without a word (max_in_flight).
      {"--max_tensors=0", "--max_tensors must be above 0"},
      {"--max_ops=0", "--max_ops must be above 0"},
      {"--max_tensor_refs=0", "--max_tensor_refs must be above 0"},
      {"--max_model_bytes=0", "--max_model_bytes must be above 0"},
      {"--max_in_flight=0", "--max_in_flight must be above 0"},
      {"--default_time_budget_ms=-1", "--default_time_budget_ms must be 0"},
      {"--max_time_budget_ms=-5", "--max_time_budget_ms must be 0"},
      {"--cache_timeout_ms=0", "--cache_timeout_ms must be above 0"},
      {"--cache_bytes=-1", "--cache_bytes must be 0"},
      {"--cache_max_entry_bytes=0",
       "--cache_max_entry_bytes must be at "
       "least 1024"}};
  for (const auto& [flag, message] : cases) {
    testing::CommandResult r = testing::RunCommand(
        MEMPLAN_SERVER_PATH, {"--address=127.0.0.1:0", flag}, "", 20);
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_THAT(r.err, HasSubstr(message)) << flag;
  }
}

TEST(ServerLimitsTest, OversizedMessageIsResourceExhausted) {
  testing::ServerProcess server(
      MEMPLAN_SERVER_PATH,
      {"--address=127.0.0.1:0", "--max_request_bytes=1000"});
  ASSERT_GT(server.port(), 0);
  auto stub = v1::MemoryPlanner::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  v1::PlanRequest request = SmallGraph();
  request.mutable_graph()->set_name(std::string(2000, 'n'));
  v1::PlanResponse response;
  grpc::ClientContext context;
  grpc::Status s = stub->Plan(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  grpc::ClientContext again;
  EXPECT_TRUE(stub->Plan(&again, SmallGraph(), &response).ok());
  EXPECT_TRUE(WIFEXITED(server.Stop(SIGTERM, 10)));
}

TEST(ServerShutdownTest, SigtermStopsHealthThenExitsZero) {
  testing::ServerProcess server(MEMPLAN_SERVER_PATH,
                                {"--address=127.0.0.1:0", "--grace_seconds=2"});
  ASSERT_GT(server.port(), 0);
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  const int status = server.Stop(SIGTERM, 10);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace memplan
