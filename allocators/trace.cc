#include "allocators/trace.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allocators/planned_arena.h"

namespace memplan::allocators {

TensorId Trace::NumIds() const {
  TensorId n = 0;
  for (const TraceEvent& e : events) {
    if (e.id >= n) {
      n = e.id < std::numeric_limits<TensorId>::max() ? e.id + 1 : e.id;
    }
  }
  return n;
}

std::string Trace::TensorName(TensorId id) const {
  if (id >= 0 && id < static_cast<TensorId>(names.size()) &&
      !names[id].empty()) {
    return absl::StrCat("tensor '", names[id], "' (", id, ")");
  }
  return absl::StrCat("tensor ", id);
}

namespace {

// Appends an alloc or free of `id`.
void Push(Trace* trace, EventKind kind, TensorId id, int64_t size) {
  trace->events.push_back(
      {kind, id, size, static_cast<int64_t>(kDefaultAlignment)});
}

// Whether a workload maker should stop at allocation `i`: polls every 4096.
bool StopWorkload(const std::function<bool()>& should_stop, int i) {
  return should_stop && i % 4096 == 0 && should_stop();
}

}  // namespace

Trace AllocationWorkload(int num_allocs, uint64_t seed,
                         const std::function<bool()>& should_stop) {
  static constexpr int64_t kSizes[] = {256, 4096, 16384, 524288, 512, 1048576};
  std::mt19937_64 rng(seed);
  Trace trace;
  trace.events.reserve(2 * static_cast<size_t>(std::max(num_allocs, 0)));
  for (int i = 0; i < num_allocs; ++i) {
    if (StopWorkload(should_stop, i)) break;
    const int64_t size = kSizes[rng() % std::size(kSizes)];
    Push(&trace, EventKind::kAlloc, i, size);
    Push(&trace, EventKind::kFree, i, size);
  }
  return trace;
}

Trace DelayedFreeWorkload(int num_allocs, int delay,
                          const std::function<bool()>& should_stop) {
  static constexpr int64_t kSizes[] = {256, 4096, 16384, 4096, 512, 1024, 1024};
  delay = std::max(delay, 1);
  std::vector<TensorId> ring(delay, -1);
  Trace trace;
  trace.events.reserve(2 * static_cast<size_t>(std::max(num_allocs, 0)));
  for (int i = 0; i < num_allocs; ++i) {
    if (StopWorkload(should_stop, i)) return trace;
    TensorId& slot = ring[i % delay];
    if (slot != -1) Push(&trace, EventKind::kFree, slot, kSizes[slot % 7]);
    slot = i;
    Push(&trace, EventKind::kAlloc, i, kSizes[i % 7]);
  }
  for (int i = 0; i < delay; ++i) {
    const TensorId id = ring[(num_allocs + i) % delay];
    if (id != -1) Push(&trace, EventKind::kFree, id, kSizes[id % 7]);
  }
  return trace;
}

Trace LarsonWorkload(int num_ops, int num_slots, int64_t min_size,
                     int64_t max_size, uint64_t seed,
                     const std::function<bool()>& should_stop) {
  std::mt19937_64 rng(seed);
  const uint64_t span =
      static_cast<uint64_t>(std::max<int64_t>(max_size - min_size, 0)) + 1;
  auto random_size = [&] {
    return min_size + static_cast<int64_t>(rng() % span);
  };
  std::vector<std::pair<TensorId, int64_t>> slots;  // (id, size)
  Trace trace;
  TensorId next = 0;
  for (int i = 0; i < num_slots; ++i) {
    slots.emplace_back(next, random_size());
    Push(&trace, EventKind::kAlloc, next++, slots.back().second);
  }
  for (int i = 0; i < num_ops && num_slots > 0; ++i) {
    if (StopWorkload(should_stop, i)) return trace;
    auto& [id, size] = slots[rng() % slots.size()];
    Push(&trace, EventKind::kFree, id, size);
    id = next++;
    size = random_size();
    Push(&trace, EventKind::kAlloc, id, size);
  }
  for (const auto& [id, size] : slots) Push(&trace, EventKind::kFree, id, size);
  return trace;
}

namespace {

enum class Life : uint8_t { kUnborn, kLive, kFailed, kDead };

// Nanoseconds on a monotonic clock.
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Events between two polls of ReplayOptions::should_stop, and the most
// time between two (allocations can be slow: one of 4 GiB alignment under
// ASan took long enough that 1024 of them outlasted every time limit).
constexpr size_t kStopStride = 1024;
constexpr int64_t kStopIntervalNs = 10'000'000;  // 10 ms

// Polls ReplayOptions::should_stop every kStopStride events or
// kStopIntervalNs, whichever comes first.
class StopPoll {
 public:
  explicit StopPoll(const ReplayOptions& options)
      : options_(options), next_ns_(NowNs() + kStopIntervalNs) {}

  // Whether the replay must stop before event `index`.
  bool operator()(size_t index) {
    if (!options_.should_stop) return false;
    if (index % kStopStride != 0 && NowNs() < next_ns_) return false;
    next_ns_ = NowNs() + kStopIntervalNs;
    return options_.should_stop();
  }

 private:
  const ReplayOptions& options_;
  int64_t next_ns_;
};

absl::Status Stopped(size_t index) {
  return absl::DeadlineExceededError(absl::StrCat(
      "replay stopped at event ", index, ": time limit or cancellation"));
}

// Whether event `index` of `events` is one of the `points` sampled.
bool Sampled(size_t index, size_t events, int points) {
  if (points <= 0 || events == 0) return false;
  if (index + 1 == events) return true;
  const size_t stride =
      std::max<size_t>(1, (events + static_cast<size_t>(points) - 1) /
                              static_cast<size_t>(points));
  return (index + 1) % stride == 0;
}

// The error for an event that breaks the trace's rules.
absl::Status BadEvent(const Trace& trace, size_t index, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "trace event %d: %s %s", index, trace.TensorName(trace.events[index].id),
      absl::string_view(why.data(), why.size())));
}

// What every event must be before a replay sizes its tables by the ids: an
// id from 0 to twice the event count (ids are dense: a trace of n events
// has at most n tensors) or below the count of names (a trace of some of a
// problem's buffers keeps their ids), an allocation of a size above 0 and
// a power-of-two alignment.
absl::Status CheckTrace(const Trace& trace) {
  const auto max_id = static_cast<TensorId>(
      std::max(2 * trace.events.size(), trace.names.size()));
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.id < 0) return BadEvent(trace, i, "has a negative id");
    if (e.id > max_id) {
      return BadEvent(
          trace, i,
          absl::StrCat("has an id past twice the trace's ", trace.events.size(),
                       " events and its ", trace.names.size(),
                       " names (ids are dense, from 0)"));
    }
    if (e.kind != EventKind::kAlloc) continue;
    if (e.size <= 0) {
      return BadEvent(trace, i, absl::StrCat("has size ", e.size));
    }
    if (e.alignment <= 0 || (e.alignment & (e.alignment - 1)) != 0) {
      return BadEvent(
          trace, i,
          absl::StrCat("has alignment ", e.alignment, ", not a power of two"));
    }
  }
  return absl::OkStatus();
}

// Checks that event `index` is legal given the tensors' states.
absl::Status CheckEvent(const Trace& trace, size_t index,
                        const std::vector<Life>& life) {
  const TraceEvent& e = trace.events[index];
  if (e.id < 0) return BadEvent(trace, index, "has a negative id");
  if (e.kind == EventKind::kAlloc && life[e.id] != Life::kUnborn) {
    return BadEvent(trace, index, "is allocated twice");
  }
  if (e.kind == EventKind::kFree &&
      (life[e.id] == Life::kUnborn || life[e.id] == Life::kDead)) {
    return BadEvent(trace, index, "is freed before it is allocated, or twice");
  }
  return absl::OkStatus();
}

// Running state of a dynamic replay.
struct DynamicReplay {
  Allocator* allocator;           // under test
  std::vector<void*> ptrs;        // by id
  std::vector<Life> life;         // by id
  std::vector<int64_t> alloc_ns;  // samples
  std::vector<int64_t> free_ns;   // samples
  ReplayResult result;            // counters so far
};

// One timed allocation, then the stats snapshot.
void ReplayAlloc(const TraceEvent& e, DynamicReplay& r) {
  const int64_t t0 = NowNs();
  void* p = r.allocator->Allocate(static_cast<size_t>(e.size),
                                  static_cast<size_t>(e.alignment));
  r.alloc_ns.push_back(NowNs() - t0);
  r.ptrs[e.id] = p;
  if (p == nullptr) {
    r.life[e.id] = Life::kFailed;
    ++r.result.failures;
    return;
  }
  r.life[e.id] = Life::kLive;
  ++r.result.allocations;
  const AllocatorStats stats = r.allocator->GetStats();
  if (stats.bytes_in_use > r.result.peak_bytes_in_use) {
    r.result.peak_bytes_in_use = stats.bytes_in_use;
    r.result.fragmentation_at_peak = stats.fragmentation;
  }
  r.result.peak_bytes_reserved =
      std::max(r.result.peak_bytes_reserved, stats.bytes_reserved);
}

// One timed free (skipped for a failed allocation).
absl::Status ReplayFree(const TraceEvent& e, DynamicReplay& r) {
  const bool live = r.life[e.id] == Life::kLive;
  r.life[e.id] = Life::kDead;
  if (!live) return absl::OkStatus();
  const int64_t t0 = NowNs();
  absl::Status s = r.allocator->Deallocate(r.ptrs[e.id]);
  r.free_ns.push_back(NowNs() - t0);
  return s;
}

// Fills in the latency figures.
void Summarize(DynamicReplay& r) {
  r.result.op_ns = r.alloc_ns;
  r.result.op_ns.insert(r.result.op_ns.end(), r.free_ns.begin(),
                        r.free_ns.end());
  for (int64_t ns : r.alloc_ns) r.result.total_ns += ns;
  for (int64_t ns : r.free_ns) r.result.total_ns += ns;
  r.result.alloc_p50_ns = Quantile(r.alloc_ns, 0.50);
  r.result.alloc_p99_ns = Quantile(r.alloc_ns, 0.99);
  r.result.free_p50_ns = Quantile(r.free_ns, 0.50);
  r.result.free_p99_ns = Quantile(r.free_ns, 0.99);
}

}  // namespace

int64_t Quantile(std::vector<int64_t> samples, double q) {
  if (samples.empty()) return 0;
  const auto i =
      std::min(samples.size() - 1,
               static_cast<size_t>(q * static_cast<double>(samples.size())));
  std::nth_element(samples.begin(), samples.begin() + static_cast<long>(i),
                   samples.end());
  return samples[i];
}

absl::StatusOr<ReplayResult> ReplayTrace(const Trace& trace,
                                         Allocator& allocator,
                                         const ReplayOptions& options) {
  if (absl::Status s = CheckTrace(trace); !s.ok()) return s;
  DynamicReplay r{&allocator, {}, {}, {}, {}, {}};
  const auto n = static_cast<size_t>(trace.NumIds());
  r.ptrs.assign(n, nullptr);
  r.life.assign(n, Life::kUnborn);
  absl::Status status;
  StopPoll must_stop(options);
  for (size_t i = 0; i < trace.events.size() && status.ok(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (must_stop(i)) {
      status = Stopped(i);
      break;
    }
    status = CheckEvent(trace, i, r.life);
    if (!status.ok()) break;
    if (e.kind == EventKind::kAlloc) {
      ReplayAlloc(e, r);
    } else {
      status = ReplayFree(e, r);
    }
    if (Sampled(i, trace.events.size(), options.series_points)) {
      const AllocatorStats stats = allocator.GetStats();
      r.result.series.push_back(
          {static_cast<int64_t>(i), stats.bytes_in_use, stats.bytes_reserved});
    }
  }
  for (size_t id = 0; id < n; ++id) {
    if (r.life[id] == Life::kLive)
      allocator.Deallocate(r.ptrs[id]).IgnoreError();
  }
  if (!status.ok()) return status;
  Summarize(r);
  return r.result;
}

namespace {

// A well-mixed 64-bit value for word `word` of tensor `id` (splitmix64).
uint64_t PatternWord(TensorId id, uint64_t word) {
  uint64_t z = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ULL + word + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Bytes of one tensor written or checked between two polls of
// ReplayOptions::should_stop: a huge tensor cannot hold a call up.
constexpr int64_t kStopBytes = int64_t{16} << 20;

// Whether to stop at byte `off` of a tensor (every kStopBytes).
bool StopInside(const ReplayOptions* options, int64_t off) {
  return off > 0 && off % kStopBytes == 0 && options != nullptr &&
         options->should_stop && options->should_stop();
}

// Writes tensor id's pattern over `size` bytes at p; false when stopped.
bool WritePattern(char* p, int64_t size, TensorId id,
                  const ReplayOptions* options) {
  for (int64_t off = 0; off < size; off += 8) {
    if (StopInside(options, off)) return false;
    const uint64_t w = PatternWord(id, static_cast<uint64_t>(off / 8));
    std::memcpy(p + off, &w,
                static_cast<size_t>(std::min<int64_t>(8, size - off)));
  }
  return true;
}

// A FindCorruption result: the check was stopped, not finished.
constexpr int64_t kCheckStopped = -2;

// The first byte offset where tensor id's pattern differs, -1 if none, or
// kCheckStopped.
int64_t FindCorruption(const char* p, int64_t size, TensorId id,
                       const ReplayOptions* options) {
  for (int64_t off = 0; off < size; off += 8) {
    if (StopInside(options, off)) return kCheckStopped;
    const uint64_t w = PatternWord(id, static_cast<uint64_t>(off / 8));
    const auto n = static_cast<size_t>(std::min<int64_t>(8, size - off));
    if (std::memcmp(p + off, &w, n) != 0) {
      for (size_t b = 0; b < n; ++b) {
        if (p[off + b] != reinterpret_cast<const char*>(&w)[b]) {
          return off + static_cast<int64_t>(b);
        }
      }
    }
  }
  return -1;
}

// Running state of a static-plan replay.
struct StaticReplay {
  const Trace* trace;                   // being replayed
  const std::vector<int64_t>* offsets;  // by id
  const PlannedArena* arena;            // the block
  std::vector<int64_t> sizes;           // by id, from the alloc event
  std::vector<int64_t> birth;           // event index of the alloc, by id
  std::vector<Life> life;               // by id
  std::vector<TensorId> live;           // ids live now, in no order
  std::vector<size_t> live_at;          // by id: its index in `live`
  int64_t bytes_live = 0;               // sum of the live tensors' sizes
  const ReplayOptions* options;         // the stop hook
};

// The first tensor born after `victim` whose bytes cover victim's byte
// `at`: the one that overwrote it. -1 if none is found.
TensorId FindCulprit(const StaticReplay& r, TensorId victim, int64_t at) {
  const int64_t addr = (*r.offsets)[victim] + at;
  for (size_t id = 0; id < r.birth.size(); ++id) {
    if (static_cast<TensorId>(id) == victim || r.birth[id] < r.birth[victim] ||
        r.life[id] == Life::kUnborn) {
      continue;
    }
    const int64_t begin = (*r.offsets)[id];
    if (begin <= addr && addr < begin + r.sizes[id]) {
      return static_cast<TensorId>(id);
    }
  }
  return -1;
}

// DATA_LOSS if tensor id's pattern changed.
absl::Status CheckTensor(const StaticReplay& r, TensorId id) {
  const char* p = static_cast<const char*>(r.arena->AtOffset((*r.offsets)[id]));
  const int64_t at = FindCorruption(p, r.sizes[id], id, r.options);
  if (at == kCheckStopped) {
    return absl::DeadlineExceededError(
        absl::StrCat("replay stopped while checking ", r.trace->TensorName(id),
                     ": time limit or cancellation"));
  }
  if (at < 0) return absl::OkStatus();
  const TensorId culprit = FindCulprit(r, id, at);
  return absl::DataLossError(absl::StrFormat(
      "static plan: %s (offset %d, %d bytes) was overwritten at byte %d "
      "while live%s",
      r.trace->TensorName(id), (*r.offsets)[id], r.sizes[id], at,
      culprit < 0 ? std::string()
                  : absl::StrCat(" by ", r.trace->TensorName(culprit),
                                 " (offset ", (*r.offsets)[culprit], ", ",
                                 r.sizes[culprit], " bytes)")));
}

// Offsets exist, fit the arena and respect each tensor's alignment.
absl::Status CheckPlacement(const Trace& trace,
                            const std::vector<int64_t>& offsets,
                            int64_t arena_size) {
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::kAlloc) continue;
    if (e.id < 0 || e.id >= static_cast<TensorId>(offsets.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(trace.TensorName(e.id), " has no offset"));
    }
    const int64_t off = offsets[e.id];
    if (off < 0 || e.size <= 0 || off > arena_size ||
        e.size > arena_size - off ||
        (e.alignment > 0 && off % e.alignment != 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: offset %d, size %d, alignment %d do not fit an arena of %d "
          "bytes",
          trace.TensorName(e.id), off, e.size, e.alignment, arena_size));
    }
  }
  return absl::OkStatus();
}

// Applies event `index` to the arena: pattern on birth, check on death.
absl::Status StaticStep(StaticReplay& r, size_t index) {
  const TraceEvent& e = r.trace->events[index];
  if (e.kind == EventKind::kAlloc) {
    r.sizes[e.id] = e.size;
    r.birth[e.id] = static_cast<int64_t>(index);
    r.life[e.id] = Life::kLive;
    r.live_at[e.id] = r.live.size();
    r.live.push_back(e.id);
    r.bytes_live += e.size;
    if (!WritePattern(static_cast<char*>(r.arena->AtOffset((*r.offsets)[e.id])),
                      e.size, e.id, r.options)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "replay stopped while writing ", r.trace->TensorName(e.id),
          ": time limit or cancellation"));
    }
    return absl::OkStatus();
  }
  r.life[e.id] = Life::kDead;
  const size_t at = r.live_at[e.id];  // swap with the last, then drop it
  r.live[at] = r.live.back();
  r.live_at[r.live[at]] = at;
  r.live.pop_back();
  r.bytes_live -= r.sizes[e.id];
  return CheckTensor(r, e.id);
}

// Checks every live tensor.
absl::Status CheckAllLive(const StaticReplay& r) {
  for (TensorId id : r.live) {
    if (absl::Status s = CheckTensor(r, id); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplayResult> ReplayStaticPlan(
    const Trace& trace, const std::vector<int64_t>& offsets, int64_t arena_size,
    Allocator& arena_source, const StaticReplayOptions& options) {
  if (absl::Status s = CheckTrace(trace); !s.ok()) return s;
  if (absl::Status s = CheckPlacement(trace, offsets, arena_size); !s.ok()) {
    return s;
  }
  const TensorId n = trace.NumIds();
  absl::StatusOr<PlannedArena> arena =
      PlannedArena::Create(arena_source, arena_size);
  if (!arena.ok()) return arena.status();
  StaticReplay r{&trace,
                 &offsets,
                 &*arena,
                 std::vector<int64_t>(n, 0),
                 std::vector<int64_t>(n, -1),
                 std::vector<Life>(n),
                 {},
                 std::vector<size_t>(n, 0),
                 0,
                 &options.replay};
  ReplayResult result;
  const ReplayOptions& replay = options.replay;
  int64_t bytes_since_poll = 0;
  StopPoll must_stop(replay);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    // Poll every 1024 events or 10 ms, and after every 16 MiB written or
    // checked.
    if (must_stop(i) || (bytes_since_poll >= kStopBytes && replay.should_stop &&
                         replay.should_stop())) {
      return Stopped(i);
    }
    if (bytes_since_poll >= kStopBytes) bytes_since_poll = 0;
    if (absl::Status s = CheckEvent(trace, i, r.life); !s.ok()) return s;
    // A free's own size is not trusted: the bytes its check reads are the
    // allocation's (CheckTrace bounds those by the arena).
    const TraceEvent& e = trace.events[i];
    bytes_since_poll += e.kind == EventKind::kAlloc ? e.size : r.sizes[e.id];
    if (absl::Status s = StaticStep(r, i); !s.ok()) return s;
    if (options.check_all_live_at_each_event) {
      if (absl::Status s = CheckAllLive(r); !s.ok()) return s;
    }
    if (trace.events[i].kind == EventKind::kAlloc) ++result.allocations;
    if (Sampled(i, trace.events.size(), replay.series_points)) {
      result.series.push_back(
          {static_cast<int64_t>(i), r.bytes_live, arena_size});
    }
  }
  if (absl::Status s = CheckAllLive(r); !s.ok()) return s;
  result.peak_bytes_in_use = arena_size;
  result.peak_bytes_reserved = arena_size;
  return result;
}

}  // namespace memplan::allocators
