// grpc.health.v1.Health for memplan-server: Check answers from a table of
// service statuses, Watch streams every change, and EndWatches() ends the
// open Watch streams so that a shutdown is not held by them (gRPC's default
// health service keeps a Watch open until Server::Shutdown's deadline
// cancels it). Callback API: an open Watch holds no thread.
//
//   server::HealthService health;  // "" is SERVING
//   builder.RegisterService(&health);
//   health.SetServing("memplan.v1.MemoryPlanner", true);
//   health.SetAllServing(false);   // on SIGTERM: probes see NOT_SERVING
//   health.EndWatches();           // Watch streams end with UNAVAILABLE
//
// Thread-safe. Must outlive the grpc::Server it is registered with.
#ifndef MEMPLAN_SERVER_HEALTH_H_
#define MEMPLAN_SERVER_HEALTH_H_

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace memplan::server {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService();
  // Waits until every Watch stream is done (the server is gone by then).
  ~HealthService() override;

  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // SERVING or NOT_SERVING for `service` ("" is the server as a whole);
  // Watch streams of `service` get the change. After SetAllServing(false)
  // (shutdown), a service is not set SERVING again (a cache coming back
  // during the drain): SetAllServing(true) ends that.
  void SetServing(const std::string& service, bool serving);
  // The same for every service set so far.
  void SetAllServing(bool serving);
  // Ends every open Watch stream with UNAVAILABLE once the status it was
  // last given has been written; a Watch opened later gets the status, then
  // ends the same way.
  void EndWatches();
  // Watch streams open now (for tests).
  int open_watches();

  // grpc.health.v1.Health: NOT_FOUND for a service never set.
  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  // The status now (SERVICE_UNKNOWN for a service never set), then each
  // change, until the client cancels or EndWatches().
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;

  ServingStatus StatusLocked(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called by a Watcher when gRPC is done with it.
  void Forget(Watcher* watcher);

  absl::Mutex mu_;  // ordered before every Watcher's own mutex
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;     // EndWatches() was called
  bool all_down_ ABSL_GUARDED_BY(mu_) = false;  // SetAllServing(false)
};

}  // namespace memplan::server

#endif  // MEMPLAN_SERVER_HEALTH_H_
