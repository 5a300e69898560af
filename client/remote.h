// Calling a memplan-server: Plan and the standard health check. Channels use
// round_robin over every address the target resolves to (dns:///host:port,
// ipv4:a:p,b:p) and retry UNAVAILABLE (Plan is idempotent).
//
//   absl::StatusOr<v1::PlanResponse> r =
//       client::PlanRemote("127.0.0.1:50051", request, absl::Seconds(10));
#ifndef MEMPLAN_CLIENT_REMOTE_H_
#define MEMPLAN_CLIENT_REMOTE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::client {

// A channel to `target` with round_robin and, with `retries`, the retry
// policy (UNAVAILABLE retried with backoff; PlanRemote and BenchmarkRemote
// retry themselves, on a channel without it).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           bool retries = true);

// The call's status as an absl::Status (same code and message).
absl::Status FromGrpc(const grpc::Status& status);

[[nodiscard]] absl::StatusOr<v1::PlanResponse> PlanRemote(
    const std::string& target, const v1::PlanRequest& request,
    absl::Duration deadline);

[[nodiscard]] absl::StatusOr<v1::BenchmarkResponse> BenchmarkRemote(
    const std::string& target, const v1::BenchmarkRequest& request,
    absl::Duration deadline);

struct HealthResult {
  int exit_code = 0;    // grpc_health_probe's: 0 serving, 2 connection
                        // failure, 3 RPC failure, 4 not serving
  std::string message;  // one line for the user
};

HealthResult CheckHealth(const std::string& target, const std::string& service,
                         absl::Duration deadline);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_REMOTE_H_
