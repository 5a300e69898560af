// The plan cache: plans kept by the content of what was planned, so that a
// fleet of build pipelines planning the same models with the same options
// pays for each plan once. The key is a SHA-256 of the canonical request:
// the problem as the planner sees it after import (sizes, alignments,
// lifetimes or the ops' structure by tensor index, pins), every option that
// changes the plan (defaults filled in), and the planner's version; tensor,
// op and buffer names, JSON field order and whitespace, and options left at
// their defaults do not change it. An entry keeps the plan's choices by
// index (planner::PlanChoices: offsets, shared objects, memory pools), so a
// renamed copy of a graph gets the same plan under its own names.
//
// Entries live in process (an LRU bounded in bytes) and, when a PlanStore
// is given (server/redis_store.h), in a store shared by replicas. Nothing
// read from either is trusted: every entry is checked (format, version,
// key, checksum) and its plan adopted through planner::AdoptGraphPlan,
// which runs the verifier on the request's own problem; an entry that
// fails is dropped, counted, and the plan recomputed. A store that fails
// or is slow only costs its bounded wait: the call goes on without it.
//
// What is kept: plans whose result does not depend on time
// (PlanResult::time_limited false). Such a plan follows from the request
// and its effort alone, so the budget is not part of the key. The effort
// is recorded in the entry; an entry serves requests of the same effort;
// a request with more effort (0, no bound but the budget, counts as the
// most) recomputes and replaces it; one with less recomputes and leaves
// it. Requests whose strategy runs no search ignore the effort.
//
//   engine::PlanCache cache({.max_bytes = 64 << 20});
//   engine::CacheUse use;
//   absl::StatusOr<planner::PlanResult> plan =
//       cache.PlanGraph(graph, options, &workers, &cancel, &use);
//   // use == CacheUse::kMemoryHit the second time
#ifndef MEMPLAN_ENGINE_PLAN_CACHE_H_
#define MEMPLAN_ENGINE_PLAN_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "planner/graph.h"
#include "planner/planner.h"

namespace memplan::engine {

// How a plan was obtained.
enum class CacheUse {
  kNone,       // no cache, or a request the cache does not key
  kMiss,       // computed (and kept when it may be)
  kMemoryHit,  // from the in-process cache, verified
  kStoreHit,   // from the shared store, verified
};

// A store shared by replicas (Redis). Implementations are thread-safe and
// bound every call by a short timeout; a call that fails or times out
// returns an error and the cache goes on without the store.
class PlanStore {
 public:
  virtual ~PlanStore() = default;
  // The store's kind for metrics labels, e.g. "redis". Fixed.
  virtual absl::string_view name() const = 0;
  // The entry under `key`, nullopt when there is none.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) = 0;
  // Sets `key` to `entry`.
  virtual absl::Status Put(const std::string& key,
                           const std::string& entry) = 0;
  // Deletes `key` (an entry that failed its checks).
  virtual absl::Status Drop(const std::string& key) = 0;
};

// What the cache reports, for metrics. `tier` is "memory" or the store's
// name(). Called from the calls' threads: implementations are thread-safe
// and cheap.
class PlanCacheListener {
 public:
  virtual ~PlanCacheListener() = default;
  virtual void Hit(absl::string_view tier) {}
  // A request that had to be planned although it is keyed.
  virtual void Miss() {}
  // An entry that failed its checks (corrupt, truncated, another version,
  // a plan the verifier refuses): dropped.
  virtual void Refused(absl::string_view tier) {}
  // Entries evicted from the in-process cache to keep it within its bound.
  virtual void Evicted(int64_t entries) {}
  // Bytes the in-process cache holds now. Called under the cache's lock
  // (so the last call carries the last figure): must not call the cache.
  virtual void Bytes(int64_t bytes) {}
  // One store call ("get", "put", "drop"): how long it took, and whether
  // it failed (error, timeout, store unreachable).
  virtual void StoreCall(absl::string_view op, absl::Duration latency,
                         bool failed) {}
};

struct PlanCacheOptions {
  // Bytes of entries kept in process (keys and entries, plus a fixed cost
  // per entry); least recently used first out. 0: nothing kept in process.
  // Default 64 MiB.
  int64_t max_bytes = int64_t{64} << 20;
  // A store shared by replicas, read after the in-process cache misses and
  // written with every new entry. Default null: none. Must outlive the
  // cache.
  PlanStore* store = nullptr;
  // Told of hits, misses, refusals, evictions and store calls. Default
  // null. Must outlive the cache.
  PlanCacheListener* listener = nullptr;
};

// The planner version keys and entries carry: memplan's version and git
// commit (memplan/version.h).
absl::string_view PlannerVersion();

// The cache key (64 hex digits) of a graph planned with `options` by the
// planner of `version`; nullopt when the graph cannot be keyed (a
// duplicate tensor name, an op reading or writing a name that is no
// tensor): such a request is planned without the cache, and the planner
// names the fault.
std::optional<std::string> GraphCacheKey(
    const planner::Graph& graph, const planner::PlanOptions& options,
    absl::string_view version = PlannerVersion());
// The same, polling `cancel` (may be null): nullopt also once it fires.
std::optional<std::string> GraphCacheKey(
    const planner::Graph& graph, const planner::PlanOptions& options,
    const base::CancelToken* cancel,
    absl::string_view version = PlannerVersion());
// The same for a buffer list (alignments already resolved).
std::string BuffersCacheKey(const planner::Problem& problem,
                            const planner::PlanOptions& options,
                            absl::string_view version = PlannerVersion());
// The same, polling `cancel` (may be null): nullopt once it fires.
std::optional<std::string> BuffersCacheKey(
    const planner::Problem& problem, const planner::PlanOptions& options,
    const base::CancelToken* cancel,
    absl::string_view version = PlannerVersion());

// The effort an entry records for `options`: options.effort when a search
// or the hill climb may run (optimize, "exact", "hill_climb", or a
// capacity with "auto"), else 0 (the plan does not depend on it).
int64_t CacheEffort(const planner::PlanOptions& options);

// An entry as kept in the cache and the store: self-describing (format,
// planner version, key, effort, budget), the choices by index, and a
// SHA-256 of the rest.
std::string EncodeCacheEntry(const std::string& key,
                             const planner::PlanOptions& options,
                             const planner::PlanResult& result);
// What an entry holds, once its format, version, key and checksum pass.
struct CacheEntry {
  int64_t effort = 0;          // CacheEffort of the request that made it
  int64_t time_budget_ms = 0;  // its budget (for the record)
  planner::PlanChoices choices;
};
// DATA_LOSS saying what is wrong (truncated, another format or version,
// another key, a checksum mismatch, a list longer than `items`: the most
// buffers the request's plan holds).
absl::StatusOr<CacheEntry> DecodeCacheEntry(absl::string_view entry,
                                            const std::string& key,
                                            size_t items = SIZE_MAX);

// Thread-safe.
class PlanCache {
 public:
  explicit PlanCache(const PlanCacheOptions& options);
  ~PlanCache();
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // planner::PlanGraph through the cache: a verified entry, else the
  // planner, once at a time for identical calls (the same key, effort and
  // budget): the others wait for the first, each until its own `cancel`,
  // and take its plan, verified (even one the budget cut, which is not
  // kept). Errors as planner::PlanGraph; the cache itself never fails a
  // call.
  [[nodiscard]] absl::StatusOr<planner::PlanResult> PlanGraph(
      const planner::Graph& graph, const planner::PlanOptions& options,
      base::WorkerPool* workers, const base::CancelToken* cancel,
      CacheUse* use);
  // planner::PlanBuffers through the cache.
  [[nodiscard]] absl::StatusOr<planner::PlanResult> PlanBuffers(
      planner::Problem problem, const planner::PlanOptions& options,
      base::WorkerPool* workers, const base::CancelToken* cancel,
      CacheUse* use);

  // Counts since the cache was made (tests, logs).
  struct Stats {
    int64_t memory_hits = 0;
    int64_t store_hits = 0;
    int64_t misses = 0;
    int64_t refused = 0;  // entries that failed their checks
    int64_t evictions = 0;
    int64_t entries = 0;  // in process now
    int64_t bytes = 0;    // in process now
  };
  Stats stats() const;

 private:
  struct Flight;
  struct Node {
    std::string key;
    std::string entry;
  };
  // Adopts an entry's choices for the request, whose plan holds at most
  // `items` buffers (a longer list in an entry is forged).
  struct Adopt {
    std::function<absl::StatusOr<planner::PlanResult>(planner::PlanChoices)>
        plan;
    size_t items = 0;
  };
  using Compute = std::function<absl::StatusOr<planner::PlanResult>()>;

  absl::StatusOr<planner::PlanResult> Through(
      const std::string& key, const planner::PlanOptions& options,
      const base::CancelToken* cancel, const Adopt& adopt,
      const Compute& compute, CacheUse* use);
  // A verified plan for `key` from memory or the store; nullopt when none
  // serves. *found_effort: the effort of an entry that was found but is not
  // for this request's effort (-1 when none was).
  std::optional<planner::PlanResult> Lookup(const std::string& key,
                                            int64_t effort, const Adopt& adopt,
                                            int64_t* found_effort,
                                            CacheUse* use);
  // Lookup's first tier alone; *served (when not null) gets the entry that
  // served.
  std::optional<planner::PlanResult> LookupMemory(
      const std::string& key, int64_t effort, const Adopt& adopt,
      int64_t* found_effort, CacheUse* use, std::string* served);
  // Decodes and adopts one entry; nullopt when it does not serve (an
  // effort that differs sets *found_effort; a bad entry is counted).
  std::optional<planner::PlanResult> Serve(absl::string_view tier,
                                           const std::string& key,
                                           absl::string_view entry,
                                           int64_t effort, const Adopt& adopt,
                                           int64_t* found_effort, bool* bad);
  // Keeps a computed plan, in memory and the store.
  void Keep(const std::string& key, const std::string& entry);
  std::optional<std::string> MemoryGet(const std::string& key);
  void MemoryPut(const std::string& key, const std::string& entry);
  void MemoryDrop(const std::string& key);
  std::optional<std::string> StoreGet(const std::string& key);
  void StoreCall(absl::string_view op, const std::function<bool()>& call);
  // Single flight: true when this call computes `flight_key` (it then
  // calls Land); otherwise waits for the call that does, at most until
  // `cancel` or `wait_until`, and sets *waited to its flight.
  bool TakeOff(const std::string& flight_key, const base::CancelToken* cancel,
               absl::Time wait_until, std::shared_ptr<Flight>* waited);
  // Hands `entry` (empty: the computation failed) to the waiting calls.
  void Land(const std::string& flight_key, std::string entry,
            bool time_limited);
  // The plan of a flight that landed with an entry, adopted (verified).
  std::optional<planner::PlanResult> FromFlight(const Flight* flight,
                                                const std::string& key,
                                                int64_t effort,
                                                const Adopt& adopt);

  const PlanCacheOptions options_;
  PlanCacheListener* const listener_;  // never null (a silent one if none)
  std::unique_ptr<PlanCacheListener> silent_;

  mutable absl::Mutex mu_;
  std::list<Node> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_map<std::string, std::list<Node>::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_
      ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> memory_hits_{0}, store_hits_{0}, misses_{0}, refused_{0},
      evictions_{0};
};

}  // namespace memplan::engine

#endif  // MEMPLAN_ENGINE_PLAN_CACHE_H_
