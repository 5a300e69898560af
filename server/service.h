// The memplan.v1.MemoryPlanner gRPC service: admission, then the planner
// pipeline (Plan) or allocator replays (Benchmark) on the shared worker
// pool, with every result recorded in the server's metrics.
//
//   server::PlannerService service(options, &pool, &shutdown, &metrics);
//   builder.RegisterService(&service);
//
// Thread-safe: gRPC calls Plan and Benchmark from many threads at once.
#ifndef MEMPLAN_SERVER_SERVICE_H_
#define MEMPLAN_SERVER_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "allocators/bfc_allocator.h"
#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "planner/cancel.h"
#include "planner/worker_pool.h"
#include "proto/benchmark.h"
#include "proto/convert.h"
#include "server/metrics.h"

namespace memplan::server {

struct ServiceOptions {
  api::Limits limits;  // per-request limits (tensors, ops, time budget)
  // Limits of Benchmark calls (bytes, ops, time).
  api::BenchmarkLimits benchmark;
  // Requests handled at once; one more answers RESOURCE_EXHAUSTED at once.
  // Default 64. REQUIRES >= 1.
  int max_in_flight = 64;
};

// gRPC status with the same code and message as an absl::Status (abseil's
// codes are gRPC's).
grpc::Status ToGrpcStatus(const absl::Status& status);

class PlannerService final : public v1::MemoryPlanner::Service {
 public:
  // `pool`, `shutdown` and `metrics` must outlive the service; cancelling
  // `shutdown` stops every call in progress.
  PlannerService(const ServiceOptions& options, planner::WorkerPool* pool,
                 const planner::CancelToken* shutdown, Metrics* metrics);

  grpc::Status Plan(grpc::ServerContext* context,
                    const v1::PlanRequest* request,
                    v1::PlanResponse* response) override;
  grpc::Status Benchmark(grpc::ServerContext* context,
                         const v1::BenchmarkRequest* request,
                         v1::BenchmarkResponse* response) override;

 private:
  // Takes a slot for one request (false when all are taken) and returns it.
  bool Admit();
  void Leave();
  // UNAVAILABLE or RESOURCE_EXHAUSTED when the call cannot start.
  grpc::Status CheckAdmission();
  // The status to return for a failed call.
  grpc::Status Failed(const absl::Status& status) const;

  const ServiceOptions options_;
  planner::WorkerPool* const pool_;
  const planner::CancelToken* const shutdown_;
  Metrics* const metrics_;
  // Arenas of static plans replayed by Benchmark come from here (as they
  // would at run time); its figures are exported as allocator="server_arena".
  allocators::BfcAllocator arena_;
  std::atomic<int> in_flight_{0};
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_SERVICE_H_
