// load_bench: a gRPC load generator for memplan-server over loopback. It
// starts a server (--address=127.0.0.1:0) or drives a running one
// (--target, loopback only), keeps --clients calls in flight for --seconds
// (and at most --max_calls), with a mix of valid, invalid, oversized Plan
// requests and small Benchmark calls, then reports throughput, p50/p99
// latency per kind and status code, and the server's RSS over time. With
// --sigterm_at it sends SIGTERM in the middle of the load and reports the
// shutdown: when health (a polling Check and an open Watch stream) turned
// NOT_SERVING, how the calls in flight ended, the exit code and when the
// process exited against --grace_seconds.
//
//   load_bench --clients=64 --seconds=60
//   load_bench --clients=64 --seconds=60 --max_in_flight=4
//   load_bench --clients=64 --seconds=20 --sigterm_at=10 --grace_seconds=5
//   load_bench --target=127.0.0.1:50051 --server_pid=1234 --max_tensors=N
//
// Exit code: 0 when every call ended as expected for its kind (overload and
// shutdown statuses included) and, with --sigterm_at, the shutdown went as
// README says; 1 otherwise; 2 on bad flags or a server that did not start.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "memplan/v1/memplan.grpc.pb.h"

ABSL_FLAG(int, clients, 64, "calls kept in flight at once (one chain each)");
ABSL_FLAG(double, seconds, 60, "how long the load lasts");
ABSL_FLAG(int64_t, max_calls, 5'000'000,
          "most calls started in all (the load ends at whichever of "
          "--seconds and --max_calls comes first)");
ABSL_FLAG(std::string, mix, "plan:70,bad:20,over:5,bench:5",
          "weights of the request kinds: plan (valid Plan: examples/*.json "
          "and small buffer lists), bad (invalid graphs and buffer lists), "
          "over (a buffer list one over --max_tensors), bench (a small "
          "Benchmark)");
ABSL_FLAG(double, rate, 0,
          "calls per second over all clients: each client starts a call "
          "every clients/rate seconds (or as soon as its last one ends, if "
          "later); 0: each client calls again as soon as its call ends, "
          "which keeps the server saturated (latency then is about "
          "clients / throughput)");
ABSL_FLAG(int, channels, 4, "gRPC channels (connections) the clients share");
ABSL_FLAG(int64_t, deadline_ms, 30000,
          "deadline of every call; a call reaching it counts as a hang");
ABSL_FLAG(uint64_t, seed, 1, "seed of the request mix");
ABSL_FLAG(std::string, target, "",
          "host:port of a running server (127.0.0.1, [::1] or localhost "
          "only); empty: start --server_binary on 127.0.0.1:0");
ABSL_FLAG(int, server_pid, 0,
          "with --target: the server's PID, for its RSS and --sigterm_at");
ABSL_FLAG(int, metrics_port, 0,
          "with --target: the server's /metrics port on 127.0.0.1, for the "
          "server-side handling times; 0: none");
ABSL_FLAG(std::string, server_binary, MEMPLAN_SERVER_PATH,
          "memplan-server to start when --target is empty");
ABSL_FLAG(std::string, server_args, "",
          "more flags for the started server, separated by spaces");
ABSL_FLAG(int, max_in_flight, 0,
          "the started server's --max_in_flight; 0: its default (64)");
ABSL_FLAG(int64_t, max_tensors, 10000,
          "the server's --max_tensors (passed to a started server; with "
          "--target give the server's): 'over' requests hold one more");
ABSL_FLAG(double, grace_seconds, 5, "the started server's --grace_seconds");
ABSL_FLAG(double, drain_seconds, -1,
          "the started server's --drain_seconds; negative: its default");
ABSL_FLAG(std::string, examples_dir, MEMPLAN_SOURCE_DIR "/examples",
          "where the valid PlanRequest JSON files (*.json) are read from");
ABSL_FLAG(int64_t, rss_interval_ms, 1000, "how often the server's RSS is read");
ABSL_FLAG(double, sigterm_at, 0,
          "seconds into the load to send the server SIGTERM and report the "
          "shutdown; 0: never");
ABSL_FLAG(int64_t, health_poll_ms, 20,
          "with --sigterm_at: how often health Check is called");

namespace memplan {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kServiceName[] = "memplan.v1.MemoryPlanner";

// Seconds from `from` to `to`.
double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// ---------------------------------------------------------------- requests

enum Kind : uint8_t { kPlan, kBad, kOver, kBench, kKinds };
constexpr std::array<const char*, kKinds> kKindNames = {"plan", "bad", "over",
                                                        "bench"};

// The requests the clients send, built once before the load.
struct Requests {
  std::vector<v1::PlanRequest> valid;       // examples and buffer lists
  std::vector<std::string> examples;        // files of the first valid
  std::vector<v1::PlanRequest> bad;         // INVALID_ARGUMENT expected
  v1::PlanRequest over;                     // one buffer over --max_tensors
  std::vector<v1::BenchmarkRequest> bench;  // small Benchmark calls
};

void AddBuffer(v1::PlanRequest* r, const std::string& id, int64_t start,
               int64_t end, int64_t size) {
  v1::Buffer* b = r->add_buffers();
  b->set_id(id);
  b->set_start(start);
  b->set_end(end);
  b->set_size(size);
}

// `n` buffers with random short lifetimes over 4n steps, 64 B to 64 KiB.
v1::PlanRequest RandomBuffers(std::mt19937_64* rng, int n) {
  v1::PlanRequest r;
  std::uniform_int_distribution<int64_t> start(0, 4 * n);
  std::uniform_int_distribution<int64_t> length(1, n / 4 + 1);
  std::uniform_int_distribution<int64_t> size(64, 64 << 10);
  for (int i = 0; i < n; ++i) {
    const int64_t s = start(*rng);
    AddBuffer(&r, absl::StrCat("b", i), s, s + length(*rng), size(*rng));
  }
  return r;
}

// Every *.json of `dir` that parses as a PlanRequest.
void AddExamples(const std::string& dir, Requests* out) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    v1::PlanRequest request;
    if (!google::protobuf::util::JsonStringToMessage(text.str(), &request)
             .ok()) {
      continue;
    }
    out->valid.push_back(std::move(request));
    out->examples.push_back(entry.path().filename().string());
  }
}

// A one-op graph reading `input` and writing `output` (sizes 64 bytes).
v1::PlanRequest TinyGraph(const std::string& input, const std::string& output,
                          int64_t output_size) {
  v1::PlanRequest r;
  v1::Graph* g = r.mutable_graph();
  g->set_name("bad");
  for (const auto& [name, size] :
       {std::pair{std::string("x"), int64_t{64}}, {"y", output_size}}) {
    v1::Tensor* t = g->add_tensors();
    t->set_name(name);
    t->set_size_bytes(size);
  }
  v1::Op* op = g->add_ops();
  op->set_name("f");
  op->add_inputs(input);
  op->add_outputs(output);
  g->add_inputs("x");
  g->add_outputs("y");
  return r;
}

// Requests the server must refuse with INVALID_ARGUMENT.
std::vector<v1::PlanRequest> BadRequests() {
  std::vector<v1::PlanRequest> bad;
  bad.push_back(TinyGraph("nobody_declared_me", "y", 64));  // dangling name
  bad.push_back(TinyGraph("x", "y", 0));                    // size 0
  v1::PlanRequest cycle = TinyGraph("x", "y", 64);          // y -> g -> y
  v1::Op* back = cycle.mutable_graph()->add_ops();
  back->set_name("g");
  back->add_inputs("y");
  back->add_outputs("y");
  bad.push_back(cycle);
  v1::PlanRequest reversed;  // ends before it starts
  AddBuffer(&reversed, "a", 0, 4, 64);
  AddBuffer(&reversed, "late", 9, 3, 64);
  bad.push_back(reversed);
  v1::PlanRequest twice;  // one id for two buffers
  AddBuffer(&twice, "a", 0, 4, 64);
  AddBuffer(&twice, "a", 2, 6, 64);
  bad.push_back(twice);
  return bad;
}

// Small Benchmark calls: buffer lists replayed on three allocators and on
// their static plan.
std::vector<v1::BenchmarkRequest> BenchRequests(std::mt19937_64* rng) {
  std::vector<v1::BenchmarkRequest> out;
  for (int n : {50, 100, 200}) {
    v1::BenchmarkRequest r;
    *r.mutable_buffers() = RandomBuffers(rng, n).buffers();
    for (const char* a : {"bfc", "pool", "buffer", "static_plan"}) {
      r.add_allocators(a);
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<Requests> BuildRequests(int64_t max_tensors, uint64_t seed) {
  Requests out;
  AddExamples(absl::GetFlag(FLAGS_examples_dir), &out);
  if (out.valid.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no PlanRequest JSON in --examples_dir=",
                     absl::GetFlag(FLAGS_examples_dir)));
  }
  std::mt19937_64 rng(seed);
  for (int n : {20, 50, 100, 200}) {
    out.valid.push_back(RandomBuffers(&rng, n));
  }
  out.bad = BadRequests();
  for (int64_t i = 0; i <= max_tensors; ++i) {
    AddBuffer(&out.over, absl::StrCat("b", i), i, i + 2, 64);
  }
  out.bench = BenchRequests(&rng);
  return out;
}

// Weights of the kinds from "plan:70,bad:20,over:5,bench:5".
absl::StatusOr<std::array<double, kKinds>> ParseMix(const std::string& mix) {
  std::array<double, kKinds> weights = {0, 0, 0, 0};
  for (absl::string_view part : absl::StrSplit(mix, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, ':');
    const auto* kind = std::find(kKindNames.begin(), kKindNames.end(), kv[0]);
    double w = 0;
    if (kv.size() != 2 || kind == kKindNames.end() ||
        !absl::SimpleAtod(kv[1], &w) || w < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mix: '", part, "' is not KIND:WEIGHT (plan, bad, over, bench)"));
    }
    weights[kind - kKindNames.begin()] = w;
  }
  if (weights[0] + weights[1] + weights[2] + weights[3] <= 0) {
    return absl::InvalidArgumentError("--mix: no positive weight");
  }
  return weights;
}

// ---------------------------------------------------------------- server

// The server under load: started here (its child) or given by --target.
struct Server {
  std::string address;   // 127.0.0.1:PORT
  int metrics_port = 0;  // its /metrics on 127.0.0.1; 0 when unknown
  pid_t pid = 0;         // 0 when unknown (--target without --server_pid)
  bool child = false;    // started here: waitpid gives its exit code
  int stdout_fd = -1;    // kept open so the server never gets SIGPIPE
};

bool IsLoopback(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" ||
         host == "ipv4:127.0.0.1" || host == "ipv6:[::1]";
}

std::vector<std::string> ServerArgs() {
  std::vector<std::string> args = {
      "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
      absl::StrCat("--max_tensors=", absl::GetFlag(FLAGS_max_tensors)),
      absl::StrCat("--grace_seconds=", absl::GetFlag(FLAGS_grace_seconds))};
  if (absl::GetFlag(FLAGS_max_in_flight) > 0) {
    args.push_back(
        absl::StrCat("--max_in_flight=", absl::GetFlag(FLAGS_max_in_flight)));
  }
  if (absl::GetFlag(FLAGS_drain_seconds) >= 0) {
    args.push_back(
        absl::StrCat("--drain_seconds=", absl::GetFlag(FLAGS_drain_seconds)));
  }
  for (absl::string_view a : absl::StrSplit(absl::GetFlag(FLAGS_server_args),
                                            ' ', absl::SkipEmpty())) {
    args.emplace_back(a);
  }
  return args;
}

// Reads the server's first line ("... listening on HOST:PORT ...") within
// 30 s and 4096 characters.
std::string FirstLine(int fd) {
  std::string line;
  const auto end = Clock::now() + std::chrono::seconds(30);
  char c = 0;
  while (Clock::now() < end && line.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(fd, &c, 1) != 1 || c == '\n') break;
    line.push_back(c);
  }
  return line;
}

absl::StatusOr<Server> StartServer() {
  const std::string binary = absl::GetFlag(FLAGS_server_binary);
  std::vector<std::string> args = ServerArgs();
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  Server server;
  server.pid = fork();
  if (server.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the bench
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  server.child = true;
  server.stdout_fd = out[0];
  const std::string line = FirstLine(out[0]);
  const size_t on = line.find(" on ");
  if (on == std::string::npos) {
    kill(server.pid, SIGKILL);
    waitpid(server.pid, nullptr, 0);
    return absl::UnavailableError(
        absl::StrCat(binary, " did not start: '", line, "'"));
  }
  server.address = line.substr(on + 4, line.find(' ', on + 4) - on - 4);
  const size_t metrics = line.find("metrics on ");
  const size_t colon = line.find(':', metrics);
  if (metrics != std::string::npos && colon != std::string::npos) {
    server.metrics_port = std::atoi(line.c_str() + colon + 1);
  }
  std::printf("server: %s %s\n  %s\n", binary.c_str(),
              absl::StrJoin(args, " ").c_str(), line.c_str());
  return server;
}

absl::StatusOr<Server> StartOrAttach() {
  const std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) return StartServer();
  if (!IsLoopback(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target=", target, " is not a loopback address"));
  }
  Server server;
  server.address = target;
  server.pid = absl::GetFlag(FLAGS_server_pid);
  server.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  std::printf("server: %s (pid %d, not started here)\n", target.c_str(),
              server.pid);
  return server;
}

// VmRSS of /proc/PID/status in bytes, or -1.
int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// User + system CPU seconds of `pid` from /proc/PID/stat, or -1.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  if (fields.size() < 13) return -1;  // fields 3.. of proc(5)
  return (std::stod(fields[11]) + std::stod(fields[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

// ---------------------------------------------------------------- load

// One finished call. Outcome is the gRPC code, or kBusy for
// RESOURCE_EXHAUSTED "the server is busy" (admission, not a limit).
struct Sample {
  int64_t start_us = 0;    // since the load began
  int64_t latency_us = 0;  // until the callback ran
  Kind kind = kPlan;
  uint8_t outcome = 0;
};
constexpr uint8_t kBusy = 17;

std::string OutcomeName(uint8_t outcome) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  if (outcome == kBusy) return "RESOURCE_EXHAUSTED(busy)";
  return outcome < 17 ? kNames[outcome] : absl::StrCat("code ", outcome);
}

// What a call of `kind` may end with: its own answer, "busy" (overload),
// UNAVAILABLE (the server shutting down).
bool Expected(Kind kind, uint8_t outcome) {
  if (outcome == kBusy || outcome == grpc::StatusCode::UNAVAILABLE) {
    return true;
  }
  switch (kind) {
    case kPlan:
    case kBench:
      return outcome == grpc::StatusCode::OK;
    case kBad:
      return outcome == grpc::StatusCode::INVALID_ARGUMENT;
    case kOver:
      return outcome == grpc::StatusCode::RESOURCE_EXHAUSTED;
    default:
      return false;
  }
}

class Load;
using Stubs = std::vector<std::unique_ptr<v1::MemoryPlanner::Stub>>;

// One client: a chain of calls, each started when the last one ends.
// Thread-safe (its callbacks run on gRPC's threads; Cancel on any).
class Client {
 public:
  // `interval`: time between the starts of two calls (0: none).
  Client(Load* load, v1::MemoryPlanner::Stub* stub, uint64_t seed,
         std::chrono::nanoseconds interval)
      : load_(load), stub_(stub), rng_(seed), interval_(interval) {}
  // Starts the first call at `at`.
  void Begin(Clock::time_point at);
  void Next();    // starts the next call, or tells the load it stopped
  void Cancel();  // cancels the call in flight, if any
  std::vector<Sample> TakeSamples() {
    absl::MutexLock lock(&mu_);
    return std::move(samples_);
  }

 private:
  void Done(const grpc::Status& status);
  // Calls Next() at `at` (now if it is past).
  void NextAt(Clock::time_point at);

  Load* const load_;
  v1::MemoryPlanner::Stub* const stub_;
  std::mt19937_64 rng_;  // used by one call at a time
  const std::chrono::nanoseconds interval_;
  Clock::time_point slot_;  // when the last call was due to start
  grpc::Alarm alarm_;       // the wait for the next slot
  absl::Mutex mu_;
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  Kind kind_ = kPlan;  // of the call in flight
  Clock::time_point started_;
  v1::PlanResponse plan_response_;
  v1::BenchmarkResponse bench_response_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
};

// Keeps --clients chains of calls going until the time, the call count or
// Stop() ends them. Thread-safe.
class Load {
 public:
  Load(const Requests* requests, std::array<double, kKinds> mix,
       Clock::time_point start, Clock::time_point end, int64_t max_calls,
       std::chrono::milliseconds deadline)
      : requests_(requests),
        mix_(mix),
        start_(start),
        end_(end),
        max_calls_(max_calls),
        deadline_(deadline) {}

  // Starts `clients` chains; with `rate` > 0 calls per second their starts
  // are spread over one interval.
  void Run(const Stubs& stubs, int clients, uint64_t seed, double rate) {
    const auto interval = std::chrono::nanoseconds(
        rate > 0 ? static_cast<int64_t>(clients / rate * 1e9) : 0);
    for (int i = 0; i < clients; ++i) {
      clients_.push_back(std::make_unique<Client>(
          this, stubs[i % stubs.size()].get(), seed * 1000003 + i, interval));
    }
    {
      absl::MutexLock lock(&mu_);
      running_ = clients;
    }
    const auto now = Clock::now();
    for (int i = 0; i < clients; ++i) {
      clients_[i]->Begin(now + interval * i / clients);
    }
  }
  // No new call after this.
  void Stop() { stopped_ = true; }
  // True once every chain stopped; waits until `until` at most.
  bool Wait(Clock::time_point until) {
    absl::MutexLock lock(&mu_);
    const auto left = until - Clock::now();
    mu_.AwaitWithTimeout(absl::Condition(this, &Load::AllStopped),
                         absl::FromChrono(left));
    return running_ == 0;
  }
  void CancelAll() {
    for (auto& c : clients_) c->Cancel();
  }
  int Running() {
    absl::MutexLock lock(&mu_);
    return running_;
  }
  std::vector<Sample> Samples() {
    std::vector<Sample> all;
    for (auto& c : clients_) {
      std::vector<Sample> s = c->TakeSamples();
      all.insert(all.end(), s.begin(), s.end());
    }
    return all;
  }

  // For the clients.
  bool MayStart() {
    return !stopped_ && Clock::now() < end_ &&
           started_.fetch_add(1, std::memory_order_relaxed) < max_calls_;
  }
  void ChainStopped() {
    absl::MutexLock lock(&mu_);
    --running_;
  }
  Kind PickKind(std::mt19937_64* rng) const {
    double x = std::uniform_real_distribution<double>(
        0, mix_[0] + mix_[1] + mix_[2] + mix_[3])(*rng);
    int k = 0;
    while (k + 1 < kKinds && (x -= mix_[k]) >= 0) ++k;
    return static_cast<Kind>(k);
  }
  const Requests& requests() const { return *requests_; }
  Clock::time_point start() const { return start_; }
  std::chrono::milliseconds deadline() const { return deadline_; }

 private:
  bool AllStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_ == 0;
  }

  const Requests* const requests_;
  const std::array<double, kKinds> mix_;  // weights of the kinds
  const Clock::time_point start_, end_;
  const int64_t max_calls_;
  const std::chrono::milliseconds deadline_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> started_{0};
  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

void Client::Begin(Clock::time_point at) {
  slot_ = at;
  NextAt(at);
}

void Client::NextAt(Clock::time_point at) {
  const auto now = Clock::now();
  if (at <= now) {
    Next();
    return;
  }
  alarm_.Set(std::chrono::system_clock::now() + (at - now),
             [this](bool) { Next(); });
}

void Client::Next() {
  if (!load_->MayStart()) {
    load_->ChainStopped();
    return;
  }
  kind_ = load_->PickKind(&rng_);
  grpc::ClientContext* context;
  {
    absl::MutexLock lock(&mu_);
    context_ = std::make_unique<grpc::ClientContext>();
    context = context_.get();
  }
  started_ = Clock::now();
  context->set_deadline(std::chrono::system_clock::now() + load_->deadline());
  const Requests& r = load_->requests();
  auto done = [this](grpc::Status s) { Done(s); };
  if (kind_ == kBench) {
    const auto& request = r.bench[rng_() % r.bench.size()];
    stub_->async()->Benchmark(context, &request, &bench_response_, done);
    return;
  }
  const v1::PlanRequest* request =
      kind_ == kPlan  ? &r.valid[rng_() % r.valid.size()]
      : kind_ == kBad ? &r.bad[rng_() % r.bad.size()]
                      : &r.over;
  stub_->async()->Plan(context, request, &plan_response_, done);
}

void Client::Done(const grpc::Status& status) {
  const auto now = Clock::now();
  Sample s;
  s.start_us = std::chrono::duration_cast<std::chrono::microseconds>(
                   started_ - load_->start())
                   .count();
  s.latency_us =
      std::chrono::duration_cast<std::chrono::microseconds>(now - started_)
          .count();
  s.kind = kind_;
  s.outcome = static_cast<uint8_t>(status.error_code());
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      status.error_message().rfind("the server is busy", 0) == 0) {
    s.outcome = kBusy;
  }
  {
    absl::MutexLock lock(&mu_);
    samples_.push_back(s);
  }
  if (interval_.count() == 0) {
    Next();
    return;
  }
  slot_ = std::max(slot_ + interval_, now);  // late: no catching up
  NextAt(slot_);
}

void Client::Cancel() {
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) context_->TryCancel();
}

// ---------------------------------------------------------------- watchers

// The server's RSS every --rss_interval_ms, on its own thread.
class RssSampler {
 public:
  struct Point {
    double t = 0;       // seconds since the load began
    int64_t bytes = 0;  // VmRSS
    double cpu = 0;     // CPU seconds used so far
  };
  RssSampler(pid_t pid, Clock::time_point start, Clock::time_point end) {
    if (pid <= 0) return;
    thread_ = std::thread([this, pid, start, end] {
      const auto interval =
          std::chrono::milliseconds(absl::GetFlag(FLAGS_rss_interval_ms));
      auto t = start;
      for (int n = 0; n < 100'000 && !stop_ && t <= end; ++n, t += interval) {
        std::this_thread::sleep_until(t);
        const int64_t rss = RssBytes(pid);
        if (rss < 0) break;  // the process is gone
        absl::MutexLock lock(&mu_);
        points_.push_back({Seconds(start, Clock::now()), rss, CpuSeconds(pid)});
      }
    });
  }
  ~RssSampler() { Join(); }
  void Join() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Point> points() {
    absl::MutexLock lock(&mu_);
    return points_;
  }

 private:
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<Point> points_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Health during a shutdown: Check called every --health_poll_ms (answers
// kept as runs of equal answers) and one Watch stream held open, each on
// its own channel. Thread-safe.
class HealthProbe {
 public:
  struct Run {
    std::string answer;  // SERVING, NOT_SERVING, or a status code's name
    double first = 0;    // seconds since the load began
    double last = 0;
    int64_t count = 0;
  };
  struct Watched {
    std::vector<std::pair<double, std::string>> messages;  // time, status
    double ended = -1;       // when the stream ended; -1: still open
    std::string end_status;  // code and message it ended with
  };

  HealthProbe(const std::string& address, Clock::time_point start,
              Clock::time_point end);
  ~HealthProbe() { Join(); }
  // Stops polling once the server has exited (one last answer is taken).
  void ServerExited() { exited_ = true; }
  void Join();
  std::vector<Run> runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }
  Watched watched() {
    absl::MutexLock lock(&mu_);
    return watched_;
  }

 private:
  void Poll(Clock::time_point end);
  void Watch(Clock::time_point end);
  void Record(const std::string& answer);

  const Clock::time_point start_;
  std::shared_ptr<grpc::Channel> check_channel_, watch_channel_;
  std::atomic<bool> exited_{false}, stop_{false};
  absl::Mutex mu_;
  std::vector<Run> runs_ ABSL_GUARDED_BY(mu_);
  Watched watched_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext watch_context_;
  std::thread poller_, watcher_;
};

// A fresh channel (own connection) to `address`.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address,
                                          int index) {
  grpc::ChannelArguments args;
  args.SetInt("memplan.load_bench.channel", index);  // no sharing
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

HealthProbe::HealthProbe(const std::string& address, Clock::time_point start,
                         Clock::time_point end)
    : start_(start),
      check_channel_(OwnChannel(address, -1)),
      watch_channel_(OwnChannel(address, -2)) {
  poller_ = std::thread([this, end] { Poll(end); });
  watcher_ = std::thread([this, end] { Watch(end); });
}

void HealthProbe::Join() {
  stop_ = true;
  watch_context_.TryCancel();
  if (poller_.joinable()) poller_.join();
  if (watcher_.joinable()) watcher_.join();
}

std::string ServingName(
    grpc::health::v1::HealthCheckResponse::ServingStatus s) {
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(s);
}

void HealthProbe::Poll(Clock::time_point end) {
  auto stub = grpc::health::v1::Health::NewStub(check_channel_);
  const auto interval =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_health_poll_ms));
  bool last = false;
  auto t = Clock::now();
  for (int n = 0; n < 1'000'000 && !stop_ && !last && t < end;
       ++n, t += interval) {
    std::this_thread::sleep_until(t);
    last = exited_;  // one answer after the exit, then stop
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(500));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(kServiceName);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status s = stub->Check(&context, request, &response);
    Record(s.ok() ? ServingName(response.status())
                  : OutcomeName(static_cast<uint8_t>(s.error_code())));
  }
}

void HealthProbe::Record(const std::string& answer) {
  const double t = Seconds(start_, Clock::now());
  absl::MutexLock lock(&mu_);
  if (runs_.empty() || runs_.back().answer != answer) {
    runs_.push_back({answer, t, t, 0});
  }
  runs_.back().last = t;
  ++runs_.back().count;
}

void HealthProbe::Watch(Clock::time_point end) {
  auto stub = grpc::health::v1::Health::NewStub(watch_channel_);
  watch_context_.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::milliseconds>(end -
                                                            Clock::now()));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(kServiceName);
  auto reader = stub->Watch(&watch_context_, request);
  grpc::health::v1::HealthCheckResponse response;
  int n = 0;
  for (; n < 10'000 && reader->Read(&response); ++n) {
    absl::MutexLock lock(&mu_);
    watched_.messages.emplace_back(Seconds(start_, Clock::now()),
                                   ServingName(response.status()));
  }
  if (n == 10'000) watch_context_.TryCancel();  // a server gone wild
  const grpc::Status s = reader->Finish();
  absl::MutexLock lock(&mu_);
  watched_.ended = Seconds(start_, Clock::now());
  watched_.end_status =
      absl::StrCat(OutcomeName(static_cast<uint8_t>(s.error_code())), " \"",
                   s.error_message(), "\"");
}

// When the server process exited, and how. A child is reaped by waitpid (its
// own thread, unblocked by the exit); another process is polled by PID.
class ExitWatch {
 public:
  ExitWatch(const Server& server, Clock::time_point start,
            std::function<void()> on_exit)
      : start_(start), on_exit_(std::move(on_exit)) {
    if (server.pid <= 0) return;
    thread_ = std::thread([this, server] {
      int status = 0;
      if (server.child) {
        if (waitpid(server.pid, &status, 0) != server.pid) status = -1;
      } else {
        // Bounded by the destructor (stop_), which Drive reaches within
        // the load's time.
        while (!stop_ && kill(server.pid, 0) == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (stop_) return;
        status = -1;  // not our child: the code is unknown
      }
      absl::MutexLock lock(&mu_);
      exited_at_ = Seconds(start_, Clock::now());
      status_ = status;
      on_exit_();
    });
  }
  ~ExitWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Seconds since the load began when it exited, or -1 (still running).
  double ExitedAt() {
    absl::MutexLock lock(&mu_);
    return exited_at_;
  }
  // True once exited; waits until `until` at most.
  bool WaitExit(Clock::time_point until) {
    while (ExitedAt() < 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return ExitedAt() >= 0;
  }
  int status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  const Clock::time_point start_;
  std::function<void()> on_exit_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  double exited_at_ ABSL_GUARDED_BY(mu_) = -1;
  int status_ ABSL_GUARDED_BY(mu_) = -1;
  std::thread thread_;
};

// ---------------------------------------------------------------- metrics

// GET http://127.0.0.1:port/metrics (HTTP/1.0; 10 s and 64 MiB at most);
// empty on failure.
std::string GetMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size())) {
    char buf[65536];
    const auto end = Clock::now() + std::chrono::seconds(10);
    for (ssize_t n; Clock::now() < end && text.size() < (size_t{64} << 20) &&
                    (n = read(fd, buf, sizeof buf)) > 0;) {
      text.append(buf, n);
    }
  }
  close(fd);
  return text;
}

// grpc_server_handling_seconds by method (the histogram has no code label):
// cumulative counts by upper bound (+Inf as infinity).
using Handling = std::map<std::string, std::map<double, double>>;

// The value of label `name` in a sample line, or "".
std::string Label(absl::string_view line, absl::string_view name) {
  const std::string key = absl::StrCat(name, "=\"");
  const size_t at = line.find(key);
  if (at == absl::string_view::npos) return "";
  const size_t from = at + key.size();
  return std::string(line.substr(from, line.find('"', from) - from));
}

Handling ScrapeHandling(int port) {
  Handling out;
  if (port <= 0) return out;
  for (absl::string_view line : absl::StrSplit(GetMetrics(port), '\n')) {
    if (!absl::StartsWith(line, "grpc_server_handling_seconds_bucket{")) {
      continue;
    }
    const std::string le = Label(line, "le");
    double bound = 0, value = 0;
    if (le == "+Inf") {
      bound = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(le, &bound)) {
      continue;
    }
    if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) continue;
    out[Label(line, "grpc_method")][bound] += value;
  }
  return out;
}

// The q-quantile in milliseconds of cumulative `buckets`, interpolated
// within a bucket as Prometheus's histogram_quantile does; -1 if empty.
double BucketQuantileMs(const std::map<double, double>& buckets, double q) {
  if (buckets.empty() || buckets.rbegin()->second <= 0) return -1;
  const double rank = q * buckets.rbegin()->second;
  double lower = 0, below = 0;
  for (const auto& [bound, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(bound)) return lower * 1000;
      const double in = count - below;
      return (lower + (bound - lower) * (in > 0 ? (rank - below) / in : 0)) *
             1000;
    }
    lower = bound;
    below = count;
  }
  return lower * 1000;
}

// Server-side handling time by method between two scrapes: from the call's
// headers to its status, as memplan-server's interceptor measures it.
void PrintHandling(const Handling& before, const Handling& after) {
  if (after.empty()) return;
  std::printf(
      "server-side handling (grpc_server_handling_seconds, "
      "interpolated in its buckets):\n");
  for (const auto& [method, buckets] : after) {
    std::map<double, double> diff = buckets;
    auto was = before.find(method);
    for (auto& [bound, count] : diff) {
      if (was == before.end()) continue;
      auto b = was->second.find(bound);
      if (b != was->second.end()) count -= b->second;
    }
    if (diff.rbegin()->second <= 0) continue;
    std::printf("  %-36s %9.0f   p50 %.2f ms, p99 %.2f ms\n", method.c_str(),
                diff.rbegin()->second, BucketQuantileMs(diff, 0.5),
                BucketQuantileMs(diff, 0.99));
  }
}

// ---------------------------------------------------------------- report

// Latency quantile (nearest rank) of sorted microseconds, in milliseconds.
double QuantileMs(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1,
                            static_cast<size_t>(q * (sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[i]) / 1000.0;
}

// Calls grouped by a key: count and sorted latencies.
struct Group {
  std::vector<int64_t> latencies_us;
  void Sort() { std::sort(latencies_us.begin(), latencies_us.end()); }
};

void PrintGroupRow(const std::string& name, Group& g, double seconds) {
  g.Sort();
  const auto& l = g.latencies_us;
  std::printf("  %-36s %9zu %10.1f %9.2f %9.2f %9.2f\n", name.c_str(), l.size(),
              static_cast<double>(l.size()) / seconds, QuantileMs(l, 0.5),
              QuantileMs(l, 0.99),
              l.empty() ? 0.0 : static_cast<double>(l.back()) / 1000.0);
}

// How long before the Watch stream's end, as the client saw it, the server
// may have closed (the end travels to the client; it is seen late under
// load).
constexpr double kCloseSeenLate = 0.1;

// True when `s` ended as a call of its kind may: Expected(), or CANCELLED
// as the server closed (at `closed` seconds since the load began, as seen
// by the Watch stream; -1: never): gRPC cancels the calls it has received
// but not yet given to a handler when it closes.
bool Clean(const Sample& s, double closed) {
  if (Expected(s.kind, s.outcome)) return true;
  return closed >= 0 && s.outcome == grpc::StatusCode::CANCELLED &&
         (s.start_us + s.latency_us) / 1e6 >= closed - kCloseSeenLate;
}

// The table of calls by kind and outcome, then by outcome alone; returns
// the number of calls that did not end cleanly (hangs included: they end
// DEADLINE_EXCEEDED).
int64_t PrintCalls(const std::vector<Sample>& samples, double seconds,
                   double closed) {
  std::map<std::pair<int, int>, Group> by_kind;
  std::map<int, Group> by_outcome;
  int64_t unexpected = 0;
  for (const Sample& s : samples) {
    by_kind[{s.kind, s.outcome}].latencies_us.push_back(s.latency_us);
    by_outcome[s.outcome].latencies_us.push_back(s.latency_us);
    unexpected += Clean(s, closed) ? 0 : 1;
  }
  std::printf("  %-36s %9s %10s %9s %9s %9s\n", "kind / status", "calls",
              "per s", "p50 ms", "p99 ms", "max ms");
  for (auto& [key, g] : by_kind) {
    PrintGroupRow(absl::StrCat(kKindNames[key.first], " ",
                               OutcomeName(static_cast<uint8_t>(key.second))),
                  g, seconds);
  }
  for (auto& [outcome, g] : by_outcome) {
    PrintGroupRow(
        absl::StrCat("all ", OutcomeName(static_cast<uint8_t>(outcome))), g,
        seconds);
  }
  return unexpected;
}
// RSS before the load (idle), then at its start (the first sample under
// load), middle and end, min and max under load, and a dozen points of the
// series; appends them to `summary`.
void PrintRss(const std::vector<RssSampler::Point>& points,
              std::string* summary) {
  if (points.size() < 2) {
    std::printf("rss: unknown (no server PID, or too short a load)\n");
    return;
  }
  auto mb = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  const auto& idle = points.front();
  const auto& first = points[1];
  const auto& middle = points[(points.size() + 1) / 2];
  const auto& last = points.back();
  int64_t lo = first.bytes, hi = first.bytes;
  for (size_t i = 1; i < points.size(); ++i) {
    lo = std::min(lo, points[i].bytes);
    hi = std::max(hi, points[i].bytes);
  }
  std::printf(
      "rss: idle %.1f MiB; under load: start %.1f MiB (%.1f s), middle %.1f "
      "MiB (%.1f s), end %.1f MiB (%.1f s), min %.1f, max %.1f MiB over %zu "
      "samples\n  over time:",
      mb(idle.bytes), mb(first.bytes), first.t, mb(middle.bytes), middle.t,
      mb(last.bytes), last.t, mb(lo), mb(hi), points.size() - 1);
  const size_t step = std::max<size_t>(1, points.size() / 12);
  for (size_t i = 0; i < points.size(); i += step) {
    std::printf(" %.0fs=%.1f", points[i].t, mb(points[i].bytes));
  }
  std::printf(" MiB\n");
  absl::StrAppendFormat(summary,
                        " rss_idle_mib=%.1f rss_start_mib=%.1f "
                        "rss_mid_mib=%.1f rss_end_mib=%.1f rss_max_mib=%.1f",
                        mb(idle.bytes), mb(first.bytes), mb(middle.bytes),
                        mb(last.bytes), mb(hi));
}

// p50/p99 of one outcome over all kinds, for the summary line.
void AppendQuantiles(const std::vector<Sample>& samples, uint8_t outcome,
                     const std::string& name, std::string* summary) {
  std::vector<int64_t> l;
  for (const Sample& s : samples) {
    if (s.outcome == outcome) l.push_back(s.latency_us);
  }
  std::sort(l.begin(), l.end());
  absl::StrAppendFormat(summary, " %s=%zu %s_p50_ms=%.2f %s_p99_ms=%.2f", name,
                        l.size(), name, QuantileMs(l, 0.5), name,
                        QuantileMs(l, 0.99));
}

// ---------------------------------------------------------------- shutdown

// What the shutdown report looks at, in seconds since the load began.
struct ShutdownFacts {
  double sigterm = -1;  // when SIGTERM was sent
  double exited = -1;   // when the process was seen gone; -1: never
  int status = -1;      // waitpid status; -1 unknown
  double grace = 0;     // --grace_seconds
  std::vector<HealthProbe::Run> checks;
  HealthProbe::Watched watch;
};

// Health Check answers as runs relative to SIGTERM; true when NOT_SERVING
// was answered after SIGTERM and before any failed Check.
bool ReportChecks(const ShutdownFacts& f) {
  bool saw_not_serving = false, failed_first = false;
  std::printf("  health Check (every %lld ms):\n",
              static_cast<long long>(absl::GetFlag(FLAGS_health_poll_ms)));
  for (const HealthProbe::Run& r : f.checks) {
    std::printf("    %-24s from %+8.3f s to %+8.3f s (%lld answers)\n",
                r.answer.c_str(), r.first - f.sigterm, r.last - f.sigterm,
                static_cast<long long>(r.count));
    if (r.last < f.sigterm) continue;
    if (r.answer == "NOT_SERVING" && !failed_first) saw_not_serving = true;
    if (r.answer != "NOT_SERVING" && r.answer != "SERVING" &&
        !saw_not_serving) {
      failed_first = true;
    }
  }
  std::printf("    %s\n", saw_not_serving
                              ? "NOT_SERVING answered before any failure: ok"
                              : "NOT_SERVING never answered: FAIL");
  return saw_not_serving;
}

// When the server closed, in seconds since the load began: the end of the
// Watch stream it ended itself; -1 when it did not.
double Closed(const ShutdownFacts& f) {
  return f.watch.end_status.find("shutting down") != std::string::npos
             ? f.watch.ended
             : -1;
}

// The Watch stream's messages and end; true when it said NOT_SERVING and
// the server ended it itself (its "shutting down" status, not a dropped
// connection). When the client sees the end is not judged against the exit:
// under load the watching thread may run after the exit was seen.
bool ReportWatch(const ShutdownFacts& f) {
  bool not_serving = false;
  std::printf("  health Watch:\n");
  for (const auto& [t, status] : f.watch.messages) {
    std::printf("    %-24s at %+8.3f s\n", status.c_str(), t - f.sigterm);
    not_serving = not_serving || (status == "NOT_SERVING" && t >= f.sigterm);
  }
  const bool ended_by_server = Closed(f) >= 0;
  if (f.watch.ended >= 0) {
    std::printf("    stream ended at %+8.3f s: %s\n", f.watch.ended - f.sigterm,
                f.watch.end_status.c_str());
  } else {
    std::printf("    stream still open at the end\n");
  }
  const bool ok = not_serving && ended_by_server;
  std::printf("    %s\n",
              ok ? "NOT_SERVING sent, stream ended by the server: ok" : "FAIL");
  return ok;
}

// Calls of one phase of the shutdown by outcome: how many, when they
// started and ended (seconds from SIGTERM) and their longest latency.
struct Phase {
  struct Row {
    int64_t calls = 0;
    double first_start = 1e300, last_start = -1e300;
    double first_end = 1e300, last_end = -1e300;
    double longest_ms = 0;
  };
  std::map<int, Row> rows;  // by outcome

  void Add(const Sample& s, double start, double end) {
    Row& r = rows[s.outcome];
    ++r.calls;
    r.first_start = std::min(r.first_start, start);
    r.last_start = std::max(r.last_start, start);
    r.first_end = std::min(r.first_end, end);
    r.last_end = std::max(r.last_end, end);
    r.longest_ms = std::max(r.longest_ms, s.latency_us / 1000.0);
  }
  void Print(const char* title) const {
    std::printf("  %s:%s\n", title, rows.empty() ? " none" : "");
    for (const auto& [outcome, r] : rows) {
      std::printf(
          "    %-20s %8lld  started %+.3f to %+.3f s, ended %+.3f to %+.3f "
          "s, longest %.1f ms\n",
          OutcomeName(static_cast<uint8_t>(outcome)).c_str(),
          static_cast<long long>(r.calls), r.first_start, r.last_start,
          r.first_end, r.last_end, r.longest_ms);
    }
  }
};

// Calls in flight at SIGTERM and calls started after it; true when every
// one ended cleanly (Clean(): its own answer or UNAVAILABLE, CANCELLED only
// as the server closed); never a hang.
bool ReportCallsAroundSigterm(const std::vector<Sample>& samples,
                              const ShutdownFacts& f) {
  const double closed = Closed(f);
  Phase in_flight, after;
  double last_end = 0;
  bool clean = true;
  for (const Sample& s : samples) {
    const double start = s.start_us / 1e6 - f.sigterm;
    const double end = start + s.latency_us / 1e6;
    if (end < 0) continue;
    last_end = std::max(last_end, end);
    (start < 0 ? in_flight : after).Add(s, start, end);
    clean = clean && Clean(s, closed);
  }
  in_flight.Print("calls in flight at SIGTERM");
  after.Print("calls started after SIGTERM");
  if (closed >= 0) {
    std::printf(
        "  the server closed at %+.3f s (its Watch stream ended); "
        "CANCELLED is clean within %.0f ms before that or later\n",
        closed - f.sigterm, kCloseSeenLate * 1000);
  }
  std::printf(
      "  last call ended at %+.3f s; %s\n", last_end,
      clean ? "every call ended cleanly: ok" : "some call ended badly: FAIL");
  return clean;
}

// The process's exit; true for exit 0 within the grace period.
bool ReportExit(const ShutdownFacts& f) {
  if (f.exited < 0) {
    std::printf("  server did not exit (killed): FAIL\n");
    return false;
  }
  const double after = f.exited - f.sigterm;
  const bool code_ok =
      f.status >= 0 && WIFEXITED(f.status) && WEXITSTATUS(f.status) == 0;
  std::string code = f.status < 0 ? "unknown (not our child)"
                     : WIFEXITED(f.status)
                         ? absl::StrCat("exit ", WEXITSTATUS(f.status))
                         : absl::StrCat("signal ", WTERMSIG(f.status));
  const bool in_time = after <= f.grace;
  std::printf("  server exited %+.3f s after SIGTERM (grace %.1f s), %s: %s\n",
              after, f.grace, code.c_str(),
              (code_ok || f.status < 0) && in_time ? "ok" : "FAIL");
  return (code_ok || f.status < 0) && in_time;
}

bool ReportShutdown(const std::vector<Sample>& samples, const ShutdownFacts& f,
                    std::string* summary) {
  std::printf("shutdown: SIGTERM at %.3f s into the load\n", f.sigterm);
  const bool checks = ReportChecks(f);
  const bool watch = ReportWatch(f);
  const bool calls = ReportCallsAroundSigterm(samples, f);
  const bool exit = ReportExit(f);
  double first_not_serving = -1;
  for (const auto& r : f.checks) {
    if (r.answer == "NOT_SERVING" && first_not_serving < 0) {
      first_not_serving = r.first - f.sigterm;
    }
  }
  absl::StrAppendFormat(summary,
                        " check_not_serving_s=%.3f exit_s=%.3f shutdown_ok=%d",
                        first_not_serving, f.exited - f.sigterm,
                        checks && watch && calls && exit);
  return checks && watch && calls && exit;
}

// ---------------------------------------------------------------- main

// Everything one run measured.
struct Measured {
  std::vector<Sample> samples;
  double elapsed = 0;  // seconds from the first call to the last end
  int hung = 0;        // chains still in a call past its deadline
  std::vector<RssSampler::Point> rss;
  ShutdownFacts facts;  // sigterm < 0 when no SIGTERM was sent
  // Server-side handling times before the load and at its end (or just
  // before SIGTERM: /metrics stops with it).
  Handling handling_before, handling_after;
};

// Sends SIGTERM at --sigterm_at (unless the load ended first), scraping
// /metrics into `handling` just before; returns when it was sent, in seconds
// since the load began, or -1.
double SigtermAt(const Server& server, Load* load, Clock::time_point start,
                 Handling* handling) {
  const double at = absl::GetFlag(FLAGS_sigterm_at);
  if (at <= 0 || server.pid <= 0) return -1;
  load->Wait(start + std::chrono::microseconds(static_cast<int64_t>(at * 1e6)));
  if (load->Running() == 0) return -1;
  *handling = ScrapeHandling(server.metrics_port);
  // The time is taken before the signal: the server may answer NOT_SERVING
  // before this thread runs again.
  const double sent = Seconds(start, Clock::now());
  kill(server.pid, SIGTERM);
  return sent;
}

// Waits for every chain to stop; cancels the calls still in flight past
// their deadline. Returns the chains that had not stopped (hung).
int FinishLoad(Load* load, Clock::time_point end) {
  const auto hard_end =
      end + std::chrono::milliseconds(absl::GetFlag(FLAGS_deadline_ms)) +
      std::chrono::seconds(10);
  if (load->Wait(hard_end)) return 0;
  const int hung = load->Running();
  std::printf("%d calls still in flight past their deadline: cancelling\n",
              hung);
  load->CancelAll();
  load->Wait(Clock::now() + std::chrono::seconds(5));
  if (load->Running() > 0) {  // their calls still use the clients
    std::printf("calls never ended, even cancelled: FAIL\n");
    std::fflush(stdout);
    _exit(1);  // the server, our child, dies with us (PR_SET_PDEATHSIG)
  }
  return hung;
}

// Stops a server started here (SIGTERM, then SIGKILL after grace + 10 s).
void StopServer(const Server& server, ExitWatch* exit) {
  if (!server.child || exit->ExitedAt() >= 0) return;
  kill(server.pid, SIGTERM);
  const auto limit =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                         (absl::GetFlag(FLAGS_grace_seconds) + 10) * 1000));
  if (!exit->WaitExit(limit)) {
    std::printf("server ignored SIGTERM: killing pid %d\n", server.pid);
    kill(server.pid, SIGKILL);
    exit->WaitExit(Clock::now() + std::chrono::seconds(5));
  }
}

// Runs the load (and the SIGTERM) against `server`, then stops a server
// started here.
Measured Drive(const Requests& requests, std::array<double, kKinds> mix,
               const Server& server, const Stubs& stubs) {
  const auto start = Clock::now();
  const auto end = start + std::chrono::microseconds(static_cast<int64_t>(
                               absl::GetFlag(FLAGS_seconds) * 1e6));
  Load load(&requests, mix, start, end, absl::GetFlag(FLAGS_max_calls),
            std::chrono::milliseconds(absl::GetFlag(FLAGS_deadline_ms)));
  std::unique_ptr<HealthProbe> health;
  if (absl::GetFlag(FLAGS_sigterm_at) > 0) {
    health = std::make_unique<HealthProbe>(server.address, start,
                                           end + std::chrono::seconds(30));
  }
  ExitWatch exit(server, start, [&] {
    load.Stop();  // calls to a dead server only fail
    if (health) health->ServerExited();
  });
  RssSampler rss(server.pid, start, end);
  Measured m;
  m.handling_before = ScrapeHandling(server.metrics_port);
  load.Run(stubs, absl::GetFlag(FLAGS_clients), absl::GetFlag(FLAGS_seed),
           absl::GetFlag(FLAGS_rate));
  m.facts.grace = absl::GetFlag(FLAGS_grace_seconds);
  m.facts.sigterm = SigtermAt(server, &load, start, &m.handling_after);
  m.hung = FinishLoad(&load, end);
  if (m.facts.sigterm < 0)
    m.handling_after = ScrapeHandling(server.metrics_port);
  m.elapsed = Seconds(start, Clock::now());
  rss.Join();
  if (m.facts.sigterm >= 0) {
    exit.WaitExit(start + std::chrono::microseconds(static_cast<int64_t>(
                              (m.facts.sigterm + m.facts.grace + 30) * 1e6)));
  }
  StopServer(server, &exit);
  if (health) {
    health->Join();
    m.facts.checks = health->runs();
    m.facts.watch = health->watched();
  }
  m.facts.exited = exit.ExitedAt();
  m.facts.status = exit.status();
  m.samples = load.Samples();
  m.rss = rss.points();
  return m;
}

// Prints the report; true when every call ended cleanly and, with
// --sigterm_at, the shutdown went as it should.
bool Report(Measured& m) {
  const double rate = static_cast<double>(m.samples.size()) / m.elapsed;
  std::printf(
      "\ncalls: %zu in %.2f s = %.1f per second; load average %s "
      "after\n",
      m.samples.size(), m.elapsed, rate, LoadAverage().c_str());
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double own_cpu = self.ru_utime.tv_sec + self.ru_stime.tv_sec +
                         (self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  std::printf("CPU: load_bench %.1f s (%.2f cores)", own_cpu,
              own_cpu / m.elapsed);
  if (m.rss.size() >= 2) {
    const auto& a = m.rss.front();
    const auto& b = m.rss.back();
    std::printf(", server %.1f s over %.1f s of load (%.2f cores)",
                b.cpu - a.cpu, b.t - a.t, (b.cpu - a.cpu) / (b.t - a.t));
  }
  std::printf("\n");
  const bool shutdown = m.facts.sigterm >= 0;
  const int64_t unexpected =
      PrintCalls(m.samples, m.elapsed, shutdown ? Closed(m.facts) : -1);
  PrintHandling(m.handling_before, m.handling_after);
  std::string summary =
      absl::StrFormat("summary: calls=%zu rps=%.1f", m.samples.size(), rate);
  AppendQuantiles(m.samples, grpc::StatusCode::OK, "ok", &summary);
  AppendQuantiles(m.samples, kBusy, "busy", &summary);
  PrintRss(m.rss, &summary);
  std::printf("calls that did not end cleanly: %lld; calls hung: %d\n",
              static_cast<long long>(unexpected), m.hung);
  bool ok = unexpected == 0 && m.hung == 0;
  if (absl::GetFlag(FLAGS_sigterm_at) > 0 && !shutdown) {
    std::printf(
        "shutdown: SIGTERM never sent (no server PID, or the load "
        "ended first): FAIL\n");
    ok = false;
  } else if (shutdown) {
    ok = ReportShutdown(m.samples, m.facts, &summary) && ok;
  }
  std::printf("%s unclean=%lld hung=%d\n", summary.c_str(),
              static_cast<long long>(unexpected), m.hung);
  return ok;
}

// The load's settings, before it starts.
void PrintHeader(const Requests& requests, size_t channels) {
  std::printf(
      "load: %d clients on %zu channels, %s, for %.1f s (at most %lld "
      "calls), mix %s, deadline %lld ms; valid requests: %s and %zu buffer "
      "lists; 'over' holds %d buffers; load average %s\n",
      absl::GetFlag(FLAGS_clients), channels,
      absl::GetFlag(FLAGS_rate) > 0
          ? absl::StrFormat("%.0f calls/s", absl::GetFlag(FLAGS_rate)).c_str()
          : "back to back",
      absl::GetFlag(FLAGS_seconds),
      static_cast<long long>(absl::GetFlag(FLAGS_max_calls)),
      absl::GetFlag(FLAGS_mix).c_str(),
      static_cast<long long>(absl::GetFlag(FLAGS_deadline_ms)),
      absl::StrJoin(requests.examples, ", ").c_str(),
      requests.valid.size() - requests.examples.size(),
      requests.over.buffers_size(), LoadAverage().c_str());
}

int Run() {
  const auto mix = ParseMix(absl::GetFlag(FLAGS_mix));
  if (!mix.ok() || absl::GetFlag(FLAGS_clients) < 1 ||
      absl::GetFlag(FLAGS_seconds) <= 0) {
    std::fprintf(stderr, "load_bench: %s\n",
                 mix.ok() ? "--clients and --seconds must be positive"
                          : std::string(mix.status().message()).c_str());
    return 2;
  }
  const auto requests = BuildRequests(absl::GetFlag(FLAGS_max_tensors),
                                      absl::GetFlag(FLAGS_seed));
  auto server = requests.ok() ? StartOrAttach() : requests.status();
  if (!server.ok()) {
    std::fprintf(stderr, "load_bench: %s\n",
                 std::string(server.status().message()).c_str());
    return 2;
  }
  Stubs stubs;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_channels)); ++i) {
    stubs.push_back(v1::MemoryPlanner::NewStub(OwnChannel(server->address, i)));
  }
  PrintHeader(*requests, stubs.size());
  Measured m = Drive(*requests, *mix, *server, stubs);
  return Report(m) ? 0 : 1;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a gRPC load generator for memplan-server (loopback only): a mix of "
      "valid, invalid and oversized Plan requests and small Benchmark calls "
      "at a given concurrency; throughput, p50/p99 per status code, the "
      "server's RSS over time, and with --sigterm_at the shutdown under "
      "load.\n\n  load_bench --clients=64 --seconds=60 "
      "[--max_in_flight=4] [--sigterm_at=30]");
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with the server's
  return memplan::Run();
}
