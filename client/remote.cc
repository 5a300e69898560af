#include "client/remote.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "memplan/v1/memplan.grpc.pb.h"

namespace memplan::client {
namespace {

// round_robin across resolved addresses; UNAVAILABLE retried with backoff.
constexpr char kServiceConfig[] = R"({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "memplan.v1.MemoryPlanner"}],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.05s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})";
// The same balancing, retries left to the caller.
constexpr char kServiceConfigWithoutRetries[] = R"({
  "loadBalancingConfig": [{"round_robin": {}}]
})";

// The retries Call makes itself, as kServiceConfig's policy has them.
constexpr int kMaxAttempts = 5;
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

void SetDeadline(grpc::ClientContext* context, absl::Duration deadline) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           bool retries) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(retries ? kServiceConfig
                                    : kServiceConfigWithoutRetries);
  args.SetMaxReceiveMessageSize(-1);  // plans of large graphs are large
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const std::string& message = status.error_message();
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      absl::StartsWith(message, "Received message larger than max")) {
    // gRPC's own limit: the same request will never be taken.
    return absl::ResourceExhaustedError(absl::StrCat(
        message,
        ": the request is larger than the server takes (memplan-server "
        "--max_request_bytes); plan in-process, raise the server's limit, "
        "or send a lean model (docs/json-contract.md, \"Models\")"));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      message);
}

namespace {

// Calls one unary method of MemoryPlanner within the deadline; UNAVAILABLE
// is retried (another replica may answer) with the channel's policy's
// backoff, but here rather than by the policy, so that what a server said
// (it shut down during the call) is not lost behind what the attempts
// after it met (connection refused once it was gone). CANCELLED is retried
// too: this client never cancels, so the server did (a call that reached
// it as it closed). The error names the target.
template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(const std::string& target, const Request& request,
                              absl::Duration deadline, Method method) {
  auto stub = v1::MemoryPlanner::NewStub(MakeChannel(target, false));
  const absl::Time end = absl::Now() + deadline;
  absl::Duration backoff = kFirstBackoff;
  std::string first, last;  // the first and last attempts' reasons
  absl::Status s;
  absl::BitGen random;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(end));
    Response response;
    s = FromGrpc(((*stub).*method)(&context, request, &response));
    if (s.ok()) return response;
    if (!absl::IsUnavailable(s) && !absl::IsCancelled(s)) {
      // A retry's own answer (a deadline, a busy replica), with what the
      // first attempt met.
      if (first.empty()) return s;
      return absl::Status(
          s.code(),
          absl::StrCat(s.message(), " (an earlier attempt: ", first, ")"));
    }
    last =
        absl::IsCancelled(s)
            ? absl::StrCat("the server cancelled the call (", s.message(), ")")
            : std::string(s.message());
    if (first.empty()) first = last;
    // Each wait from 80% to 120% of the backoff, as gRPC's own retries
    // (clients cut off together do not all come back at once).
    const absl::Duration wait = backoff * absl::Uniform(random, 0.8, 1.2);
    if (attempt == kMaxAttempts || absl::Now() + wait >= end) break;
    absl::SleepFor(wait);
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
  std::string message =
      absl::StrCat("cannot reach memplan-server at ", target, ": ", last);
  if (first != last) {
    absl::StrAppend(&message, " (an earlier attempt: ", first, ")");
  }
  return absl::UnavailableError(message);
}

}  // namespace

absl::StatusOr<v1::PlanResponse> PlanRemote(const std::string& target,
                                            const v1::PlanRequest& request,
                                            absl::Duration deadline) {
  return Call<v1::PlanRequest, v1::PlanResponse>(
      target, request, deadline, &v1::MemoryPlanner::Stub::Plan);
}

absl::StatusOr<v1::BenchmarkResponse> BenchmarkRemote(
    const std::string& target, const v1::BenchmarkRequest& request,
    absl::Duration deadline) {
  return Call<v1::BenchmarkRequest, v1::BenchmarkResponse>(
      target, request, deadline, &v1::MemoryPlanner::Stub::Benchmark);
}

HealthResult CheckHealth(const std::string& target, const std::string& service,
                         absl::Duration deadline) {
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(target));
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    const bool connection = status.error_code() == grpc::UNAVAILABLE ||
                            status.error_code() == grpc::DEADLINE_EXCEEDED;
    return {connection ? 2 : 3,
            absl::StrCat(connection ? "error: cannot connect to "
                                    : "error: health RPC failed at ",
                         target, ": ", status.error_message())};
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return {4, absl::StrCat(
                   "service unhealthy (responded with ",
                   grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                       response.status()),
                   ")")};
  }
  return {0, "status: SERVING"};
}

}  // namespace memplan::client
