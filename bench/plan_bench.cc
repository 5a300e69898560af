// plan_bench: the planner figures behind BENCHMARKS.md.
//   plan_bench quality FILE...       arena / lower bound per strategy for each
//                                    file (JSON graph or MiniMalloc CSV)
//   plan_bench scale [--threads=T] [N...]  planning time of random buffer lists
//                                    (default 10000 100000 1000000), one
//                                    core, median of 3 runs (or --runs=R)
//   plan_bench graph [--threads=T] [OPS...]  planning time of random graphs
//                                    of OPS ops (default 300000) from the
//                                    graph, liveness included, median of
//                                    3 runs (or --runs=R)
//   plan_bench traces [--threads=T] [FILE...]  every MiniMalloc CSV of
//                                    bench/data/traces (or FILEs)
//                                    planned by default: buffers, lower
//                                    bound, arena ratio, median of 3 runs
//   plan_bench peak [--threads=T] [FILE...]  the peak window's default
//                                    variants alone on T threads in all, as
//                                    the default plan places them beside
//                                    the heuristics (no limit; median of
//                                    --runs=R, default 3)
//   plan_bench pools [--threads=T] [FILE...]  the shared-objects stage
//                                    alone, with each overlap search, on T
//                                    threads in all (median of --runs=R,
//                                    default 3)
//   plan_bench dense [--threads=T] [--generator=NAME] [N...]  long-lifetime
//                                    generators (LongDenseProblem,
//                                    StaggeredProblem, MixedLongProblem, or
//                                    the one named) at
//                                    N buffers (default 50000 100000 200000)
//                                    planned by default, median of 3 runs
//   plan_bench csv --generator=NAME N  the dense generator's problem of N
//                                    buffers (seed 1, alignment 1), or
//                                    with RandomProblem the scale
//                                    benchmark's, as MiniMalloc CSV on stdout
//   plan_bench random [INSTANCES]    the random suite: INSTANCES (default
//                                    50) fixed-seed problems per generator
//                                    (RandomProblem, DenseProblem) and size
//                                    (100, 1000); per strategy the mean and
//                                    worst arena / lower bound
// Every mode but quality takes --keep_freed_memory=0|1: 0 runs
// glibc's malloc as it comes; 1, the default, keeps freed memory for reuse
// as `memplan plan` does (base/process_memory.h), over
// --malloc_arenas=A arenas (default base::KeptMemoryArenas of the workers:
// one for every two, 2 to 8), and with
// --huge_pages=1, the default, the heap on transparent huge pages as
// `memplan plan` asks for them (0: 4 KiB pages). scale, graph, traces and
// dense take --max_threads=M: each plan's thread budget
// (PlanOptions::max_threads; default 0, one per usable core up to 16), to
// measure a request that may use fewer threads than the pool has.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/process_memory.h"
#include "bench/median.h"
#include "formats/file_io.h"
#include "formats/format.h"
#include "formats/minimalloc_csv.h"
#include "formats/request_json.h"
#include "planner/peak_window.h"
#include "planner/planner.h"
#include "planner/sections.h"
#include "planner/shared_objects.h"
#include "planner/strategy.h"
#include "planner/testing/random_problems.h"
#include "proto/convert.h"

namespace memplan {
namespace {

// A graph or a buffer list read from a file (JSON or MiniMalloc CSV).
struct PlanInput {
  std::optional<planner::Graph> graph;
  std::optional<planner::Problem> buffers;
  planner::PlanOptions options;
};

absl::StatusOr<PlanInput> ReadPlanInput(const std::string& path) {
  absl::StatusOr<std::string> bytes =
      formats::ReadFile(path, formats::kDefaultMaxInputBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<formats::Format> format =
      formats::DetectFormat(path, *bytes, "");
  if (!format.ok()) return format.status();
  PlanInput input;
  if (*format == formats::Format::kCsv) {
    absl::StatusOr<formats::MinimallocCsv> csv =
        formats::ReadMinimallocCsv(*bytes, path);
    if (!csv.ok()) return csv.status();
    input.buffers = std::move(csv->problem);
    return input;
  }
  absl::StatusOr<v1::PlanRequest> request =
      formats::ParseRequestJson(*bytes, path);
  if (!request.ok()) return request.status();
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(request->options(), {});
  if (!options.ok()) return options.status();
  input.options = *options;
  if (request->has_graph()) {
    input.graph = api::GraphFromProto(request->graph());
  } else {
    input.buffers = api::BuffersFromProto(request->buffers(), 64);
  }
  return input;
}

// Plans one input with `strategy`; prints nothing, returns the result.
absl::StatusOr<planner::PlanResult> PlanWith(const PlanInput& input,
                                             const std::string& strategy) {
  planner::PlanOptions options = input.options;
  options.strategy = strategy;
  if (input.graph.has_value()) {
    return planner::PlanGraph(*input.graph, options, nullptr, nullptr);
  }
  return planner::PlanBuffers(*input.buffers, options, nullptr, nullptr);
}

int Quality(const std::vector<std::string>& files) {
  std::vector<std::string> strategies = planner::StrategyNames();
  strategies.push_back("auto");
  std::printf("| input | buffers | lower bound |");
  for (const auto& s : strategies) std::printf(" %s |", s.c_str());
  std::printf("\n|---|---|---|");
  for (size_t i = 0; i < strategies.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const std::string& file : files) {
    absl::StatusOr<PlanInput> input = ReadPlanInput(file);
    if (!input.ok()) {
      std::fprintf(stderr, "%s\n", input.status().ToString().c_str());
      return 1;
    }
    std::string row;
    int64_t buffers = 0, bound = 0;
    for (const std::string& s : strategies) {
      absl::StatusOr<planner::PlanResult> r = PlanWith(*input, s);
      if (!r.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", file.c_str(), s.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      buffers = r->problem.buffers.size();
      bound = r->lower_bound;
      absl::StrAppend(
          &row, " ", r->solution.arena_size, " (",
          absl::StrFormat("%.3f", static_cast<double>(r->solution.arena_size) /
                                      r->lower_bound),
          ") |");
    }
    std::printf("| %s | %lld | %lld |%s\n",
                file.substr(file.rfind('/') + 1).c_str(),
                static_cast<long long>(buffers), static_cast<long long>(bound),
                row.c_str());
  }
  return 0;
}

// Median figures of a few full pipeline runs of one problem.
struct Timing {
  double seconds = 0;      // median wall time of a run
  double cpu_seconds = 0;  // median process CPU time of a run
  double peak_rss_mb = 0;  // median peak resident memory during a run
  std::vector<std::pair<std::string, double>> stages;  // median ms each
  int64_t arena = 0;                                   // arena of the last run
  int64_t lower_bound = 0;                             // the plan's lower bound
  std::string strategy;  // the winner of the last run
};

// CPU time of this process (all threads): on a machine shared with other
// work, less noisy than wall time.
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Starts a new peak of this process's resident memory (Linux: writing 5
// to clear_refs resets VmHWM to the current RSS).
void ResetPeakRss() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// The peak resident memory since the last reset, in MB (VmHWM); 0 where
// /proc does not say.
double PeakRssMb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb / 1024;
}

// Plans `problem` `runs` times with `options` (on `pool`, may be null) and
// returns the medians; exits on an error (a bug).
// `runs` calls of plan(), each after an untimed set_up(): wall, CPU, peak
// RSS and stages (medians).
Timing TimeRuns(int runs, absl::FunctionRef<void()> set_up,
                absl::FunctionRef<absl::StatusOr<planner::PlanResult>()> plan) {
  Timing timing;
  std::vector<double> seconds, cpu_seconds, peak_rss;
  std::vector<std::pair<std::string, std::vector<double>>> stages;
  for (int run = 0; run < runs; ++run) {
    set_up();
    ResetPeakRss();
    const absl::Time start = absl::Now();
    const double cpu_start = CpuSeconds();
    absl::StatusOr<planner::PlanResult> r = plan();
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    cpu_seconds.push_back(CpuSeconds() - cpu_start);
    peak_rss.push_back(PeakRssMb());
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      std::exit(1);
    }
    timing.arena = r->solution.arena_size;
    timing.lower_bound = r->lower_bound;
    timing.strategy = r->strategy;
    for (const planner::StageTime& s : r->stages) {
      auto it = std::find_if(stages.begin(), stages.end(),
                             [&](const auto& e) { return e.first == s.stage; });
      if (it == stages.end()) it = stages.insert(stages.end(), {s.stage, {}});
      it->second.push_back(s.micros / 1000.0);
    }
  }
  timing.seconds = memplan::bench::Median(seconds);
  timing.cpu_seconds = memplan::bench::Median(cpu_seconds);
  timing.peak_rss_mb = memplan::bench::Median(peak_rss);
  for (auto& [stage, ms] : stages)
    timing.stages.push_back({stage, memplan::bench::Median(ms)});
  return timing;
}

Timing TimePlans(const planner::Problem& problem,
                 const planner::PlanOptions& options, base::WorkerPool* pool,
                 int runs) {
  planner::Problem copy;  // PlanBuffers takes it by value
  return TimeRuns(
      runs, [&] { copy = problem; },
      [&] {
        return planner::PlanBuffers(std::move(copy), options, pool, nullptr);
      });
}

// "prepare 3 ms, pools 6 ms, ...": the median stage times.
std::string StageList(const Timing& t) {
  std::string out;
  for (const auto& [stage, ms] : t.stages) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", stage, " ",
                    absl::StrFormat("%.0f", ms), " ms");
  }
  return out;
}

// A worker pool of `threads`, or none (one core) for 0.
std::unique_ptr<base::WorkerPool> MakeWorkers(int threads) {
  if (threads <= 0) return nullptr;
  return std::make_unique<base::WorkerPool>(threads, 64);
}

int Scale(const std::vector<int>& sizes, int threads, int max_threads,
          int runs) {
  // threads == 0: one core, no worker pool; else the stages split their
  // work over a pool of `threads` (the caller works too: PlanOptions::
  // max_threads, by default one per usable core up to 16, bounds the
  // threads of one request, so on 2 cores the caller and one worker).
  std::unique_ptr<base::WorkerPool> pool = MakeWorkers(threads);
  std::printf(
      "| buffers | workers | median seconds (%d runs) | median CPU seconds | "
      "median peak RSS MB | arena / lower bound | time ratio to previous | "
      "n log n ratio | median stages |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      runs);
  double previous = 0;
  int previous_n = 0;
  planner::PlanOptions options;
  options.strategy = "best_fit_size";
  options.max_threads = max_threads;
  for (int n : sizes) {
    const planner::Problem problem = planner::testing::RandomProblem(n, 42, 64);
    const Timing t = TimePlans(problem, options, pool.get(), runs);
    std::string ratio = "-", nlogn = "-";
    if (previous > 0) {
      ratio = absl::StrFormat("%.1fx", t.seconds / previous);
      nlogn = absl::StrFormat(
          "%.1fx", (n * std::log2(n)) / (previous_n * std::log2(previous_n)));
    }
    std::printf("| %d | %d | %.3f | %.3f | %.0f | %.3f | %s | %s | %s |\n", n,
                threads, t.seconds, t.cpu_seconds, t.peak_rss_mb,
                static_cast<double>(t.arena) / t.lower_bound, ratio.c_str(),
                nlogn.c_str(), StageList(t).c_str());
    std::fflush(stdout);
    previous = t.seconds;
    previous_n = n;
  }
  return 0;
}

// Random graphs of `ops` ops (planner::testing::RandomGraph: 1-3 reads of
// recent tensors, 1-2 writes an op) planned by default from the graph, the
// liveness stage included, on `threads` workers (0: one core).
int Graphs(const std::vector<int>& sizes, int threads, int max_threads,
           int runs) {
  std::unique_ptr<base::WorkerPool> pool = MakeWorkers(threads);
  planner::PlanOptions options;
  options.max_threads = max_threads;
  std::printf(
      "| ops | tensors | workers | median seconds (%d runs) | median CPU "
      "seconds | median peak RSS MB | arena / lower bound | median stages "
      "|\n|---|---|---|---|---|---|---|---|\n",
      runs);
  for (int ops : sizes) {
    const planner::Graph graph = planner::testing::RandomGraph(ops, 11);
    const Timing t = TimeRuns(
        runs, [] {},
        [&] {
          return planner::PlanGraph(graph, options, pool.get(), nullptr);
        });
    std::printf("| %d | %zu | %d | %.3f | %.3f | %.0f | %.3f | %s |\n", ops,
                graph.tensors.size(), threads, t.seconds, t.cpu_seconds,
                t.peak_rss_mb, static_cast<double>(t.arena) / t.lower_bound,
                StageList(t).c_str());
    std::fflush(stdout);
  }
  return 0;
}

// The MiniMalloc CSV files of `dir`, sorted by name.
std::vector<std::string> CsvFilesIn(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".csv") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The traces of bench/data/traces.
std::vector<std::string> TraceFiles() {
  return CsvFilesIn(std::string(MEMPLAN_SOURCE_DIR) + "/bench/data/traces");
}

// ReadPlanInput for the modes that take buffer lists only: nullopt, having
// said which file is none, when `file` does not read as one.
std::optional<PlanInput> ReadBufferList(const std::string& file) {
  absl::StatusOr<PlanInput> input = ReadPlanInput(file);
  if (!input.ok() || !input->buffers.has_value()) {
    std::fprintf(stderr, "%s: not a buffer list\n", file.c_str());
    return std::nullopt;
  }
  return *std::move(input);
}

// Every trace planned by default ("auto": best and first fit by size),
// median of 3 runs, on `threads` workers (0: one core).
int Traces(std::vector<std::string> files, int threads, int max_threads) {
  if (files.empty()) files = TraceFiles();
  std::unique_ptr<base::WorkerPool> pool = MakeWorkers(threads);
  std::printf(
      "| trace | buffers | lower bound | arena / lower bound | median seconds "
      "(3 runs) | median CPU seconds | winner | median stages |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const std::string& file : files) {
    const std::optional<PlanInput> input = ReadBufferList(file);
    if (!input.has_value()) return 1;
    planner::PlanOptions options = input->options;
    options.max_threads = max_threads;
    const Timing t = TimePlans(*input->buffers, options, pool.get(), 3);
    std::printf("| %s | %zu | %lld | %.4f | %.3f | %.3f | %s | %s |\n",
                file.substr(file.rfind('/') + 1).c_str(),
                input->buffers->buffers.size(),
                static_cast<long long>(t.lower_bound),
                static_cast<double>(t.arena) / t.lower_bound, t.seconds,
                t.cpu_seconds, t.strategy.c_str(), StageList(t).c_str());
    std::fflush(stdout);
  }
  return 0;
}

// The peak window's default variants placed alone, as the default plan
// places them beside the heuristics (no plan to stay below, ending at the
// aligned bound), on `threads` threads in all (1: the caller alone); median
// of `runs`.
int PeakWindows(std::vector<std::string> files, int threads, int runs) {
  if (files.empty()) files = TraceFiles();
  std::unique_ptr<base::WorkerPool> pool =
      MakeWorkers(std::max(threads - 1, 0));
  std::printf(
      "| trace | threads | variants run | arena / lower bound | median "
      "seconds (%d runs) | median CPU seconds |\n|---|---|---|---|---|---|\n",
      runs);
  for (const std::string& file : files) {
    const std::optional<PlanInput> input = ReadBufferList(file);
    if (!input.has_value()) return 1;
    const planner::Problem& problem = *input->buffers;
    std::vector<double> seconds, cpu_seconds;
    absl::StatusOr<planner::PeakWindowPlan> plan;
    for (int run = 0; run < runs; ++run) {
      const absl::Time start = absl::Now();
      const double cpu_start = CpuSeconds();
      plan = planner::PlanPeakWindow(
          problem, planner::kDefaultPeakWindowVariants,
          planner::AlignedLowerBound(problem), nullptr, {pool.get(), threads});
      seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      cpu_seconds.push_back(CpuSeconds() - cpu_start);
      if (!plan.ok()) {
        std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
        return 1;
      }
    }
    const double ratio = plan->solution
                             ? static_cast<double>(plan->solution->arena_size) /
                                   planner::LowerBound(problem)
                             : 0;
    std::printf("| %s | %d | %d | %.4f | %.3f | %.3f |\n",
                file.substr(file.rfind('/') + 1).c_str(), threads,
                plan->variants_run, ratio, memplan::bench::Median(seconds),
                memplan::bench::Median(cpu_seconds));
    std::fflush(stdout);
  }
  return 0;
}

// The shared-objects stage alone (the pipeline's "pools") on each trace,
// with each overlap search (planner/shared_objects.h): the compressed time
// prepared once, median of `runs`; `threads` threads in all (1: the caller
// alone). Every search must give the same objects: a difference exits 1.
int Pools(std::vector<std::string> files, int threads, int runs) {
  if (files.empty()) files = TraceFiles();
  std::unique_ptr<base::WorkerPool> pool =
      MakeWorkers(std::max(threads - 1, 0));
  const base::Parallelism parallel{pool.get(), std::max(threads, 1)};
  constexpr std::pair<const char*, planner::OverlapSearch> kSearches[] = {
      {"auto", planner::OverlapSearch::kAuto},
      {"scan", planner::OverlapSearch::kScan},
      {"merged", planner::OverlapSearch::kMerged}};
  std::printf(
      "| trace | threads | objects | object bytes | median ms (%d runs): "
      "auto | scan | merged |\n|---|---|---|---|---|---|---|\n",
      runs);
  for (const std::string& file : files) {
    const std::optional<PlanInput> input = ReadBufferList(file);
    if (!input.has_value()) return 1;
    const planner::Problem& problem = *input->buffers;
    const planner::Sections time = *planner::CompressTime(problem);
    std::optional<planner::SharedObjects> first;
    std::string row;
    for (const auto& [name, search] : kSearches) {
      std::vector<double> ms;
      for (int run = 0; run < runs; ++run) {
        const absl::Time start = absl::Now();
        absl::StatusOr<planner::SharedObjects> objects =
            planner::ColorSharedObjects(problem, nullptr, search, 0, &time,
                                        parallel);
        ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
        if (!objects.ok()) {
          std::fprintf(stderr, "%s %s: %s\n", file.c_str(), name,
                       objects.status().ToString().c_str());
          return 1;
        }
        if (!first.has_value()) first = *objects;
        if (objects->object_of != first->object_of) {
          std::fprintf(stderr, "%s: the %s search gave other objects\n",
                       file.c_str(), name);
          return 1;
        }
      }
      absl::StrAppend(
          &row, " ", absl::StrFormat("%.1f", memplan::bench::Median(ms)), " |");
    }
    std::printf("| %s | %d | %zu | %lld |%s\n",
                file.substr(file.rfind('/') + 1).c_str(), threads,
                first->size.size(), static_cast<long long>(first->TotalBytes()),
                row.c_str());
    std::fflush(stdout);
  }
  return 0;
}

// The long-lifetime generators planned by default, median of 3 runs.
using Generator = planner::Problem (*)(int, uint32_t, planner::Bytes);
constexpr std::pair<const char*, Generator> kDenseGenerators[] = {
    {"LongDenseProblem", &planner::testing::LongDenseProblem},
    {"StaggeredProblem", &planner::testing::StaggeredProblem},
    {"MixedLongProblem", &planner::testing::MixedLongProblem}};

// Writes the named dense generator's problem of n buffers (seed 1,
// alignment 1), or the scale benchmark's (RandomProblem, seed 42, alignment
// 64), to stdout as MiniMalloc CSV, for the CLI's and the server's figures.
int WriteCsv(const std::string& name, int n) {
  std::optional<planner::Problem> problem;
  if (name == "RandomProblem") {
    problem = planner::testing::RandomProblem(n, 42, 64);
  }
  for (const auto& [generator, generate] : kDenseGenerators) {
    if (name == generator) problem = generate(n, 1, 1);
  }
  if (!problem.has_value()) {
    std::fprintf(stderr, "plan_bench csv: unknown generator '%s'\n",
                 name.c_str());
    return 64;
  }
  // Alignment 1 needs no column; RandomProblem's 64 does.
  std::fputs(formats::WriteMinimallocCsv(
                 *problem, nullptr, /*with_alignment=*/name == "RandomProblem")
                 .c_str(),
             stdout);
  return 0;
}

int Dense(std::vector<int> sizes, int threads, int max_threads,
          const std::string& only) {
  if (sizes.empty()) sizes = {50000, 100000, 200000};
  std::unique_ptr<base::WorkerPool> pool = MakeWorkers(threads);
  std::printf(
      "| generator | buffers | arena / lower bound | median seconds (3 runs) "
      "| median CPU seconds | median stages |\n|---|---|---|---|---|---|\n");
  planner::PlanOptions options;
  options.max_threads = max_threads;
  for (const auto& [name, generate] : kDenseGenerators) {
    if (!only.empty() && only != name) continue;
    for (int n : sizes) {
      const planner::Problem problem = generate(n, 1, 64);
      const Timing t = TimePlans(problem, options, pool.get(), 3);
      std::printf("| %s | %d | %.4f | %.3f | %.3f | %s |\n", name, n,
                  static_cast<double>(t.arena) / t.lower_bound, t.seconds,
                  t.cpu_seconds, StageList(t).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

// One strategy's figures over a set of instances.
struct SuiteRow {
  std::string label;          // strategy as shown
  std::vector<double> ratio;  // arena / lower bound per instance
  int optimal = 0;            // instances with arena == lower bound
  double seconds = 0;         // total planning time
};

// Plans `problem` as `label` says ("auto+optimize" or a strategy name) and
// adds its figures to `row`; exits on an error (a bug).
void RunSuiteCase(const planner::Problem& problem, const std::string& label,
                  SuiteRow* row) {
  planner::PlanOptions options;
  options.strategy = label == "auto+optimize" ? "auto" : label;
  options.optimize = label == "auto+optimize";
  options.time_budget = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanBuffers(problem, options, nullptr, nullptr);
  row->seconds += absl::ToDoubleSeconds(absl::Now() - start);
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", label.c_str(),
                 r.status().ToString().c_str());
    std::exit(1);
  }
  row->ratio.push_back(static_cast<double>(r->solution.arena_size) /
                       r->lower_bound);
  row->optimal += r->solution.arena_size == r->lower_bound;
}

// Prints one table: a generator at one size.
void PrintSuite(const char* generator, int n, int instances,
                const std::vector<SuiteRow>& rows) {
  std::printf("\n%s, %d buffers, %d instances (seeds 1..%d):\n\n", generator, n,
              instances, instances);
  std::printf(
      "| strategy | mean arena / LB | worst | at LB | mean ms |\n"
      "|---|---|---|---|---|\n");
  for (const SuiteRow& row : rows) {
    double sum = 0, worst = 0;
    for (double r : row.ratio) {
      sum += r;
      worst = std::max(worst, r);
    }
    std::printf("| %s | %.4f | %.4f | %d/%zu | %.1f |\n", row.label.c_str(),
                sum / row.ratio.size(), worst, row.optimal, row.ratio.size(),
                1000 * row.seconds / row.ratio.size());
  }
  std::fflush(stdout);
}

int RandomSuite(int instances) {
  using Generator = planner::Problem (*)(int, uint32_t, planner::Bytes);
  const std::pair<const char*, Generator> generators[] = {
      {"RandomProblem (graph-like)", &planner::testing::RandomProblem},
      {"DenseProblem (hard)", &planner::testing::DenseProblem}};
  for (const auto& [name, generate] : generators) {
    for (int n : {100, 1000}) {
      std::vector<std::string> labels = planner::HeuristicNames();
      if (n <= 100) labels.push_back("exact");  // 1 s budget
      labels.push_back("auto");
      labels.push_back("auto+optimize");
      std::vector<SuiteRow> rows(labels.size());
      for (size_t k = 0; k < labels.size(); ++k) rows[k].label = labels[k];
      for (int seed = 1; seed <= instances; ++seed) {
        const planner::Problem problem = generate(n, seed, 1);
        for (size_t k = 0; k < labels.size(); ++k) {
          RunSuiteCase(problem, labels[k], &rows[k]);
        }
      }
      PrintSuite(name, n, instances, rows);
    }
  }
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "quality" && argc > 2) {
    return memplan::Quality(std::vector<std::string>(argv + 2, argv + argc));
  }
  // Sizes or files, and --threads=T (workers; 0, the default: one core).
  std::vector<std::string> args;
  int threads = 0;
  int max_threads = 0;    // scale, graph, traces, dense: PlanOptions'
  std::string generator;  // dense: only this generator
  bool keep_freed_memory = true;
  bool huge_pages = true;
  int arenas = 0;  // 0: base::KeptMemoryArenas(threads)
  int runs = 3;    // scale: runs per size
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--runs=", 0) == 0) {
      runs = std::max(1, std::atoi(arg.c_str() + 7));
    } else if (arg == "--keep_freed_memory=0" ||
               arg == "--keep_freed_memory=1") {
      keep_freed_memory = arg.back() == '1';
    } else if (arg == "--huge_pages=0" || arg == "--huge_pages=1") {
      huge_pages = arg.back() == '1';
    } else if (arg.rfind("--malloc_arenas=", 0) == 0) {
      arenas = std::atoi(arg.c_str() + 16);
      if (arenas < 1) {
        std::fprintf(stderr, "plan_bench: --malloc_arenas must be >= 1\n");
        return 64;
      }
    } else if (arg.rfind("--threads=", 0) == 0) {
      threads = std::atoi(arg.c_str() + 10);
    } else if (arg.rfind("--max_threads=", 0) == 0) {
      max_threads = std::atoi(arg.c_str() + 14);
      if (max_threads < 0) {
        std::fprintf(stderr, "plan_bench: --max_threads must be >= 0\n");
        return 64;
      }
    } else if (arg.rfind("--generator=", 0) == 0) {
      generator = arg.substr(12);
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "plan_bench: unknown flag %s\n", arg.c_str());
      return 64;
    } else {
      args.push_back(arg);
    }
  }
  if (arenas == 0) arenas = memplan::base::KeptMemoryArenas(threads);
  if (keep_freed_memory && huge_pages) {
    memplan::base::KeepFreedMemoryOnHugePages(memplan::base::kHugePageHeapBytes,
                                              arenas);
  } else if (keep_freed_memory) {
    memplan::base::KeepFreedMemory(arenas);
  }
  std::vector<int> sizes;
  for (const std::string& a : args) sizes.push_back(std::atoi(a.c_str()));
  if (mode == "scale") {
    if (sizes.empty()) sizes = {10000, 100000, 1000000};
    return memplan::Scale(sizes, threads, max_threads, runs);
  }
  if (mode == "graph") {
    if (sizes.empty()) sizes = {300000};
    return memplan::Graphs(sizes, threads, max_threads, runs);
  }
  if (mode == "traces") return memplan::Traces(args, threads, max_threads);
  if (mode == "peak") {
    return memplan::PeakWindows(args, std::max(threads, 1), runs);
  }
  if (mode == "pools") {
    return memplan::Pools(args, std::max(threads, 1), runs);
  }
  if (mode == "dense") {
    return memplan::Dense(sizes, threads, max_threads, generator);
  }
  if (mode == "csv" && sizes.size() == 1) {
    return memplan::WriteCsv(generator, sizes[0]);
  }
  if (mode == "random") {
    return memplan::RandomSuite(argc > 2 ? std::atoi(argv[2]) : 50);
  }
  std::fprintf(stderr,
               "usage: plan_bench quality FILE...\n"
               "       plan_bench scale [--threads=T] [--runs=R] [N...]\n"
               "       plan_bench graph [--threads=T] [--runs=R] [OPS...]\n"
               "       plan_bench traces [--threads=T] [FILE...]\n"
               "       plan_bench peak [--threads=T] [--runs=R] [FILE...]\n"
               "       plan_bench pools [--threads=T] [--runs=R] [FILE...]\n"
               "       plan_bench dense [--threads=T] [--generator=NAME] "
               "[N...]\n"
               "       plan_bench random [INSTANCES]\n"
               "       plan_bench csv --generator=NAME N  (a dense "
               "generator's or RandomProblem's problem as CSV)\n"
               "all but quality: --keep_freed_memory=0 runs "
               "glibc's malloc as it\ncomes (default 1: freed memory kept, "
               "as `memplan plan` runs), --malloc_arenas=A\nthe arenas "
               "kept memory is shared over (default: one for every two\n"
               "workers, 2 to 8, as `memplan plan` on that many cores), "
               "--huge_pages=0 "
               "keeps\nit on 4 KiB pages (default 1: huge pages asked "
               "for, as `memplan plan` does)\nscale, graph, traces, "
               "dense: --max_threads=M, each plan's thread budget\n(default "
               "0: one per usable core, at most 16)\n");
  return 64;
}
