#include "client/cli_flags.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
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
#include "base/edit_distance.h"
#include "base/text.h"
#include "client/input.h"
#include "engine/benchmark.h"
#include "engine/emit.h"
#include "formats/file_io.h"
#include "formats/format.h"
#include "proto/convert.h"

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

// `arg`: the argument as given ("-x", "--stratgy=auto"); one with a single
// dash may be a file's name.
absl::Status UnknownFlag(const std::string& name, absl::string_view arg) {
  const std::string closest = ClosestFlag(name);
  const absl::string_view shown = arg.substr(0, 64);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown flag ", absl::StartsWith(arg, "--") ? "--" : "-",
      name.substr(0, 64),
      closest.empty() ? "" : absl::StrCat("; did you mean --", closest, "?"),
      absl::StartsWith(arg, "--")
          ? ""
          : absl::StrCat(" (a file named ", shown, ": -- ", shown, ")")));
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

namespace {

// --memory_pool NAME=BYTES lists into the options.
absl::Status ApplyMemoryPools(v1::PlanOptions* o) {
  for (const std::string& list : absl::GetFlag(FLAGS_memory_pool)) {
    for (absl::string_view item :
         absl::StrSplit(list, ',', absl::SkipEmpty())) {
      const std::vector<std::string> kv = absl::StrSplit(item, '=');
      int64_t capacity = 0;
      if (kv.size() != 2 || kv[0].empty() ||
          !absl::SimpleAtoi(kv[1], &capacity)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--memory_pool: '", item, "' is not NAME=BYTES (0: unbounded)"));
      }
      v1::MemoryPool* pool = o->add_memory_pools();
      pool->set_name(kv[0]);
      pool->set_capacity_bytes(capacity);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyPlanFlags(v1::PlanOptions* o) {
  if (int64_t a = absl::GetFlag(FLAGS_alignment); a != 0) o->set_alignment(a);
  if (int64_t c = absl::GetFlag(FLAGS_capacity); c != 0) o->set_capacity(c);
  if (auto s = absl::GetFlag(FLAGS_strategy); !s.empty()) o->set_strategy(s);
  if (int64_t t = absl::GetFlag(FLAGS_time_budget_ms); t != 0) {
    o->set_time_budget_ms(t);
  }
  if (int64_t e = absl::GetFlag(FLAGS_effort); e != 0) o->set_effort(e);
  // Given as false, it turns off a request file's optimize too.
  if (FlagGiven("optimize")) o->set_optimize(absl::GetFlag(FLAGS_optimize));
  if (auto w = absl::GetFlag(FLAGS_weights); !w.empty()) o->set_weights(w);
  if (auto io = absl::GetFlag(FLAGS_io); !io.empty()) o->set_io(io);
  return ApplyMemoryPools(o);
}

namespace {

// A request's error about a value `flag` set, as the flag's: the field's
// name ("options.alignment 3 ...", "emit: unknown format ...") becomes the
// flag's, or the flag's name comes first.
absl::Status AsFlagError(const absl::Status& s, absl::string_view flag,
                         absl::string_view field) {
  absl::string_view message = s.message();
  if (!field.empty() && absl::ConsumePrefix(&message, field)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, message));
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", message));
}

// bench's own flags given, each on a workload request that is otherwise
// fine (CheckFlagValues). With `remote`, names the server's build may know
// (workloads, allocators) are the server's to check.
absl::Status CheckBenchFlags(bool remote) {
  if (absl::GetFlag(FLAGS_workload_size) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workload_size ", absl::GetFlag(FLAGS_workload_size),
                     " is negative (0: the default)"));
  }
  v1::BenchmarkRequest request;
  request.set_workload(remote || absl::GetFlag(FLAGS_workload).empty()
                           ? "allocation"
                           : absl::GetFlag(FLAGS_workload));
  BenchFlagsOnto(&request);
  if (remote) {
    request.clear_allocators();
    request.clear_arena_allocator();
  }
  absl::Status s = engine::CheckBenchmarkFields(request);
  if (s.ok()) return s;
  // Which flag, by how the message starts (the rest may quote the flag's
  // value, any text); "repetitions 101 ..." names its field first.
  struct Field {
    const char* start;
    const char* flag;
    const char* field;
  };
  const Field fields[] = {{"unknown workload", "workload", ""},
                          {"repetitions", "repetitions", "repetitions"},
                          {"unknown arena_allocator", "arena_allocator", ""},
                          {"unknown allocator", "allocators", ""}};
  for (const Field& f : fields) {
    if (absl::StartsWith(s.message(), f.start)) {
      return AsFlagError(s, f.flag, f.field);
    }
  }
  return s;
}

}  // namespace

void BenchFlagsOnto(v1::BenchmarkRequest* request) {
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_allocators),
                                               ',', absl::SkipEmpty())) {
    request->add_allocators(std::string(name));
  }
  request->set_arena_allocator(absl::GetFlag(FLAGS_arena_allocator));
  request->set_repetitions(absl::GetFlag(FLAGS_repetitions));
}

absl::Status CheckServerTarget(absl::string_view target) {
  for (absl::string_view scheme :
       {"http://", "https://", "grpc://", "grpcs://"}) {
    if (!absl::StartsWithIgnoreCase(target, scheme)) continue;
    absl::string_view rest = target.substr(scheme.size());
    rest = rest.substr(0, rest.find('/'));
    if (rest.empty()) rest = "HOST:PORT";
    return absl::InvalidArgumentError(absl::StrCat(
        "--server takes a gRPC target, HOST:PORT (or dns:///HOST:PORT, "
        "ipv4:ADDR:PORT,...), not a URL: try --server ",
        base::SafeText(rest.substr(0, 256))));
  }
  return absl::OkStatus();
}

absl::Status CheckFlagValues(absl::string_view command) {
  // A server may be a newer build: the names only it may know (strategies,
  // emit formats, workloads, allocators) are left to it.
  const bool remote = !absl::GetFlag(FLAGS_server).empty();
  if (auto s = CheckServerTarget(absl::GetFlag(FLAGS_server)); !s.ok()) {
    return s;
  }
  if (const std::string f = absl::GetFlag(FLAGS_input_format); !f.empty()) {
    if (auto s = formats::FormatFromName(f); !s.ok()) {
      return AsFlagError(s.status(), "input_format", "");
    }
  }
  if (absl::GetFlag(FLAGS_max_input_bytes) <= 0) {
    return absl::InvalidArgumentError("--max_input_bytes must be above 0");
  }
  // (inspect refuses --dim, --input, --emit and --c_header_id itself.)
  const bool inspect = command == "inspect";
  if (!inspect) {
    if (auto model = ModelOptionsFromFlags(absl::GetFlag(FLAGS_dim),
                                           absl::GetFlag(FLAGS_input));
        !model.ok()) {
      return model.status();
    }
  }
  // The planning options given, checked together: the fields named in
  // the error are the flags' ("options.alignment 3 ..." is "--alignment 3
  // ...").
  v1::PlanOptions given;
  if (auto s = ApplyPlanFlags(&given); !s.ok()) return s;
  if (remote) given.clear_strategy();
  if (absl::Status s = api::OptionsFromProto(given, api::Budgets{}).status();
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrReplaceAll(
        s.message(),
        {{"options.memory_pools", "--memory_pool"}, {"options.", "--"}}));
  }
  if (command == "bench") return CheckBenchFlags(remote);  // own --emit
  if (inspect) return absl::OkStatus();
  // What the plan may emit, as a TFLite model's plan (the input, not read
  // yet, is checked against its format later).
  v1::PlanRequest emit;
  emit.mutable_model()->set_format("tflite");
  if (!remote) {
    for (const std::string& format : absl::GetFlag(FLAGS_emit)) {
      emit.add_emit(format);
    }
  }
  emit.set_c_header_id(absl::GetFlag(FLAGS_c_header_id));
  if (absl::Status s = engine::CheckEmit(emit); !s.ok()) {
    return absl::StartsWith(s.message(), "c_header_id")
               ? AsFlagError(s, "c_header_id", "c_header_id")
               : AsFlagError(s, "emit", "emit");
  }
  return absl::OkStatus();
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
    if (flag == nullptr || !OurFlag(*flag)) return UnknownFlag(name, arg);
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
