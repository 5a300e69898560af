// The memplan.v1.MemoryPlanner gRPC service: admission, then the engine's
// use cases (engine::Plan, engine::RunBenchmark) run by the shared workers,
// with every result recorded in the server's metrics. A thin adapter: the
// work and its limits live in engine/.
//
//   server::PlannerService service(options, &workers, &shutdown, &metrics);
//   builder.RegisterService(&service);
//
// Thread-safe: gRPC calls Plan and Benchmark from many threads at once.
#ifndef MEMPLAN_SERVER_SERVICE_H_
#define MEMPLAN_SERVER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "base/cancel.h"
#include "base/worker_pool.h"
#include "engine/benchmark.h"
#include "engine/plan.h"
#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "server/idle_memory.h"
#include "server/metrics.h"

namespace memplan::server {

struct ServiceOptions {
  engine::Limits limits;  // per-request limits (tensors, ops, time budget)
  // Limits of Benchmark calls (bytes, ops, time).
  engine::BenchmarkLimits benchmark;
  // Requests handled at once; one more answers RESOURCE_EXHAUSTED at once.
  // Default 64. REQUIRES >= 1.
  int max_in_flight = 64;
  // The plan cache Plan calls go through (engine/plan_cache.h). Default
  // null: none. Must outlive the service.
  engine::PlanCache* plan_cache = nullptr;
};

// gRPC status with the same code and message as an absl::Status (abseil's
// codes are gRPC's); messages longer than 2 KiB are cut.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Plan and Benchmark are served as gRPC "streamed unary" methods: a client
// sees plain unary calls, but the handler reads the request itself, so
// bytes that do not parse as the request are answered INVALID_ARGUMENT
// saying so (gRPC's own unary handler answers INTERNAL with no message,
// which the alert rules count as a server fault).
class PlannerService final : public v1::MemoryPlanner::StreamedUnaryService {
 public:
  // `workers`, `shutdown`, `metrics` and `memory` (if not null) must
  // outlive the service; cancelling `shutdown` stops every call in
  // progress; `memory` hears when the server turns busy and idle.
  PlannerService(const ServiceOptions& options, base::WorkerPool* workers,
                 const base::CancelToken* shutdown, Metrics* metrics,
                 IdleMemoryReturner* memory = nullptr);

  grpc::Status StreamedPlan(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::PlanRequest, v1::PlanResponse>* stream)
      override;
  grpc::Status StreamedBenchmark(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::BenchmarkRequest, v1::BenchmarkResponse>*
          stream) override;

  // The calls on a request already read.
  grpc::Status RunPlan(grpc::ServerContext* context,
                       const v1::PlanRequest& request,
                       v1::PlanResponse* response);
  grpc::Status RunBenchmark(grpc::ServerContext* context,
                            const v1::BenchmarkRequest& request,
                            v1::BenchmarkResponse* response);

  // From now on new calls get UNAVAILABLE; calls in progress go on (the
  // first step of a shutdown, before `shutdown` is cancelled).
  void StopAdmitting() { admitting_ = false; }
  // Calls admitted and not finished.
  int in_flight() const { return in_flight_.load(); }

 private:
  // Takes a slot for one request (false when all are taken) and returns it.
  bool Admit();
  void Leave();
  // UNAVAILABLE or RESOURCE_EXHAUSTED when the call cannot start.
  grpc::Status CheckAdmission();
  // The status to return for a failed call.
  grpc::Status Failed(const absl::Status& status) const;
  // Admits the call, runs it, and leaves; anything thrown becomes INTERNAL
  // (logged and counted) instead of escaping into gRPC.
  grpc::Status Guarded(const char* method,
                       const std::function<grpc::Status()>& call);
  grpc::Status LastResort(const char* method, const char* what) const;

  const ServiceOptions options_;
  base::WorkerPool* const workers_;
  const base::CancelToken* const shutdown_;
  Metrics* const metrics_;
  IdleMemoryReturner* const memory_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> admitting_{true};
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_SERVICE_H_
