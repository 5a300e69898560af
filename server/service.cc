#include "server/service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memplan::server {
namespace {

// The call's deadline, or InfiniteFuture when the client gave none.
absl::Time CallDeadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

PlannerService::PlannerService(const ServiceOptions& options,
                               planner::WorkerPool* pool,
                               const planner::CancelToken* shutdown)
    : options_(options), pool_(pool), shutdown_(shutdown) {}

bool PlannerService::Admit() {
  int current = in_flight_.load();
  while (current < options_.max_in_flight) {
    if (in_flight_.compare_exchange_weak(current, current + 1)) return true;
  }
  return false;
}

grpc::Status PlannerService::Plan(grpc::ServerContext* context,
                                  const v1::PlanRequest* request,
                                  v1::PlanResponse* response) {
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
  planner::CancelToken cancel(shutdown_, CallDeadline(*context));
  absl::StatusOr<v1::PlanResponse> result =
      api::Plan(*request, options_.limits, pool_, &cancel);
  in_flight_.fetch_sub(1);
  if (!result.ok()) {
    if (shutdown_->Cancelled() && absl::IsDeadlineExceeded(result.status())) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server shut down while planning");
    }
    return ToGrpcStatus(result.status());
  }
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace memplan::server
