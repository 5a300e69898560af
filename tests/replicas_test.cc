// More than one replica: two real memplan-server processes on 127.0.0.1,
// called through client::MakeChannel with an "ipv4:" list (round_robin,
// UNAVAILABLE retried). Each replica's own /metrics shows how many calls it
// served; one replica going away mid-run loses no call.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/remote.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "tests/testing/metrics.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

// A replica: memplan-server with gRPC and metrics on ports it picks.
struct Replica {
  Replica()
      : process(MEMPLAN_SERVER_PATH,
                {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                 "--worker_threads=1", "--grace_seconds=2"}),
        metrics_port(testing::MetricsPort(process.first_line())) {}

  // Plan calls this replica finished with `code`, from its own /metrics.
  double PlanCalls(const std::string& code = "OK") const {
    absl::StatusOr<double> sum =
        testing::MetricSum(metrics_port, "grpc_server_handled_total",
                           {{"grpc_method", "Plan"}, {"grpc_code", code}});
    EXPECT_TRUE(sum.ok()) << sum.status();
    return sum.value_or(-1);
  }

  testing::ServerProcess process;
  int metrics_port;
};

// A chain x -> op0 -> t0 -> op1 -> ... -> y of `n` ops: valid and quick.
v1::PlanRequest Chain(int n) {
  std::vector<testing::ChainTensor> tensors = {{"x", 1024}};
  for (int i = 0; i < n; ++i) {
    tensors.push_back(
        {i + 1 == n ? "y" : absl::StrCat("t", i), 1024 * (1 + i % 7)});
  }
  v1::PlanRequest r;
  *r.mutable_graph() = testing::ChainGraph(tensors);
  return r;
}

std::string Target(const Replica& a, const Replica& b) {
  return absl::StrCat("ipv4:127.0.0.1:", a.process.port(),
                      ",127.0.0.1:", b.process.port());
}

grpc::Status CallPlan(v1::MemoryPlanner::Stub* stub,
                      const v1::PlanRequest& request, v1::PlanResponse* out) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  return stub->Plan(&context, request, out);
}

TEST(ReplicasTest, RoundRobinReachesBothReplicas) {
  Replica a, b;
  ASSERT_GT(a.metrics_port, 0) << a.process.first_line();
  ASSERT_GT(b.metrics_port, 0) << b.process.first_line();
  auto channel = client::MakeChannel(Target(a, b));
  auto stub = v1::MemoryPlanner::NewStub(channel);
  const v1::PlanRequest request = Chain(20);
  // round_robin alternates once both subchannels are ready; until then the
  // calls go to whichever connected first (on a loaded machine, more than
  // a few). Call until both have served one: at most 200 calls or 20 s.
  const absl::Time warm_until = absl::Now() + absl::Seconds(20);
  int warm_up = 0;
  for (; warm_up < 200 && absl::Now() < warm_until &&
         (a.PlanCalls() <= 0 || b.PlanCalls() <= 0);
       ++warm_up) {
    v1::PlanResponse response;
    grpc::Status s = CallPlan(stub.get(), request, &response);
    ASSERT_TRUE(s.ok()) << "warm-up " << warm_up << ": " << s.error_message();
  }
  const double a_before = a.PlanCalls(), b_before = b.PlanCalls();
  ASSERT_GT(a_before, 0) << "after " << warm_up << " calls";
  ASSERT_GT(b_before, 0) << "after " << warm_up << " calls";
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    v1::PlanResponse response;
    grpc::Status s = CallPlan(stub.get(), request, &response);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
    EXPECT_GE(response.arena_size_bytes(), response.lower_bound_bytes());
  }
  const double on_a = a.PlanCalls() - a_before;
  const double on_b = b.PlanCalls() - b_before;
  EXPECT_EQ(on_a + on_b, kCalls) << "a " << on_a << ", b " << on_b;
  EXPECT_GE(on_a, kCalls / 4) << "b served " << on_b;
  EXPECT_GE(on_b, kCalls / 4) << "a served " << on_a;
}

// Two client threads call without pause; replica b is killed (SIGKILL: no
// drain, calls on it are cut) a third of the way in. Every call must still
// succeed: the channel retries UNAVAILABLE on replica a.
TEST(ReplicasTest, ReplicaGoingAwayLosesNoCall) {
  Replica a, b;
  ASSERT_GT(a.metrics_port, 0) << a.process.first_line();
  ASSERT_GT(b.metrics_port, 0) << b.process.first_line();
  auto channel = client::MakeChannel(Target(a, b));
  auto stub = v1::MemoryPlanner::NewStub(channel);
  const v1::PlanRequest request = Chain(200);
  constexpr int kThreads = 2, kCallsPerThread = 150;
  std::atomic<int> done{0}, ok{0};
  std::vector<std::string> errors[kThreads];
  const absl::Time stop_at = absl::Now() + absl::Seconds(40);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsPerThread && absl::Now() < stop_at; ++i) {
        v1::PlanResponse response;
        grpc::Status s = CallPlan(stub.get(), request, &response);
        if (s.ok() && response.assignments_size() == 201) {
          ++ok;
        } else {
          errors[t].push_back(
              absl::StrCat(s.error_code(), " ", s.error_message()));
        }
        ++done;
      }
    });
  }
  const absl::Time wait_until = absl::Now() + absl::Seconds(20);
  while (done < kThreads * kCallsPerThread / 3 && absl::Now() < wait_until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const double b_before = b.PlanCalls();
  const double a_before = a.PlanCalls();
  b.process.Stop(SIGKILL, 5);
  const int done_at_kill = done;
  for (std::thread& t : threads) t.join();

  ASSERT_EQ(done, kThreads * kCallsPerThread) << "ran out of time";
  ASSERT_LT(done_at_kill, kThreads * kCallsPerThread) << "killed too late";
  std::vector<std::string> all;
  for (auto& e : errors) all.insert(all.end(), e.begin(), e.end());
  EXPECT_THAT(all, ::testing::IsEmpty());
  EXPECT_EQ(ok, kThreads * kCallsPerThread);
  // Both served before the kill; a served every call finished after it
  // (but for at most one per thread that b had answered just before).
  EXPECT_GT(b_before, 0);
  EXPECT_GT(a_before, 0);
  const double a_after = a.PlanCalls();
  EXPECT_GE(a_after - a_before,
            kThreads * kCallsPerThread - done_at_kill - kThreads)
      << "done at kill " << done_at_kill;
}

// The CLI takes the same ipv4: list and spreads its call the same way.
TEST(ReplicasTest, CliPlansThroughAnIpv4List) {
  Replica a, b;
  ASSERT_GT(a.metrics_port, 0) << a.process.first_line();
  ASSERT_GT(b.metrics_port, 0) << b.process.first_line();
  testing::CommandResult r = testing::RunCommand(
      MEMPLAN_CLI_PATH,
      {"plan", "--server", Target(a, b),
       std::string(MEMPLAN_SOURCE_DIR) + "/examples/resnet50.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("buffers:      123"));
  EXPECT_EQ(a.PlanCalls() + b.PlanCalls(), 1);
  // With b gone, the same target still plans (on a).
  b.process.Stop(SIGTERM, 10);
  r = testing::RunCommand(MEMPLAN_CLI_PATH, {"plan", "--server", Target(a, b),
                                             std::string(MEMPLAN_SOURCE_DIR) +
                                                 "/examples/resnet50.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace memplan
