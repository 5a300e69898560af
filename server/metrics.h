// memplan-server's Prometheus metrics (prometheus-cpp), served on their own
// HTTP port: gRPC server metrics named as go-grpc-prometheus names them
// (filled by a server interceptor), planner metrics, and allocator metrics
// from Benchmark runs (each call replays the static plan in arenas of its
// own, reported as allocator="static_plan"). No
// label takes its value from a request: method names outside the known set
// are counted as "unknown".
//
//   absl::StatusOr<std::unique_ptr<Metrics>> m = Metrics::Start("127.0.0.1:0");
//   builder.experimental().SetInterceptorCreators(m->InterceptorFactories());
//
// Thread-safe.
#ifndef MEMPLAN_SERVER_METRICS_H_
#define MEMPLAN_SERVER_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/benchmark.h"
#include "engine/plan_cache.h"
#include "grpcpp/support/server_interceptor.h"
#include "planner/planner.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace memplan::server {

class Metrics {
 public:
  // Serves /metrics on `address` (host:port; port 0 picks one).
  // UNAVAILABLE naming the address when it cannot listen there (port taken).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(
      const std::string& address);
  // Metrics that are collected but not served (tests, no --metrics_address).
  Metrics();
  ~Metrics();

  // The port /metrics is served on; 0 when not served. Not concurrent with
  // StopServing().
  int port() const;
  // Stops serving /metrics; the metrics are still collected. Takes up to
  // about 2 s (civetweb polls its sockets in 2 s steps): a shutdown runs it
  // on a thread of its own.
  void StopServing();

  // Interceptor factories that count every RPC (for ServerBuilder).
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  InterceptorFactories();

  // A call started / finished, for the gRPC metrics. `method` is the full
  // "/package.Service/Method".
  void RpcStarted(const std::string& method);
  void RpcHandled(const std::string& method, grpc::StatusCode code,
                  double seconds);

  // A plan was returned.
  void PlanDone(const planner::PlanResult& result);
  // Where memplan_planner_queue_depth comes from: `depth` is asked at
  // each collection (a scrape), so the gauge shows the requests and tasks
  // as they are then, whatever order the calls and the workers changed
  // them in. Null (what a source's owner sets before it goes): the gauge
  // reads 0. Waits for a collection asking the old source.
  void SetQueueDepthSource(std::function<int()> depth);
  // One allocator run of a Benchmark call (figures at its peak).
  void AllocatorRun(const std::string& allocator,
                    const engine::ReplayFigures& result);
  // A call of `method` ("Plan", "Benchmark") ended INTERNAL on something
  // thrown.
  void InternalError(const std::string& method);

  // What the plan cache reports, as memplan_plan_cache_* metrics; its
  // store calls are labelled store=`store` (e.g. "redis"). Lives as long as
  // the Metrics.
  engine::PlanCacheListener* PlanCacheListener(const std::string& store);
  // Whether the plan cache's shared store is reachable
  // (memplan_plan_cache_store_up{store}).
  void PlanCacheStoreUp(const std::string& store, bool up);

  prometheus::Registry& registry() { return *registry_; }
  // What a scrape collects: the registry, once the sampled gauges are set.
  std::vector<prometheus::MetricFamily> Collect();

 private:
  struct Families;
  class CacheListener;
  class Sampled;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  absl::Mutex source_mu_;
  std::function<int()> queue_depth_ ABSL_GUARDED_BY(source_mu_);
  // Registered with the exposer in place of the registry.
  std::shared_ptr<Sampled> sampled_;
  std::unique_ptr<CacheListener> cache_listener_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_METRICS_H_
