// memplan-server: serves memplan.v1.MemoryPlanner, grpc.health.v1 and server
// reflection. SIGTERM/SIGINT: health turns NOT_SERVING, plans in progress
// are cancelled, the server shuts down within --grace_seconds and exits 0.
#include <csignal>
#include <map>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "memplan/version.h"
#include "planner/worker_pool.h"
#include "server/metrics.h"
#include "server/service.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "host:port to serve gRPC on; port 0 picks a free port (printed)");
ABSL_FLAG(int, worker_threads, 0,
          "threads planning requests; 0 means one per core");
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
ABSL_FLAG(double, grace_seconds, 5,
          "on SIGTERM/SIGINT, how long calls in progress may take to finish");

namespace memplan::server {
namespace {

constexpr char kServiceName[] = "memplan.v1.MemoryPlanner";

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
  options.max_in_flight = std::max(1, absl::GetFlag(FLAGS_max_in_flight));
  options.benchmark.plan = options.limits;
  options.benchmark.max_bytes = absl::GetFlag(FLAGS_max_benchmark_bytes);
  options.benchmark.max_ops = absl::GetFlag(FLAGS_max_benchmark_ops);
  options.benchmark.max_time =
      absl::Seconds(absl::GetFlag(FLAGS_max_benchmark_seconds));
  return options;
}

// Waits for SIGTERM or SIGINT (blocked in every thread), then drains.
void WaitForSignalThenShutdown(grpc::Server* server,
                               planner::CancelToken* shutdown) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "memplan-server: signal %d, shutting down\n",
               signal_number);
  server->GetHealthCheckService()->SetServingStatus(false);
  shutdown->Cancel();
  const absl::Duration grace =
      absl::Seconds(absl::GetFlag(FLAGS_grace_seconds));
  server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

int Run() {
  const int threads =
      absl::GetFlag(FLAGS_worker_threads) > 0
          ? absl::GetFlag(FLAGS_worker_threads)
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const ServiceOptions options = OptionsFromFlags();
  const std::string metrics_address = absl::GetFlag(FLAGS_metrics_address);
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      metrics_address.empty() ? std::make_unique<Metrics>()
                              : Metrics::Start(metrics_address);
  if (!metrics.ok()) {
    std::fprintf(stderr, "memplan-server: %s\n",
                 std::string(metrics.status().message()).c_str());
    return 1;
  }
  planner::WorkerPool workers(threads, options.max_in_flight * 8);
  planner::CancelToken shutdown;
  PlannerService service(options, &workers, &shutdown, metrics->get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = absl::GetFlag(FLAGS_address);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(absl::GetFlag(FLAGS_max_request_bytes), INT32_MAX)));
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(
      (*metrics)->InterceptorFactories());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "memplan-server: cannot listen on %s\n",
                 address.c_str());
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  const std::string host = address.substr(0, address.rfind(':'));
  std::string metrics_note = "metrics off";
  if ((*metrics)->port() > 0) {
    const std::string metrics_host =
        metrics_address.substr(0, metrics_address.rfind(':'));
    metrics_note = absl::StrCat("metrics on ", metrics_host, ":",
                                (*metrics)->port(), "/metrics");
  }
  std::printf("memplan-server listening on %s:%d (%d worker threads, %s)\n",
              host.c_str(), port, threads, metrics_note.c_str());
  std::fflush(stdout);

  std::thread signals(WaitForSignalThenShutdown, server.get(), &shutdown);
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
    std::printf("  --%s (default: %s)\n      %s\n", name.c_str(),
                flag->DefaultValue().empty() ? "\"\""
                                             : flag->DefaultValue().c_str(),
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
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return memplan::server::Run();
}
