// memplan: the command-line client. Plans a graph or buffer list in-process
// (the default) or through a memplan-server (--server), and checks a
// server's health. Exit codes follow sysexits: 0 ok, 64 usage, 65 bad input,
// 66 missing file, 69 unavailable, 70 internal, 75 deadline or overload.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "allocators/bfc_allocator.h"
#include "client/input.h"
#include "client/onnx_import.h"
#include "client/remote.h"
#include "google/protobuf/util/json_util.h"
#include "planner/planner.h"
#include "planner/worker_pool.h"
#include "proto/benchmark.h"
#include "proto/convert.h"

ABSL_FLAG(std::string, server, "",
          "memplan-server address (host:port, dns:///host:port or "
          "ipv4:a:p,b:p); empty plans in-process");
ABSL_FLAG(std::string, format, "text", "output: text, json or csv");
ABSL_FLAG(std::string, input_format, "",
          "json, csv or onnx; default from the file extension");
ABSL_FLAG(std::vector<std::string>, dim, {},
          "ONNX: symbolic dim values, NAME=VALUE[,NAME=VALUE]; repeatable");
ABSL_FLAG(std::vector<std::string>, input, {},
          "ONNX: value shapes, NAME=1x3x224x224[,NAME=SHAPE]; repeatable");
ABSL_FLAG(std::string, dump_graph, "",
          "write the request as planned (e.g. the imported ONNX graph) to "
          "this file as protobuf JSON");
ABSL_FLAG(int64_t, alignment, 0, "default alignment in bytes (default 64)");
ABSL_FLAG(int64_t, capacity, 0, "fail unless the arena fits in N bytes");
ABSL_FLAG(std::string, strategy, "", "auto, or one strategy name");
ABSL_FLAG(int64_t, time_budget_ms, 0,
          "how long the exact search may run (default: the server's, 1 s)");
ABSL_FLAG(bool, optimize, false,
          "after the heuristics, search for a smaller plan (exact solver) "
          "for up to --time_budget_ms");
ABSL_FLAG(std::vector<std::string>, memory_pool, {},
          "several memories, fastest first: NAME=CAPACITY[,NAME=CAPACITY] "
          "(bytes; 0 unbounded); repeatable");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(30),
          "give up after this long (e.g. 500ms, 10s)");
ABSL_FLAG(std::string, workload, "",
          "bench: a synthetic workload instead of FILE: allocation, "
          "allocation_delayed or larson");
ABSL_FLAG(int, workload_size, 0, "bench: allocations in the workload (1000)");
ABSL_FLAG(std::string, allocators, "",
          "bench: comma-separated allocators (bfc, pool, pool_indexed, "
          "buffer, aligned, static_plan); default all");
ABSL_FLAG(int, repetitions, 1, "bench: runs per allocator");
ABSL_FLAG(std::string, service, "",
          "health: the service to check (empty: the whole server)");

namespace memplan::client {
namespace {

constexpr int kUsage = 64, kDataErr = 65, kNoInput = 66, kUnavailable = 69,
              kSoftware = 70, kTempFail = 75;

constexpr char kUsageText[] =
    "usage:\n"
    "  memplan plan [--server HOST:PORT] [--format text|json|csv]\n"
    "               [--input_format json|csv|onnx] [--alignment N]\n"
    "               [--capacity N] [--dim NAME=N,...] [--input NAME=AxB,...]\n"
    "               [--dump_graph FILE]\n"
    "               [--strategy NAME] [--optimize] [--time_budget_ms N]\n"
    "               [--memory_pool NAME=BYTES,...] [--deadline D]\n"
    "               FILE|-\n"
    "  memplan bench [--server HOST:PORT] [--format text|json]\n"
    "                [--allocators a,b] [--repetitions N] FILE|-\n"
    "  memplan bench [--server HOST:PORT] --workload allocation|\n"
    "                allocation_delayed|larson [--workload_size N]\n"
    "  memplan health --server HOST:PORT [--service NAME] [--deadline D]\n"
    "\n"
    "FILE is protobuf JSON (a PlanRequest or a Graph) or MiniMalloc CSV\n"
    "(id,lower,upper,size[,alignment]) or an ONNX model (.onnx: --dim sets\n"
    "symbolic dims, --input whole shapes; both repeat or take lists).\n"
    "Flags may be written --name=value, --name value, and with - or _ in\n"
    "the name.\n"
    "exit codes: 0 ok, 64 usage, 65 bad input, 66 missing file,\n"
    "69 unavailable, 70 internal, 75 deadline or overload (retry)\n"
    "health exit codes (as grpc_health_probe): 0 serving, 1 bad arguments,\n"
    "2 connection failure, 3 RPC failure, 4 not serving\n";

int Usage(const std::string& error) {
  std::fprintf(stderr, "memplan: %s\n%s", error.c_str(), kUsageText);
  return kUsage;
}

// The exit code for a failed call or input.
int ExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return kDataErr;
    case absl::StatusCode::kNotFound:
      return kNoInput;
    case absl::StatusCode::kUnavailable:
      return kUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return kTempFail;
    default:
      return kSoftware;
  }
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "memplan: %s: %s\n",
               absl::StatusCodeToString(s.code()).c_str(),
               std::string(s.message()).c_str());
  return ExitCode(s);
}

// Parses flags with abseil's registry, so that a bad flag is a usage error
// (exit 64) rather than abseil's exit 1. Returns the positional arguments.
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv) {
  std::vector<std::string> positional, dims, inputs, memory_pools;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-" || !absl::StartsWith(arg, "-")) {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(arg.find_first_not_of('-'));
    std::string value;
    const size_t eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    name = absl::StrReplaceAll(name, {{"-", "_"}});
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value && flag->IsOfType<bool>()) {
      value = "true";  // a bare boolean flag
    } else if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
      value = argv[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value for --", name, ": ", error));
    }
    // --dim and --input repeat: every occurrence adds to the list.
    if (name == "dim") dims.push_back(value);
    if (name == "input") inputs.push_back(value);
    if (name == "memory_pool") memory_pools.push_back(value);
  }
  absl::SetFlag(&FLAGS_dim, dims);
  absl::SetFlag(&FLAGS_input, inputs);
  absl::SetFlag(&FLAGS_memory_pool, memory_pools);
  return positional;
}

// Applies the command-line options to the request.
absl::Status ApplyFlags(v1::PlanRequest* request) {
  v1::PlanOptions* o = request->mutable_options();
  if (int64_t a = absl::GetFlag(FLAGS_alignment); a != 0) o->set_alignment(a);
  if (int64_t c = absl::GetFlag(FLAGS_capacity); c != 0) o->set_capacity(c);
  if (auto s = absl::GetFlag(FLAGS_strategy); !s.empty()) o->set_strategy(s);
  if (int64_t t = absl::GetFlag(FLAGS_time_budget_ms); t != 0) {
    o->set_time_budget_ms(t);
  }
  if (absl::GetFlag(FLAGS_optimize)) o->set_optimize(true);
  // --memory_pool NAME=BYTES, each occurrence a comma-separated list.
  for (const std::string& list : absl::GetFlag(FLAGS_memory_pool)) {
    for (absl::string_view item : absl::StrSplit(list, ',')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(item, '=');
      int64_t capacity = 0;
      if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &capacity)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--memory_pool: '", item, "' is not NAME=BYTES (0: unbounded)"));
      }
      v1::MemoryPool* pool = o->add_memory_pools();
      pool->set_name(kv.first);
      pool->set_capacity_bytes(capacity);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::PlanResponse> PlanInProcess(const v1::PlanRequest& request) {
  const int threads =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  planner::WorkerPool pool(threads, 64);
  planner::CancelToken cancel(absl::Now() + absl::GetFlag(FLAGS_deadline));
  return api::Plan(request, api::Limits{}, &pool, &cancel);
}

// A message as protobuf JSON with the proto field names.
void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::cout << json;
}

int Print(const Input& input, const v1::PlanResponse& response) {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format == "json") {
    PrintJson(response);
  } else if (format == "csv") {
    std::cout << FormatCsv(input, response);
  } else {
    std::cout << planner::FormatReport(api::ResultFromProto(response));
  }
  return 0;
}

int RunPlan(const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("plan takes one FILE (or - for stdin)");
  const std::string format = absl::GetFlag(FLAGS_format);
  const std::string input_format = absl::GetFlag(FLAGS_input_format);
  if (format != "text" && format != "json" && format != "csv") {
    return Usage("--format must be text, json or csv");
  }
  if (!input_format.empty() && input_format != "json" &&
      input_format != "csv" && input_format != "onnx") {
    return Usage("--input_format must be json, csv or onnx");
  }
  std::vector<std::string> warnings;
  absl::StatusOr<Input> input =
      IsOnnxInput(args[0], input_format)
          ? ReadOnnxInput(args[0], absl::GetFlag(FLAGS_dim),
                          absl::GetFlag(FLAGS_input), &warnings)
          : ReadInput(args[0], input_format);
  for (const std::string& w : warnings) {
    std::fprintf(stderr, "memplan: warning: %s\n", w.c_str());
  }
  if (!input.ok()) return Fail(input.status());
  if (format == "csv" && input->format != InputFormat::kCsv) {
    return Usage("--format csv needs CSV input");
  }
  if (auto s = ApplyFlags(&input->request); !s.ok()) return Fail(s);
  if (const std::string dump = absl::GetFlag(FLAGS_dump_graph); !dump.empty()) {
    auto s = WriteRequestJson(dump, input->request);
    if (!s.ok()) return Fail(s);
  }
  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<v1::PlanResponse> response =
      server.empty()
          ? PlanInProcess(input->request)
          : PlanRemote(server, input->request, absl::GetFlag(FLAGS_deadline));
  if (!response.ok()) return Fail(response.status());
  return Print(*input, *response);
}

// The Benchmark request: FILE's graph or a synthetic workload.
absl::StatusOr<v1::BenchmarkRequest> BenchRequest(
    const std::vector<std::string>& args) {
  v1::BenchmarkRequest request;
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (workload.empty() == args.empty() || args.size() > 1) {
    return absl::InvalidArgumentError(
        "bench takes one FILE (a graph) or --workload");
  }
  if (!workload.empty()) {
    request.set_workload(workload);
    request.set_workload_size(absl::GetFlag(FLAGS_workload_size));
  } else {
    absl::StatusOr<Input> input = ReadInput(args[0], "json");
    if (!input.ok()) return input.status();
    if (!input->request.has_graph()) {
      return absl::InvalidArgumentError(
          absl::StrCat(args[0], ": bench needs a graph, not buffers"));
    }
    *request.mutable_graph() = input->request.graph();
    *request.mutable_options() = input->request.options();
  }
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_allocators),
                                               ',', absl::SkipEmpty())) {
    request.add_allocators(std::string(name));
  }
  request.set_repetitions(absl::GetFlag(FLAGS_repetitions));
  return request;
}

absl::StatusOr<v1::BenchmarkResponse> BenchInProcess(
    const v1::BenchmarkRequest& request) {
  allocators::BfcAllocator arena{allocators::BfcAllocator::Options{}};
  planner::CancelToken cancel(absl::Now() + absl::GetFlag(FLAGS_deadline));
  return api::RunBenchmark(request, api::BenchmarkLimits{}, &arena, nullptr,
                           &cancel, nullptr);
}

// A table: one row per allocator, reserved bytes against the static plan.
void PrintBenchTable(const v1::BenchmarkResponse& r) {
  std::printf(
      "trace: %lld events; static plan arena %lld bytes (%s), lower "
      "bound %lld bytes\n",
      static_cast<long long>(r.trace_events()),
      static_cast<long long>(r.arena_size_bytes()), r.strategy().c_str(),
      static_cast<long long>(r.lower_bound_bytes()));
  std::printf("%-14s %14s %14s %9s %8s %8s %8s %8s\n", "allocator",
              "peak in use", "peak reserved", "vs plan", "frag", "fails",
              "p50 ns", "p99 ns");
  for (const v1::AllocatorFigures& row : r.rows()) {
    const double vs = r.arena_size_bytes() > 0
                          ? static_cast<double>(row.peak_bytes_reserved()) /
                                static_cast<double>(r.arena_size_bytes())
                          : 0;
    std::printf("%-14s %14lld %14lld %8.2fx %8.3f %8lld %8lld %8lld\n",
                row.allocator().c_str(),
                static_cast<long long>(row.peak_bytes_in_use()),
                static_cast<long long>(row.peak_bytes_reserved()), vs,
                row.fragmentation_at_peak(),
                static_cast<long long>(row.failures()),
                static_cast<long long>(row.p50_ns()),
                static_cast<long long>(row.p99_ns()));
  }
}

int RunBench(const std::vector<std::string>& args) {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") {
    return Usage("bench --format must be text or json");
  }
  absl::StatusOr<v1::BenchmarkRequest> request = BenchRequest(args);
  if (absl::IsInvalidArgument(request.status()) &&
      request.status().message().find("bench takes") == 0) {
    return Usage(std::string(request.status().message()));
  }
  if (!request.ok()) return Fail(request.status());
  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<v1::BenchmarkResponse> response =
      server.empty()
          ? BenchInProcess(*request)
          : BenchmarkRemote(server, *request, absl::GetFlag(FLAGS_deadline));
  if (!response.ok()) return Fail(response.status());
  if (format == "json") {
    PrintJson(*response);
  } else {
    PrintBenchTable(*response);
  }
  return 0;
}

int RunHealth(const std::vector<std::string>& args) {
  const std::string server = absl::GetFlag(FLAGS_server);
  if (!args.empty() || server.empty()) {
    std::fprintf(stderr, "memplan: health needs --server and no FILE\n%s",
                 kUsageText);
    return 1;
  }
  HealthResult r = CheckHealth(server, absl::GetFlag(FLAGS_service),
                               absl::GetFlag(FLAGS_deadline));
  std::printf("%s\n", r.message.c_str());
  return r.exit_code;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage("no command");
  const std::string command = argv[1];
  bool help = command == "help";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    help = help || arg == "--help" || arg == "-h" || arg == "-help";
  }
  if (help) {
    std::printf("memplan: plans memory for ML computation graphs.\n%s",
                kUsageText);
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> args = ParseFlags(argc, argv);
  if (!args.ok()) {
    if (command == "health") {
      std::fprintf(stderr, "memplan: %s\n",
                   std::string(args.status().message()).c_str());
      return 1;
    }
    return Usage(std::string(args.status().message()));
  }
  if (command == "plan") return RunPlan(*args);
  if (command == "health") return RunHealth(*args);
  if (command == "bench") return RunBench(*args);
  return Usage(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace memplan::client

int main(int argc, char** argv) { return memplan::client::Main(argc, argv); }
