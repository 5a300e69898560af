#include "server/service.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/text.h"

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
  // Messages may quote a request (names, values): the text rule makes them
  // valid UTF-8 (a strict client decodes them), and they are cut, on a
  // character boundary, so a status always fits gRPC's metadata limits,
  // however large the input was.
  constexpr size_t kMaxMessage = 2048;
  const std::string message = base::SafeMessage(status.message());
  std::string text(base::Utf8Prefix(message, kMaxMessage));
  if (message.size() > text.size()) {
    absl::StrAppend(&text, "... (", message.size() - text.size(),
                    " more bytes)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), text);
}

PlannerService::PlannerService(const ServiceOptions& options,
                               base::WorkerPool* workers,
                               const base::CancelToken* shutdown,
                               Metrics* metrics, IdleMemoryReturner* memory)
    : options_(options),
      workers_(workers),
      shutdown_(shutdown),
      metrics_(metrics),
      memory_(memory) {}

bool PlannerService::Admit() {
  int current = in_flight_.load();
  while (current < options_.max_in_flight) {
    if (in_flight_.compare_exchange_weak(current, current + 1)) {
      metrics_->SetQueueDepth(current + 1 + workers_->queue_depth());
      // (A call that leaves the last slot at this moment may tell the
      // returner after this: memory is then returned during this call,
      // which costs it page faults, nothing more.)
      if (current == 0 && memory_ != nullptr) memory_->CallStarted();
      return true;
    }
  }
  return false;
}

void PlannerService::Leave() {
  const int now = in_flight_.fetch_sub(1) - 1;
  metrics_->SetQueueDepth(now + workers_->queue_depth());
  if (now == 0 && memory_ != nullptr) memory_->CallsEnded();
}

grpc::Status PlannerService::CheckAdmission() {
  if (!admitting_ || shutdown_->Cancelled()) {
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

grpc::Status PlannerService::Guarded(
    const char* method, const std::function<grpc::Status()>& call) {
  if (grpc::Status s = CheckAdmission(); !s.ok()) return s;
  grpc::Status status;
  try {
    status = call();
  } catch (const std::exception& e) {
    status = LastResort(method, e.what());
  } catch (...) {
    status = LastResort(method, "unknown exception");
  }
  Leave();
  return status;
}

grpc::Status PlannerService::LastResort(const char* method,
                                        const char* what) const {
  std::fprintf(stderr, "memplan-server: %s: internal error: %s\n", method,
               what);
  metrics_->InternalError(method);
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      absl::StrCat("internal error in ", method, ": ", what));
}

namespace {

// Reads the one request of a streamed unary call and answers it with `run`:
// INVALID_ARGUMENT when the bytes the client sent do not parse as the
// request (CANCELLED when the client went away first).
template <typename Request, typename Response, typename Run>
grpc::Status Unary(grpc::ServerContext* context,
                   grpc::ServerUnaryStreamer<Request, Response>* stream,
                   const Run& run) {
  Request request;
  if (!stream->Read(&request)) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the call ended");
    }
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("the request could not be parsed as a ",
                                     Request::descriptor()->full_name(),
                                     " (not a protobuf message of that type)"));
  }
  Response response;
  grpc::Status status = run(request, &response);
  if (status.ok()) stream->Write(response);  // false: the client is gone
  return status;
}

}  // namespace

grpc::Status PlannerService::StreamedPlan(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::PlanRequest, v1::PlanResponse>* stream) {
  return Unary(context, stream,
               [&](const v1::PlanRequest& request, v1::PlanResponse* response) {
                 return RunPlan(context, request, response);
               });
}

grpc::Status PlannerService::StreamedBenchmark(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::BenchmarkRequest, v1::BenchmarkResponse>*
        stream) {
  return Unary(context, stream,
               [&](const v1::BenchmarkRequest& request,
                   v1::BenchmarkResponse* response) {
                 return RunBenchmark(context, request, response);
               });
}

grpc::Status PlannerService::RunPlan(grpc::ServerContext* context,
                                     const v1::PlanRequest& request,
                                     v1::PlanResponse* response) {
  return Guarded("Plan", [&] {
    base::CancelToken cancel(shutdown_, CallDeadline(*context),
                             [context] { return context->IsCancelled(); });
    absl::StatusOr<engine::PlanOutcome> outcome = engine::Plan(
        request, options_.limits, workers_, &cancel, options_.plan_cache);
    if (!outcome.ok()) return Failed(outcome.status());
    metrics_->PlanDone(outcome->result);
    *response = engine::ToResponse(*outcome);
    return grpc::Status::OK;
  });
}

grpc::Status PlannerService::RunBenchmark(grpc::ServerContext* context,
                                          const v1::BenchmarkRequest& request,
                                          v1::BenchmarkResponse* response) {
  return Guarded("Benchmark", [&] {
    base::CancelToken cancel(shutdown_, CallDeadline(*context),
                             [context] { return context->IsCancelled(); });
    absl::StatusOr<v1::BenchmarkResponse> result = engine::RunBenchmark(
        request, options_.benchmark, workers_, &cancel,
        [this](const std::string& name, const engine::ReplayFigures& r) {
          metrics_->AllocatorRun(name, r);
        });
    if (!result.ok()) return Failed(result.status());
    *response = *std::move(result);
    return grpc::Status::OK;
  });
}

}  // namespace memplan::server
