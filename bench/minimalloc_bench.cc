// minimalloc_bench: runs the exact solver in capacity mode on the MiniMalloc
// benchmark CSVs (`id,lower,upper,size`, half-open [lower, upper)) and prints
// one Markdown table row per instance plus the total.
//
//   minimalloc_bench bench/data/minimalloc [--capacity=1048576]
//       [--time_limit=10] [--threads=1] [--minimize]
//
// Every file `NAME.CAPACITY.csv` whose NAME has no dot is an instance; its
// capacity comes from the file name unless --capacity is given. Each answer
// is checked (all pairs) before it is reported. --minimize asks for the
// smallest arena instead (proven optimal when the search ends in time). Exit
// status 1 if any answer is invalid or over capacity.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "planner/cancel.h"
#include "planner/exact_solver.h"
#include "planner/problem.h"

namespace {

using memplan::planner::Buffer;
using memplan::planner::Bytes;
using memplan::planner::Problem;
using memplan::planner::Solution;

// Command-line settings.
struct Flags {
  std::string dir;                // folder holding the CSV files
  std::optional<Bytes> capacity;  // overrides the file name's capacity
  double time_limit = 10;         // seconds per instance
  int threads = 1;                // search threads per instance
  bool minimize = false;          // kMinimize instead of kCapacity
};

// One benchmark file.
struct Instance {
  std::string name;    // the file name up to the first dot
  std::string path;    // full path
  Bytes capacity = 0;  // from the file name
};

// Splits one CSV line at commas.
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  return cells;
}

// Reads a MiniMalloc CSV; columns found by header name. Empty on error.
std::optional<Problem> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const std::vector<std::string> header = SplitCsv(line);
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  const size_t id = column("id"), lower = column("lower"),
               upper = column("upper"), size = column("size");
  if (std::max({id, lower, upper, size}) >= header.size()) return std::nullopt;
  Problem problem;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() < header.size()) return std::nullopt;
    Buffer b;
    b.name = cells[id];
    b.start = std::stoll(cells[lower]);
    b.end = std::stoll(cells[upper]);
    b.size = std::stoll(cells[size]);
    problem.buffers.push_back(b);
  }
  return problem;
}

// Checks a plan pairwise: aligned, no overlap among live-together buffers.
bool Valid(const Problem& problem, const Solution& solution) {
  const size_t n = problem.buffers.size();
  if (solution.offsets.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const Buffer& a = problem.buffers[i];
    const auto oa = solution.offsets[i];
    if (oa < 0 || oa % a.alignment != 0) return false;
    if (oa + a.size > solution.arena_size) return false;
    for (size_t j = i + 1; j < n; ++j) {
      const Buffer& b = problem.buffers[j];
      const auto ob = solution.offsets[j];
      if (memplan::planner::LifetimesOverlap(a, b) && oa < ob + b.size &&
          ob < oa + a.size) {
        return false;
      }
    }
  }
  return true;
}

// Parses argv; false on a usage error.
bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
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
      flags.threads = std::stoi(*v);
    } else if (arg == "--minimize") {
      flags.minimize = true;
    } else if (arg.rfind("--", 0) == 0 || !flags.dir.empty()) {
      return false;
    } else {
      flags.dir = arg;
    }
  }
  return !flags.dir.empty();
}

// Lists NAME.CAPACITY.csv files (NAME without dots), sorted by name.
std::vector<Instance> ListInstances(const std::string& dir) {
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
    instances.push_back(
        {file.substr(0, first), entry.path().string(), std::stoll(middle)});
  }
  std::sort(
      instances.begin(), instances.end(),
      [](const Instance& a, const Instance& b) { return a.name < b.name; });
  return instances;
}

// Solves one instance and prints its row; returns false if the answer is
// invalid or over capacity.
bool RunOne(const Instance& instance, const Flags& flags, double& seconds) {
  std::optional<Problem> problem = ReadCsv(instance.path);
  if (!problem) {
    std::fprintf(stderr, "cannot read %s\n", instance.path.c_str());
    return false;
  }
  memplan::planner::ExactOptions options;
  options.mode = flags.minimize ? memplan::planner::ExactMode::kMinimize
                                : memplan::planner::ExactMode::kCapacity;
  options.capacity = flags.capacity.value_or(instance.capacity);
  options.threads = flags.threads;
  const absl::Time start = absl::Now();
  memplan::planner::CancelToken cancel(start + absl::Seconds(flags.time_limit));
  memplan::planner::SolveContext ctx;
  ctx.cancel = &cancel;
  auto result = memplan::planner::SolveExact(*problem, options, ctx);
  seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!result.ok()) {
    std::fprintf(stderr, "%s: %s\n", instance.name.c_str(),
                 result.status().ToString().c_str());
    return false;
  }
  const bool valid = Valid(*problem, result->solution);
  const Bytes arena = result->solution.arena_size;
  const bool within = arena <= *options.capacity;
  std::printf("| %s | %zu | %lld | %lld | %.3f | %s | %s | %.2f | %lld |%s\n",
              instance.name.c_str(), problem->buffers.size(),
              static_cast<long long>(result->lower_bound),
              static_cast<long long>(arena),
              static_cast<double>(arena) / result->lower_bound,
              within ? "yes" : "no", result->proven_optimal ? "yes" : "no",
              seconds, static_cast<long long>(result->nodes),
              valid ? "" : " INVALID");
  std::fflush(stdout);
  return valid && within;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(stderr,
                 "usage: %s DIR [--capacity=BYTES] [--time_limit=SECONDS] "
                 "[--threads=N] [--minimize]\n",
                 argv[0]);
    return 64;
  }
  std::printf(
      "| instance | buffers | lower bound | arena | ratio | within capacity "
      "| proven optimal | seconds | nodes |\n|---|---|---|---|---|---|---|---|"
      "---|\n");
  double total = 0;
  int ok = 0;
  const std::vector<Instance> instances = ListInstances(flags.dir);
  for (const Instance& instance : instances) {
    double seconds = 0;
    ok += RunOne(instance, flags, seconds) ? 1 : 0;
    total += seconds;
  }
  std::printf("\nwithin capacity: %d of %zu, total %.2f s\n", ok,
              instances.size(), total);
  return ok == static_cast<int>(instances.size()) ? 0 : 1;
}
