#include "client/cli_flags.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "base/edit_distance.h"
#include "formats/file_io.h"

ABSL_FLAG(std::string, server, "", "");
ABSL_FLAG(std::string, format, "text", "");
ABSL_FLAG(std::string, input_format, "", "");
ABSL_FLAG(std::vector<std::string>, dim, {}, "");
ABSL_FLAG(std::vector<std::string>, input, {}, "");
ABSL_FLAG(std::string, dump_graph, "", "");
ABSL_FLAG(int64_t, alignment, 0, "");
ABSL_FLAG(int64_t, capacity, 0, "");
ABSL_FLAG(std::string, strategy, "", "");
ABSL_FLAG(int64_t, time_budget_ms, 0, "");
ABSL_FLAG(int64_t, effort, 0, "");
ABSL_FLAG(bool, optimize, false, "");
ABSL_FLAG(std::vector<std::string>, memory_pool, {}, "");
ABSL_FLAG(std::string, weights, "", "");
ABSL_FLAG(std::string, io, "", "");
ABSL_FLAG(bool, no_timings, false, "");
ABSL_FLAG(std::vector<std::string>, emit, {}, "");
ABSL_FLAG(std::vector<std::string>, output, {}, "");
ABSL_FLAG(std::string, c_header_id, "", "");
ABSL_FLAG(int64_t, max_input_bytes, memplan::formats::kDefaultMaxInputBytes,
          "");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(30), "");
ABSL_FLAG(std::string, workload, "", "");
ABSL_FLAG(int, workload_size, 0, "");
ABSL_FLAG(std::string, allocators, "", "");
ABSL_FLAG(std::string, arena_allocator, "", "");
ABSL_FLAG(int, repetitions, 1, "");
ABSL_FLAG(std::string, service, "", "");

namespace memplan::client {
namespace {

// Flags given as lists, which repeat: every occurrence adds to the list
// (--emit and -o as given, commas included: the Nth -o is the Nth --emit's
// file).
constexpr const char* kListFlags[] = {"dim", "input", "memory_pool", "emit",
                                      "output"};

// Short spellings.
std::string Canonical(std::string name) {
  name = absl::StrReplaceAll(name, {{"-", "_"}});
  if (name == "o") return "output";
  return name;
}

// The flags this file defines (not abseil's or gRPC's own).
bool OurFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "client/cli_flags.cc");
}

absl::Status UnknownFlag(const std::string& name) {
  const std::string closest = ClosestFlag(name);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown flag --", name.substr(0, 64),
      closest.empty() ? "" : absl::StrCat("; did you mean --", closest, "?")));
}

}  // namespace

std::string ClosestFlag(absl::string_view name) {
  std::string best;
  size_t best_distance = name.size() / 3 + 1;
  for (const auto& [flag_name, flag] : absl::GetAllFlags()) {
    if (!OurFlag(*flag)) continue;
    const size_t d = base::EditDistance(name, flag_name);
    if (d < best_distance || (d == best_distance && flag_name < best)) {
      best = std::string(flag_name);
      best_distance = d;
    }
  }
  return best;
}

namespace {
// The flags the last ParseFlags was given, by canonical name.
std::set<std::string>& Given() {
  static auto* given = new std::set<std::string>();
  return *given;
}
}  // namespace

bool FlagGiven(absl::string_view name) {
  return Given().count(std::string(name)) > 0;
}

absl::Duration PlanDeadline(int64_t time_budget_ms) {
  const absl::Duration deadline = absl::GetFlag(FLAGS_deadline);
  if (FlagGiven("deadline")) return deadline;
  const int64_t budget_ms = std::min<int64_t>(time_budget_ms, 3'600'000);
  return std::max(deadline, absl::Milliseconds(budget_ms) + absl::Seconds(10));
}

absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv,
                                                    int first) {
  Given().clear();
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> lists;
  bool options = true;  // until "--": what follows it is positional
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options && arg == "--") {
      options = false;
      continue;
    }
    if (!options || arg == "-" || !absl::StartsWith(arg, "-")) {
      positional.push_back(arg);
      continue;
    }
    const size_t start = arg.find_first_not_of('-');
    if (start == std::string::npos || start > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg.substr(0, 64),
                       " (\"--\" alone ends the flags)"));
    }
    std::string name = arg.substr(start);
    std::string value;
    const size_t eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    name = Canonical(name);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || !OurFlag(*flag)) return UnknownFlag(name);
    Given().insert(name);
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
          absl::StrCat("bad value for --", name, ": ", error,
                       flag->IsOfType<absl::Duration>()
                           ? " (durations need a unit: 500ms, 10s, 2m)"
                           : ""));
    }
    for (const char* list : kListFlags) {
      if (name == list) lists[name].push_back(value);
    }
  }
  absl::SetFlag(&FLAGS_dim, lists["dim"]);
  absl::SetFlag(&FLAGS_input, lists["input"]);
  absl::SetFlag(&FLAGS_memory_pool, lists["memory_pool"]);
  absl::SetFlag(&FLAGS_emit, lists["emit"]);
  absl::SetFlag(&FLAGS_output, lists["output"]);
  return positional;
}

}  // namespace memplan::client
