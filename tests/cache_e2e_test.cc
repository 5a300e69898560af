// The plan cache with the real thing: a real redis-server on 127.0.0.1 (a
// free port, no persistence, stopped by PID) and real memplan-server
// replicas started with --cache=redis://127.0.0.1:PORT. A plan made
// through one replica is served by the other with identical bytes, a
// renamed copy of a graph too under its own names; Redis killed in the
// middle of a load fails no call, and once restarted the hits resume; a
// poisoned entry written straight into Redis is never returned; identical
// requests at once are computed once per replica. Skipped, saying so, where
// redis-server is not installed (scripts/setup.sh installs it).
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/plan_cache.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "planner/planner.h"
#include "proto/convert.h"
#include "tests/testing/metrics.h"
#include "tests/testing/process.h"
#include "tests/testing/requests.h"

namespace memplan {
namespace {

constexpr char kRedisServer[] = "/usr/bin/redis-server";

// A redis-server of our own on 127.0.0.1:port, without persistence,
// stopped by PID.
class RedisServer {
 public:
  explicit RedisServer(int port) : port_(port) { Start(); }
  ~RedisServer() { Kill(); }

  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDOUT_FILENO);
      const std::string port = std::to_string(port_);
      execl(kRedisServer, kRedisServer, "--port", port.c_str(), "--bind",
            "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel",
            "warning", "--maxmemory", "64mb", "--maxmemory-policy",
            "allkeys-lru", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  // SIGKILL (no shutdown of its own: a Redis that vanishes) and reaped.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Waits (at most 10 s) until it answers PING.
  bool WaitReady() const {
    for (int i = 0; i < 200; ++i) {
      if (redisReply* r = Command({"PING"})) {
        freeReplyObject(r);
        return true;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }
  // One command on a fresh connection; null when it fails. The caller
  // frees the reply.
  redisReply* Command(const std::vector<std::string>& args) const {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr || c->err) {
      if (c != nullptr) redisFree(c);
      return nullptr;
    }
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(
        c, static_cast<int>(args.size()), argv.data(), lengths.data()));
    redisFree(c);
    return r;
  }
  int port() const { return port_; }
  std::string url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

 private:
  const int port_;
  pid_t pid_ = -1;
};

// A memplan-server replica with gRPC and metrics on ports it picks.
struct Replica {
  explicit Replica(const std::string& cache, std::vector<std::string> more = {})
      : process(MEMPLAN_SERVER_PATH, Args(cache, std::move(more))),
        metrics_port(testing::MetricsPort(process.first_line())),
        channel(grpc::CreateChannel(process.address(),
                                    grpc::InsecureChannelCredentials())),
        stub(v1::MemoryPlanner::NewStub(channel)) {}

  static std::vector<std::string> Args(const std::string& cache,
                                       std::vector<std::string> more) {
    std::vector<std::string> args = {
        "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
        "--worker_threads=2", "--grace_seconds=2", "--cache=" + cache,
        // The default 5 ms is for a Redis beside the server; on a loaded
        // test machine redis-server can wait longer than that for a core,
        // and a lookup that times out makes a hit a miss. A Redis that is
        // gone still fails at once (the connection is refused or reset).
        "--cache_timeout_ms=1000"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  grpc::Status Plan(const v1::PlanRequest& request, v1::PlanResponse* out,
                    absl::Duration deadline = absl::Seconds(30)) const {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return stub->Plan(&context, request, out);
  }
  // A metric summed over the series whose labels include `match`.
  double Metric(const std::string& name,
                const std::map<std::string, std::string>& match = {}) const {
    absl::StatusOr<double> sum = testing::MetricSum(metrics_port, name, match);
    EXPECT_TRUE(sum.ok()) << sum.status();
    return sum.value_or(-1);
  }
  // Waits (at most 10 s) until the replica's store is up: it connects
  // from a thread of its own, and waits only 200 ms for that at start
  // (a loaded machine, as under ctest -j2, can take longer; a plan made
  // before then is not shared).
  bool WaitStoreUp() const {
    for (int i = 0; i < 100; ++i) {
      if (Metric("memplan_plan_cache_store_up", {{"store", "redis"}}) == 1) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }
  // The health status of `service`.
  int Health(const std::string& service) const {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    if (!health->Check(&context, request, &response).ok()) return -1;
    return response.status();
  }

  testing::ServerProcess process;
  int metrics_port;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::MemoryPlanner::Stub> stub;
};

// A chain graph with tensor names made from `prefix` and sizes from `seed`:
// the same structure for every prefix.
v1::PlanRequest Chain(int n, int seed, const std::string& prefix = "") {
  std::vector<testing::ChainTensor> tensors = {
      {prefix + "x", 1024 + 64 * int64_t{seed}}};
  std::vector<std::string> ops;
  for (int i = 0; i < n; ++i) {
    tensors.push_back(
        {absl::StrCat(prefix, "t", i), 256 * (1 + (i * 7 + seed * 13) % 23)});
    ops.push_back(absl::StrCat(prefix, "op", i));
  }
  v1::PlanRequest r;
  *r.mutable_graph() = testing::ChainGraph(tensors, ops);
  return r;
}

// A request whose plan takes a search of a few hundred milliseconds,
// bounded by effort (so it is cached).
v1::PlanRequest Search() {
  v1::PlanRequest r = testing::MinimallocSearch("I.1048576.csv", 60000);
  r.mutable_options()->set_strategy("auto");
  r.mutable_options()->set_optimize(true);
  r.mutable_options()->set_effort(100000);
  r.set_no_timings(true);  // the same bytes from every call
  return r;
}

// Whether two assignments live together share a byte.
std::string Overlap(const v1::PlanResponse& r) {
  for (int i = 0; i < r.assignments_size(); ++i) {
    for (int j = i + 1; j < r.assignments_size(); ++j) {
      const v1::Assignment& a = r.assignments(i);
      const v1::Assignment& b = r.assignments(j);
      const bool live =
          a.first_step() < b.end_step() && b.first_step() < a.end_step();
      const bool bytes = a.offset() < b.offset() + b.size() &&
                         b.offset() < a.offset() + a.size();
      if (live && bytes && a.in_place_of() != b.name() &&
          b.in_place_of() != a.name()) {
        return a.name() + " and " + b.name();
      }
    }
  }
  return "";
}

// What a server plans for `request` and the key it stores it under,
// computed here as the server does.
struct ServerPlan {
  planner::PlanOptions options;
  std::string key;
  planner::PlanResult plan;
};
std::optional<ServerPlan> PlanAsTheServerDoes(const v1::PlanRequest& request) {
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(request.options(), api::Budgets{});
  if (!options.ok()) return std::nullopt;
  const planner::Graph graph = api::GraphFromProto(request.graph());
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanGraph(graph, *options, nullptr, nullptr);
  const std::optional<std::string> key = engine::GraphCacheKey(graph, *options);
  if (!plan.ok() || !key.has_value()) return std::nullopt;
  return ServerPlan{*options, *key, *std::move(plan)};
}

class CacheE2eTest : public ::testing::Test {
 protected:
  // Writes `plan` as the entry of `server`'s key, straight into Redis (as
  // another writer could).
  bool SetEntry(const ServerPlan& server, const planner::PlanResult& plan) {
    redisReply* set = redis_->Command(
        {"SET", "memplan:plan:" + server.key,
         engine::EncodeCacheEntry(server.key, server.options, plan)});
    if (set == nullptr) return false;
    freeReplyObject(set);
    return true;
  }
  void SetUp() override {
    if (access(kRedisServer, X_OK) != 0) {
      GTEST_SKIP() << kRedisServer
                   << " is missing (scripts/setup.sh installs redis-server)";
    }
    redis_ = std::make_unique<RedisServer>(testing::FreePort());
    ASSERT_TRUE(redis_->WaitReady()) << "redis-server did not start";
  }
  std::unique_ptr<RedisServer> redis_;
};

TEST_F(CacheE2eTest, APlanMadeByOneReplicaIsServedByTheOther) {
  Replica a(redis_->url()), b(redis_->url());
  ASSERT_TRUE(a.WaitStoreUp() && b.WaitStoreUp()) << "no Redis connection";
  ASSERT_GT(a.process.port(), 0) << a.process.first_line();
  ASSERT_GT(b.process.port(), 0) << b.process.first_line();
  // no_timings: the same bytes for the same request, cached or not.
  v1::PlanRequest request = Chain(60, 1);
  request.set_no_timings(true);
  v1::PlanResponse made, served;
  ASSERT_TRUE(a.Plan(request, &made).ok());
  ASSERT_TRUE(b.Plan(request, &served).ok());
  EXPECT_EQ(served.SerializeAsString(), made.SerializeAsString());
  EXPECT_GT(made.assignments_size(), 0);
  EXPECT_EQ(a.Metric("memplan_plan_cache_misses_total"), 1);
  EXPECT_EQ(b.Metric("memplan_plan_cache_misses_total"), 0);
  EXPECT_EQ(b.Metric("memplan_plan_cache_hits_total", {{"store", "redis"}}), 1);
  // With timings, the response says where it came from; b keeps the plan
  // in process too.
  request.set_no_timings(false);
  v1::PlanResponse again;
  ASSERT_TRUE(b.Plan(request, &again).ok());
  EXPECT_TRUE(again.cached());
  again.set_cached(false);
  again.clear_stage_micros();
  EXPECT_EQ(again.SerializeAsString(), made.SerializeAsString());
  EXPECT_EQ(b.Metric("memplan_plan_cache_hits_total", {{"store", "memory"}}),
            1);
  EXPECT_EQ(b.Health("memplan.v1.PlanCache"),
            grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(CacheE2eTest, ARenamedCopyHitsAndComesBackUnderItsOwnNames) {
  Replica a(redis_->url()), b(redis_->url());
  ASSERT_TRUE(a.WaitStoreUp() && b.WaitStoreUp()) << "no Redis connection";
  const v1::PlanRequest original = Chain(40, 2);
  const v1::PlanRequest renamed = Chain(40, 2, "exported_v2/");
  v1::PlanResponse made, served;
  ASSERT_TRUE(a.Plan(original, &made).ok());
  ASSERT_TRUE(b.Plan(renamed, &served).ok());
  EXPECT_TRUE(served.cached());
  ASSERT_EQ(served.assignments_size(), made.assignments_size());
  for (int i = 0; i < made.assignments_size(); ++i) {
    EXPECT_EQ(served.assignments(i).name(),
              "exported_v2/" + made.assignments(i).name());
    EXPECT_EQ(served.assignments(i).offset(), made.assignments(i).offset());
  }
  EXPECT_EQ(served.arena_size_bytes(), made.arena_size_bytes());
}

// Redis goes away (SIGKILL) in the middle of a load of new plans: every
// call still succeeds, quickly, and the server counts store errors and
// reports the store down; once Redis is back, plans are shared again.
TEST_F(CacheE2eTest, RedisKilledMidLoadFailsNoCallAndHitsResumeAfter) {
  Replica a(redis_->url()), b(redis_->url());
  ASSERT_TRUE(a.WaitStoreUp() && b.WaitStoreUp()) << "no Redis connection";
  constexpr int kCalls = 300;
  std::atomic<int> done{0};
  std::vector<std::string> errors;
  absl::Duration slowest;
  std::thread load([&] {
    for (int i = 0; i < kCalls; ++i) {
      v1::PlanResponse r;
      const absl::Time start = absl::Now();
      grpc::Status s = a.Plan(Chain(30, 1000 + i), &r, absl::Seconds(10));
      slowest = std::max(slowest, absl::Now() - start);
      if (!s.ok()) errors.push_back(s.error_message());
      ++done;
    }
  });
  for (int i = 0; i < 20000 && done < kCalls / 4; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  redis_->Kill();
  const int done_at_kill = done;
  load.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_LT(done_at_kill, kCalls) << "killed too late";
  EXPECT_LT(slowest, absl::Seconds(2));
  EXPECT_GT(a.Metric("memplan_plan_cache_store_errors_total"), 0);
  EXPECT_EQ(a.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}), 0);
  EXPECT_EQ(a.Health("memplan.v1.PlanCache"),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(a.Health("memplan.v1.MemoryPlanner"),
            grpc::health::v1::HealthCheckResponse::SERVING);

  // b, idle meanwhile, finds out by itself within seconds (it PINGs a
  // quiet store every second).
  for (int i = 0; i < 100; ++i) {
    if (b.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}) == 0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(b.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}), 0);

  // Back on the same port: both replicas reconnect (backoff at most 2 s).
  redis_->Start();
  ASSERT_TRUE(redis_->WaitReady());
  for (int i = 0; i < 100; ++i) {
    if (a.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}) == 1 &&
        b.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}) == 1) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  const v1::PlanRequest fresh = Chain(50, 77);
  v1::PlanResponse made, served;
  ASSERT_TRUE(a.Plan(fresh, &made).ok());
  ASSERT_TRUE(b.Plan(fresh, &served).ok());
  EXPECT_FALSE(made.cached());
  EXPECT_TRUE(served.cached());
  EXPECT_EQ(a.Health("memplan.v1.PlanCache"),
            grpc::health::v1::HealthCheckResponse::SERVING);
}

// A valid-looking entry (right key, version and checksum) whose plan puts
// two tensors that are live together on the same bytes, written straight
// into Redis: the server refuses it, counts it, and answers its own plan.
TEST_F(CacheE2eTest, APoisonedEntryIsNeverReturned) {
  const v1::PlanRequest request = Chain(40, 3);
  // The plan the server would make, forged.
  const std::optional<ServerPlan> plan = PlanAsTheServerDoes(request);
  ASSERT_TRUE(plan.has_value());
  planner::PlanResult forged = plan->plan;
  // t0 and t1 are live together (op1 reads t0, writes t1): same offset.
  const int t0 = forged.tensors[1].buffer, t1 = forged.tensors[2].buffer;
  ASSERT_GE(t0, 0);
  ASSERT_GE(t1, 0);
  forged.solution.offsets[t1] = forged.solution.offsets[t0];
  forged.solution.arena_size = 0;  // fitted, as a careful forger would
  for (size_t i = 0; i < forged.problem.buffers.size(); ++i) {
    forged.solution.arena_size =
        std::max(forged.solution.arena_size,
                 forged.solution.offsets[i] + forged.problem.buffers[i].size);
  }
  ASSERT_TRUE(SetEntry(*plan, forged));

  Replica a(redis_->url());
  ASSERT_TRUE(a.WaitStoreUp()) << "no Redis connection";
  v1::PlanResponse r;
  ASSERT_TRUE(a.Plan(request, &r).ok());
  EXPECT_FALSE(r.cached());
  EXPECT_EQ(Overlap(r), "");
  EXPECT_EQ(r.arena_size_bytes(), plan->plan.solution.arena_size);
  EXPECT_EQ(a.Metric("memplan_plan_cache_verification_failures_total",
                     {{"store", "redis"}}),
            1);
  // Replaced by the server's own plan, which the next replica serves.
  Replica b(redis_->url());
  ASSERT_TRUE(b.WaitStoreUp()) << "no Redis connection";
  v1::PlanResponse served;
  ASSERT_TRUE(b.Plan(request, &served).ok());
  EXPECT_TRUE(served.cached());
  EXPECT_EQ(Overlap(served), "");
  EXPECT_EQ(b.Metric("memplan_plan_cache_verification_failures_total"), 0);
}

// With a shared secret (--cache_secret_file), replicas serve only entries
// signed with it: a valid plan written into Redis by anything else (here a
// larger one, said to be optimal, which the verifier cannot tell from the
// server's own) is refused; what one replica stores, the other serves.
TEST_F(CacheE2eTest, WithASecretOnlySignedEntriesAreServed) {
  const std::string secret_file =
      ::testing::TempDir() + "memplan_cache_secret_" + std::to_string(getpid());
  {
    std::ofstream(secret_file) << "a secret of the replicas, 42 bytes long.\n";
  }
  struct Remove {
    const std::string& path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_secret{secret_file};
  const v1::PlanRequest request = Chain(40, 5);
  const std::optional<ServerPlan> plan = PlanAsTheServerDoes(request);
  ASSERT_TRUE(plan.has_value());
  planner::PlanResult larger = plan->plan;  // valid: every offset moved up
  for (planner::Offset& o : larger.solution.offsets) o += 4096;
  larger.solution.arena_size += 4096;
  larger.proven_optimal = true;
  ASSERT_TRUE(SetEntry(*plan, larger));

  const std::vector<std::string> signing = {"--cache_secret_file=" +
                                            secret_file};
  Replica a(redis_->url(), signing);
  ASSERT_TRUE(a.WaitStoreUp()) << "no Redis connection";
  v1::PlanResponse r;
  ASSERT_TRUE(a.Plan(request, &r).ok());
  EXPECT_FALSE(r.cached());
  EXPECT_EQ(r.arena_size_bytes(), plan->plan.solution.arena_size);
  EXPECT_EQ(a.Metric("memplan_plan_cache_verification_failures_total",
                     {{"store", "redis"}}),
            1);
  Replica b(redis_->url(), signing);
  ASSERT_TRUE(b.WaitStoreUp()) << "no Redis connection";
  v1::PlanResponse served;
  ASSERT_TRUE(b.Plan(request, &served).ok());
  EXPECT_TRUE(served.cached());
  EXPECT_EQ(served.arena_size_bytes(), plan->plan.solution.arena_size);
}

// Eight identical requests at once on each of two replicas sharing Redis:
// each replica computes the plan at most once (the others wait for it).
TEST_F(CacheE2eTest, IdenticalRequestsAtOnceComputeOncePerReplica) {
  Replica a(redis_->url()), b(redis_->url());
  ASSERT_TRUE(a.WaitStoreUp() && b.WaitStoreUp()) << "no Redis connection";
  const v1::PlanRequest request = Search();
  constexpr int kPerReplica = 8;
  std::vector<std::thread> threads;
  std::vector<v1::PlanResponse> responses(2 * kPerReplica);
  std::atomic<int> ok{0};
  for (int i = 0; i < 2 * kPerReplica; ++i) {
    threads.emplace_back([&, i] {
      const Replica& replica = i % 2 ? b : a;
      if (replica.Plan(request, &responses[i], absl::Seconds(60)).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(ok, 2 * kPerReplica);
  const double misses = a.Metric("memplan_plan_cache_misses_total") +
                        b.Metric("memplan_plan_cache_misses_total");
  EXPECT_GE(misses, 1);
  EXPECT_LE(a.Metric("memplan_plan_cache_misses_total"), 1);
  EXPECT_LE(b.Metric("memplan_plan_cache_misses_total"), 1);
  for (const v1::PlanResponse& r : responses) {
    EXPECT_EQ(r.SerializeAsString(), responses[0].SerializeAsString());
  }
  EXPECT_EQ(a.Metric("memplan_plan_cache_hits_total") +
                b.Metric("memplan_plan_cache_hits_total"),
            2 * kPerReplica - misses);
}

// Without Redis at all (--cache=redis:// to a port nobody listens on),
// calls succeed and the store is reported down.
TEST(CacheE2eNoRedisTest, AnUnreachableRedisFailsNoCall) {
  Replica a(absl::StrCat("redis://127.0.0.1:", testing::FreePort()));
  ASSERT_GT(a.process.port(), 0) << a.process.first_line();
  for (int i = 0; i < 20; ++i) {
    v1::PlanResponse r;
    const absl::Time start = absl::Now();
    ASSERT_TRUE(a.Plan(Chain(20, i), &r).ok());
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
  EXPECT_EQ(a.Metric("memplan_plan_cache_store_up", {{"store", "redis"}}), 0);
  EXPECT_GT(a.Metric("memplan_plan_cache_store_errors_total"), 0);
  // The in-process cache still serves.
  v1::PlanResponse r;
  ASSERT_TRUE(a.Plan(Chain(20, 0), &r).ok());
  EXPECT_TRUE(r.cached());
}

}  // namespace
}  // namespace memplan
