#include "server/health.h"

#include <optional>
#include <utility>

namespace memplan::server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One open Watch stream: writes the newest status, one write at a time, and
// finishes when asked to end, when the client cancels or a write fails.
class HealthService::Watcher final
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name)
      : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Writes `status` next (a newer one replaces it while a write is busy).
  void Send(ServingStatus status) {
    absl::MutexLock lock(&mu_);
    pending_ = status;
    WriteOrFinishLocked();
  }
  // Finishes with UNAVAILABLE once every status sent has been written.
  void End() {
    absl::MutexLock lock(&mu_);
    end_ = true;
    WriteOrFinishLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the stream is broken: nothing more to say
    WriteOrFinishLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    WriteOrFinishLocked();
  }
  void OnDone() override {
    service_->Forget(this);
    delete this;
  }

 private:
  // The next step of the stream: nothing while a write is busy (its
  // OnWriteDone comes back here), else write, else finish if asked.
  void WriteOrFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (cancelled_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
    } else if (pending_.has_value()) {
      response_.set_status(*pending_);
      pending_.reset();
      writing_ = true;
      StartWrite(&response_);
    } else if (end_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server is shutting down"));
    }
  }

  HealthService* const service_;
  const std::string name_;  // the service watched
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);  // being written
  std::optional<ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // a write is in flight
  bool end_ ABSL_GUARDED_BY(mu_) = false;        // End() was called
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // by the client or a failure
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish() was called
};

HealthService::HealthService() {
  absl::MutexLock lock(&mu_);
  serving_[""] = true;
}

HealthService::~HealthService() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::set<Watcher*>* watchers) { return watchers->empty(); },
      &watchers_));
}

HealthService::ServingStatus HealthService::StatusLocked(
    const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING
                    : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetServing(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  serving_[service] = serving && !all_down_;
  for (Watcher* w : watchers_) {
    if (w->name() == service) w->Send(StatusLocked(service));
  }
}

void HealthService::SetAllServing(bool serving) {
  absl::MutexLock lock(&mu_);
  all_down_ = !serving;
  for (auto& [name, value] : serving_) value = serving;
  for (Watcher* w : watchers_) w->Send(StatusLocked(w->name()));
}

void HealthService::EndWatches() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  for (Watcher* w : watchers_) w->End();
}

int HealthService::open_watches() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

void HealthService::Forget(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusLocked(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  absl::MutexLock lock(&mu_);
  watchers_.insert(watcher);
  watcher->Send(StatusLocked(request->service()));
  if (ended_) watcher->End();
  return watcher;
}

}  // namespace memplan::server
