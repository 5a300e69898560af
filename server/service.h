// The memplan.v1.MemoryPlanner gRPC service: admission, then the planner
// pipeline on the shared worker pool.
//
//   server::PlannerService service(options, &pool, &shutdown);
//   builder.RegisterService(&service);
//
// Thread-safe: gRPC calls Plan from many threads at once.
#ifndef MEMPLAN_SERVER_SERVICE_H_
#define MEMPLAN_SERVER_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "planner/cancel.h"
#include "planner/worker_pool.h"
#include "proto/convert.h"

namespace memplan::server {

struct ServiceOptions {
  api::Limits limits;  // per-request limits (tensors, ops, time budget)
  // Requests planned at once; one more answers RESOURCE_EXHAUSTED at once.
  // Default 64. REQUIRES >= 1.
  int max_in_flight = 64;
};

// gRPC status with the same code and message as an absl::Status (abseil's
// codes are gRPC's).
grpc::Status ToGrpcStatus(const absl::Status& status);

class PlannerService final : public v1::MemoryPlanner::Service {
 public:
  // `pool` and `shutdown` must outlive the service; cancelling `shutdown`
  // stops every plan in progress.
  PlannerService(const ServiceOptions& options, planner::WorkerPool* pool,
                 const planner::CancelToken* shutdown);

  grpc::Status Plan(grpc::ServerContext* context,
                    const v1::PlanRequest* request,
                    v1::PlanResponse* response) override;

  int in_flight() const { return in_flight_.load(); }

 private:
  // Takes a slot for one request; false when all are taken.
  bool Admit();

  const ServiceOptions options_;
  planner::WorkerPool* const pool_;
  const planner::CancelToken* const shutdown_;
  std::atomic<int> in_flight_{0};
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_SERVICE_H_
