// rps_bench: requests per second of the Plan RPC for a ~200-tensor graph
// against an empty RPC (the health check) on the same in-process server over
// loopback, in the same run. DESIGN's budget: Plan sustains >= 40% of the
// empty RPC's rate. Each round also times an echo service answering the
// same request with the same response, prepared: the transport's ceiling.
//   rps_bench [seconds per round=2] [client threads=4] [rounds=3]
//             [strategy=auto] [workers=2] [cache=off|memory]
// With cache=memory the service has the in-process plan cache that
// memplan-server has by default (--cache=memory): every call after the
// first is a hit (the problem rebuilt from the request and the plan
// verified, not searched).
//   rps_bench --dump FILE    writes the graph's PlanRequest as JSON
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "bench/median.h"
#include "engine/plan.h"
#include "engine/plan_cache.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "planner/testing/random_problems.h"
#include "server/metrics.h"
#include "server/service.h"

namespace memplan {
namespace {

// The planner's random graph as a request: ~200 tensors.
v1::PlanRequest Graph200() {
  planner::Graph g = planner::testing::RandomGraph(130, 7);
  v1::PlanRequest r;
  v1::Graph* out = r.mutable_graph();
  out->set_name(g.name);
  for (const planner::Tensor& t : g.tensors) {
    v1::Tensor* x = out->add_tensors();
    x->set_name(t.name);
    x->set_size_bytes(t.size_bytes);
  }
  for (const planner::Op& op : g.ops) {
    v1::Op* o = out->add_ops();
    o->set_name(op.name);
    for (const auto& i : op.inputs) o->add_inputs(i);
    for (const auto& x : op.outputs) o->add_outputs(x);
  }
  for (const auto& i : g.inputs) out->add_inputs(i);
  for (const auto& o : g.outputs) out->add_outputs(o);
  return r;
}

// The transport's share alone: a MemoryPlanner whose Plan answers a
// prepared response (the real plan of the benchmark's request) without
// planning: gRPC and protobuf reading and writing the same messages.
class EchoPlanner final : public v1::MemoryPlanner::Service {
 public:
  explicit EchoPlanner(v1::PlanResponse response)
      : response_(std::move(response)) {}
  grpc::Status Plan(grpc::ServerContext*, const v1::PlanRequest* request,
                    v1::PlanResponse* response) override {
    if (request->graph().tensors_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no tensors");
    }
    *response = response_;
    return grpc::Status::OK;
  }

 private:
  const v1::PlanResponse response_;
};

// A server of `service` on 127.0.0.1 (port 0) with the metrics'
// interceptors, as memplan-server has them, and a channel to it.
std::unique_ptr<grpc::Server> StartServer(
    grpc::Service* service, server::Metrics* metrics,
    std::shared_ptr<grpc::Channel>* channel) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service);
  builder.experimental().SetInterceptorCreators(
      metrics->InterceptorFactories());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                 grpc::InsecureChannelCredentials());
  return server;
}

// Calls `call` from `threads` threads for `seconds`; returns calls/second.
template <typename Call>
double Rate(int threads, double seconds, Call call) {
  std::atomic<int64_t> done{0};
  std::atomic<bool> failed{false};
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (std::chrono::steady_clock::now() < end) {
        if (!call()) failed = true;
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (failed) {
    std::fprintf(stderr, "a call failed\n");
    std::exit(1);
  }
  return static_cast<double>(done.load()) / seconds;
}

int Run(double seconds, int threads, int rounds, const std::string& strategy,
        int workers, bool cache) {
  // As memplan-server's main does: no deadlock detection on hot mutexes.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  base::WorkerPool pool(workers, 512);
  base::CancelToken shutdown;
  server::Metrics metrics;
  server::ServiceOptions options;
  options.max_in_flight = 1024;
  engine::PlanCache plan_cache{engine::PlanCacheOptions()};
  if (cache) options.plan_cache = &plan_cache;
  server::PlannerService service(options, &pool, &shutdown, &metrics);
  grpc::EnableDefaultHealthCheckService(true);
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::Server> server =
      StartServer(&service, &metrics, &channel);
  auto planner_stub = v1::MemoryPlanner::NewStub(channel);
  auto health_stub = grpc::health::v1::Health::NewStub(channel);
  v1::PlanRequest request = Graph200();
  request.mutable_options()->set_strategy(strategy);
  std::printf(
      "graph: %d tensors, %d ops; strategy %s; %d client threads, "
      "%.1f s per round; plan cache %s\n",
      request.graph().tensors_size(), request.graph().ops_size(),
      strategy.c_str(), threads, seconds, cache ? "in memory" : "off");
  v1::PlanResponse planned;
  {
    // The plan itself: whether the default heuristics end at the bound
    // (else the default plan also searches, within its node cap).
    grpc::ClientContext context;
    v1::PlanResponse& resp = planned;
    if (!planner_stub->Plan(&context, request, &resp).ok()) {
      std::fprintf(stderr, "the first Plan call failed\n");
      return 1;
    }
    std::printf(
        "plan: arena %lld, lower bound %lld, strategy %s; request %zu bytes, "
        "response %zu bytes\n",
        static_cast<long long>(resp.arena_size_bytes()),
        static_cast<long long>(resp.lower_bound_bytes()),
        resp.strategy().c_str(), request.ByteSizeLong(), resp.ByteSizeLong());
  }
  // The same messages through the echo service (its own server, with the
  // same interceptors), on the same client channel settings.
  EchoPlanner echo(planned);
  std::shared_ptr<grpc::Channel> echo_channel;
  std::unique_ptr<grpc::Server> echo_server =
      StartServer(&echo, &metrics, &echo_channel);
  auto echo_stub = v1::MemoryPlanner::NewStub(echo_channel);
  std::vector<double> ratios, floors;
  for (int round = 0; round < rounds; ++round) {
    const double empty = Rate(threads, seconds, [&] {
      grpc::ClientContext context;
      grpc::health::v1::HealthCheckRequest req;
      grpc::health::v1::HealthCheckResponse resp;
      return health_stub->Check(&context, req, &resp).ok();
    });
    const double plan = Rate(threads, seconds, [&] {
      grpc::ClientContext context;
      v1::PlanResponse resp;
      return planner_stub->Plan(&context, request, &resp).ok();
    });
    const double floor = Rate(threads, seconds, [&] {
      grpc::ClientContext context;
      v1::PlanResponse resp;
      return echo_stub->Plan(&context, request, &resp).ok();
    });
    ratios.push_back(plan / empty);
    floors.push_back(floor / empty);
    std::printf(
        "round %d: health %.0f rps, plan %.0f rps, ratio %.2f; echo %.0f rps, "
        "ratio %.2f\n",
        round + 1, empty, plan, plan / empty, floor, floor / empty);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(floors.begin(), floors.end());
  std::printf(
      "median ratio echo (the same messages, no planning) / empty RPC: %.2f\n",
      floors[floors.size() / 2]);
  std::printf("median ratio plan / empty RPC: %.2f (budget >= 0.40)\n",
              ratios[ratios.size() / 2]);
  echo_server->Shutdown();
  server->Shutdown();
  return 0;
}

// The server's own work for one Plan call of the graph, in this thread
// without gRPC: parsing the request's bytes on an arena, engine::Plan,
// the response on the same arena, serializing it. Median microseconds of
// `calls` calls per step, after as many unmeasured calls.
int Handler(int calls, const std::string& strategy) {
  v1::PlanRequest source = Graph200();
  source.mutable_options()->set_strategy(strategy);
  const std::string bytes = source.SerializeAsString();
  base::WorkerPool pool(2, 512);
  base::CancelToken cancel;
  std::vector<double> parse, plan, respond, serialize, total;
  std::map<std::string, std::vector<double>> stages;
  size_t response_bytes = 0;
  for (int i = 0; i < 2 * calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    google::protobuf::Arena arena;
    auto* request =
        google::protobuf::Arena::CreateMessage<v1::PlanRequest>(&arena);
    if (!request->ParseFromString(bytes)) return 1;
    const auto t1 = std::chrono::steady_clock::now();
    absl::StatusOr<engine::PlanOutcome> outcome =
        engine::Plan(*request, engine::Limits{}, &pool, &cancel);
    if (!outcome.ok()) {
      std::fprintf(stderr, "%s\n", outcome.status().ToString().c_str());
      return 1;
    }
    const auto t2 = std::chrono::steady_clock::now();
    if (i >= calls) {
      for (const planner::StageTime& st : outcome->result.stages) {
        stages[st.stage].push_back(static_cast<double>(st.micros));
      }
    }
    auto* response =
        google::protobuf::Arena::CreateMessage<v1::PlanResponse>(&arena);
    engine::ToResponse(*std::move(outcome), &cancel, nullptr, response);
    const auto t3 = std::chrono::steady_clock::now();
    const std::string out = response->SerializeAsString();
    const auto t4 = std::chrono::steady_clock::now();
    response_bytes = out.size();
    if (i < calls) continue;  // warming up
    const auto us = [](auto a, auto b) {
      return std::chrono::duration<double, std::micro>(b - a).count();
    };
    parse.push_back(us(t0, t1));
    plan.push_back(us(t1, t2));
    respond.push_back(us(t2, t3));
    serialize.push_back(us(t3, t4));
    total.push_back(us(t0, t4));
  }
  std::printf(
      "handler, one thread, median of %d calls (request %zu bytes, response "
      "%zu): parse %.1f us, engine::Plan %.1f us, ToResponse %.1f us, "
      "serialize %.1f us; total %.1f us\n",
      calls, bytes.size(), response_bytes, bench::Median(parse),
      bench::Median(plan), bench::Median(respond), bench::Median(serialize),
      bench::Median(total));
  std::printf("engine::Plan's stages (median us):");
  for (const auto& [name, micros] : stages) {
    std::printf(" %s %.0f", name.c_str(), bench::Median(micros));
  }
  std::printf("\n");
  return 0;
}

}  // namespace

constexpr const char* kUsage =
    "usage: rps_bench [seconds per round=2] [client threads=4] [rounds=3]\n"
    "                 [strategy=auto] [workers=2] [cache=off|memory]\n"
    "       rps_bench --dump FILE   the graph's PlanRequest as JSON\n"
    "       rps_bench --handler [calls=3000] [strategy=auto]\n"
    "                               the server's own work for one call, in\n"
    "                               this thread without gRPC (median us)\n"
    "Plan RPCs per second on a 193-tensor graph against an empty RPC\n"
    "(health Check), same in-process server over loopback, same run; and\n"
    "the same messages through a service that answers a prepared plan\n"
    "(echo: what gRPC and protobuf alone allow).\n";

}  // namespace memplan

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--dump") {
    // The request the figures come from, as JSON (memplan plan FILE).
    std::string json;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    if (!google::protobuf::util::MessageToJsonString(memplan::Graph200(), &json,
                                                     o)
             .ok()) {
      return 1;
    }
    std::FILE* f = std::fopen(argv[2], "w");
    if (f == nullptr) return 1;
    std::fputs(json.c_str(), f);
    return std::fclose(f) == 0 ? 0 : 1;
  }
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--handler" && argc > 4) {
    std::fprintf(stderr,
                 "rps_bench: --handler takes at most a call count and a "
                 "strategy\n");
    return 64;
  }
  if (first == "--handler") {
    int calls = 3000;
    if ((argc > 2 && !absl::SimpleAtoi(argv[2], &calls)) || calls < 1 ||
        calls > 1000000) {
      std::fprintf(stderr, "rps_bench: --handler takes 1 to 1000000 calls\n");
      return 64;
    }
    return memplan::Handler(calls, argc > 3 ? argv[3] : "auto");
  }
  if (first == "--help" || first == "-h" || argc > 7) {
    std::fputs(memplan::kUsage, argc > 7 ? stderr : stdout);
    return argc > 7 ? 64 : 0;
  }
  double seconds = 2.0;
  int threads = 4, rounds = 3, workers = 2;
  const bool numbers_ok = (argc <= 1 || absl::SimpleAtod(argv[1], &seconds)) &&
                          (argc <= 2 || absl::SimpleAtoi(argv[2], &threads)) &&
                          (argc <= 3 || absl::SimpleAtoi(argv[3], &rounds)) &&
                          (argc <= 5 || absl::SimpleAtoi(argv[5], &workers));
  const std::string strategy = argc > 4 ? argv[4] : "auto";
  const std::string cache_arg = argc > 6 ? argv[6] : "off";
  // Bounded: every round and client loop ends in count and time.
  if (!numbers_ok || !(seconds > 0 && seconds <= 600) || threads < 1 ||
      threads > 1024 || rounds < 1 || rounds > 1000 || workers < 1 ||
      workers > 1024 || (cache_arg != "off" && cache_arg != "memory")) {
    std::fprintf(stderr,
                 "rps_bench: bad arguments (seconds in (0, 600], threads, "
                 "rounds and workers from 1 to 1024 (rounds 1000), cache off "
                 "or memory); rps_bench --help for usage\n");
    return 64;
  }
  const bool cache = cache_arg == "memory";
  return memplan::Run(seconds, threads, rounds, strategy, workers, cache);
}
