// memplan-server: serves memplan.v1.MemoryPlanner, grpc.health.v1 and server
// reflection. SIGTERM/SIGINT start a shutdown that ends with exit 0 within
// --grace_seconds of the signal:
//   1. health turns NOT_SERVING for every service; new Plan/Benchmark calls
//      get UNAVAILABLE; calls in progress go on; /metrics stops;
//   2. for --drain_seconds the server keeps listening, so health Check keeps
//      answering NOT_SERVING (readiness probes and load balancers see it);
//   3. it waits for the calls in progress, still listening; 0.5 s before the
//      grace ends, those still running are cancelled (they end with
//      UNAVAILABLE, or the exact search with its best plan, within
//      milliseconds);
//   4. open health Watch streams end (UNAVAILABLE), the server stops
//      listening and closes its connections (gRPC gives calls 0.1 s, then
//      cancels them), and the process exits 0.
// A second signal during the drain, or while calls still run after it, ends
// the wait and cancels the calls in progress.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/parallel.h"
#include "base/process_memory.h"
#include "base/worker_pool.h"
#include "formats/file_io.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "memplan/version.h"
#include "server/health.h"
#include "server/idle_memory.h"
#include "server/metrics.h"
#include "server/redis_store.h"
#include "server/service.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "host:port to serve gRPC on; port 0 picks a free port (printed)");
ABSL_FLAG(int, worker_threads, 0,
          "threads planning requests; 0 means one per usable core (the "
          "affinity mask, fewer under a cgroup CPU quota)");
ABSL_FLAG(int64_t, max_request_bytes, 64 << 20,
          "largest request message accepted, in bytes");
ABSL_FLAG(int64_t, max_tensors, 1'000'000,
          "most tensors (or buffers) one request may hold");
ABSL_FLAG(int64_t, max_ops, 1'000'000, "most ops one graph may hold");
ABSL_FLAG(int64_t, max_tensor_refs, 10'000'000,
          "most tensor references (op inputs and outputs) one graph may hold");
ABSL_FLAG(int64_t, max_model_bytes, int64_t{256} << 20,
          "largest model file (PlanRequest.model) accepted, in bytes; "
          "also bounded by --max_request_bytes");
ABSL_FLAG(int, max_in_flight, 64,
          "requests planned at once; more answer RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_benchmarks, 2,
          "Benchmark calls replaying at once (each may touch "
          "--max_benchmark_bytes); more answer RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, default_time_budget_ms, 1000,
          "search time for a plan when the request sets none");
ABSL_FLAG(int64_t, max_time_budget_ms, 60000,
          "largest search time a request may ask for");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "host:port serving Prometheus /metrics; port 0 picks a free port "
          "(printed); empty turns metrics serving off");
ABSL_FLAG(int64_t, max_benchmark_bytes, int64_t{1} << 30,
          "most bytes one Benchmark replay may hold at once");
ABSL_FLAG(int64_t, max_benchmark_ops, 10'000'000,
          "most allocation events one Benchmark call may replay");
ABSL_FLAG(double, max_benchmark_seconds, 30,
          "wall time limit of one Benchmark call");
ABSL_FLAG(bool, return_memory_when_idle, true,
          "0.5 s after the last call in progress ends, and again 5 s after, "
          "give the memory calls freed back to the system (malloc_trim, "
          "and each worker's heap top); false: glibc keeps what it keeps (a "
          "worker thread's arena shrinks only from its top), and heaps grow "
          "in glibc's steps even where malloc uses huge pages");
ABSL_FLAG(double, grace_seconds, 5,
          "on SIGTERM/SIGINT, the time from the signal to the exit (0 on a "
          "clean stop): the drain, then calls in progress may finish until "
          "0.5 s before its end, when they are cancelled");
ABSL_FLAG(double, drain_seconds, 2,
          "on SIGTERM/SIGINT, how long at least health answers NOT_SERVING "
          "before the server closes (meanwhile new calls get UNAVAILABLE and "
          "calls in progress go on); part of --grace_seconds, at most grace - "
          "0.5 s; under Kubernetes, the readiness probe's periodSeconds times "
          "its failureThreshold sees the pod unready; a second signal ends it "
          "and cancels the calls in progress");

ABSL_FLAG(std::string, cache, "memory",
          "the plan cache: memory (in process, bounded by --cache_bytes), "
          "redis://HOST:PORT (in process and in a Redis shared by every "
          "replica given the same one; a Redis that is down or slow never "
          "fails a call), or off");
ABSL_FLAG(int64_t, cache_bytes, int64_t{64} << 20,
          "bytes of plans kept in process, least recently used out first; "
          "0 keeps none in process (with redis, every lookup asks Redis)");
ABSL_FLAG(int64_t, cache_timeout_ms, 5,
          "with --cache=redis://...: the longest one Redis command of a Plan "
          "call takes, from the wait for a connection to the last byte of "
          "its reply; past it the call goes on without the cache");
ABSL_FLAG(std::string, cache_secret_file, "",
          "with --cache=redis://...: a file holding a secret every replica "
          "shares (16 bytes or more; a final newline is not part of it): "
          "entries are signed with it and only signed ones are served; "
          "without it any writer to Redis can put a plan in front of the "
          "replicas");
ABSL_FLAG(int64_t, cache_max_entry_bytes, int64_t{64} << 20,
          "with --cache=redis://...: the largest plan entry stored in or "
          "read from Redis, at least 1024 (a longer reply fails its lookup, "
          "whatever sent it)");

namespace memplan::server {
namespace {

constexpr char kServiceName[] = "memplan.v1.MemoryPlanner";
// The health service name that says whether the plan cache's shared store
// is reachable (only with --cache=redis://...).
constexpr char kCacheHealthName[] = "memplan.v1.PlanCache";

// The plan cache the flags ask for: its store (Redis) and the cache.
struct PlanCacheParts {
  std::unique_ptr<RedisStore> store;
  std::unique_ptr<engine::PlanCache> cache;
  std::string note;  // for the start-up line
};

absl::StatusOr<PlanCacheParts> MakePlanCache(Metrics* metrics,
                                             HealthService* health) {
  PlanCacheParts parts;
  const std::string kind = absl::GetFlag(FLAGS_cache);
  const int64_t bytes = std::max<int64_t>(0, absl::GetFlag(FLAGS_cache_bytes));
  const std::string secret_file = absl::GetFlag(FLAGS_cache_secret_file);
  if (!secret_file.empty() && !absl::StartsWith(kind, "redis://")) {
    return absl::InvalidArgumentError(
        "--cache_secret_file signs entries stored in Redis: it needs "
        "--cache=redis://HOST:PORT");
  }
  if (kind == "off" || (kind == "memory" && bytes == 0)) {
    parts.note = "plan cache off";
    return parts;
  }
  engine::PlanCacheOptions options;
  options.max_bytes = bytes;
  if (kind != "memory") {
    RedisStoreOptions redis;
    redis.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_cache_timeout_ms));
    redis.max_reply_bytes = absl::GetFlag(FLAGS_cache_max_entry_bytes);
    if (const std::string& path = secret_file; !path.empty()) {
      absl::StatusOr<std::string> secret = formats::ReadFile(path, 4096);
      if (!secret.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--cache_secret_file: ", secret.status().message()));
      }
      while (!secret->empty() &&
             (secret->back() == '\n' || secret->back() == '\r')) {
        secret->pop_back();
      }
      if (secret->size() < 16) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--cache_secret_file: ", path, " holds ", secret->size(),
            " bytes; a shared secret needs 16 or more (e.g. head -c 32 "
            "/dev/urandom | base64)"));
      }
      redis.secret = *std::move(secret);
    }
    redis.on_change = [metrics, health](bool up) {
      metrics->PlanCacheStoreUp("redis", up);
      health->SetServing(kCacheHealthName, up);
    };
    // Down until the store's thread says otherwise: set before it starts,
    // so that its first "up" is never overwritten (the metric and the
    // health status then said down while the store served).
    metrics->PlanCacheStoreUp("redis", false);
    health->SetServing(kCacheHealthName, false);
    absl::StatusOr<std::unique_ptr<RedisStore>> store =
        RedisStore::Open(kind, redis);
    if (!store.ok()) return store.status();
    parts.store = *std::move(store);
    if (redis.secret.empty()) {
      std::fprintf(stderr,
                   "memplan-server: warning: plan cache entries in Redis are "
                   "not signed (--cache_secret_file): anything that can "
                   "write to it can put a plan in front of every replica\n");
    }
    // A moment for the first connection, so that the first calls find it.
    parts.store->WaitUntilUp(absl::Milliseconds(200));
    options.store = parts.store.get();
  }
  options.listener = metrics->PlanCacheListener(
      parts.store != nullptr ? std::string(parts.store->name()) : "");
  parts.cache = std::make_unique<engine::PlanCache>(options);
  parts.note = absl::StrCat("plan cache ", bytes >> 20, " MiB in process",
                            parts.store != nullptr ? " + " + kind : "");
  if (parts.store != nullptr && absl::EndsWith(MEMPLAN_GIT_COMMIT, "-dirty")) {
    // Builds of one commit with different local changes share the key.
    std::fprintf(stderr,
                 "memplan-server: warning: this build is of a commit with "
                 "local changes (%s): replicas of other builds of it, changed "
                 "otherwise, share its plan cache entries (each is still "
                 "verified before use)\n",
                 MEMPLAN_GIT_COMMIT);
  }
  if (parts.store != nullptr &&
      absl::string_view(MEMPLAN_GIT_COMMIT) == "unknown") {
    // Entries are keyed by the build: builds that cannot tell theirs apart
    // would serve each other's plans.
    std::fprintf(stderr,
                 "memplan-server: warning: this build does not know its git "
                 "commit (built without .git): replicas of other such builds "
                 "share its plan cache entries; build with "
                 "-DMEMPLAN_GIT_COMMIT=... (the image: --build-arg "
                 "MEMPLAN_GIT_COMMIT=...)\n");
  }
  return parts;
}

ServiceOptions OptionsFromFlags() {
  ServiceOptions options;
  options.limits.max_tensors = absl::GetFlag(FLAGS_max_tensors);
  options.limits.max_ops = absl::GetFlag(FLAGS_max_ops);
  options.limits.max_tensor_refs = absl::GetFlag(FLAGS_max_tensor_refs);
  options.limits.max_model_bytes = absl::GetFlag(FLAGS_max_model_bytes);
  options.limits.budgets.default_budget =
      absl::Milliseconds(absl::GetFlag(FLAGS_default_time_budget_ms));
  options.limits.budgets.max_budget =
      absl::Milliseconds(absl::GetFlag(FLAGS_max_time_budget_ms));
  options.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  options.max_benchmarks = absl::GetFlag(FLAGS_max_benchmarks);
  options.benchmark.plan = options.limits;
  options.benchmark.max_bytes = absl::GetFlag(FLAGS_max_benchmark_bytes);
  options.benchmark.max_ops = absl::GetFlag(FLAGS_max_benchmark_ops);
  options.benchmark.max_time =
      absl::Seconds(absl::GetFlag(FLAGS_max_benchmark_seconds));
  return options;
}

// What a shutdown acts on.
struct Serving {
  grpc::Server* server;
  HealthService* health;
  PlannerService* service;
  base::CancelToken* shutdown;  // cancels the calls in progress
  Metrics* metrics;             // its /metrics stops at the signal
};

// The moments of a shutdown, from the signal and the flags.
struct ShutdownTimes {
  absl::Time drain_end;  // health has said NOT_SERVING long enough
  absl::Time cancel;     // calls still in progress are cancelled
  absl::Time close;      // the server closes, whatever is in progress
};

// Cancelled calls stop within milliseconds (engine's promise: 50 ms); half a
// second leaves room for that and for the process's exit on a busy machine.
constexpr absl::Duration kStopMargin = absl::Milliseconds(500);
// How long no call must be in progress before freed memory goes back to the
// system: long enough for gRPC to send the last response and free it, short
// enough that an idle server's resident size drops before anyone looks.
constexpr absl::Duration kIdleBeforeReturn = absl::Milliseconds(500);
// What gRPC gives calls it did not hand us (health Check) when it closes.
constexpr absl::Duration kCloseWait = absl::Milliseconds(100);

ShutdownTimes TimesFrom(absl::Time signalled) {
  const absl::Duration grace = std::max(
      absl::ZeroDuration(), absl::Seconds(absl::GetFlag(FLAGS_grace_seconds)));
  const absl::Duration stop = std::min(kStopMargin, grace);
  const absl::Duration drain =
      std::clamp(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)),
                 absl::ZeroDuration(), grace - stop);
  return {signalled + drain, signalled + grace - stop,
          signalled + grace - stop / 2};
}

// SIGTERM and SIGINT, blocked in every thread and taken by sigwait.
sigset_t ShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

// Waits for a shutdown signal until `deadline`; true if one came.
bool SignalBefore(absl::Time deadline) {
  const sigset_t signals = ShutdownSignals();
  for (absl::Duration left = deadline - absl::Now();
       left > absl::ZeroDuration(); left = deadline - absl::Now()) {
    const timespec timeout = absl::ToTimespec(left);
    if (sigtimedwait(&signals, nullptr, &timeout) > 0) return true;
    if (errno != EINTR && errno != EAGAIN) return false;
  }
  return false;
}

// Waits until no Plan/Benchmark call is in progress, or `until`; true when
// none is. With `signalled`, a signal meanwhile (a second Ctrl-C) ends the
// wait and sets it.
bool CallsEnded(const PlannerService& service, absl::Time until,
                bool* signalled = nullptr) {
  while (service.in_flight() > 0 && absl::Now() < until) {
    const absl::Time next =
        std::min(until, absl::Now() + absl::Milliseconds(5));
    if (signalled == nullptr) {
      absl::SleepFor(next - absl::Now());
    } else if (SignalBefore(next)) {
      *signalled = true;
      return false;
    }
  }
  return service.in_flight() == 0;
}

// One line on stderr, with the time since the signal.
void Log(absl::Time signalled, const std::string& what) {
  std::fprintf(stderr, "memplan-server: %+.3f s: %s\n",
               absl::ToDoubleSeconds(absl::Now() - signalled), what.c_str());
}

// Step 3 of the file comment: calls in progress finish, or are cancelled at
// `cancel` (at once after a second signal).
void FinishCalls(const Serving& s, absl::Time signalled,
                 const ShutdownTimes& times, bool second_signal) {
  if (!second_signal && CallsEnded(*s.service, times.cancel, &second_signal)) {
    return;
  }
  Log(signalled,
      absl::StrCat(second_signal ? "second signal: " : "", "cancelling ",
                   s.service->in_flight(), " calls in progress"));
  s.shutdown->Cancel();
  CallsEnded(*s.service, times.close);
}

// Steps 1 to 4 of the file comment, from the signal to the server's end.
void ShutDown(const Serving& s, int signal_number) {
  const absl::Time signalled = absl::Now();
  const ShutdownTimes times = TimesFrom(signalled);
  // Refusing first: whoever sees NOT_SERVING will be refused.
  s.service->StopAdmitting();
  s.health->SetAllServing(false);
  std::thread metrics_stop([&] { s.metrics->StopServing(); });
  Log(signalled,
      absl::StrFormat("signal %d: health NOT_SERVING, new calls refused, %d "
                      "in progress, draining for %.1f s",
                      signal_number, s.service->in_flight(),
                      absl::ToDoubleSeconds(times.drain_end - signalled)));
  FinishCalls(s, signalled, times, SignalBefore(times.drain_end));
  s.health->EndWatches();
  Log(signalled, absl::StrCat("closing: health Watch streams ended, ",
                              s.service->in_flight(), " calls in progress"));
  s.server->Shutdown(absl::ToChronoTime(absl::Now() + kCloseWait));
  s.shutdown->Cancel();  // nothing may outlive the server
  Log(signalled, "closed");
  metrics_stop.join();
}

// Waits for SIGTERM or SIGINT, then shuts the server down.
void WaitForSignalThenShutdown(const Serving& serving) {
  const sigset_t signals = ShutdownSignals();
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  ShutDown(serving, signal_number);
}

// Flag values no server can run with: a message naming the flag, or "".
std::string BadFlag() {
  const std::pair<const char*, double> at_least_zero[] = {
      {"grace_seconds", absl::GetFlag(FLAGS_grace_seconds)},
      {"drain_seconds", absl::GetFlag(FLAGS_drain_seconds)}};
  for (const auto& [name, value] : at_least_zero) {
    if (!std::isfinite(value) || value < 0) {
      return absl::StrCat("--", name, " must be a number of seconds >= 0");
    }
  }
  const double benchmark = absl::GetFlag(FLAGS_max_benchmark_seconds);
  if (!std::isfinite(benchmark) || benchmark <= 0) {
    return "--max_benchmark_seconds must be a number of seconds above 0";
  }
  // A limit of 0 would refuse every call (or, clamped, mean something
  // else than it says): none of these has a meaning for 0.
  const std::pair<const char*, int64_t> above_zero[] = {
      {"max_request_bytes", absl::GetFlag(FLAGS_max_request_bytes)},
      {"max_tensors", absl::GetFlag(FLAGS_max_tensors)},
      {"max_ops", absl::GetFlag(FLAGS_max_ops)},
      {"max_tensor_refs", absl::GetFlag(FLAGS_max_tensor_refs)},
      {"max_model_bytes", absl::GetFlag(FLAGS_max_model_bytes)},
      {"max_in_flight", absl::GetFlag(FLAGS_max_in_flight)},
      {"max_benchmark_bytes", absl::GetFlag(FLAGS_max_benchmark_bytes)},
      {"max_benchmark_ops", absl::GetFlag(FLAGS_max_benchmark_ops)},
      {"max_benchmarks", absl::GetFlag(FLAGS_max_benchmarks)},
      {"cache_timeout_ms", absl::GetFlag(FLAGS_cache_timeout_ms)}};
  for (const auto& [name, value] : above_zero) {
    if (value <= 0) return absl::StrCat("--", name, " must be above 0");
  }
  // A budget of 0: default plans only, never a timed search.
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{
            "default_time_budget_ms",
            absl::GetFlag(FLAGS_default_time_budget_ms)},
        {"max_time_budget_ms", absl::GetFlag(FLAGS_max_time_budget_ms)}}) {
    if (value < 0) {
      return absl::StrCat("--", name, " must be 0 (no timed search) or more");
    }
  }
  if (absl::GetFlag(FLAGS_cache_bytes) < 0) {
    return "--cache_bytes must be 0 (none kept in process) or more";
  }
  if (absl::GetFlag(FLAGS_cache_max_entry_bytes) < 1024) {
    return "--cache_max_entry_bytes must be at least 1024";
  }
  if (absl::GetFlag(FLAGS_worker_threads) < 0) {
    return "--worker_threads must be 0 (one per core) or more";
  }
  return "";
}

int Run() {
  if (const std::string bad = BadFlag(); !bad.empty()) {
    std::fprintf(stderr, "memplan-server: %s\n", bad.c_str());
    return 1;
  }
  const int threads = absl::GetFlag(FLAGS_worker_threads) > 0
                          ? absl::GetFlag(FLAGS_worker_threads)
                          : base::UsableCores();
  ServiceOptions options = OptionsFromFlags();
  const std::string metrics_address = absl::GetFlag(FLAGS_metrics_address);
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      metrics_address.empty() ? std::make_unique<Metrics>()
                              : Metrics::Start(metrics_address);
  if (!metrics.ok()) {
    std::fprintf(stderr, "memplan-server: %s\n",
                 std::string(metrics.status().message()).c_str());
    return 1;
  }
  base::WorkerPool workers(threads, options.max_in_flight * 8);
  std::optional<IdleMemoryReturner> idle_memory;  // after workers: uses them
  if (absl::GetFlag(FLAGS_return_memory_when_idle)) {
    // Where malloc asks for huge pages (the container image), heaps grow
    // 64 MiB at a time, so that a large call's memory lies on 2 MiB pages
    // (grown page by page, a heap gets none): a 1M-buffer call about 13%
    // faster. The heaps' tops go back once a large call's response is
    // freed (its thread's, ArenaMessage) and once idle (the workers').
    // Without huge pages the steps only cost: each call faults the pages
    // it reuses again. There, malloc's thresholds are fixed where glibc's
    // sliding ones end up, so that the idle return can give the heaps'
    // tops back whole.
    if (base::MallocAsksForHugePages()) {
      base::GrowHeapsInLargeSteps();
    } else {
      base::FixMallocThresholds();
    }
    idle_memory.emplace(kIdleBeforeReturn,
                        [&workers](const std::function<void()>& task) {
                          workers.RunOnEachThread(task);
                        });
  }
  HealthService health;  // outlives the server, which ends its calls
  absl::StatusOr<PlanCacheParts> cache = MakePlanCache(metrics->get(), &health);
  if (!cache.ok()) {
    std::fprintf(stderr, "memplan-server: %s\n",
                 std::string(cache.status().message()).c_str());
    return 1;
  }
  options.plan_cache = cache->cache.get();
  base::CancelToken shutdown;
  PlannerService service(options, &workers, &shutdown, metrics->get(),
                         idle_memory ? &*idle_memory : nullptr);

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = absl::GetFlag(FLAGS_address);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  // gRPC sets SO_REUSEPORT by default: a second server started on a port in
  // use would start and silently take part of the first one's connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(absl::GetFlag(FLAGS_max_request_bytes), INT32_MAX)));
  builder.RegisterService(&service);
  builder.RegisterService(&health);
  builder.experimental().SetInterceptorCreators(
      (*metrics)->InterceptorFactories());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    // (gRPC's own log line above says why, among its details.)
    std::fprintf(stderr,
                 "memplan-server: cannot listen on %s (--address): is the "
                 "port in use, or the host not an address of this machine?\n",
                 address.c_str());
    return 1;
  }
  health.SetServing(kServiceName, true);
  const std::string host = address.substr(0, address.rfind(':'));
  std::string metrics_note = "metrics off";
  if ((*metrics)->port() > 0) {
    const std::string metrics_host =
        metrics_address.substr(0, metrics_address.rfind(':'));
    metrics_note = absl::StrCat("metrics on ", metrics_host, ":",
                                (*metrics)->port(), "/metrics");
  }
  std::printf("memplan-server listening on %s:%d (%d worker threads, %s, %s)\n",
              host.c_str(), port, threads, metrics_note.c_str(),
              cache->note.c_str());
  std::fflush(stdout);

  std::thread signals(
      WaitForSignalThenShutdown,
      Serving{server.get(), &health, &service, &shutdown, metrics->get()});
  server->Wait();
  signals.join();
  std::fprintf(stderr, "memplan-server: stopped\n");
  return 0;
}

}  // namespace
}  // namespace memplan::server

namespace {

// --help lists this file's flags (abseil's default looks for a file named
// after the program); --version prints the version, commit and build type.
void ConfigureUsage() {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.version_string = [] {
    return std::string("memplan-server " MEMPLAN_VERSION
                       " (commit " MEMPLAN_GIT_COMMIT ", " MEMPLAN_BUILD_TYPE
                       " build)\n");
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(
      "plans memory for ML computation graphs over gRPC "
      "(memplan.v1.MemoryPlanner, grpc.health.v1, reflection) and serves "
      "Prometheus metrics.\n\n"
      "  memplan-server [--address=127.0.0.1:50051] [--flag=value ...]\n\n"
      "Durations and sizes are plain numbers in the unit the flag names.");
}

// --help: the usage line and every flag of this program with its default,
// exit 0 (abseil's own --help exits 1).
bool PrintHelpIfAsked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    asked = asked || arg == "--help" || arg == "-h" || arg == "-help" ||
            arg == "--helpfull" || arg == "--helpshort";
  }
  if (!asked) return false;
  std::printf("memplan-server: %s\n\nflags:\n",
              std::string(absl::ProgramUsageMessage()).c_str());
  std::map<std::string, const absl::CommandLineFlag*> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), "server/main.cc")) {
      ours[std::string(name)] = flag;
    }
  }
  for (const auto& [name, flag] : ours) {
    std::printf(
        "  --%s (default: %s)\n      %s\n", name.c_str(),
        flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue().c_str(),
        flag->Help().c_str());
  }
  std::printf("  --version\n      the version, git commit and build type\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ConfigureUsage();
  if (PrintHelpIfAsked(argc, argv)) return 0;
  absl::ParseCommandLine(argc, argv);
  // Debian's abseil checks every Mutex for deadlocks: too slow for the hot
  // paths of a server (a sixth of a BFC alloc+free).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the shutdown signals in every thread; one thread waits for them.
  const sigset_t signals = memplan::server::ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return memplan::server::Run();
}
