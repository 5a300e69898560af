#include "client/help.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/benchmark.h"
#include "engine/plan.h"
#include "formats/format.h"
#include "memplan/version.h"
#include "planner/strategy.h"

namespace memplan::client {
namespace {

constexpr char kExitCodes[] =
    "exit codes: 0 ok, 64 usage, 65 bad input (also: no plan within\n"
    "  --capacity, a request over a limit), 66 missing input, 69 server\n"
    "  unavailable, 70 internal error, 73 cannot write the output, 74\n"
    "  input cannot be read (I/O error), 75 deadline or server busy\n"
    "  (retry)\n";

constexpr char kFlagSyntax[] =
    "Flags are --name=value or --name value, with - or _ in names; -o is\n"
    "--output. Durations need a unit: 500ms, 10s, 2m.\n";

// `shapes`: the command takes --dim and --input (plan and bench do).
std::string InputHelp(bool shapes = true) {
  return absl::StrCat(
      "FILE is ", formats::FormatNames(),
      " (from the extension, else the\n"
      "content; - reads standard input):\n"
      "  protobuf JSON   a memplan.v1.PlanRequest or a bare Graph\n"
      "  MiniMalloc CSV  id,lower,upper,size[,alignment], half-open lifetimes\n"
      "  ONNX, TFLite    models; weights stay out of the arena (--weights)\n"
      "  --input_format=FORMAT      force the format (default: detect)\n",
      shapes
          ? "  --dim=NAME=N[,NAME=N]      models: symbolic dims (repeatable)\n"
            "  --input=NAME=AxBxC[,...]   models: whole shapes of inputs "
            "(repeatable)\n"
          : "",
      "  --max_input_bytes=N        refuse larger input read into memory:\n"
      "                             JSON, CSV, standard input (default\n"
      "                             536870912); model files are mapped and\n"
      "                             may hold up to 2 GiB\n");
}

std::string PlanHelp() {
  return absl::StrCat(
      "memplan plan [flags] FILE\n"
      "Plans where every tensor lives in one arena, in-process or with\n"
      "--server, and prints the arena, the lower bound, the efficiency and\n"
      "the plan.\n\n",
      InputHelp(),
      "\nOutput:\n"
      "  --format=text|json|csv     text report (default), the PlanResponse "
      "as\n"
      "                             JSON, or MiniMalloc CSV with offsets (CSV\n"
      "                             input only)\n"
      "  --no_timings               leave stage times out: the same input "
      "gives\n"
      "                             byte-identical JSON\n"
      "  --emit=FORMAT -o FILE      also write a file from the plan: ",
      engine::EmitFormatNames(),
      "\n"
      "                             (tflite: the model with TFLite Micro's\n"
      "                             offline plan; TFLite input only); repeat\n"
      "                             the pair for several files\n"
      "  --c_header_id=ID           names in the C header: MEMPLAN_<ID>_...\n"
      "                             (default: the model's file name, a\n"
      "                             graph's name or \"plan\", and a hash of\n"
      "                             the model and plan)\n"
      "  --dump_graph=FILE          write the graph memplan planned as JSON\n"
      "\nPlanning:\n"
      "  --strategy=NAME            auto (default) or one of:\n"
      "                             ",
      absl::StrJoin(planner::StrategyNames(), ", "),
      "\n"
      "  --optimize                 the default plan, every other heuristic,\n"
      "                             then the exact search\n"
      "  --time_budget_ms=N         search time (default 1000; at most 60 s,\n"
      "                             or the server's cap)\n"
      "  --effort=N                 bound the search by work, not time: the\n"
      "                             same plan on any machine (default 0:\n"
      "                             off); a plan the budget cut says\n"
      "                             time_limited\n"
      "  --capacity=N               fail (exit 65) unless the arena fits N\n"
      "  --alignment=N              default alignment, a power of two (64;\n"
      "                             TFLite: 16; a CSV without an alignment\n"
      "                             column: 1)\n"
      "  --memory_pool=NAME=BYTES[,NAME=BYTES]  several memories, fastest\n"
      "                             first; 0 bytes: unbounded (repeatable)\n"
      "  --weights=exclude|arena    weights and constants: kept out of the\n"
      "                             arena (default) or placed in it\n"
      "  --io=arena|arena_keep_inputs|exclude  graph inputs and outputs: in\n"
      "                             the arena as runtimes run them (default:\n"
      "                             inputs to their last use, outputs from\n"
      "                             their producer), inputs kept for the\n"
      "                             whole run, or owned by the caller\n"
      "\nWhere:\n"
      "  --server=HOST:PORT         plan on a memplan-server (also "
      "dns:///h:p,\n"
      "                             ipv4:a:p,b:p); default: in-process\n"
      "  --deadline=DURATION        give up after this long (default 30s,\n"
      "                             or the time budget and 10s more); a\n"
      "                             budget past it ends before it: the best\n"
      "                             plan so far, time_limited\n\n",
      kFlagSyntax, kExitCodes);
}

std::string BenchHelp() {
  return absl::StrCat(
      "memplan bench [flags] FILE\n"
      "memplan bench [flags] --workload=NAME\n"
      "Replays the allocation trace of FILE (any input plan reads) or of a\n"
      "synthetic workload on dynamic allocators and on the static plan, and\n"
      "compares the memory each one needs.\n\n",
      InputHelp(),
      "\n"
      "  --workload=NAME            allocation, allocation_delayed or larson\n"
      "  --workload_size=N          allocations in the workload (default "
      "1000)\n"
      "  --allocators=a,b           of ",
      absl::StrJoin(engine::BenchmarkAllocatorNames(), ", "),
      "\n                             (default: all but mmap)\n"
      "  --arena_allocator=NAME     where the plan's arena comes from: ",
      absl::StrJoin(engine::ArenaAllocatorNames(), ", "),
      " (default bfc)\n"
      "  --repetitions=N            runs per allocator (default 1, at most "
      "100)\n"
      "  --format=text|json         table (default) or the BenchmarkResponse\n"
      "  --emit=html -o FILE        charts of bytes over the replay\n"
      "  --server, --deadline, plan's planning flags: as for plan\n\n",
      kFlagSyntax, kExitCodes);
}

std::string InspectHelp() {
  return absl::StrCat(
      "memplan inspect [flags] FILE\n"
      "Describes an input without planning it: for a model, its inputs and\n"
      "outputs with shapes and element types, the symbolic dims to set with\n"
      "--dim (with plan), weight bytes, op count and op types; for CSV or\n"
      "JSON, the counts and the lower bound plan would report (the request's\n"
      "options and --alignment, --weights, --io, as for plan). In-process:\n"
      "--dim, --input, --emit, -o, --dump_graph and --server are plan's.\n\n",
      InputHelp(/*shapes=*/false), "  --format=text|json\n\n", kFlagSyntax,
      kExitCodes);
}

std::string HealthHelp() {
  return absl::StrCat(
      "memplan health --server=HOST:PORT [--service=NAME] [--deadline=D]\n"
      "Checks a server with grpc.health.v1 (empty --service: the whole\n"
      "server; memplan.v1.MemoryPlanner: the planner).\n"
      "exit codes (as grpc_health_probe): 0 serving, 1 bad arguments,\n"
      "  2 connection failure, 3 RPC failure, 4 not serving\n");
}

}  // namespace

std::string OverviewHelp() {
  return absl::StrCat(
      "memplan plans memory for ML computation graphs: one arena, an offset\n"
      "for every tensor, the lower bound no plan can beat, and proof that\n"
      "the plan is valid.\n\n"
      "usage:\n"
      "  memplan plan [flags] FILE       plan a graph, buffer list or model\n"
      "  memplan bench [flags] FILE      compare allocators with the plan\n"
      "  memplan inspect [flags] FILE    describe an input\n"
      "  memplan health --server=H:P     check a memplan-server\n"
      "  memplan help [COMMAND]          this text, or a command's flags\n"
      "  memplan --version\n\n",
      kExitCodes);
}

std::string CommandHelp(absl::string_view command) {
  if (command == "plan") return PlanHelp();
  if (command == "bench") return BenchHelp();
  if (command == "inspect") return InspectHelp();
  if (command == "health") return HealthHelp();
  return "";
}

std::string VersionLine() {
  return "memplan " MEMPLAN_VERSION " (commit " MEMPLAN_GIT_COMMIT
         ", " MEMPLAN_BUILD_TYPE " build)";
}

}  // namespace memplan::client
