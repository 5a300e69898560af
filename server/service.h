// The memplan.v1.MemoryPlanner gRPC service: admission, then the engine's
// use cases (engine::Plan, engine::RunBenchmark) run by the shared workers,
// with every result recorded in the server's metrics. A thin adapter: the
// work and its limits live in engine/.
//
//   server::PlannerService service(options, &workers, &shutdown, &metrics);
//   builder.RegisterService(&service);
//
// Thread-safe: gRPC calls Plan and Benchmark from many threads at once.
#ifndef MEMPLAN_SERVER_SERVICE_H_
#define MEMPLAN_SERVER_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/cancel.h"
#include "base/process_memory.h"
#include "base/worker_pool.h"
#include "engine/benchmark.h"
#include "engine/plan.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.grpc.pb.h"
#include "server/idle_memory.h"
#include "server/metrics.h"

namespace memplan::server {

struct ServiceOptions {
  engine::Limits limits;  // per-request limits (tensors, ops, time budget)
  // Limits of Benchmark calls (bytes, ops, time).
  engine::BenchmarkLimits benchmark;
  // Requests handled at once; one more answers RESOURCE_EXHAUSTED at once.
  // Default 64. REQUIRES >= 1.
  int max_in_flight = 64;
  // Benchmark calls replaying at once, among those; one more answers
  // RESOURCE_EXHAUSTED at once. Each may touch BenchmarkLimits::max_bytes
  // and map files (mmap): the server's memory and map count stay bounded
  // whatever the clients do. Default 2. REQUIRES >= 1.
  int max_benchmarks = 2;
  // The plan cache Plan calls go through (engine/plan_cache.h). Default
  // null: none. Must outlive the service.
  engine::PlanCache* plan_cache = nullptr;
};

// gRPC status with the same code and message as an absl::Status (abseil's
// codes are gRPC's); messages longer than 2 KiB are cut.
grpc::Status ToGrpcStatus(const absl::Status& status);

// A request or response of Plan or Benchmark as gRPC hands it to the
// handler and takes it back: the message on a protobuf arena of its own,
// freed at once with it. A graph's tensors and ops and a plan's
// assignments are each a message with strings, which one by one cost a
// small Plan call about as much malloc and free as its planning, and a
// million-buffer call hundreds of milliseconds on one thread. A request is
// parsed by the SerializationTraits below, which answer bytes that do not
// parse as the request INVALID_ARGUMENT saying so (gRPC's own protobuf
// traits answer INTERNAL with no message, which the alert rules count as
// a server fault).
//
// A large call's memory goes back to the system once its response is
// freed: where malloc uses huge pages the server grows malloc's heaps 64
// MiB at a time (base::GrowHeapsInLargeSteps, server/main.cc), and each
// heap then keeps that much of its top for the next call; the gRPC thread
// that ran a large call has no other moment to give its heap back (the
// workers' heaps go back once the server is idle, server/idle_memory.h).
template <typename Message>
class ArenaMessage {
 public:
  ArenaMessage() = default;
  // Frees the message; then, if set_return_heap_top(true) was called, gives
  // the calling thread's free heap top back (base::ReturnThreadHeapTop).
  ~ArenaMessage() {
    arena_.Reset();
    if (return_heap_top_) base::ReturnThreadHeapTop();
  }
  ArenaMessage(const ArenaMessage&) = delete;
  ArenaMessage& operator=(const ArenaMessage&) = delete;

  const Message& message() const { return *message_; }
  Message* mutable_message() { return message_; }
  // The bytes the message's arena holds.
  size_t arena_bytes() const { return arena_.SpaceAllocated(); }
  void set_return_heap_top(bool on) { return_heap_top_ = on; }

 private:
  static google::protobuf::ArenaOptions Blocks() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 16 << 10;  // a ~200-tensor graph in 3 blocks
    // Not larger: with 8 MiB blocks an idle server held 67-81 MB more than
    // before a 400,000-buffer call, in one run of four under load (the
    // reliability test allows 64; with 1 MiB, 10 of 10 passed).
    options.max_block_size = 1 << 20;
    return options;
  }

  google::protobuf::Arena arena_{Blocks()};
  Message* const message_ =
      google::protobuf::Arena::CreateMessage<Message>(&arena_);
  bool return_heap_top_ = false;
};

// memplan.v1.MemoryPlanner, served as plain sync unary methods (one batch
// in, one out) whose request and response types are ArenaMessage: what a
// client sees is the generated service's. (Served as gRPC "streamed unary"
// methods instead, each call took two more completion-queue round trips: about
// 15% fewer small Plan calls a second, bench/rps_bench.cc.)
class PlannerService final : public grpc::Service {
 public:
  // `workers`, `shutdown`, `metrics` and `memory` (if not null) must
  // outlive the service; cancelling `shutdown` stops every call in
  // progress; `memory` hears when the server turns busy and idle.
  PlannerService(const ServiceOptions& options, base::WorkerPool* workers,
                 const base::CancelToken* shutdown, Metrics* metrics,
                 IdleMemoryReturner* memory = nullptr);
  ~PlannerService() override;

  // The calls on a request already read, into an empty response (on the
  // call's arena).
  grpc::Status RunPlan(grpc::ServerContext* context,
                       const v1::PlanRequest& request,
                       v1::PlanResponse* response);
  grpc::Status RunBenchmark(grpc::ServerContext* context,
                            const v1::BenchmarkRequest& request,
                            v1::BenchmarkResponse* response);

  // From now on new calls get UNAVAILABLE; calls in progress go on (the
  // first step of a shutdown, before `shutdown` is cancelled).
  void StopAdmitting() { admitting_ = false; }
  // Calls admitted and not finished.
  int in_flight() const { return in_flight_.load(); }

 private:
  // Registers `run` as the unary method `name` ("/memplan.v1.MemoryPlanner/
  // Plan"), as the generated Service would, but reading its request as a
  // ArenaMessage (bytes that do not parse are INVALID_ARGUMENT) and building
  // its response on another.
  // A call whose request's arena holds at least `large_request` bytes gives
  // its thread's heap top back once its response is freed
  // (ArenaMessage::set_return_heap_top).
  template <typename Request, typename Response>
  void AddParsedMethod(const char* name,
                       grpc::Status (PlannerService::*run)(grpc::ServerContext*,
                                                           const Request&,
                                                           Response*),
                       size_t large_request);
  // Takes a slot for one request (false when all are taken) and returns it.
  bool Admit();
  void Leave();
  // UNAVAILABLE or RESOURCE_EXHAUSTED when the call cannot start.
  grpc::Status CheckAdmission();
  // The status to return for a failed call.
  grpc::Status Failed(const absl::Status& status) const;
  // Admits the call, runs it, and leaves; anything thrown becomes INTERNAL
  // (logged and counted) instead of escaping into gRPC.
  grpc::Status Guarded(const char* method,
                       const std::function<grpc::Status()>& call);
  grpc::Status LastResort(const char* method, const char* what) const;

  const ServiceOptions options_;
  base::WorkerPool* const workers_;
  const base::CancelToken* const shutdown_;
  Metrics* const metrics_;
  IdleMemoryReturner* const memory_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> benchmarks_{0};  // Benchmark calls replaying
  std::atomic<bool> admitting_{true};
};

}  // namespace memplan::server

namespace grpc {

// Writes a memplan response; parses a memplan request, where bytes that do
// not parse (or no message at all) are INVALID_ARGUMENT naming the message
// type.
template <typename Message>
class SerializationTraits<memplan::server::ArenaMessage<Message>, void> {
 public:
  static Status Serialize(const memplan::server::ArenaMessage<Message>& r,
                          ByteBuffer* buffer, bool* own_buffer) {
    return SerializationTraits<Message>::Serialize(r.message(), buffer,
                                                   own_buffer);
  }
  static Status Deserialize(ByteBuffer* buffer,
                            memplan::server::ArenaMessage<Message>* r) {
    if (SerializationTraits<Message>::Deserialize(buffer, r->mutable_message())
            .ok()) {
      return Status::OK;
    }
    return Status(StatusCode::INVALID_ARGUMENT,
                  "the request could not be parsed as a " +
                      Message::descriptor()->full_name() +
                      " (not a protobuf message of that type)");
  }
};

}  // namespace grpc

#endif  // MEMPLAN_SERVER_SERVICE_H_
