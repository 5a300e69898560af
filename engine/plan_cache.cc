#include "engine/plan_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "memplan/version.h"
#include "planner/memory_spaces.h"
#include "planner/strategy.h"

namespace memplan::engine {
namespace {

// Bumped whenever the key's canonical form or the entry's layout changes.
constexpr int64_t kCacheFormat = 2;  // 2: optimize keyed for every strategy
// The planner's version: a plan made by another build is another plan.
constexpr char kPlannerVersion[] = MEMPLAN_VERSION " " MEMPLAN_GIT_COMMIT;
constexpr char kEntryMagic[] = "memplan-plan\n";
// What an in-process entry costs beyond its key and bytes (list node, map
// slot, string headers).
constexpr int64_t kEntryOverhead = 128;
// How often a call waiting for an identical one polls its own token.
constexpr absl::Duration kFlightPoll = absl::Milliseconds(5);

// Little-endian base-128 varints, zigzag for signed values: each value
// self-delimiting, so a sequence of them reads back one way only.
inline void PutVarintTo(uint64_t v, char*& out) {
  while (v >= 0x80) {
    *out++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<char>(v);
}
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// The canonical form's writer: varint fields and length-prefixed strings,
// hashed a few KiB at a time.
class KeyWriter {
 public:
  void Int(int64_t v) {
    if (used_ + 10 > sizeof(buffer_)) Flush();
    char* out = buffer_ + used_;
    PutVarintTo(ZigZag(v), out);
    used_ = static_cast<size_t>(out - buffer_);
  }
  void Str(absl::string_view s) {
    Int(static_cast<int64_t>(s.size()));
    Flush();
    hash_.Update(s);
  }
  std::string Finish() {
    Flush();
    return base::Sha256::Hex(hash_.Finish());
  }

 private:
  void Flush() {
    hash_.Update(absl::string_view(buffer_, used_));
    used_ = 0;
  }
  base::Sha256 hash_;
  char buffer_[4096];
  size_t used_ = 0;
};

// The key's prefix (format, version, input kind) and its suffix (every
// option that changes the plan; not the budget, not the effort: an entry
// records the effort).
void KeyPrefix(char kind, absl::string_view version, KeyWriter* w) {
  w->Str("memplan plan cache key");
  w->Int(kCacheFormat);
  w->Str(version);
  w->Int(kind);
}
void KeyOptions(const planner::PlanOptions& o, KeyWriter* w) {
  const std::string strategy = o.strategy.empty() ? "auto" : o.strategy;
  w->Int(o.alignment);
  w->Str(strategy);
  // Not only for auto: the exact search climbs first when asked to.
  w->Int(o.optimize);
  w->Int(o.capacity.has_value());
  w->Int(o.capacity.value_or(0));
  w->Int(static_cast<int64_t>(o.memory_spaces.size()));
  for (const planner::MemorySpace& m : o.memory_spaces) {
    w->Str(m.name);
    w->Int(m.capacity);
  }
  w->Int(o.weights_in_arena);
  w->Int(static_cast<int64_t>(o.io));
  // Not o.max_threads: the plan is the same on any number of threads.
}

// Tensor indices of `names`, written with their count; false when one is
// not a tensor.
bool WriteRefs(absl::Span<const std::string> names,
               const absl::flat_hash_map<absl::string_view, int64_t>& index,
               KeyWriter* w) {
  w->Int(static_cast<int64_t>(names.size()));
  for (const std::string& name : names) {
    auto it = index.find(name);
    if (it == index.end()) return false;
    w->Int(it->second);
  }
  return true;
}

// The entry's fields: the same varints, bounds-checked when read.
void PutVarint(uint64_t v, std::string* out) {
  char bytes[10];
  char* end = bytes;
  PutVarintTo(v, end);
  out->append(bytes, static_cast<size_t>(end - bytes));
}
void PutInt(int64_t v, std::string* out) { PutVarint(ZigZag(v), out); }
void PutStr(absl::string_view s, std::string* out) {
  PutVarint(s.size(), out);
  out->append(s.data(), s.size());
}

class EntryReader {
 public:
  explicit EntryReader(absl::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  size_t left() const { return data_.size(); }

  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (data_.empty()) return Fail();
      const auto byte = static_cast<uint8_t>(data_.front());
      data_.remove_prefix(1);
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return v;
    }
    return Fail();
  }
  int64_t Int() {
    const uint64_t v = Varint();
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  // A count of at most `most` items of at least `bytes_each` bytes each:
  // never more than are left, so a forged count cannot make the reader
  // allocate beyond the entry (and the request's own size).
  size_t Count(size_t most = SIZE_MAX, size_t bytes_each = 1) {
    const uint64_t n = Varint();
    if (n > most || n > data_.size() / bytes_each) return Fail();
    return static_cast<size_t>(n);
  }
  std::string Str() {
    const size_t n = Count();
    if (!ok_) return "";
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }
  int Int32() {
    const int64_t v = Int();
    if (v < INT32_MIN || v > INT32_MAX) return static_cast<int>(Fail());
    return static_cast<int>(v);
  }

 private:
  uint64_t Fail() {
    ok_ = false;
    data_ = {};
    return 0;
  }
  absl::string_view data_;
  bool ok_ = true;
};

void PutChoices(const planner::PlanChoices& c, std::string* out) {
  PutInt(c.solution.arena_size, out);
  PutVarint(c.solution.offsets.size(), out);
  for (int64_t o : c.solution.offsets) PutInt(o, out);
  PutStr(c.strategy, out);
  PutInt(c.proven_optimal, out);
  PutVarint(c.shared_objects.object_of.size(), out);
  for (int o : c.shared_objects.object_of) PutInt(o, out);
  PutVarint(c.shared_objects.size.size(), out);
  for (int64_t s : c.shared_objects.size) PutInt(s, out);
  PutVarint(c.memory_spaces.size(), out);
  for (const planner::MemorySpacePlan& m : c.memory_spaces) {
    PutStr(m.name, out);
    PutInt(m.capacity, out);
    PutInt(m.arena_size, out);
    PutInt(m.lower_bound, out);
    PutInt(m.buffers, out);
    PutStr(m.strategy, out);
  }
  PutVarint(c.memory_space_of.size(), out);
  for (int k : c.memory_space_of) PutInt(k, out);
}

// `items`: the most buffers a plan of the request holds (each list of
// the choices has one entry per buffer at most).
planner::PlanChoices ReadChoices(EntryReader* r, size_t items) {
  planner::PlanChoices c;
  c.solution.arena_size = r->Int();
  c.solution.offsets.resize(r->Count(items));
  for (int64_t& o : c.solution.offsets) o = r->Int();
  c.strategy = r->Str();
  c.proven_optimal = r->Int() != 0;
  c.shared_objects.object_of.resize(r->Count(items));
  for (int& o : c.shared_objects.object_of) o = r->Int32();
  c.shared_objects.size.resize(r->Count(items));
  for (int64_t& s : c.shared_objects.size) s = r->Int();
  // A space: two strings and four numbers, 6 bytes at least.
  c.memory_spaces.resize(r->Count(planner::kMaxMemorySpaces, 6));
  for (planner::MemorySpacePlan& m : c.memory_spaces) {
    m.name = r->Str();
    m.capacity = r->Int();
    m.arena_size = r->Int();
    m.lower_bound = r->Int();
    m.buffers = r->Int32();
    m.strategy = r->Str();
  }
  c.memory_space_of.resize(r->Count(items));
  for (int& k : c.memory_space_of) k = r->Int32();
  return c;
}

absl::Status BadEntry(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("plan cache entry: ", what));
}

// A listener that hears nothing.
class SilentListener : public PlanCacheListener {};

// Whether a request with effort `wanted` may replace an entry of effort
// `kept`: more effort, 0 (no bound) being the most.
bool MoreEffort(int64_t wanted, int64_t kept) {
  if (kept == 0) return false;
  return wanted == 0 || wanted > kept;
}

}  // namespace

absl::string_view PlannerVersion() { return kPlannerVersion; }

std::optional<std::string> GraphCacheKey(const planner::Graph& graph,
                                         const planner::PlanOptions& options,
                                         absl::string_view version) {
  return GraphCacheKey(graph, options, nullptr, version);
}

std::optional<std::string> GraphCacheKey(const planner::Graph& graph,
                                         const planner::PlanOptions& options,
                                         const base::CancelToken* cancel,
                                         absl::string_view version) {
  absl::flat_hash_map<absl::string_view, int64_t> index;
  index.reserve(graph.tensors.size());
  KeyWriter w;
  KeyPrefix('g', version, &w);
  w.Int(static_cast<int64_t>(graph.tensors.size()));
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    if (base::CancelledAt(cancel, i)) return std::nullopt;
    const planner::Tensor& t = graph.tensors[i];
    if (!index.emplace(t.name, static_cast<int64_t>(i)).second) {
      return std::nullopt;
    }
    w.Int(t.size_bytes);
    w.Int(t.alignment != 0 ? t.alignment : options.alignment);
    w.Int(int64_t{t.constant} | int64_t{t.variable} << 1 |
          int64_t{t.folded} << 2);
  }
  w.Int(static_cast<int64_t>(graph.ops.size()));
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (base::CancelledAt(cancel, i)) return std::nullopt;
    const planner::Op& op = graph.ops[i];
    w.Int(op.in_place);
    if (!WriteRefs(op.inputs, index, &w) || !WriteRefs(op.outputs, index, &w)) {
      return std::nullopt;
    }
  }
  if (!WriteRefs(graph.inputs, index, &w) ||
      !WriteRefs(graph.outputs, index, &w)) {
    return std::nullopt;
  }
  KeyOptions(options, &w);
  return w.Finish();
}

std::string BuffersCacheKey(const planner::Problem& problem,
                            const planner::PlanOptions& options,
                            absl::string_view version) {
  return *BuffersCacheKey(problem, options, nullptr, version);
}

std::optional<std::string> BuffersCacheKey(const planner::Problem& problem,
                                           const planner::PlanOptions& options,
                                           const base::CancelToken* cancel,
                                           absl::string_view version) {
  KeyWriter w;
  KeyPrefix('b', version, &w);
  w.Int(static_cast<int64_t>(problem.buffers.size()));
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (base::CancelledAt(cancel, i)) return std::nullopt;
    const planner::Buffer& b = problem.buffers[i];
    w.Int(b.start);
    w.Int(b.end);
    w.Int(b.size);
    w.Int(b.alignment);
    w.Int(b.fixed_offset.has_value());
    w.Int(b.fixed_offset.value_or(0));
    w.Int(b.persistent);
  }
  KeyOptions(options, &w);
  return w.Finish();
}

namespace {

// Whether a plan under `options` may run work the time budget (or an
// effort) bounds: a search or the hill climb by name.
bool BudgetBounds(const planner::PlanOptions& options) {
  absl::StatusOr<planner::StrategyChoice> choice =
      planner::ResolveStrategy(options.strategy, options.optimize);
  if (!choice.ok()) return true;
  const bool climbs =
      std::find(choice->heuristics.begin(), choice->heuristics.end(),
                "hill_climb") != choice->heuristics.end();
  const bool searches =
      choice->search == planner::SearchWhen::kAlways ||
      ((choice->search == planner::SearchWhen::kCapacityMissed ||
        choice->search == planner::SearchWhen::kAboveBound) &&
       options.capacity.has_value());
  return climbs || searches;
}

}  // namespace

int64_t CacheEffort(const planner::PlanOptions& options) {
  return BudgetBounds(options) ? options.effort : 0;
}

std::string EncodeCacheEntry(const std::string& key,
                             const planner::PlanOptions& options,
                             const planner::PlanResult& result) {
  std::string out = kEntryMagic;
  PutInt(kCacheFormat, &out);
  PutStr(kPlannerVersion, &out);
  PutStr(key, &out);
  PutInt(CacheEffort(options), &out);
  PutInt(absl::ToInt64Milliseconds(options.time_budget), &out);
  PutChoices(planner::ChoicesOf(result), &out);
  const base::Sha256::Digest sum = base::Sha256::Of(out);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

absl::StatusOr<CacheEntry> DecodeCacheEntry(absl::string_view entry,
                                            const std::string& key,
                                            size_t items) {
  const size_t magic = sizeof(kEntryMagic) - 1;
  if (entry.size() < magic + 32 || entry.substr(0, magic) != kEntryMagic) {
    return BadEntry("not an entry (or truncated)");
  }
  const absl::string_view body = entry.substr(0, entry.size() - 32);
  const base::Sha256::Digest sum = base::Sha256::Of(body);
  if (std::memcmp(sum.data(), entry.data() + body.size(), 32) != 0) {
    return BadEntry("checksum mismatch (corrupt or truncated)");
  }
  EntryReader r(body.substr(magic));
  if (r.Int() != kCacheFormat) return BadEntry("another format");
  if (r.Str() != kPlannerVersion) return BadEntry("another planner version");
  if (r.Str() != key) return BadEntry("made for another key");
  CacheEntry out;
  out.effort = r.Int();
  out.time_budget_ms = r.Int();
  out.choices = ReadChoices(&r, items);
  if (!r.ok() || r.left() != 0) return BadEntry("malformed");
  return out;
}

// One computation in progress, that identical requests wait for; when it
// lands, its entry (even one not kept: a plan the budget cut).
struct PlanCache::Flight {
  absl::Notification landed;
  std::string entry;  // empty when the computation failed
  bool time_limited = false;
};

PlanCache::PlanCache(const PlanCacheOptions& options)
    : options_(options),
      listener_(options.listener != nullptr ? options.listener
                                            : new SilentListener()),
      silent_(options.listener != nullptr ? nullptr : listener_) {}

PlanCache::~PlanCache() = default;

PlanCache::Stats PlanCache::stats() const {
  Stats s;
  s.memory_hits = memory_hits_.load();
  s.store_hits = store_hits_.load();
  s.misses = misses_.load();
  s.refused = refused_.load();
  s.evictions = evictions_.load();
  absl::MutexLock lock(&mu_);
  s.entries = static_cast<int64_t>(lru_.size());
  s.bytes = bytes_;
  return s;
}

absl::StatusOr<planner::PlanResult> PlanCache::PlanGraph(
    const planner::Graph& graph, const planner::PlanOptions& options,
    base::WorkerPool* workers, const base::CancelToken* cancel, CacheUse* use) {
  const std::optional<std::string> key = GraphCacheKey(graph, options, cancel);
  if (cancel != nullptr && cancel->Cancelled()) {
    return absl::DeadlineExceededError("plan cache key cancelled");
  }
  const Compute compute = [&] {
    return planner::PlanGraph(graph, options, workers, cancel);
  };
  if (!key.has_value()) {
    *use = CacheUse::kNone;
    return compute();
  }
  const Adopt adopt{[&](planner::PlanChoices choices) {
                      return planner::AdoptGraphPlan(
                          graph, options, std::move(choices), cancel, workers);
                    },
                    graph.tensors.size()};
  return Through(*key, options, cancel, adopt, compute, use);
}

absl::StatusOr<planner::PlanResult> PlanCache::PlanBuffers(
    planner::Problem problem, const planner::PlanOptions& options,
    base::WorkerPool* workers, const base::CancelToken* cancel, CacheUse* use) {
  const std::optional<std::string> key =
      BuffersCacheKey(problem, options, cancel);
  if (!key.has_value()) {
    return absl::DeadlineExceededError("plan cache key cancelled");
  }
  const Adopt adopt{[&](planner::PlanChoices choices) {
                      return planner::AdoptBuffersPlan(problem, options,
                                                       std::move(choices),
                                                       cancel, workers);
                    },
                    problem.buffers.size()};
  const Compute compute = [&] {
    return planner::PlanBuffers(std::move(problem), options, workers, cancel);
  };
  return Through(*key, options, cancel, adopt, compute, use);
}

absl::StatusOr<planner::PlanResult> PlanCache::Through(
    const std::string& key, const planner::PlanOptions& options,
    const base::CancelToken* cancel, const Adopt& adopt, const Compute& compute,
    CacheUse* use) {
  const int64_t effort = CacheEffort(options);
  // Identical calls: the same key, effort and budget (a call with another
  // budget does not wait for this one's).
  const std::string flight_key = absl::StrCat(
      key, "/", effort, "/", absl::ToInt64Milliseconds(options.time_budget));
  // Whether this call's budget ends where an identical call's does (its
  // deadline, a second later even, does not cut it short): only then may
  // calls waiting for its flight take a plan the budget cut.
  const absl::Time later = absl::Now() + absl::Seconds(1);
  const bool budget_shared = planner::TimeBudgetEnd(options, cancel, later) ==
                             later + options.time_budget;
  // How long this call waits for an identical call's flight: where the
  // budget bounds its plan (a search, the hill climb) and its own deadline
  // ends its budget early, only until then; it then plans itself with what
  // is left (the heuristics it needs; time_limited), where waiting on to
  // its deadline for a flight given longer would leave it no plan at all.
  // Other plans take as long whatever the budget: the flight, begun
  // earlier, lands before this call's own plan would end.
  const absl::Time now = absl::Now();
  const absl::Time budget_end = planner::TimeBudgetEnd(options, cancel, now);
  const absl::Time wait_until =
      BudgetBounds(options) && budget_end < now + options.time_budget
          ? budget_end
          : absl::InfiniteFuture();
  int64_t found_effort = -1;
  bool flying = false;
  // Once this call flies, whatever ends it (an exception: std::bad_alloc)
  // lets identical calls waiting for its flight go.
  bool landed = false;
  absl::Cleanup land_anyway = [&] {
    if (flying && !landed) {
      Land(flight_key, std::string(), /*time_limited=*/false);
    }
  };
  // At most twice: before and after waiting for an identical call.
  for (int round = 0; round < 2 && !flying; ++round) {
    if (std::optional<planner::PlanResult> hit =
            Lookup(key, effort, adopt, &found_effort, use)) {
      return *std::move(hit);
    }
    if (found_effort >= 0) break;  // another effort's entry: compute
    std::shared_ptr<Flight> waited;
    flying = TakeOff(flight_key, cancel, wait_until, &waited);
    if (std::optional<planner::PlanResult> shared =
            FromFlight(waited.get(), key, effort, adopt)) {
      *use = CacheUse::kMemoryHit;
      return *std::move(shared);
    }
  }
  if (flying) {
    // An identical call may have kept its plan (in memory first) and landed
    // between the lookup above and this take-off: look in memory once more
    // before computing it again.
    std::string served;
    if (std::optional<planner::PlanResult> hit =
            LookupMemory(key, effort, adopt, &found_effort, use, &served)) {
      landed = true;
      Land(flight_key, std::move(served), /*time_limited=*/false);
      return *std::move(hit);
    }
  }
  *use = CacheUse::kMiss;
  misses_.fetch_add(1);
  listener_->Miss();
  absl::StatusOr<planner::PlanResult> result = compute();
  std::string entry;
  if (result.ok()) entry = EncodeCacheEntry(key, options, *result);
  if (result.ok() && !result->time_limited &&
      (found_effort < 0 || MoreEffort(effort, found_effort))) {
    Keep(key, entry);
  }
  if (flying) {
    // A plan its own deadline cut short is not for calls given longer:
    // they plan themselves.
    const bool shared = result.ok() && (!result->time_limited || budget_shared);
    landed = true;
    Land(flight_key, shared ? std::move(entry) : std::string(),
         result.ok() && result->time_limited);
  }
  return result;
}

std::optional<planner::PlanResult> PlanCache::FromFlight(const Flight* flight,
                                                         const std::string& key,
                                                         int64_t effort,
                                                         const Adopt& adopt) {
  if (flight == nullptr || !flight->landed.HasBeenNotified() ||
      flight->entry.empty()) {
    return std::nullopt;
  }
  int64_t found_effort = -1;
  bool bad = false;
  std::optional<planner::PlanResult> plan =
      Serve("memory", key, flight->entry, effort, adopt, &found_effort, &bad);
  if (!plan.has_value()) return std::nullopt;
  // A plan the budget cut is not kept, but an identical call that waited
  // for it gets it as it is: its own would be cut the same way (a plan
  // cut by the computing call's own deadline lands empty).
  plan->time_limited = flight->time_limited;
  memory_hits_.fetch_add(1);
  listener_->Hit("memory");
  return plan;
}

std::optional<planner::PlanResult> PlanCache::LookupMemory(
    const std::string& key, int64_t effort, const Adopt& adopt,
    int64_t* found_effort, CacheUse* use, std::string* served) {
  std::optional<std::string> entry = MemoryGet(key);
  if (!entry.has_value()) return std::nullopt;
  bool bad = false;
  std::optional<planner::PlanResult> plan =
      Serve("memory", key, *entry, effort, adopt, found_effort, &bad);
  if (bad) MemoryDrop(key);
  if (!plan.has_value()) return std::nullopt;
  *use = CacheUse::kMemoryHit;
  memory_hits_.fetch_add(1);
  listener_->Hit("memory");
  if (served != nullptr) *served = *std::move(entry);
  return plan;
}

std::optional<planner::PlanResult> PlanCache::Lookup(const std::string& key,
                                                     int64_t effort,
                                                     const Adopt& adopt,
                                                     int64_t* found_effort,
                                                     CacheUse* use) {
  if (std::optional<planner::PlanResult> plan =
          LookupMemory(key, effort, adopt, found_effort, use, nullptr)) {
    return plan;
  }
  if (*found_effort >= 0) return std::nullopt;
  if (options_.store == nullptr) return std::nullopt;
  std::optional<std::string> entry = StoreGet(key);
  if (!entry.has_value()) return std::nullopt;
  bool bad = false;
  std::optional<planner::PlanResult> plan = Serve(
      options_.store->name(), key, *entry, effort, adopt, found_effort, &bad);
  if (bad) {
    StoreCall("drop", [&] { return options_.store->Drop(key).ok(); });
  }
  if (!plan.has_value()) return std::nullopt;
  MemoryPut(key, *entry);
  *use = CacheUse::kStoreHit;
  store_hits_.fetch_add(1);
  listener_->Hit(options_.store->name());
  return plan;
}

std::optional<planner::PlanResult> PlanCache::Serve(
    absl::string_view tier, const std::string& key, absl::string_view entry,
    int64_t effort, const Adopt& adopt, int64_t* found_effort, bool* bad) {
  absl::StatusOr<CacheEntry> decoded =
      DecodeCacheEntry(entry, key, adopt.items);
  if (decoded.ok()) {
    if (decoded->effort != effort) {
      *found_effort = decoded->effort;
      return std::nullopt;
    }
    absl::StatusOr<planner::PlanResult> plan =
        adopt.plan(std::move(decoded->choices));
    if (plan.ok()) return *std::move(plan);
    // A request the planner refuses, or a call cancelled meanwhile: not
    // the entry's fault; planning gives the answer.
    if (absl::IsInvalidArgument(plan.status()) ||
        absl::IsDeadlineExceeded(plan.status())) {
      return std::nullopt;
    }
  }
  *bad = true;
  refused_.fetch_add(1);
  listener_->Refused(tier);
  return std::nullopt;
}

void PlanCache::Keep(const std::string& key, const std::string& entry) {
  MemoryPut(key, entry);
  if (options_.store != nullptr) {
    StoreCall("put", [&] { return options_.store->Put(key, entry).ok(); });
  }
}

std::optional<std::string> PlanCache::MemoryGet(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->entry;
}

void PlanCache::MemoryPut(const std::string& key, const std::string& entry) {
  const int64_t cost =
      static_cast<int64_t>(key.size() + entry.size()) + kEntryOverhead;
  if (cost > options_.max_bytes) return;
  int64_t evicted = 0;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      bytes_ -= static_cast<int64_t>(it->second->key.size() +
                                     it->second->entry.size()) +
                kEntryOverhead;
      lru_.erase(it->second);
      index_.erase(it);
    }
    while (!lru_.empty() && bytes_ + cost > options_.max_bytes) {
      const Node& last = lru_.back();
      bytes_ -= static_cast<int64_t>(last.key.size() + last.entry.size()) +
                kEntryOverhead;
      index_.erase(last.key);
      lru_.pop_back();
      ++evicted;
    }
    lru_.push_front({key, entry});
    index_[key] = lru_.begin();
    bytes_ += cost;
    // Told under the lock, so that two puts at once cannot leave the
    // gauge at the older figure.
    listener_->Bytes(bytes_);
  }
  if (evicted > 0) {
    evictions_.fetch_add(evicted);
    listener_->Evicted(evicted);
  }
}

void PlanCache::MemoryDrop(const std::string& key) {
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return;
    bytes_ -= static_cast<int64_t>(it->second->key.size() +
                                   it->second->entry.size()) +
              kEntryOverhead;
    lru_.erase(it->second);
    index_.erase(it);
    listener_->Bytes(bytes_);  // under the lock, as in MemoryPut
  }
}

std::optional<std::string> PlanCache::StoreGet(const std::string& key) {
  std::optional<std::string> entry;
  StoreCall("get", [&] {
    absl::StatusOr<std::optional<std::string>> got = options_.store->Get(key);
    if (got.ok()) entry = *std::move(got);
    return got.ok();
  });
  return entry;
}

void PlanCache::StoreCall(absl::string_view op,
                          const std::function<bool()>& call) {
  const absl::Time start = absl::Now();
  const bool ok = call();
  listener_->StoreCall(op, absl::Now() - start, !ok);
}

bool PlanCache::TakeOff(const std::string& flight_key,
                        const base::CancelToken* cancel, absl::Time wait_until,
                        std::shared_ptr<Flight>* waited) {
  std::shared_ptr<Flight> flight;
  {
    absl::MutexLock lock(&mu_);
    auto it = flights_.find(flight_key);
    if (it == flights_.end()) {
      // Made before it is listed: a failure lists nothing.
      flights_.emplace(flight_key, std::make_shared<Flight>());
      return true;
    }
    flight = it->second;
  }
  while (!flight->landed.WaitForNotificationWithTimeout(kFlightPoll)) {
    if (cancel != nullptr && cancel->Cancelled()) break;
    if (absl::Now() >= wait_until) break;
  }
  *waited = std::move(flight);
  return false;
}

void PlanCache::Land(const std::string& flight_key, std::string entry,
                     bool time_limited) {
  std::shared_ptr<Flight> flight;
  {
    absl::MutexLock lock(&mu_);
    auto it = flights_.find(flight_key);
    if (it == flights_.end()) return;
    flight = std::move(it->second);
    flights_.erase(it);
  }
  // Written before Notify, read by waiters only after it.
  flight->entry = std::move(entry);
  flight->time_limited = time_limited;
  flight->landed.Notify();
}

}  // namespace memplan::engine
