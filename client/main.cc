// memplan: the command-line client, a thin adapter over the engine: reads
// input with formats/, plans in-process (engine::Plan) or through a
// memplan-server (--server), prints or writes the result. Exit codes follow
// sysexits: 0 ok, 64 usage, 65 bad input, 66 missing input, 69 server
// unavailable, 70 internal, 73 cannot write the output, 74 input cannot be
// read, 75 deadline or overload.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/parallel.h"
#include "base/process_memory.h"
#include "base/text.h"
#include "base/worker_pool.h"
#include "client/cli_flags.h"
#include "client/help.h"
#include "client/input.h"
#include "client/inspect.h"
#include "client/remote.h"
#include "engine/benchmark.h"
#include "engine/emit.h"
#include "engine/model_import.h"
#include "engine/names.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "formats/minimalloc_csv.h"
#include "formats/request_json.h"
#include "pictures/bench_html.h"
#include "planner/planner.h"
#include "planner/tflm_greedy.h"
#include "proto/convert.h"

namespace memplan::client {
namespace {

// Points per allocator of the bytes-over-time charts of bench --emit html.
constexpr int kBenchSeriesPoints = 512;

constexpr int kUsage = 64, kDataErr = 65, kNoInput = 66, kUnavailable = 69,
              kSoftware = 70, kCantCreate = 73, kIoErr = 74, kTempFail = 75;

// A usage error: the error, and where the command's help is (the overview,
// a list of the commands, when there is no command).
// The error may quote arguments: escaped and cut short like any.
int Usage(const std::string& command, const std::string& error) {
  const std::string safe = base::BoundedMessage(error);
  if (CommandHelp(command).empty()) {
    std::fprintf(stderr, "memplan: %s\n\n%s", safe.c_str(),
                 OverviewHelp().c_str());
  } else {
    std::fprintf(stderr, "memplan: %s\nrun 'memplan help %s' for its flags\n",
                 safe.c_str(), command.c_str());
  }
  return kUsage;
}

// The exit code for a failed call or input. Over a limit is retryable only
// when a server said it is busy; any other limit (the request's size, its
// tensors...) refuses the same request every time.
int ExitCode(const absl::Status& s, bool remote) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return kDataErr;
    case absl::StatusCode::kResourceExhausted:
      return remote && absl::StartsWith(s.message(), "the server is busy")
                 ? kTempFail
                 : kDataErr;
    case absl::StatusCode::kNotFound:
      return kNoInput;
    case absl::StatusCode::kPermissionDenied:
      return kCantCreate;
    case absl::StatusCode::kUnavailable:
      // A server's: unavailable. Locally: input that cannot be read
      // (formats::ReadFile, "cannot read ..."), an I/O error.
      return remote ? kUnavailable : kIoErr;
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return kTempFail;
    default:
      return kSoftware;
  }
}

int Fail(const absl::Status& s, bool remote = false) {
  // Messages may quote raw names from the input: the text rule applies,
  // and a long name is cut as the server cuts it. A local file that cannot
  // be read or written says so without a gRPC code, which would misname
  // it ("PERMISSION_DENIED: cannot write x: No such file or directory"):
  // its exit code (74, 73) tells it apart.
  const bool local_file =
      !remote && (s.code() == absl::StatusCode::kNotFound ||
                  s.code() == absl::StatusCode::kPermissionDenied ||
                  s.code() == absl::StatusCode::kUnavailable);
  std::string line = absl::StrCat(
      local_file ? "" : absl::StrCat(absl::StatusCodeToString(s.code()), ": "),
      base::BoundedMessage(s.message()));
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    // Its message may not say which deadline ("Deadline Exceeded").
    absl::StrAppend(
        &line, " (the call's deadline",
        FlagGiven("deadline")
            ? absl::StrCat(", --deadline ",
                           absl::FormatDuration(absl::GetFlag(FLAGS_deadline)))
            : ": 30 s unless --deadline says, a plan's time budget over "
              "20 s and 10 s more",
        ")");
  }
  std::fprintf(stderr, "memplan: %s\n", line.c_str());
  return ExitCode(s, remote);
}

bool Remote() { return !absl::GetFlag(FLAGS_server).empty(); }

InputOptions InputOptionsFromFlags() {
  InputOptions options;
  options.format = absl::GetFlag(FLAGS_input_format);
  options.dims = absl::GetFlag(FLAGS_dim);
  options.shapes = absl::GetFlag(FLAGS_input);
  options.max_bytes = absl::GetFlag(FLAGS_max_input_bytes);
  return options;
}

// A worker pool of one thread per usable core, for in-process calls.
base::WorkerPool& Workers() {
  static auto* workers = new base::WorkerPool(base::UsableCores(), 64);
  return *workers;
}

// What a plan call gave: the response, and in-process the planner's own
// result (no proto round trip for the report).
struct Planned {
  v1::PlanResponse response;
  planner::PlanResult result;
};

absl::StatusOr<Planned> PlanRequest(const v1::PlanRequest& request) {
  Planned planned;
  if (Remote()) {
    absl::StatusOr<v1::PlanResponse> r =
        PlanRemote(absl::GetFlag(FLAGS_server), request,
                   PlanDeadline(request.options().time_budget_ms()));
    if (!r.ok()) return r.status();
    planned.response = *std::move(r);
    planned.result = api::ResultFromProto(planned.response);
    return planned;
  }
  base::CancelToken cancel(absl::Now() +
                           PlanDeadline(request.options().time_budget_ms()));
  absl::StatusOr<engine::PlanOutcome> outcome =
      engine::Plan(request, engine::Limits{}, &Workers(), &cancel);
  if (!outcome.ok()) return outcome.status();
  // The files move; a long assignment list is filled on the workers.
  engine::ToResponse(std::move(*outcome), nullptr, &Workers(),
                     &planned.response);
  planned.result = std::move(outcome->result);
  // As the response has them (none with --no_timings), so that the text
  // report is the same in-process and with --server.
  if (request.no_timings()) planned.result.stages.clear();
  return planned;
}

// --dump_graph: the graph memplan plans, as a PlanRequest in JSON.
absl::Status DumpGraph(const Input& input, const std::string& path) {
  v1::PlanRequest dump = input.request;
  if (dump.has_model()) {
    // Within --deadline, as the plan's own import.
    base::CancelToken cancel(absl::Now() + absl::GetFlag(FLAGS_deadline));
    absl::StatusOr<formats::ImportedModel> model =
        engine::ImportModelFile(dump.model(), &cancel);
    if (!model.ok()) return model.status();
    dump.clear_model();
    *dump.mutable_graph() = *model->graph;  // a copy: off the arena
    if (model->format == formats::Format::kTflite &&
        dump.options().alignment() == 0) {
      // What a TFLite model is planned with (TFLM's), which the graph alone
      // would not get.
      dump.mutable_options()->set_alignment(planner::kTflmAlignment);
    }
  }
  // What to write and how to report it are this run's, not the graph's:
  // planned again, the dump takes the flags of that run.
  dump.clear_emit();
  dump.clear_c_header_id();
  dump.clear_no_timings();
  // The names as the plan has them (the text rule): a model's or a CSV's
  // bytes may not be UTF-8, which JSON cannot hold, and the dump must read
  // back to the same graph (SafeName keeps distinct names distinct).
  if (dump.has_graph()) engine::CleanGraphNames(dump.mutable_graph());
  for (v1::Buffer& b : *dump.mutable_buffers()) {
    *b.mutable_id() = base::SafeName(b.id());
  }
  for (v1::MemoryPool& pool : *dump.mutable_options()->mutable_memory_pools()) {
    *pool.mutable_name() = base::SafeName(pool.name());
  }
  return formats::WriteFileAtomically(path, formats::ToJson(dump));
}

// The text report, with what a TFLite user compares against.
std::string TextReport(const Planned& planned) {
  std::string out = planner::FormatReport(planned.result);
  const v1::PlanResponse& r = planned.response;
  if (r.has_baseline() && r.baseline().arena_size_bytes() > 0) {
    absl::StrAppend(
        &out, "baseline:     ", r.baseline().strategy(), " needs ",
        r.baseline().arena_size_bytes(), " bytes (memplan ",
        absl::StrFormat("%.3f", static_cast<double>(r.arena_size_bytes()) /
                                    r.baseline().arena_size_bytes()),
        "x of it)\n");
  }
  if (r.runtime_arena_bytes() > 0) {
    // What the figure covers and what it leaves out (docs/inputs.md).
    absl::StrAppend(
        &out, "runtime:      ", r.runtime_arena_bytes(),
        " bytes of TFLite Micro's arena hold the tensors it plans (this "
        "plan, rounded up to 16,\n              and any it places itself); "
        "its arena needs more: "
        "TFLite Micro's persistent allocations and kernels' scratch\n"
        "              buffers, which only TFLite Micro knows "
        "(docs/inputs.md)\n");
  }
  return out;
}

int PrintPlan(const Input& input, const Planned& planned) {
  const std::string format = absl::GetFlag(FLAGS_format);
  for (const std::string& w : planned.response.warnings()) {
    std::fprintf(stderr, "memplan: warning: %s\n", w.c_str());
  }
  if (format == "json") {
    // A large plan's assignments printed on every core.
    std::cout << formats::ToJson(planned.response,
                                 {&Workers(), Workers().threads()});
  } else if (format == "csv") {
    planner::Solution solution;
    for (const v1::Assignment& a : planned.response.assignments()) {
      solution.offsets.push_back(a.offset());
    }
    // The ids as the plan has them (the text rule): a raw carriage return
    // or escape sequence would rewrite the user's terminal.
    planner::Problem problem = input.csv->problem;
    for (planner::Buffer& b : problem.buffers) b.name = base::SafeName(b.name);
    std::cout << formats::WriteMinimallocCsv(problem, &solution,
                                             input.csv->has_alignment);
  } else {
    std::cout << TextReport(planned);
  }
  return 0;
}

// A file to write: one --emit FORMAT and its -o FILE.
struct EmitTarget {
  std::string format;
  std::string path;
};

// Pairs the --emit flags with the -o flags in the order given (the Nth -o
// is the Nth --emit's file). INVALID_ARGUMENT when they do not pair up or
// two write one file.
absl::StatusOr<std::vector<EmitTarget>> EmitTargets() {
  const std::vector<std::string> formats = absl::GetFlag(FLAGS_emit);
  const std::vector<std::string> paths = absl::GetFlag(FLAGS_output);
  if (formats.size() != paths.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "each --emit FORMAT needs its own -o FILE (e.g. --emit svg -o "
        "plan.svg --emit html -o plan.html); got ",
        formats.size(), " --emit and ", paths.size(), " -o"));
  }
  std::vector<EmitTarget> targets;
  for (size_t i = 0; i < formats.size(); ++i) {
    for (const EmitTarget& t : targets) {
      if (formats::SameFile(t.path, paths[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "-o ", base::SafeText(paths[i]),
            t.path == paths[i]
                ? ""
                : absl::StrCat(" (the file -o ", base::SafeText(t.path), ")"),
            " is given for both --emit ", base::SafeText(t.format),
            " and --emit ", base::SafeText(formats[i]),
            "; give each its own file"));
      }
    }
    targets.push_back({formats[i], paths[i]});
  }
  return targets;
}

// Checks the output flags of plan before anything is read.
absl::StatusOr<std::vector<EmitTarget>> CheckPlanFlags() {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json" && format != "csv") {
    return absl::InvalidArgumentError("--format must be text, json or csv");
  }
  absl::StatusOr<std::vector<EmitTarget>> targets = EmitTargets();
  if (!targets.ok()) return targets;
  const std::string dump = absl::GetFlag(FLAGS_dump_graph);
  if (dump == "-") {
    return absl::InvalidArgumentError(
        "--dump_graph needs a file (standard output holds the plan)");
  }
  for (const EmitTarget& t : *targets) {
    if (!dump.empty() && formats::SameFile(t.path, dump)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dump_graph and -o both write '", base::SafeText(dump), "'"));
    }
  }
  return targets;
}

// Writes the files of `targets`, asked for after the request's own emit
// (the last targets.size() files of the response), and takes them out of
// the response: written, not printed. The request's own files stay (JSON
// output prints them).
absl::Status WriteEmitted(const std::vector<EmitTarget>& targets,
                          v1::PlanResponse* response) {
  const int first = response->files_size() - static_cast<int>(targets.size());
  if (first < 0) {
    return absl::InternalError("the plan came back without its files");
  }
  // All or none: a picture and its page go together.
  std::vector<formats::FileToWrite> files;
  for (size_t i = 0; i < targets.size(); ++i) {
    files.push_back(
        {targets[i].path, response->files(first + static_cast<int>(i)).data()});
  }
  if (absl::Status s = formats::WriteFilesAtomically(files); !s.ok()) {
    return s;
  }
  response->mutable_files()->DeleteSubrange(first,
                                            static_cast<int>(targets.size()));
  return absl::OkStatus();
}

// A request file's own emit list gives files only JSON output shows.
void WarnAboutRequestEmit(const v1::PlanRequest& request) {
  if (request.emit_size() == 0 || absl::GetFlag(FLAGS_format) == "json") {
    return;
  }
  std::fprintf(
      stderr,
      "memplan: warning: the request's emit (%s) returns files in "
      "the JSON response only (--format json); write them with "
      "--emit FORMAT -o FILE\n",
      base::BoundedMessage(absl::StrJoin(request.emit(), ", "), 200).c_str());
}

int RunPlan(const std::vector<std::string>& args) {
  if (args.size() != 1)
    return Usage("plan", "plan takes one FILE (- for stdin)");
  absl::StatusOr<std::vector<EmitTarget>> targets = CheckPlanFlags();
  if (!targets.ok()) {
    return Usage("plan", std::string(targets.status().message()));
  }
  absl::StatusOr<Input> input = ReadInput(args[0], InputOptionsFromFlags());
  if (!input.ok()) return Fail(input.status());
  if (absl::GetFlag(FLAGS_format) == "csv" && !input->csv.has_value()) {
    return Usage("plan", "--format csv needs CSV input");
  }
  if (absl::GetFlag(FLAGS_format) == "csv" &&
      !absl::GetFlag(FLAGS_memory_pool).empty()) {
    // A CSV has one offset column for one arena: each pool's offsets
    // count from its own base, which the file could not say.
    return Usage("plan",
                 "--format csv writes one arena's offsets; with --memory_pool "
                 "use --format json or text");
  }
  v1::PlanRequest& request = input->request;
  if (auto s = ApplyPlanFlags(request.mutable_options()); !s.ok()) {
    return Fail(s);
  }
  if (FlagGiven("no_timings")) {
    request.set_no_timings(absl::GetFlag(FLAGS_no_timings));
  }
  if (const std::string id = absl::GetFlag(FLAGS_c_header_id); !id.empty()) {
    request.set_c_header_id(id);
  }
  // A format the flags ask for is written to its file, once: the
  // request's own asking for it too is dropped.
  for (const EmitTarget& t : *targets) {
    auto* emit = request.mutable_emit();
    for (int i = emit->size() - 1; i >= 0; --i) {
      if (engine::CanonicalEmitFormat((*emit)[i]) ==
          engine::CanonicalEmitFormat(t.format)) {
        emit->DeleteSubrange(i, 1);
      }
    }
  }
  WarnAboutRequestEmit(request);
  for (const EmitTarget& t : *targets) request.add_emit(t.format);
  if (const std::string dump = absl::GetFlag(FLAGS_dump_graph); !dump.empty()) {
    if (auto s = DumpGraph(*input, dump); !s.ok()) return Fail(s);
  }
  absl::StatusOr<Planned> planned = PlanRequest(request);
  if (!planned.ok()) return Fail(planned.status(), Remote());
  if (auto s = WriteEmitted(*targets, &planned->response); !s.ok()) {
    return Fail(s);
  }
  for (const EmitTarget& t : *targets) {
    // Standard output holds that file (`-o - > plan.h`): a report after it
    // would break it. Warnings still go to standard error.
    if (t.path == "-") {
      for (const std::string& w : planned->response.warnings()) {
        std::fprintf(stderr, "memplan: warning: %s\n", w.c_str());
      }
      return 0;
    }
  }
  return PrintPlan(*input, *planned);
}

// The Benchmark request: FILE's input or a synthetic workload.
absl::StatusOr<v1::BenchmarkRequest> BenchRequest(
    const std::vector<std::string>& args) {
  v1::BenchmarkRequest request;
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (!workload.empty()) {
    request.set_workload(workload);
    request.set_workload_size(absl::GetFlag(FLAGS_workload_size));
  } else {
    absl::StatusOr<Input> input = ReadInput(args[0], InputOptionsFromFlags());
    if (!input.ok()) return input.status();
    v1::PlanRequest& plan = input->request;
    if (plan.has_graph())
      *request.mutable_graph() = std::move(*plan.mutable_graph());
    if (plan.has_model())
      *request.mutable_model() = std::move(*plan.mutable_model());
    *request.mutable_buffers() = std::move(*plan.mutable_buffers());
    *request.mutable_options() = plan.options();
  }
  if (auto s = ApplyPlanFlags(request.mutable_options()); !s.ok()) return s;
  BenchFlagsOnto(&request);
  return request;
}

absl::StatusOr<v1::BenchmarkResponse> Bench(const v1::BenchmarkRequest& r) {
  if (Remote()) {
    return BenchmarkRemote(absl::GetFlag(FLAGS_server), r,
                           absl::GetFlag(FLAGS_deadline));
  }
  base::CancelToken cancel(absl::Now() + absl::GetFlag(FLAGS_deadline));
  // In-process, --deadline is the only time limit (a server's
  // --max_benchmark_seconds is the server's).
  engine::BenchmarkLimits limits;
  limits.max_time = absl::GetFlag(FLAGS_deadline);
  return engine::RunBenchmark(r, limits, &Workers(), &cancel, nullptr);
}

// A table: one row per allocator, reserved bytes against the static plan.
void PrintBenchTable(const v1::BenchmarkResponse& r) {
  std::printf(
      "trace: %lld events; static plan arena %lld bytes (%s, arena from "
      "%s), lower bound %lld bytes%s\n",
      static_cast<long long>(r.trace_events()),
      static_cast<long long>(r.arena_size_bytes()), r.strategy().c_str(),
      r.arena_allocator().c_str(),
      static_cast<long long>(r.lower_bound_bytes()),
      // (0 from a server older than the field.)
      r.unaligned_lower_bound_bytes() > 0 &&
              r.unaligned_lower_bound_bytes() != r.lower_bound_bytes()
          ? absl::StrCat(" (", r.unaligned_lower_bound_bytes(),
                         " without alignment padding)")
                .c_str()
          : "");
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
    return Usage("bench", "bench --format must be text or json");
  }
  if (absl::GetFlag(FLAGS_workload).empty() == args.empty() ||
      args.size() > 1) {
    return Usage("bench", "bench takes one FILE or --workload");
  }
  absl::StatusOr<std::vector<EmitTarget>> targets = EmitTargets();
  if (!targets.ok()) {
    return Usage("bench", std::string(targets.status().message()));
  }
  if (targets->size() > 1 ||
      (!targets->empty() && targets->front().format != "html")) {
    return Usage("bench",
                 "bench --emit takes html, once: --emit html -o FILE (charts "
                 "of the replay)");
  }
  const bool emit = !targets->empty();
  absl::StatusOr<v1::BenchmarkRequest> request = BenchRequest(args);
  if (!request.ok()) return Fail(request.status());
  if (emit) request->set_series_points(kBenchSeriesPoints);
  absl::StatusOr<v1::BenchmarkResponse> response = Bench(*request);
  if (!response.ok()) return Fail(response.status(), Remote());
  if (emit) {
    const std::string title =
        args.empty() ? absl::StrCat("workload ", absl::GetFlag(FLAGS_workload))
                     : args[0];
    absl::Status s = formats::WriteFileAtomically(
        targets->front().path, formats::BenchHtml(*response, title));
    if (!s.ok()) return Fail(s);
  }
  if (format == "json") {
    std::cout << formats::ToJson(*response);
  } else {
    PrintBenchTable(*response);
  }
  return 0;
}

// inspect: what an input holds, without planning it.
int RunInspect(const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("inspect", "inspect takes one FILE");
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") {
    return Usage("inspect", "inspect --format must be text or json");
  }
  // What inspect cannot honour is a usage error, not silently dropped: it
  // describes the input as stored, in-process, and writes no file.
  const std::pair<const char*, bool> unused[] = {
      {"--dim", !absl::GetFlag(FLAGS_dim).empty()},
      {"--input", !absl::GetFlag(FLAGS_input).empty()},
      {"--emit", !absl::GetFlag(FLAGS_emit).empty()},
      {"-o", !absl::GetFlag(FLAGS_output).empty()},
      {"--dump_graph", !absl::GetFlag(FLAGS_dump_graph).empty()},
      {"--c_header_id", !absl::GetFlag(FLAGS_c_header_id).empty()},
      {"--server", Remote()}};
  for (const auto& [flag, given] : unused) {
    if (given) {
      return Usage("inspect",
                   absl::StrCat("inspect does not take ", flag,
                                " (it describes the input as stored, "
                                "in-process; plan takes it)"));
    }
  }
  absl::StatusOr<Input> input = ReadInput(args[0], InputOptionsFromFlags());
  if (!input.ok()) return Fail(input.status());
  // The options plan would use, for the lower bound it would report.
  if (auto s = ApplyPlanFlags(input->request.mutable_options()); !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<v1::InputSummary> summary = Summarize(*input);
  if (!summary.ok()) return Fail(summary.status());
  std::cout << (format == "json" ? formats::ToJson(*summary)
                                 : FormatSummary(*summary));
  return 0;
}

int RunHealth(const std::vector<std::string>& args) {
  const std::string server = absl::GetFlag(FLAGS_server);
  if (!args.empty() || server.empty()) {
    std::fprintf(stderr,
                 "memplan: health needs --server and no FILE\nrun 'memplan "
                 "help health' for its flags\n");
    return 1;
  }
  if (absl::Status s = CheckServerTarget(server); !s.ok()) {
    std::fprintf(stderr, "memplan: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  HealthResult r = CheckHealth(server, absl::GetFlag(FLAGS_service),
                               absl::GetFlag(FLAGS_deadline));
  std::printf("%s\n", r.message.c_str());
  return r.exit_code;
}

// True when any argument asks for help.
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help" ||
        arg == "--helpfull") {
      return true;
    }
  }
  return false;
}

int Run(int argc, char** argv) {
  if (argc < 2) return Usage("", "no command");
  const std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::printf("%s\n", VersionLine().c_str());
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    // (`memplan help help`: the overview, which says how help works.)
    const std::string topic = argc > 2 ? argv[2] : "help";
    const std::string help = topic == "help" ? "" : CommandHelp(topic);
    if (topic != "help" && help.empty()) {
      return Usage("", absl::StrCat("no command '", topic, "' to help with"));
    }
    std::printf("%s", help.empty() ? OverviewHelp().c_str() : help.c_str());
    return 0;
  }
  const bool known = !CommandHelp(command).empty();
  if (!known) return Usage("", absl::StrCat("unknown command '", command, "'"));
  if (WantsHelp(argc, argv)) {
    std::printf("%s", CommandHelp(command).c_str());
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> args = ParseFlags(argc, argv, 2);
  if (args.ok() && absl::GetFlag(FLAGS_deadline) <= absl::ZeroDuration()) {
    args = absl::InvalidArgumentError("--deadline must be above 0 (inf: none)");
  }
  if (!args.ok()) {
    if (command == "health") {
      std::fprintf(stderr, "memplan: %s\n",
                   base::BoundedMessage(args.status().message()).c_str());
      return 1;
    }
    return Usage(command, std::string(args.status().message()));
  }
  if (command != "health") {
    if (absl::Status s = CheckFlagValues(command); !s.ok()) {
      return Usage(command, std::string(s.message()));
    }
  }
  if (command == "plan") {
    // One plan, then exit: freed memory is kept for the next stage, and
    // the heap is asked for huge pages (a third of a large plan's time is
    // page faults otherwise). Not for `bench`, whose figures include
    // malloc's own behaviour.
    base::KeepFreedMemoryOnHugePages(
        base::kHugePageHeapBytes, base::KeptMemoryArenas(base::UsableCores()));
    return RunPlan(*args);
  }
  if (command == "bench") return RunBench(*args);
  if (command == "inspect") return RunInspect(*args);
  return RunHealth(*args);
}

}  // namespace
}  // namespace memplan::client

int main(int argc, char** argv) {
  // No exception may escape: a bug is reported as one, with exit 70.
  try {
    const int code = memplan::client::Run(argc, argv);
    // Output lost (a full disk) is never a success (a command that failed
    // has said why already).
    if (code != 0) return code;
    if (absl::Status s = memplan::formats::FlushStdout(); !s.ok()) {
      std::fprintf(stderr, "memplan: %s\n", std::string(s.message()).c_str());
      return 73;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memplan: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "memplan: internal error: unknown exception\n");
  }
  return 70;
}
