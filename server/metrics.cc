#include "server/metrics.h"

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace memplan::server {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// go-grpc-prometheus's buckets, with finer ones below 5 ms: a Plan call of a
// small graph takes well under a millisecond.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return *b;
}

// Nanosecond-scale buckets for single allocator operations.
const Histogram::BucketBoundaries& OpBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      25e-9, 50e-9, 100e-9, 250e-9, 500e-9, 1e-6, 2.5e-6, 10e-6, 100e-6, 1e-3};
  return *b;
}

// The methods this server has; anything else is labelled "unknown".
struct MethodLabels {
  std::string service, method, type;
};
MethodLabels Labels(const std::string& full) {
  static const char* kKnown[][3] = {
      {"/memplan.v1.MemoryPlanner/Plan", "Plan", "unary"},
      {"/memplan.v1.MemoryPlanner/Benchmark", "Benchmark", "unary"},
      {"/grpc.health.v1.Health/Check", "Check", "unary"},
      {"/grpc.health.v1.Health/Watch", "Watch", "server_stream"},
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
       "ServerReflectionInfo", "bidi_stream"},
  };
  for (const auto& k : kKnown) {
    if (full == k[0]) {
      const std::string path = k[0];
      return {path.substr(1, path.rfind('/') - 1), k[1], k[2]};
    }
  }
  return {"unknown", "unknown", "unknown"};
}

const char* CodeName(grpc::StatusCode code) {
  static const char* kNames[] = {"OK",
                                 "Canceled",
                                 "Unknown",
                                 "InvalidArgument",
                                 "DeadlineExceeded",
                                 "NotFound",
                                 "AlreadyExists",
                                 "PermissionDenied",
                                 "ResourceExhausted",
                                 "FailedPrecondition",
                                 "Aborted",
                                 "OutOfRange",
                                 "Unimplemented",
                                 "Internal",
                                 "Unavailable",
                                 "DataLoss",
                                 "Unauthenticated"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "Unknown";
}

// Counts one RPC: start at the first metadata, end at the status.
class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* batch) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (batch->QueryInterceptionHookPoint(Hook::POST_RECV_INITIAL_METADATA)) {
      start_ = std::chrono::steady_clock::now();
      metrics_->RpcStarted(method_);
    }
    if (batch->QueryInterceptionHookPoint(Hook::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> took =
          std::chrono::steady_clock::now() - start_;
      metrics_->RpcHandled(method_, batch->GetSendStatus().error_code(),
                           took.count());
    }
    batch->Proceed();
  }

 private:
  Metrics* metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
};

class MetricsInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info->method());
  }

 private:
  Metrics* metrics_;
};

}  // namespace

// Every metric family, registered once.
struct Metrics::Families {
  explicit Families(prometheus::Registry& r)
      : started(prometheus::BuildCounter()
                    .Name("grpc_server_started_total")
                    .Help("RPCs started on the server.")
                    .Register(r)),
        handled(prometheus::BuildCounter()
                    .Name("grpc_server_handled_total")
                    .Help("RPCs completed on the server, by status code.")
                    .Register(r)),
        handling(prometheus::BuildHistogram()
                     .Name("grpc_server_handling_seconds")
                     .Help("Time from an RPC's start to its status.")
                     .Register(r)),
        arena(prometheus::BuildGauge()
                  .Name("memplan_plan_arena_bytes")
                  .Help("Arena size of the last plan returned.")
                  .Register(r)
                  .Add({})),
        efficiency(prometheus::BuildGauge()
                       .Name("memplan_plan_efficiency_ratio")
                       .Help("Arena / lower bound of the last plan (1 is "
                             "optimal).")
                       .Register(r)
                       .Add({})),
        stage(prometheus::BuildHistogram()
                  .Name("memplan_plan_stage_seconds")
                  .Help("Time per planner pipeline stage.")
                  .Register(r)),
        queue(prometheus::BuildGauge()
                  .Name("memplan_planner_queue_depth")
                  .Help("Requests admitted and not yet answered, plus "
                        "planner tasks waiting for a worker.")
                  .Register(r)
                  .Add({})),
        wins(prometheus::BuildCounter()
                 .Name("memplan_plan_strategy_wins_total")
                 .Help("Plans returned, by the strategy that won.")
                 .Register(r)),
        time_limited(prometheus::BuildCounter()
                         .Name("memplan_plan_time_limited_total")
                         .Help("Plans returned whose search the time budget "
                               "or the deadline cut (another machine may "
                               "plan differently; an effort bounds it by "
                               "work).")
                         .Register(r)
                         .Add({})),
        in_use(Gauge_("memplan_allocator_bytes_in_use",
                      "Bytes handed out (Benchmark allocators: at the peak "
                      "of their last run).",
                      r)),
        peak_in_use(Gauge_("memplan_allocator_peak_bytes_in_use",
                           "Most bytes handed out at once.", r)),
        reserved(Gauge_("memplan_allocator_bytes_reserved",
                        "Bytes taken from the system (Benchmark allocators: "
                        "the peak of their last run).",
                        r)),
        fragmentation(Gauge_("memplan_allocator_fragmentation_ratio",
                             "1 - largest free block / free bytes.", r)),
        allocs(prometheus::BuildCounter()
                   .Name("memplan_allocator_allocs_total")
                   .Help("Successful allocations.")
                   .Register(r)),
        failures(prometheus::BuildCounter()
                     .Name("memplan_allocator_alloc_failures_total")
                     .Help("Allocations that failed.")
                     .Register(r)),
        op_seconds(prometheus::BuildHistogram()
                       .Name("memplan_allocator_op_seconds")
                       .Help("Time of one allocate or free call.")
                       .Register(r)),
        internal(prometheus::BuildCounter()
                     .Name("memplan_internal_errors_total")
                     .Help("Calls answered INTERNAL because something was "
                           "thrown (a bug: see the server log).")
                     .Register(r)),
        cache_hits(prometheus::BuildCounter()
                       .Name("memplan_plan_cache_hits_total")
                       .Help("Plans served from the plan cache, verified, by "
                             "where the entry was found (memory, redis).")
                       .Register(r)),
        cache_misses(prometheus::BuildCounter()
                         .Name("memplan_plan_cache_misses_total")
                         .Help("Plans computed because no cache entry served "
                               "the request.")
                         .Register(r)
                         .Add({})),
        cache_refused(prometheus::BuildCounter()
                          .Name("memplan_plan_cache_verification_failures_"
                                "total")
                          .Help("Cache entries that failed their checks "
                                "(corrupt, truncated, another version, a plan "
                                "the verifier refuses): dropped, the plan "
                                "recomputed.")
                          .Register(r)),
        cache_bytes(prometheus::BuildGauge()
                        .Name("memplan_plan_cache_bytes")
                        .Help("Bytes the in-process plan cache holds.")
                        .Register(r)
                        .Add({})),
        cache_evictions(prometheus::BuildCounter()
                            .Name("memplan_plan_cache_evictions_total")
                            .Help("Entries evicted from the in-process plan "
                                  "cache to keep it within --cache_bytes.")
                            .Register(r)
                            .Add({})),
        store_errors(prometheus::BuildCounter()
                         .Name("memplan_plan_cache_store_errors_total")
                         .Help("Shared store calls that failed or timed out "
                               "(the Plan call went on without the store).")
                         .Register(r)),
        store_seconds(prometheus::BuildHistogram()
                          .Name("memplan_plan_cache_store_seconds")
                          .Help("Time of one shared store call (get, put, "
                                "drop).")
                          .Register(r)),
        store_up(prometheus::BuildGauge()
                     .Name("memplan_plan_cache_store_up")
                     .Help("1 while the plan cache's shared store is "
                           "reachable.")
                     .Register(r)) {}

  static Family<Gauge>& Gauge_(const char* name, const char* help,
                               prometheus::Registry& r) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
  }

  Family<Counter>& started;
  Family<Counter>& handled;
  Family<Histogram>& handling;
  Gauge& arena;
  Gauge& efficiency;
  Family<Histogram>& stage;
  Gauge& queue;
  Family<Counter>& wins;
  Counter& time_limited;
  Family<Gauge>& in_use;
  Family<Gauge>& peak_in_use;
  Family<Gauge>& reserved;
  Family<Gauge>& fragmentation;
  Family<Counter>& allocs;
  Family<Counter>& failures;
  Family<Histogram>& op_seconds;
  Family<Counter>& internal;
  Family<Counter>& cache_hits;
  Counter& cache_misses;
  Family<Counter>& cache_refused;
  Gauge& cache_bytes;
  Counter& cache_evictions;
  Family<Counter>& store_errors;
  Family<Histogram>& store_seconds;
  Family<Gauge>& store_up;
  absl::Mutex peak_mu;  // serializes read-modify-write of peak gauges
};

namespace {

// Store calls take tens of microseconds on a LAN; the timeout is
// milliseconds.
const Histogram::BucketBoundaries& StoreBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      // --cache_timeout_ms may be raised past the 5 ms default
      0.05, 0.1, 0.25, 0.5, 1, 2.5};
  return *b;
}

}  // namespace

// The plan cache's reports into the families above. Labels are fixed
// strings: the tier ("memory" or the store's name) and the call ("get",
// "put", "drop").
class Metrics::CacheListener : public engine::PlanCacheListener {
 public:
  CacheListener(Families* f, std::string store)
      : f_(f), store_(std::move(store)) {}
  void Hit(absl::string_view tier) override {
    f_->cache_hits.Add({{"store", std::string(tier)}}).Increment();
  }
  void Miss() override { f_->cache_misses.Increment(); }
  void Refused(absl::string_view tier) override {
    f_->cache_refused.Add({{"store", std::string(tier)}}).Increment();
  }
  void Evicted(int64_t entries) override {
    f_->cache_evictions.Increment(static_cast<double>(entries));
  }
  void Bytes(int64_t bytes) override {
    f_->cache_bytes.Set(static_cast<double>(bytes));
  }
  void StoreCall(absl::string_view op, absl::Duration latency,
                 bool failed) override {
    const prometheus::Labels labels{{"store", store_}, {"op", std::string(op)}};
    f_->store_seconds.Add(labels, StoreBuckets())
        .Observe(absl::ToDoubleSeconds(latency));
    if (failed) f_->store_errors.Add(labels).Increment();
  }

 private:
  Families* f_;
  const std::string store_;
};

namespace {

// civetweb's worker threads and its timeout for reading a request.
constexpr int kMetricsThreads = 8;
constexpr int kMetricsReadTimeoutMs = 5000;

}  // namespace

// The registry as a scrape collects it: Metrics::Collect.
class Metrics::Sampled : public prometheus::Collectable {
 public:
  explicit Sampled(Metrics* metrics) : metrics_(metrics) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return metrics_->Collect();
  }

 private:
  Metrics* const metrics_;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      families_(std::make_unique<Families>(*registry_)),
      sampled_(std::make_shared<Sampled>(this)) {
  // Every allocator's counters from the start, at 0: rates and increase()
  // then see the first replay after a start too.
  for (const std::string& allocator : engine::BenchmarkAllocatorNames()) {
    families_->allocs.Add({{"allocator", allocator}});
    families_->failures.Add({{"allocator", allocator}});
  }
}

Metrics::~Metrics() = default;

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(
    const std::string& address) {
  auto metrics = std::make_unique<Metrics>();
  // The exporter's web server (civetweb) gives each connection a thread of
  // its own while it reads a request: with prometheus-cpp's default of two
  // threads and 30 s to read, two clients that send half a request stall
  // every scrape for 30 s, renewable forever. Enough threads that a few
  // stalled connections leave scrapes a free one, and a short read timeout
  // that frees theirs.
  std::vector<std::string> options = {
      "listening_ports",    address,                        //
      "num_threads",        absl::StrCat(kMetricsThreads),  //
      "request_timeout_ms", absl::StrCat(kMetricsReadTimeoutMs)};
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address,
                     " (--metrics_address): is the port in use, or the host "
                     "not an address of this machine? (",
                     e.what(), ")"));
  }
  metrics->exposer_->RegisterCollectable(metrics->sampled_);
  return metrics;
}

int Metrics::port() const {
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::StopServing() { exposer_.reset(); }

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
Metrics::InterceptorFactories() {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      factories;
  factories.push_back(std::make_unique<MetricsInterceptorFactory>(this));
  return factories;
}

void Metrics::RpcStarted(const std::string& method) {
  const MethodLabels l = Labels(method);
  families_->started
      .Add({{"grpc_service", l.service},
            {"grpc_method", l.method},
            {"grpc_type", l.type}})
      .Increment();
}

void Metrics::RpcHandled(const std::string& method, grpc::StatusCode code,
                         double seconds) {
  const MethodLabels l = Labels(method);
  families_->handled
      .Add({{"grpc_service", l.service},
            {"grpc_method", l.method},
            {"grpc_type", l.type},
            {"grpc_code", CodeName(code)}})
      .Increment();
  families_->handling
      .Add({{"grpc_service", l.service},
            {"grpc_method", l.method},
            {"grpc_type", l.type}},
           LatencyBuckets())
      .Observe(seconds);
}

void Metrics::PlanDone(const planner::PlanResult& result) {
  families_->arena.Set(static_cast<double>(result.solution.arena_size));
  if (result.lower_bound > 0) {
    families_->efficiency.Set(static_cast<double>(result.solution.arena_size) /
                              static_cast<double>(result.lower_bound));
  }
  for (const planner::StageTime& s : result.stages) {
    families_->stage.Add({{"stage", s.stage}}, LatencyBuckets())
        .Observe(static_cast<double>(s.micros) * 1e-6);
  }
  families_->wins.Add({{"strategy", result.strategy}}).Increment();
  if (result.time_limited) families_->time_limited.Increment();
}

void Metrics::SetQueueDepthSource(std::function<int()> depth) {
  absl::MutexLock lock(&source_mu_);
  queue_depth_ = std::move(depth);
}

std::vector<prometheus::MetricFamily> Metrics::Collect() {
  {
    absl::MutexLock lock(&source_mu_);
    families_->queue.Set(queue_depth_ ? static_cast<double>(queue_depth_())
                                      : 0.0);
  }
  return registry_->Collect();
}

void Metrics::AllocatorRun(const std::string& allocator,
                           const engine::ReplayFigures& r) {
  const prometheus::Labels labels{{"allocator", allocator}};
  families_->in_use.Add(labels).Set(static_cast<double>(r.peak_bytes_in_use));
  families_->reserved.Add(labels).Set(
      static_cast<double>(r.peak_bytes_reserved));
  families_->fragmentation.Add(labels).Set(r.fragmentation_at_peak);
  families_->allocs.Add(labels).Increment(static_cast<double>(r.allocations));
  families_->failures.Add(labels).Increment(static_cast<double>(r.failures));
  Histogram& ops = families_->op_seconds.Add(labels, OpBuckets());
  for (int64_t ns : r.op_ns) ops.Observe(static_cast<double>(ns) * 1e-9);
  absl::MutexLock lock(&families_->peak_mu);
  Gauge& peak = families_->peak_in_use.Add(labels);
  if (r.peak_bytes_in_use > peak.Value()) {
    peak.Set(static_cast<double>(r.peak_bytes_in_use));
  }
}

engine::PlanCacheListener* Metrics::PlanCacheListener(
    const std::string& store) {
  if (cache_listener_ == nullptr) {
    cache_listener_ = std::make_unique<CacheListener>(families_.get(), store);
    // Every series from the start, so that rates and alerts see zeros.
    families_->cache_hits.Add({{"store", "memory"}});
    families_->cache_refused.Add({{"store", "memory"}});
    if (!store.empty()) {
      families_->cache_hits.Add({{"store", store}});
      families_->cache_refused.Add({{"store", store}});
      for (const char* op : {"get", "put", "drop"}) {
        families_->store_errors.Add({{"store", store}, {"op", op}});
      }
    }
  }
  return cache_listener_.get();
}

void Metrics::PlanCacheStoreUp(const std::string& store, bool up) {
  families_->store_up.Add({{"store", store}}).Set(up ? 1 : 0);
}

void Metrics::InternalError(const std::string& method) {
  const bool known = method == "Plan" || method == "Benchmark";
  families_->internal.Add({{"grpc_method", known ? method : "unknown"}})
      .Increment();
}

}  // namespace memplan::server
