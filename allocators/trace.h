// Allocation traces and their replay: a list of alloc/free events (a
// graph's, made by engine/trace_bridge.h from the planner's lifetimes, or a
// synthetic workload) is replayed on any Allocator to measure latency, peak
// memory and fragmentation, or on a static plan inside one arena, checking
// that no two live tensors overlap.
//
//   allocators::Trace trace = allocators::LarsonWorkload(1000, 64, 16, 4096);
//   auto bfc = allocators::MakeAllocator("bfc");
//   absl::StatusOr<allocators::ReplayResult> r =
//       allocators::ReplayTrace(trace, **bfc);  // r->peak_bytes_in_use ...
//
// Plain data and free functions; thread-compatible.
#ifndef MEMPLAN_ALLOCATORS_TRACE_H_
#define MEMPLAN_ALLOCATORS_TRACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allocators/allocator.h"

namespace memplan::allocators {

using TensorId = int64_t;  // dense: 0 .. Trace::NumIds() - 1

enum class EventKind {
  kAlloc,  // the tensor is born
  kFree,   // the tensor dies
};

// One step of a trace.
struct TraceEvent {
  EventKind kind = EventKind::kAlloc;  // what happens
  TensorId id = 0;                     // which tensor
  int64_t size = 0;                    // bytes (also set on kFree)
  int64_t alignment = static_cast<int64_t>(kDefaultAlignment);  // power of 2
};

// A sequence of events; every id is allocated once, then freed at most once.
struct Trace {
  std::vector<TraceEvent> events;  // in order
  std::vector<std::string> names;  // optional: names[id], for messages

  // 1 + the largest id (0 for an empty trace).
  TensorId NumIds() const;
  // names[id] when given, else "tensor <id>".
  std::string TensorName(TensorId id) const;
};

// The workloads below poll `should_stop` (when given) every 4096
// allocations; once it returns true the trace ends there, cut short (the
// caller that asked to stop drops it). A million allocations take tens of
// milliseconds.

// TensorFlow's BM_Allocation: `num_allocs` allocations, each freed right
// away, sizes drawn with a fixed seed from {256, 4096, 16384, 524288, 512,
// 1048576}.
Trace AllocationWorkload(int num_allocs, uint64_t seed = 1,
                         const std::function<bool()>& should_stop = {});

// TensorFlow's BM_AllocationDelayed: each allocation is freed `delay`
// allocations later (a ring of `delay` slots); sizes cycle through {256,
// 4096, 16384, 4096, 512, 1024, 1024}. REQUIRES delay >= 1.
Trace DelayedFreeWorkload(int num_allocs, int delay,
                          const std::function<bool()>& should_stop = {});

// A larson-style mixed workload: `num_slots` slots are filled, then each of
// `num_ops` steps picks a random slot, frees its block and allocates one of
// a random size in [min_size, max_size]; everything is freed at the end.
Trace LarsonWorkload(int num_ops, int num_slots, int64_t min_size,
                     int64_t max_size, uint64_t seed = 1,
                     const std::function<bool()>& should_stop = {});

// Bytes held at one event of a replay.
struct SeriesPoint {
  int64_t event = 0;           // index of the trace event
  int64_t bytes_in_use = 0;    // handed out
  int64_t bytes_reserved = 0;  // taken from the system
};

// Settings shared by both replays.
struct ReplayOptions {
  // Polled every 1024 events; when it returns true the replay stops with
  // DEADLINE_EXCEEDED (a time limit, a cancelled call). Default: never.
  std::function<bool()> should_stop;
  // Sample bytes in use and reserved after up to this many evenly spaced
  // events (ReplayResult::series), the last event always included. Default
  // 0: no series.
  int series_points = 0;
};

// The q-quantile (0 <= q <= 1) of `samples`, 0 when empty: the value at
// rank floor(q * n) of the sorted samples.
int64_t Quantile(std::vector<int64_t> samples, double q);

// What a replay measured. Latencies are of the allocator calls alone.
struct ReplayResult {
  int64_t allocations = 0;             // allocations that succeeded
  int64_t failures = 0;                // allocations that returned nullptr
  int64_t alloc_p50_ns = 0;            // median Allocate latency
  int64_t alloc_p99_ns = 0;            // 99th percentile Allocate latency
  int64_t free_p50_ns = 0;             // median Deallocate latency
  int64_t free_p99_ns = 0;             // 99th percentile Deallocate latency
  int64_t total_ns = 0;                // sum of all timed calls
  int64_t peak_bytes_in_use = 0;       // max bytes_in_use after an allocation
  int64_t peak_bytes_reserved = 0;     // max bytes_reserved after an allocation
  double fragmentation_at_peak = 0.0;  // fragmentation when in use peaked
  std::vector<int64_t> op_ns;          // every timed call's latency, in order
  std::vector<SeriesPoint> series;     // ReplayOptions::series_points
};

// Replays `trace` on `allocator` (normally a fresh one). A failed
// allocation is counted and its free skipped; tensors still live at the end
// are freed untimed. GetStats() is read after every allocation, outside
// the timed section. INVALID_ARGUMENT for a malformed trace (an id below 0
// or past twice the event count, an allocation of size <= 0 or of an
// alignment that is not a power of two, an id allocated twice, freed
// before it is allocated or twice), before any work; a Deallocate
// error is returned as is; DEADLINE_EXCEEDED when options.should_stop said
// so (everything still live is freed first).
absl::StatusOr<ReplayResult> ReplayTrace(
    const Trace& trace, Allocator& allocator,
    const ReplayOptions& options = ReplayOptions());

// Options of ReplayStaticPlan.
struct StaticReplayOptions {
  ReplayOptions replay;  // stop hook and series (in use: live tensors' bytes)
  // false: each tensor's pattern is checked once, when it is freed (or at
  // the end): enough to catch any overlap, since the later-born tensor
  // overwrites the earlier one. Cost: every byte written once, read once.
  // true: every live tensor is checked after every event, which names the
  // victim at the first corrupting event. Cost: O(events x live bytes), for
  // tests only. Default false.
  bool check_all_live_at_each_event = false;
};

// Replays `trace` on a static plan: one PlannedArena of arena_size bytes
// from `arena_source` (normally a BfcAllocator), tensor id at
// offsets[id]. When a tensor is born, a pattern unique to it is written over
// all its bytes; it is checked as StaticReplayOptions says. DATA_LOSS,
// naming the overwritten tensor and a later-born tensor that overlaps it,
// when a pattern changed; INVALID_ARGUMENT for a malformed trace (as
// ReplayTrace) or when an offset is missing, out of the arena or
// misaligned; RESOURCE_EXHAUSTED when the arena cannot be
// allocated; DEADLINE_EXCEEDED when options.replay.should_stop said so.
// peak_bytes_in_use and peak_bytes_reserved are arena_size.
absl::StatusOr<ReplayResult> ReplayStaticPlan(
    const Trace& trace, const std::vector<int64_t>& offsets, int64_t arena_size,
    Allocator& arena_source,
    const StaticReplayOptions& options = StaticReplayOptions());

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_TRACE_H_
