#include "server/service.h"

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>

#include "absl/cleanup/cleanup.h"
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

// The CancelToken probe of a call: whether its client has gone (cancelled
// the call, or the connection dropped). On the sync server
// ServerContext::IsCancelled() polls the call's completion queue (a lock, a
// poll and often a futex wait and wake), and the planner checks its token
// at every stage and every few thousand steps: asked each time, the probe
// cost a small plan more than its planning. So it is asked at most once
// per kProbeEvery, the first time kProbeEvery into the call (a call that
// ends sooner never asks); one thread asks at a time, the others answer
// "not yet" meanwhile. A client that goes is noticed within about
// kProbeEvery plus the planner's own polling gap (a few milliseconds).
class ClientGoneProbe {
 public:
  explicit ClientGoneProbe(grpc::ServerContext* context)
      : context_(context),
        next_probe_ns_(absl::GetCurrentTimeNanos() + kProbeEveryNs) {}

  ClientGoneProbe(const ClientGoneProbe&) = delete;
  ClientGoneProbe& operator=(const ClientGoneProbe&) = delete;

  bool operator()() {
    const int64_t now = absl::GetCurrentTimeNanos();
    int64_t next = next_probe_ns_.load(std::memory_order_relaxed);
    if (now < next) return false;
    if (!next_probe_ns_.compare_exchange_strong(next, now + kProbeEveryNs,
                                                std::memory_order_relaxed)) {
      return false;  // another thread is asking now
    }
    return context_->IsCancelled();
  }

 private:
  static constexpr int64_t kProbeEveryNs = 2'000'000;  // 2 ms
  grpc::ServerContext* const context_;
  std::atomic<int64_t> next_probe_ns_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Messages may quote a request (names, values): the text rule makes them
  // valid UTF-8 (a strict client decodes them), and they are cut, on a
  // character boundary, so a status always fits gRPC's metadata limits,
  // however large the input was.
  const std::string text = base::BoundedMessage(status.message());
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), text);
}

template <typename Request, typename Response>
void PlannerService::AddParsedMethod(
    const char* name,
    grpc::Status (PlannerService::*run)(grpc::ServerContext*, const Request&,
                                        Response*),
    size_t large_request) {
  using In = ArenaMessage<Request>;
  using Out = ArenaMessage<Response>;
  AddMethod(new grpc::internal::RpcServiceMethod(
      name, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<PlannerService, In, Out>(
          [run, large_request](PlannerService* service,
                               grpc::ServerContext* context, const In* request,
                               Out* response) {
            // The response is the call's last memory to go (gRPC frees the
            // request first, the response once sent).
            response->set_return_heap_top(request->arena_bytes() >=
                                          large_request);
            return (service->*run)(context, request->message(),
                                   response->mutable_message());
          },
          this)));
}

PlannerService::PlannerService(const ServiceOptions& options,
                               base::WorkerPool* workers,
                               const base::CancelToken* shutdown,
                               Metrics* metrics, IdleMemoryReturner* memory)
    : options_(options),
      workers_(workers),
      shutdown_(shutdown),
      metrics_(metrics),
      memory_(memory) {
  // A Plan request of 1 MiB: some 20,000 buffers or tensors, tens of
  // milliseconds of planning, next to which giving a heap back costs
  // little. A Benchmark call replays allocators at any size: always.
  AddParsedMethod("/memplan.v1.MemoryPlanner/Plan", &PlannerService::RunPlan,
                  size_t{1} << 20);
  AddParsedMethod("/memplan.v1.MemoryPlanner/Benchmark",
                  &PlannerService::RunBenchmark, 0);
  // Read at each scrape: set on each admission and exit instead, two calls
  // admitted at once could set 2 then 1 (the older count last), and tasks a
  // call left queued, never started, kept counting after its last exit.
  metrics_->SetQueueDepthSource(
      [this] { return in_flight_.load() + workers_->queue_depth(); });
}

PlannerService::~PlannerService() { metrics_->SetQueueDepthSource(nullptr); }

bool PlannerService::Admit() {
  int current = in_flight_.load();
  while (current < options_.max_in_flight) {
    if (in_flight_.compare_exchange_weak(current, current + 1)) {
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

grpc::Status PlannerService::RunPlan(grpc::ServerContext* context,
                                     const v1::PlanRequest& request,
                                     v1::PlanResponse* response) {
  return Guarded("Plan", [&] {
    ClientGoneProbe client_gone(context);
    base::CancelToken cancel(shutdown_, CallDeadline(*context),
                             [&client_gone] { return client_gone(); });
    absl::StatusOr<engine::PlanOutcome> outcome = engine::Plan(
        request, options_.limits, workers_, &cancel, options_.plan_cache);
    if (!outcome.ok()) return Failed(outcome.status());
    // A call that ended meanwhile gets no response built or serialized
    // (for a large plan with pictures, more work than the last stage).
    const auto ended = [&] {
      return Failed(absl::DeadlineExceededError("the call ended"));
    };
    if (cancel.Cancelled()) return ended();
    metrics_->PlanDone(outcome->result);
    // On this thread alone: filled on the workers, the assignments' blocks
    // come from the workers' heaps, which without huge pages (no heap
    // steps, glibc's sliding trim threshold) keep them past the idle
    // return (an idle server held over 64 MB after a 400,000-buffer call
    // in 3 runs of 10 under load); with the steps it gained about 6%
    // (BENCHMARKS.md, session 12).
    engine::ToResponse(*std::move(outcome), &cancel, nullptr, response);
    if (cancel.Cancelled()) return ended();
    return grpc::Status::OK;
  });
}

grpc::Status PlannerService::RunBenchmark(grpc::ServerContext* context,
                                          const v1::BenchmarkRequest& request,
                                          v1::BenchmarkResponse* response) {
  return Guarded("Benchmark", [&] {
    if (benchmarks_.fetch_add(1) >= options_.max_benchmarks) {
      benchmarks_.fetch_sub(1);
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the server is busy: ", options_.max_benchmarks,
                       " Benchmark calls in progress (--max_benchmarks); "
                       "retry later"));
    }
    absl::Cleanup done = [this] { benchmarks_.fetch_sub(1); };
    ClientGoneProbe client_gone(context);
    base::CancelToken cancel(shutdown_, CallDeadline(*context),
                             [&client_gone] { return client_gone(); });
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
