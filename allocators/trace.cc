#include "allocators/trace.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allocators/planned_arena.h"

namespace memplan::allocators {

TensorId Trace::NumIds() const {
  TensorId n = 0;
  for (const TraceEvent& e : events) n = std::max(n, e.id + 1);
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

// A tensor's name for schedule errors.
std::string ScheduleTensorName(const Schedule& s, int t) {
  if (t >= 0 && t < static_cast<int>(s.tensor_names.size())) {
    return absl::StrCat("tensor '", s.tensor_names[t], "' (", t, ")");
  }
  return absl::StrCat("tensor ", t);
}

// An op's name for schedule errors.
std::string OpName(const Schedule& s, size_t i) {
  return s.ops[i].name.empty() ? absl::StrCat("op ", i)
                               : absl::StrCat("op '", s.ops[i].name, "'");
}

// Lengths and sizes are consistent.
absl::Status CheckScheduleShape(const Schedule& s) {
  const size_t n = s.tensor_sizes.size();
  if (!s.tensor_names.empty() && s.tensor_names.size() != n) {
    return absl::InvalidArgumentError("tensor_names: one name per tensor");
  }
  if (!s.persistent.empty() && s.persistent.size() != n) {
    return absl::InvalidArgumentError("persistent: one flag per tensor");
  }
  if (!IsPowerOfTwo(static_cast<size_t>(std::max<int64_t>(s.alignment, 0)))) {
    return absl::InvalidArgumentError("alignment must be a power of two");
  }
  for (size_t t = 0; t < n; ++t) {
    if (s.tensor_sizes[t] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(ScheduleTensorName(s, static_cast<int>(t)), ": size ",
                       s.tensor_sizes[t], " must be > 0"));
    }
  }
  return absl::OkStatus();
}

// producer[t] = the op writing t, -1 for graph inputs and weights.
absl::StatusOr<std::vector<int>> Producers(const Schedule& s) {
  const int n = static_cast<int>(s.tensor_sizes.size());
  std::vector<int> producer(n, -1);
  for (size_t i = 0; i < s.ops.size(); ++i) {
    for (int t : s.ops[i].outputs) {
      if (t < 0 || t >= n) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(s, i), ": output tensor index ", t, " out of range"));
      }
      if (producer[t] != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(ScheduleTensorName(s, t), " is written by ",
                         OpName(s, producer[t]), " and ", OpName(s, i)));
      }
      producer[t] = static_cast<int>(i);
    }
  }
  return producer;
}

// death[t] = the op after which t may be freed: its last reader, else its
// producer (-1: right after the start).
absl::StatusOr<std::vector<int>> Deaths(const Schedule& s,
                                        const std::vector<int>& producer) {
  std::vector<int> death = producer;
  const int n = static_cast<int>(s.tensor_sizes.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    for (int t : s.ops[i].inputs) {
      if (t < 0 || t >= n) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(s, i), ": input tensor index ", t, " out of range"));
      }
      if (producer[t] >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(
            absl::StrCat(OpName(s, i), " reads ", ScheduleTensorName(s, t),
                         " before it is written"));
      }
      death[t] = std::max(death[t], static_cast<int>(i));
    }
  }
  return death;
}

// Appends one event for tensor t.
void AddEvent(const Schedule& s, EventKind kind, int t, Trace* trace) {
  trace->events.push_back({kind, t, s.tensor_sizes[t], s.alignment});
}

// True when t is freed only at the end.
bool IsPersistent(const Schedule& s, int t) {
  return !s.persistent.empty() && s.persistent[t];
}

}  // namespace

absl::StatusOr<Trace> TraceFromSchedule(const Schedule& s) {
  if (absl::Status st = CheckScheduleShape(s); !st.ok()) return st;
  absl::StatusOr<std::vector<int>> producer = Producers(s);
  if (!producer.ok()) return producer.status();
  absl::StatusOr<std::vector<int>> death = Deaths(s, *producer);
  if (!death.ok()) return death.status();
  const int n = static_cast<int>(s.tensor_sizes.size());
  // frees[i + 1]: tensors freed after op i; frees[0]: after the start.
  std::vector<std::vector<int>> frees(s.ops.size() + 1);
  for (int t = 0; t < n; ++t) {
    if (!IsPersistent(s, t)) frees[(*death)[t] + 1].push_back(t);
  }
  Trace trace;
  trace.names = s.tensor_names;
  for (int t = 0; t < n; ++t) {
    if ((*producer)[t] == -1) AddEvent(s, EventKind::kAlloc, t, &trace);
  }
  for (int t : frees[0]) AddEvent(s, EventKind::kFree, t, &trace);
  for (size_t i = 0; i < s.ops.size(); ++i) {
    for (int t : s.ops[i].outputs) AddEvent(s, EventKind::kAlloc, t, &trace);
    for (int t : frees[i + 1]) AddEvent(s, EventKind::kFree, t, &trace);
  }
  for (int t = 0; t < n; ++t) {
    if (IsPersistent(s, t)) AddEvent(s, EventKind::kFree, t, &trace);
  }
  return trace;
}

namespace {

// Appends an alloc or free of `id`.
void Push(Trace* trace, EventKind kind, TensorId id, int64_t size) {
  trace->events.push_back(
      {kind, id, size, static_cast<int64_t>(kDefaultAlignment)});
}

}  // namespace

Trace AllocationWorkload(int num_allocs, uint64_t seed) {
  static constexpr int64_t kSizes[] = {256, 4096, 16384, 524288, 512, 1048576};
  std::mt19937_64 rng(seed);
  Trace trace;
  for (int i = 0; i < num_allocs; ++i) {
    const int64_t size = kSizes[rng() % std::size(kSizes)];
    Push(&trace, EventKind::kAlloc, i, size);
    Push(&trace, EventKind::kFree, i, size);
  }
  return trace;
}

Trace DelayedFreeWorkload(int num_allocs, int delay) {
  static constexpr int64_t kSizes[] = {256, 4096, 16384, 4096, 512, 1024, 1024};
  delay = std::max(delay, 1);
  std::vector<TensorId> ring(delay, -1);
  Trace trace;
  for (int i = 0; i < num_allocs; ++i) {
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
                     int64_t max_size, uint64_t seed) {
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

// The q-quantile (0..1) of `samples` (sorted in place); 0 when empty.
int64_t Quantile(std::vector<int64_t>& samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto i = static_cast<size_t>(q * static_cast<double>(samples.size()));
  return samples[std::min(i, samples.size() - 1)];
}

// The error for an event that breaks the trace's rules.
absl::Status BadEvent(const Trace& trace, size_t index, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "trace event %d: %s %s", index, trace.TensorName(trace.events[index].id),
      absl::string_view(why.data(), why.size())));
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

absl::StatusOr<ReplayResult> ReplayTrace(const Trace& trace,
                                         Allocator& allocator) {
  DynamicReplay r{&allocator, {}, {}, {}, {}, {}};
  const auto n = static_cast<size_t>(trace.NumIds());
  r.ptrs.assign(n, nullptr);
  r.life.assign(n, Life::kUnborn);
  absl::Status status;
  for (size_t i = 0; i < trace.events.size() && status.ok(); ++i) {
    const TraceEvent& e = trace.events[i];
    status = CheckEvent(trace, i, r.life);
    if (!status.ok()) break;
    if (e.kind == EventKind::kAlloc) {
      ReplayAlloc(e, r);
    } else {
      status = ReplayFree(e, r);
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

// Writes tensor id's pattern over `size` bytes at p.
void WritePattern(char* p, int64_t size, TensorId id) {
  for (int64_t off = 0; off < size; off += 8) {
    const uint64_t w = PatternWord(id, static_cast<uint64_t>(off / 8));
    std::memcpy(p + off, &w,
                static_cast<size_t>(std::min<int64_t>(8, size - off)));
  }
}

// The first byte offset where tensor id's pattern differs, or -1.
int64_t FindCorruption(const char* p, int64_t size, TensorId id) {
  for (int64_t off = 0; off < size; off += 8) {
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
  std::vector<TensorId> live;           // ids live now
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
  const int64_t at = FindCorruption(p, r.sizes[id], id);
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
    if (off < 0 || e.size <= 0 || off + e.size > arena_size ||
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
    r.live.push_back(e.id);
    WritePattern(static_cast<char*>(r.arena->AtOffset((*r.offsets)[e.id])),
                 e.size, e.id);
    return absl::OkStatus();
  }
  r.life[e.id] = Life::kDead;
  r.live.erase(std::find(r.live.begin(), r.live.end(), e.id));
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
                 {}};
  ReplayResult result;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (absl::Status s = CheckEvent(trace, i, r.life); !s.ok()) return s;
    if (absl::Status s = StaticStep(r, i); !s.ok()) return s;
    if (options.check_all_live_at_each_event) {
      if (absl::Status s = CheckAllLive(r); !s.ok()) return s;
    }
    if (trace.events[i].kind == EventKind::kAlloc) ++result.allocations;
  }
  if (absl::Status s = CheckAllLive(r); !s.ok()) return s;
  result.peak_bytes_in_use = arena_size;
  result.peak_bytes_reserved = arena_size;
  return result;
}

}  // namespace memplan::allocators
