#include "server/service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memplan::server {
namespace {

constexpr char kArenaName[] = "server_arena";

// The call's deadline, or InfiniteFuture when the client gave none.
absl::Time CallDeadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

allocators::BfcAllocator::Options ArenaOptions(const ServiceOptions& o) {
  allocators::BfcAllocator::Options options;
  options.name = kArenaName;
  options.memory_limit = static_cast<size_t>(o.benchmark.max_bytes);
  options.garbage_collection = true;  // give idle arenas back to the system
  return options;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

PlannerService::PlannerService(const ServiceOptions& options,
                               planner::WorkerPool* pool,
                               const planner::CancelToken* shutdown,
                               Metrics* metrics)
    : options_(options),
      pool_(pool),
      shutdown_(shutdown),
      metrics_(metrics),
      arena_(ArenaOptions(options)) {}

bool PlannerService::Admit() {
  int current = in_flight_.load();
  while (current < options_.max_in_flight) {
    if (in_flight_.compare_exchange_weak(current, current + 1)) {
      metrics_->SetQueueDepth(current + 1 + pool_->queue_depth());
      return true;
    }
  }
  return false;
}

void PlannerService::Leave() {
  const int now = in_flight_.fetch_sub(1) - 1;
  metrics_->SetQueueDepth(now + pool_->queue_depth());
}

grpc::Status PlannerService::CheckAdmission() {
  if (shutdown_->Cancelled()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is shutting down");
  }
  if (!Admit()) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("the server is busy: ", options_.max_in_flight,
                     " requests in flight; retry later"));
  }
  return grpc::Status::OK;
}

grpc::Status PlannerService::Failed(const absl::Status& status) const {
  if (shutdown_->Cancelled() && absl::IsDeadlineExceeded(status)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server shut down during the call");
  }
  return ToGrpcStatus(status);
}

grpc::Status PlannerService::Plan(grpc::ServerContext* context,
                                  const v1::PlanRequest* request,
                                  v1::PlanResponse* response) {
  if (grpc::Status s = CheckAdmission(); !s.ok()) return s;
  planner::CancelToken cancel(shutdown_, CallDeadline(*context));
  absl::StatusOr<planner::PlanResult> result =
      api::PlanToResult(*request, options_.limits, pool_, &cancel);
  Leave();
  if (!result.ok()) return Failed(result.status());
  metrics_->PlanDone(*result);
  *response = api::ToProto(*result);
  return grpc::Status::OK;
}

grpc::Status PlannerService::Benchmark(grpc::ServerContext* context,
                                       const v1::BenchmarkRequest* request,
                                       v1::BenchmarkResponse* response) {
  if (grpc::Status s = CheckAdmission(); !s.ok()) return s;
  planner::CancelToken cancel(shutdown_, CallDeadline(*context));
  absl::StatusOr<v1::BenchmarkResponse> result = api::RunBenchmark(
      *request, options_.benchmark, &arena_, pool_, &cancel,
      [this](const std::string& name, const allocators::ReplayResult& r) {
        if (name != "static_plan") metrics_->AllocatorRun(name, r);
      });
  metrics_->AllocatorSnapshot(kArenaName, arena_.GetStats());
  Leave();
  if (!result.ok()) return Failed(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace memplan::server
