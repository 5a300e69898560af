// minimalloc_bench: the exact solver and the planner's search, measured.
//
//   minimalloc_bench [suite] DIR [--capacity=BYTES] [--time_limit=10]
//       [--threads=1] [--minimize] [--effort=N] [--runs=1]
//     The MiniMalloc CSVs of DIR (`NAME.CAPACITY.csv`, `id,lower,upper,size`,
//     half-open [lower, upper)): SolveExact in capacity mode (or --minimize),
//     one Markdown row per instance plus the total.
//   minimalloc_bench zero_slack [--count=6] [--min_buffers=150]
//       [--max_buffers=450] [--seed=1] [--cut=sweep|guillotine]
//       [--time_limit=30] [--minimize] ...
//     Generated zero-slack packings (planner/testing/zero_slack.h): a
//     1 MiB x time rectangle cut into min..max buffers (by a sweep over
//     time, or by guillotine cuts); the capacity is the rectangle's height,
//     the optimum. With --near, one buffer of each is a grain (1 KiB)
//     larger (testing::NearZeroSlackProblem) and the capacity is the
//     height plus a grain: the lower bound, and still the optimum (the
//     buffers above that one moved up a grain), but no longer zero slack.
//   minimalloc_bench threads DIR [--threads=1,2,16] [--only=D,J]
//       [--minimize] [--time_limit=10] [--effort=N] [--runs=3]
//     The exact search on several threads (ExactOptions::threads): each
//     instance of DIR (or those --only names) solved with every thread
//     count in turn, run after run, so that each count meets the same
//     load. One row per count: per instance the median arena / lower
//     bound and the median nodes, the mean of those ratios, and the
//     cores the runs got (process CPU time / wall time: under 1 per
//     thread on a shared machine). Under --effort every count gives the
//     same plan (a row says "differs" otherwise); with a time limit more
//     threads search more nodes in the same time.
//   minimalloc_bench plan FILE... [--time_limit=10] [--effort=N] [--runs=1]
//       [--threads=2]
//     The whole planner (PlanBuffers, "auto" with optimize, time_budget =
//     time_limit) on each CSV: arena / lower bound and wall time (reading
//     excluded), with the stage times.
//
// --orderings=A,B,... replaces ExactOptions::orderings and
// zero_slack_orderings (suite and zero_slack); --remember_failures=0 turns
// off ExactOptions::remember_failures (zero-slack searches); --pq_sweep=0
// turns off ExactOptions::pq_sweep; --dives=0 ExactOptions::dives.
// With --runs=R every instance is solved R times and the median time is
// printed; plan marks rows whose runs gave different plans ("runs
// differ": expected when a time budget, not --effort, ended the search).
// Every answer is checked by planner::Verify before its row is printed;
// exit status 1 if any is invalid or (suite, zero_slack) over capacity.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "bench/median.h"
#include "formats/file_io.h"
#include "formats/minimalloc_csv.h"
#include "planner/exact/exact_solver.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/testing/zero_slack.h"
#include "planner/verifier.h"

namespace {

using memplan::planner::Buffer;
using memplan::planner::Bytes;
using memplan::planner::Offset;
using memplan::planner::Problem;
using memplan::planner::Solution;

// Command-line settings.
struct Flags {
  std::string mode = "suite";      // suite, zero_slack or plan
  std::vector<std::string> args;   // DIR (suite) or FILEs (plan)
  std::optional<Bytes> capacity;   // overrides the file name's capacity
  double time_limit = -1;          // seconds per instance (default per mode)
  int threads = 0;                 // search threads (suite) or workers (plan)
  std::vector<int> thread_counts;  // threads: the counts compared
  std::vector<std::string> only;   // threads: the instances (default all)
  bool minimize = false;           // kMinimize instead of kCapacity
  int64_t effort = 0;              // ExactOptions::max_nodes / effort
  int runs = 1;                    // repetitions; the median time is printed
  bool runs_given = false;         // --runs was on the command line
  int count = 6;                   // zero_slack: instances
  int min_buffers = 150;           // zero_slack: buffers of the first
  int max_buffers = 450;           // zero_slack: buffers of the last
  uint32_t seed = 1;               // zero_slack: seed of the first
  bool guillotine = false;         // zero_slack: guillotine cuts, not sweep
  std::vector<std::string> orderings;  // overrides both ordering lists
  bool remember_failures = true;       // ExactOptions::remember_failures
  bool pq_sweep = true;                // ExactOptions::pq_sweep
  bool dives = true;                   // ExactOptions::dives
  bool near = false;                   // zero_slack: one buffer a grain larger
};

// One instance to solve.
struct Instance {
  std::string name;    // the file name up to the first dot, or generated
  Problem problem;     // the buffers
  Bytes capacity = 0;  // from the file name, or the packing's height
};

// Reads a MiniMalloc CSV with the one reader of formats/; the message goes
// to stderr and the result is empty on error.
std::optional<Problem> ReadCsv(const std::string& path) {
  absl::StatusOr<std::string> text =
      memplan::formats::ReadFile(path, memplan::formats::kDefaultMaxInputBytes);
  absl::StatusOr<memplan::formats::MinimallocCsv> csv =
      text.ok()
          ? memplan::formats::ReadMinimallocCsv(*text, path)
          : absl::StatusOr<memplan::formats::MinimallocCsv>(text.status());
  if (!csv.ok()) {
    std::fprintf(stderr, "%s\n", csv.status().ToString().c_str());
    return std::nullopt;
  }
  return std::move(csv->problem);
}

// Parses argv; false on a usage error.
bool ParseFlags(int argc, char** argv, Flags& flags) {
  int first = 1;
  if (argc > 1 &&
      (std::string(argv[1]) == "suite" ||
       std::string(argv[1]) == "zero_slack" ||
       std::string(argv[1]) == "threads" || std::string(argv[1]) == "plan")) {
    flags.mode = argv[1];
    first = 2;
  }
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& name) -> std::optional<std::string> {
      if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
      return std::nullopt;
    };
    if (auto v = value("--capacity")) {
      flags.capacity = std::stoll(*v);
    } else if (auto v = value("--time_limit")) {
      flags.time_limit = std::stod(*v);
    } else if (auto v = value("--threads")) {
      for (absl::string_view count : absl::StrSplit(*v, ',')) {
        flags.thread_counts.push_back(
            std::max(1, std::stoi(std::string(count))));
      }
      flags.threads = flags.thread_counts.front();
    } else if (auto v = value("--only")) {
      flags.only = absl::StrSplit(*v, ',');
    } else if (auto v = value("--effort")) {
      flags.effort = std::stoll(*v);
    } else if (auto v = value("--runs")) {
      flags.runs = std::max(1, std::stoi(*v));
      flags.runs_given = true;
    } else if (auto v = value("--count")) {
      flags.count = std::max(1, std::stoi(*v));
    } else if (auto v = value("--min_buffers")) {
      flags.min_buffers = std::stoi(*v);
    } else if (auto v = value("--max_buffers")) {
      flags.max_buffers = std::stoi(*v);
    } else if (auto v = value("--seed")) {
      flags.seed = static_cast<uint32_t>(std::stoul(*v));
    } else if (auto v = value("--remember_failures")) {
      if (*v != "0" && *v != "1") return false;
      flags.remember_failures = *v == "1";
    } else if (auto v = value("--orderings")) {
      flags.orderings = absl::StrSplit(*v, ',');
    } else if (auto v = value("--cut")) {
      if (*v != "sweep" && *v != "guillotine") return false;
      flags.guillotine = *v == "guillotine";
    } else if (auto v = value("--dives")) {
      if (*v != "0" && *v != "1") return false;
      flags.dives = *v == "1";
    } else if (auto v = value("--pq_sweep")) {
      if (*v != "0" && *v != "1") return false;
      flags.pq_sweep = *v == "1";
    } else if (arg == "--minimize") {
      flags.minimize = true;
    } else if (arg == "--near") {
      flags.near = true;
    } else if (arg.rfind("--", 0) == 0) {
      return false;
    } else {
      flags.args.push_back(arg);
    }
  }
  if (flags.time_limit < 0)
    flags.time_limit = flags.mode == "zero_slack" ? 30 : 10;
  if (flags.mode == "threads") {
    if (flags.thread_counts.empty()) flags.thread_counts = {1, 2};
    if (flags.runs == 1 && !flags.runs_given) flags.runs = 3;
  }
  if (flags.mode == "suite" || flags.mode == "threads") {
    return flags.args.size() == 1;
  }
  if (flags.mode == "plan") return !flags.args.empty();
  return flags.args.empty() && flags.min_buffers >= 2 &&
         flags.max_buffers >= flags.min_buffers;
}

// NAME.CAPACITY.csv files of `dir` (NAME without dots), sorted by name.
std::vector<Instance> ListSuite(const std::string& dir) {
  std::vector<Instance> instances;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    const size_t first = file.find('.');
    const size_t last = file.rfind(".csv");
    if (first == std::string::npos || last == std::string::npos) continue;
    const std::string middle = file.substr(first + 1, last - first - 1);
    if (middle.empty() ||
        middle.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::optional<Problem> problem = ReadCsv(entry.path().string());
    if (!problem) {
      std::fprintf(stderr, "cannot read %s\n", entry.path().c_str());
      std::exit(66);
    }
    instances.push_back(
        {file.substr(0, first), *std::move(problem), std::stoll(middle)});
  }
  std::sort(
      instances.begin(), instances.end(),
      [](const Instance& a, const Instance& b) { return a.name < b.name; });
  return instances;
}

// The generated packings: count instances, buffers spread evenly over
// [min_buffers, max_buffers], seeds seed, seed + 1, ...
std::vector<Instance> ZeroSlackInstances(const Flags& flags) {
  std::vector<Instance> instances;
  for (int k = 0; k < flags.count; ++k) {
    memplan::planner::testing::ZeroSlackOptions options;
    options.buffers =
        flags.count == 1
            ? flags.min_buffers
            : flags.min_buffers + (flags.max_buffers - flags.min_buffers) * k /
                                      (flags.count - 1);
    options.seed = flags.seed + static_cast<uint32_t>(k);
    if (flags.guillotine) {
      options.cut = memplan::planner::testing::ZeroSlackCut::kGuillotine;
    }
    if (flags.near) {
      instances.push_back(
          {"nzs" + std::to_string(options.buffers) + "s" +
               std::to_string(options.seed),
           memplan::planner::testing::NearZeroSlackProblem(options),
           options.capacity + options.grain});
      continue;
    }
    instances.push_back({"zs" + std::to_string(options.buffers) + "s" +
                             std::to_string(options.seed),
                         memplan::planner::testing::ZeroSlackProblem(options),
                         options.capacity});
  }
  return instances;
}

// The ExactOptions of the flags for one instance.
memplan::planner::ExactOptions OptionsFor(const Instance& instance,
                                          const Flags& flags) {
  memplan::planner::ExactOptions options;
  options.mode = flags.minimize ? memplan::planner::ExactMode::kMinimize
                                : memplan::planner::ExactMode::kCapacity;
  options.capacity = flags.capacity.value_or(instance.capacity);
  options.threads = std::max(flags.threads, 1);
  options.max_nodes = flags.effort;
  options.remember_failures = flags.remember_failures;
  options.pq_sweep = flags.pq_sweep;
  options.dives = flags.dives;
  if (!flags.orderings.empty()) {
    options.orderings = flags.orderings;
    options.zero_slack_orderings = flags.orderings;
  }
  return options;
}

// Solves one instance with SolveExact (runs times) and prints its row;
// returns false if an answer is invalid or (capacity mode) over capacity.
bool SolveOne(const Instance& instance, const Flags& flags, double& seconds) {
  const memplan::planner::ExactOptions options = OptionsFor(instance, flags);
  std::vector<double> times;
  std::optional<memplan::planner::ExactResult> result;
  for (int run = 0; run < flags.runs; ++run) {
    const absl::Time start = absl::Now();
    memplan::base::CancelToken cancel(start + absl::Seconds(flags.time_limit));
    memplan::planner::SolveContext ctx;
    ctx.cancel = &cancel;
    auto r = memplan::planner::SolveExact(instance.problem, options, ctx);
    times.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", instance.name.c_str(),
                   r.status().ToString().c_str());
      return false;
    }
    result = *std::move(r);
  }
  seconds = memplan::bench::Median(times);
  const absl::Status valid =
      memplan::planner::Verify(instance.problem, result->solution);
  const Bytes arena = result->solution.arena_size;
  const bool within = arena <= *options.capacity;
  std::printf("| %s | %zu | %lld | %lld | %.3f | %s | %s | %.2f | %lld |%s\n",
              instance.name.c_str(), instance.problem.buffers.size(),
              static_cast<long long>(result->lower_bound),
              static_cast<long long>(arena),
              static_cast<double>(arena) / result->lower_bound,
              within ? "yes" : "no", result->proven_optimal ? "yes" : "no",
              seconds, static_cast<long long>(result->nodes),
              valid.ok() ? "" : " INVALID");
  if (!valid.ok()) std::fprintf(stderr, "%s\n", valid.ToString().c_str());
  std::fflush(stdout);
  return valid.ok() && (flags.minimize || within);
}

// Runs SolveOne over the instances with a table header and a total.
int SolveAll(const std::vector<Instance>& instances, const Flags& flags) {
  std::printf(
      "| instance | buffers | lower bound | arena | ratio | within capacity "
      "| proven optimal | seconds | nodes |\n|---|---|---|---|---|---|---|---|"
      "---|\n");
  double total = 0;
  int ok = 0;
  for (const Instance& instance : instances) {
    double seconds = 0;
    ok += SolveOne(instance, flags, seconds) ? 1 : 0;
    total += seconds;
  }
  std::printf("\n%s: %d of %zu, total %.2f s\n",
              flags.minimize ? "valid" : "within capacity", ok,
              instances.size(), total);
  return ok == static_cast<int>(instances.size()) ? 0 : 1;
}

// CPU seconds of this process so far (all its threads).
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) /
             1e6;
}

// Nodes in a short form: 950, 12.3k, 6.36M.
std::string ShortCount(double n) {
  char buf[32];
  if (n >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  } else if (n >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.1fk", n / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  }
  return buf;
}

// The threads mode: every instance with every thread count, run after run;
// one row per count.
int CompareThreads(std::vector<Instance> instances, const Flags& flags) {
  if (!flags.only.empty()) {
    std::vector<Instance> kept;
    for (Instance& instance : instances) {
      if (std::find(flags.only.begin(), flags.only.end(), instance.name) !=
          flags.only.end()) {
        kept.push_back(std::move(instance));
      }
    }
    instances = std::move(kept);
  }
  if (instances.empty()) {
    std::fprintf(stderr, "no instance to solve\n");
    return 64;
  }
  const size_t counts = flags.thread_counts.size();
  // [count][instance][run]
  std::vector<std::vector<std::vector<double>>> ratios(
      counts, std::vector<std::vector<double>>(instances.size()));
  auto nodes = ratios;
  std::vector<double> cpu(counts, 0), wall(counts, 0);
  std::vector<std::vector<std::vector<Offset>>> plans(instances.size());
  std::vector<bool> differs(counts, false);
  bool bad = false;
  for (int run = 0; run < flags.runs; ++run) {
    for (size_t i = 0; i < instances.size(); ++i) {
      for (size_t c = 0; c < counts; ++c) {
        memplan::planner::ExactOptions options =
            OptionsFor(instances[i], flags);
        options.threads = flags.thread_counts[c];
        const double cpu_start = ProcessCpuSeconds();
        const absl::Time start = absl::Now();
        memplan::base::CancelToken cancel(start +
                                          absl::Seconds(flags.time_limit));
        memplan::planner::SolveContext ctx;
        ctx.cancel = &cancel;
        auto r =
            memplan::planner::SolveExact(instances[i].problem, options, ctx);
        wall[c] += absl::ToDoubleSeconds(absl::Now() - start);
        cpu[c] += ProcessCpuSeconds() - cpu_start;
        if (!r.ok() ||
            !memplan::planner::Verify(instances[i].problem, r->solution).ok()) {
          std::fprintf(stderr, "%s, %d threads: %s\n",
                       instances[i].name.c_str(), options.threads,
                       r.ok() ? "INVALID plan" : r.status().ToString().c_str());
          bad = true;
          continue;
        }
        ratios[c][i].push_back(static_cast<double>(r->solution.arena_size) /
                               static_cast<double>(r->lower_bound));
        nodes[c][i].push_back(static_cast<double>(r->nodes));
        if (c == 0) plans[i].push_back(r->solution.offsets);
        if (flags.effort > 0 && r->solution.offsets != plans[i].back()) {
          differs[c] = true;
        }
      }
    }
  }
  std::printf("| threads |");
  for (const Instance& instance : instances) {
    std::printf(" %s |", instance.name.c_str());
  }
  std::printf(" mean ratio | cores used |\n|---|");
  for (size_t i = 0; i <= instances.size() + 1; ++i) std::printf("---|");
  std::printf("\n");
  for (size_t c = 0; c < counts; ++c) {
    std::printf("| %d |", flags.thread_counts[c]);
    std::vector<double> medians;
    for (size_t i = 0; i < instances.size(); ++i) {
      if (ratios[c][i].empty()) {
        std::printf(" - |");
        continue;
      }
      medians.push_back(memplan::bench::Median(ratios[c][i]));
      std::printf(" %.3f (%s) |", medians.back(),
                  ShortCount(memplan::bench::Median(nodes[c][i])).c_str());
    }
    double mean = 0;
    for (double m : medians) mean += m / static_cast<double>(medians.size());
    std::printf(" %.4f | %.2f |%s\n", mean,
                wall[c] > 0 ? cpu[c] / wall[c] : 0.0,
                differs[c] ? " differs" : "");
  }
  std::printf(
      "\n(arena / lower bound, median of %d runs, and in parentheses the "
      "median nodes; %s; per solve %g s",
      flags.runs, flags.minimize ? "minimized" : "capacity mode",
      flags.time_limit);
  if (flags.effort > 0) {
    std::printf(" and effort %lld", static_cast<long long>(flags.effort));
  }
  std::printf(")\n");
  return bad ? 1 : 0;
}

// The stage times of a plan, "name ms, ...".
std::string Stages(const memplan::planner::PlanResult& plan) {
  std::string out;
  for (const auto& s : plan.stages) {
    if (!out.empty()) out += ", ";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s %.0f", s.stage.c_str(),
                  static_cast<double>(s.micros) / 1000);
    out += buf;
  }
  return out;
}

// Plans each file with the whole planner under a time budget (and effort).
int PlanFiles(const Flags& flags) {
  std::printf(
      "| file | buffers | lower bound | arena | ratio | proven | strategy | "
      "seconds | stages (ms) |\n|---|---|---|---|---|---|---|---|---|\n");
  memplan::base::WorkerPool workers(flags.threads > 0 ? flags.threads : 2, 64);
  int bad = 0;
  for (const std::string& file : flags.args) {
    std::optional<Problem> problem = ReadCsv(file);
    if (!problem) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 66;
    }
    memplan::planner::PlanOptions options;
    options.optimize = true;
    options.time_budget = absl::Seconds(flags.time_limit);
    options.effort = flags.effort;
    std::vector<double> times;
    absl::StatusOr<memplan::planner::PlanResult> plan;
    std::vector<memplan::planner::Offset> first;  // the first run's plan
    bool same = true;  // every run gave the first run's plan
    for (int run = 0; run < flags.runs; ++run) {
      const absl::Time start = absl::Now();
      plan =
          memplan::planner::PlanBuffers(*problem, options, &workers, nullptr);
      times.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      if (!plan.ok()) break;
      if (run == 0) first = plan->solution.offsets;
      same = same && plan->solution.offsets == first;
    }
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(),
                   plan.status().ToString().c_str());
      ++bad;
      continue;
    }
    const absl::Status valid =
        memplan::planner::Verify(*problem, plan->solution);
    bad += valid.ok() ? 0 : 1;
    std::printf(
        "| %s | %zu | %lld | %lld | %.6f | %s | %s | %.2f | %s%s |%s\n",
        std::filesystem::path(file).filename().c_str(), problem->buffers.size(),
        static_cast<long long>(plan->lower_bound),
        static_cast<long long>(plan->solution.arena_size),
        static_cast<double>(plan->solution.arena_size) / plan->lower_bound,
        plan->proven_optimal ? "yes" : "no", plan->strategy.c_str(),
        memplan::bench::Median(times), Stages(*plan).c_str(),
        same ? "" : " (runs differ)", valid.ok() ? "" : " INVALID");
    std::fflush(stdout);
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(stderr,
                 "usage: %s [suite] DIR [--capacity=BYTES] [--minimize] ...\n"
                 "       %s zero_slack [--count=N] [--min_buffers=N] "
                 "[--max_buffers=N] [--seed=S] [--near] ...\n"
                 "       %s threads DIR [--threads=1,2,16] [--only=D,J] ...\n"
                 "       %s plan FILE... ...\n"
                 "  common: [--time_limit=SECONDS] [--threads=N] "
                 "[--effort=N] [--runs=R]\n"
                 "  search: [--orderings=A,B,...] [--remember_failures=0|1] "
                 "[--pq_sweep=0|1] [--dives=0|1]\n",
                 argv[0], argv[0], argv[0], argv[0]);
    return 64;
  }
  if (flags.mode == "plan") return PlanFiles(flags);
  if (flags.mode == "threads") {
    return CompareThreads(ListSuite(flags.args[0]), flags);
  }
  if (flags.mode == "zero_slack") {
    return SolveAll(ZeroSlackInstances(flags), flags);
  }
  return SolveAll(ListSuite(flags.args[0]), flags);
}
