// The memplan CLI's flags: parsing through abseil's flag registry (so
// values are checked by abseil's own parsers) with the CLI's rules: a bad
// or unknown flag is a usage error that suggests the closest known flag,
// list flags (--dim, --input, --memory_pool, --emit, -o) repeat, and flags
// may be written --name=value or --name value, with - or _ in the name.
//
//   absl::StatusOr<std::vector<std::string>> files =
//       client::ParseFlags(argc, argv, /*first=*/2);
#ifndef MEMPLAN_CLIENT_CLI_FLAGS_H_
#define MEMPLAN_CLIENT_CLI_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "memplan/v1/memplan.pb.h"

// Every flag of the CLI; their meaning and defaults are in help.cc.
ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(std::string, input_format);
ABSL_DECLARE_FLAG(std::vector<std::string>, dim);
ABSL_DECLARE_FLAG(std::vector<std::string>, input);
ABSL_DECLARE_FLAG(std::string, dump_graph);
ABSL_DECLARE_FLAG(int64_t, alignment);
ABSL_DECLARE_FLAG(int64_t, capacity);
ABSL_DECLARE_FLAG(std::string, strategy);
ABSL_DECLARE_FLAG(int64_t, time_budget_ms);
ABSL_DECLARE_FLAG(int64_t, effort);
ABSL_DECLARE_FLAG(bool, optimize);
ABSL_DECLARE_FLAG(std::vector<std::string>, memory_pool);
ABSL_DECLARE_FLAG(std::string, weights);
ABSL_DECLARE_FLAG(std::string, io);
ABSL_DECLARE_FLAG(bool, no_timings);
ABSL_DECLARE_FLAG(std::vector<std::string>, emit);
ABSL_DECLARE_FLAG(std::vector<std::string>, output);
ABSL_DECLARE_FLAG(std::string, c_header_id);
ABSL_DECLARE_FLAG(int64_t, max_input_bytes);
ABSL_DECLARE_FLAG(absl::Duration, deadline);
ABSL_DECLARE_FLAG(std::string, workload);
ABSL_DECLARE_FLAG(int, workload_size);
ABSL_DECLARE_FLAG(std::string, allocators);
ABSL_DECLARE_FLAG(std::string, arena_allocator);
ABSL_DECLARE_FLAG(int, repetitions);
ABSL_DECLARE_FLAG(std::string, service);

namespace memplan::client {

// Parses argv[first..] into the flags; returns the positional arguments.
// INVALID_ARGUMENT naming the flag (and the closest known one for a typo).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ParseFlags(int argc,
                                                                  char** argv,
                                                                  int first);

// Whether the last ParseFlags was given flag `name` (canonical: "deadline").
bool FlagGiven(absl::string_view name);

// The planning flags (--alignment, --capacity, --strategy,
// --time_budget_ms, --effort, --optimize, --weights, --io, --memory_pool)
// onto a request's options: the flags given win over the request's own.
// INVALID_ARGUMENT for a --memory_pool that is not NAME=BYTES.
[[nodiscard]] absl::Status ApplyPlanFlags(memplan::v1::PlanOptions* options);

// bench's --allocators, --arena_allocator and --repetitions onto a
// Benchmark request.
void BenchFlagsOnto(memplan::v1::BenchmarkRequest* request);

// A --server value that is a URL (http://HOST:PORT): an error saying what
// the flag takes instead. OK otherwise (gRPC checks the rest).
[[nodiscard]] absl::Status CheckServerTarget(absl::string_view target);

// The values of the flags given that go into a request, checked before
// any input is read, as the request's own checks would (so that a wrong
// value is a usage error, exit 64, naming the flag, not the request's
// field): --input_format, --dim, --input, the planning flags, --emit,
// --c_header_id (plan's), --max_input_bytes, and bench's --workload,
// --workload_size, --allocators, --arena_allocator and --repetitions. With
// --server, the names a newer server may know (strategies, emit formats,
// workloads, allocators) are left to it. INVALID_ARGUMENT naming the flag.
[[nodiscard]] absl::Status CheckFlagValues(absl::string_view command);

// A plan call's deadline: --deadline when given, else its default (30 s)
// or, for a time budget longer than 20 s, the budget and 10 s more (a
// budget counted up to an hour), so that a budget asked for is not cut by
// a deadline nobody asked for.
absl::Duration PlanDeadline(int64_t time_budget_ms);

// The known flag closest to `name` by edit distance, or "" when none is
// close (at most a third of the name's length away).
std::string ClosestFlag(absl::string_view name);

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_CLI_FLAGS_H_
