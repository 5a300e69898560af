#include "engine/plan_cache.h"

#include <atomic>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/plan.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "planner/memory_spaces.h"
#include "planner/testing/random_problems.h"
#include "proto/convert.h"

namespace memplan::engine {
namespace {

using ::testing::HasSubstr;

v1::PlanRequest Parse(const std::string& json) {
  v1::PlanRequest request;
  auto status = google::protobuf::util::JsonStringToMessage(json, &request);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return request;
}

// The key engine::Plan would use for a JSON request with a graph.
std::string KeyOfJson(const std::string& json) {
  const v1::PlanRequest request = Parse(json);
  absl::StatusOr<planner::PlanOptions> options =
      api::OptionsFromProto(request.options(), api::Budgets{});
  EXPECT_TRUE(options.ok()) << options.status();
  std::optional<std::string> key =
      GraphCacheKey(api::GraphFromProto(request.graph()), *options);
  EXPECT_TRUE(key.has_value());
  return key.value_or("");
}

constexpr char kMlp[] = R"({
  "graph": {
    "name": "mlp",
    "tensors": [{"name": "x", "size_bytes": 256}, {"name": "w", "size_bytes": 128},
                {"name": "h", "size_bytes": 512}, {"name": "y", "size_bytes": 256}],
    "ops": [{"name": "fc", "inputs": ["x", "w"], "outputs": ["h"]},
            {"name": "out", "inputs": ["h"], "outputs": ["y"]}],
    "inputs": ["x"], "outputs": ["y"]
  }
})";

// The same request: other field order, no whitespace, every default
// option spelled out, a time budget and other names.
constexpr char kMlpReordered[] =
    R"({"options":{"alignment":64,"strategy":"auto","io":"arena",)"
    R"("weights":"exclude","optimize":false,"timeBudgetMs":5000},)"
    R"("graph":{"outputs":["Y"],"inputs":["X"],"ops":[)"
    R"({"outputs":["H"],"inputs":["X","W"],"name":"dense"},)"
    R"({"name":"relu","outputs":["Y"],"inputs":["H"]}],"name":"other",)"
    R"("tensors":[{"sizeBytes":"256","name":"X"},{"name":"W","sizeBytes":128},)"
    R"({"name":"H","sizeBytes":512,"alignment":0},{"name":"Y","sizeBytes":256}]}})";

TEST(CacheKeyTest, OrderWhitespaceDefaultsBudgetAndNamesDoNotMatter) {
  EXPECT_EQ(KeyOfJson(kMlp), KeyOfJson(kMlpReordered));
  EXPECT_EQ(KeyOfJson(kMlp).size(), 64u);
}

// A request with one edit applied to the JSON text of kMlp.
std::string Edited(const std::string& from, const std::string& to) {
  std::string json = kMlp;
  const size_t at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return json.replace(at, from.size(), to);
}

TEST(CacheKeyTest, EverySizeLifetimeAndOptionChangesIt) {
  const std::string base = KeyOfJson(kMlp);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {R"("size_bytes": 512)", R"("size_bytes": 576)"},  // a size
      {R"("size_bytes": 512)", R"("size_bytes": 512, "alignment": 128)"},
      {R"("name": "w", "size_bytes": 128)",
       R"("name": "w", "size_bytes": 128, "constant": true)"},
      {R"("inputs": ["h"], "outputs": ["y"])",
       R"("inputs": ["h", "x"], "outputs": ["y"])"},  // x lives longer
      {R"("inputs": ["h"], "outputs": ["y"])",
       R"("inputs": ["h"], "outputs": ["y"], "in_place": true)"},
      {R"("outputs": ["y"]
  })",
       R"("outputs": ["y", "h"]
  })"},  // h becomes an output
      {R"("inputs": ["x"], "outputs": ["y"]
  })",
       R"("inputs": ["x"], "outputs": ["y"]
  }, "options": {"alignment": 128})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"strategy": "best_fit_lifetime"}
})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"optimize": true}
})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"capacity": 4096}
})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"weights": "arena"}
})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"io": "exclude"}
})"},
      {R"("outputs": ["y"]
  }
})",
       R"("outputs": ["y"]
  }, "options": {"memory_pools": [{"name": "sram", "capacity_bytes": 512}]}
})"},
  };
  std::vector<std::string> keys = {base};
  for (const auto& [from, to] : edits) {
    const std::string key = KeyOfJson(Edited(from, to));
    EXPECT_NE(key, base) << to;
    for (const std::string& k : keys) EXPECT_TRUE(k != key || k == base) << to;
    keys.push_back(key);
  }
}

// --optimize changes the plan of the exact search too (it climbs first):
// two requests that differ only in it never share an entry, whatever the
// strategy (a replica served one the other's plan).
TEST(CacheKeyTest, OptimizeIsKeyedForEveryStrategy) {
  const planner::Problem p = planner::testing::RandomProblem(30, 2, 64);
  for (const char* strategy :
       {"auto", "exact", "hill_climb", "best_fit_size"}) {
    planner::PlanOptions plain;
    plain.strategy = strategy;
    planner::PlanOptions optimized = plain;
    optimized.optimize = true;
    EXPECT_NE(BuffersCacheKey(p, plain), BuffersCacheKey(p, optimized))
        << strategy;
  }
}

// The key covers every field of these types (GraphCacheKey,
// BuffersCacheKey, KeyOptions in plan_cache.cc) and an entry every field of
// the choices (PutChoices). A type that grows fails here first: add the new
// field to the key (or the entry), then the size below.
TEST(CacheKeyTest, KeyedTypesHaveTheFieldsTheKeyCovers) {
  EXPECT_EQ(sizeof(planner::Tensor), 56u);
  EXPECT_EQ(sizeof(planner::Op), 216u);  // names inline: 3 read, 2 written
  EXPECT_EQ(sizeof(planner::Graph), 128u);
  EXPECT_EQ(sizeof(planner::Buffer), 88u);
  // PlanOptions::max_threads is left out of the key: no plan depends on it.
  EXPECT_EQ(sizeof(planner::PlanOptions), 128u);
  EXPECT_EQ(sizeof(planner::MemorySpace), 40u);
  EXPECT_EQ(sizeof(planner::PlanChoices), 168u);
  EXPECT_EQ(sizeof(planner::MemorySpacePlan), 96u);
}

TEST(CacheKeyTest, PlannerVersionChangesIt) {
  const v1::PlanRequest request = Parse(kMlp);
  const planner::Graph graph = api::GraphFromProto(request.graph());
  const planner::PlanOptions options;
  EXPECT_NE(GraphCacheKey(graph, options, "0.2.0 abc"),
            GraphCacheKey(graph, options, "0.2.1 abc"));
  EXPECT_EQ(GraphCacheKey(graph, options), GraphCacheKey(graph, options));
  base::CancelToken ended;  // a call already over gets no key
  ended.Cancel();
  EXPECT_EQ(GraphCacheKey(graph, options, nullptr),
            GraphCacheKey(graph, options));
  EXPECT_FALSE(GraphCacheKey(graph, options, &ended).has_value());
}

TEST(CacheKeyTest, DanglingOrDuplicateNamesAreNotKeyed) {
  planner::Graph graph = planner::testing::RandomGraph(5, 1);
  const planner::PlanOptions options;
  ASSERT_TRUE(GraphCacheKey(graph, options).has_value());
  planner::Graph dangling = graph;
  dangling.ops[1].inputs.push_back("nowhere");
  EXPECT_FALSE(GraphCacheKey(dangling, options).has_value());
  planner::Graph duplicate = graph;
  duplicate.tensors[2].name = duplicate.tensors[1].name;
  EXPECT_FALSE(GraphCacheKey(duplicate, options).has_value());
}

TEST(CacheKeyTest, BufferIdsDoNotMatterButEveryFieldDoes) {
  const planner::Problem p = planner::testing::RandomProblem(20, 4, 64);
  const planner::PlanOptions options;
  const std::string base = BuffersCacheKey(p, options);
  planner::Problem renamed = p;
  for (planner::Buffer& b : renamed.buffers) b.name += "_renamed";
  EXPECT_EQ(BuffersCacheKey(renamed, options), base);
  for (int field = 0; field < 5; ++field) {
    planner::Problem q = p;
    planner::Buffer& b = q.buffers[7];
    if (field == 0) b.start += 1;
    if (field == 1) b.end += 1;
    if (field == 2) b.size += 1;
    if (field == 3) b.alignment *= 2;
    if (field == 4) b.fixed_offset = 0;
    EXPECT_NE(BuffersCacheKey(q, options), base) << field;
  }
  planner::PlanOptions effort = options;
  effort.effort = 1000;  // recorded in the entry, not in the key
  effort.time_budget = absl::Seconds(9);
  EXPECT_EQ(BuffersCacheKey(p, effort), base);
  // Keying polls the call's token: a call already ended gets no key.
  base::CancelToken ended;
  ended.Cancel();
  EXPECT_EQ(BuffersCacheKey(p, options, nullptr), base);
  EXPECT_FALSE(BuffersCacheKey(p, options, &ended).has_value());
}

TEST(CacheEffortTest, OnlyWhereASearchMayRun) {
  planner::PlanOptions o;
  o.effort = 5000;
  EXPECT_EQ(CacheEffort(o), 0);  // auto: its own node cap (work_cap.h)
  o.optimize = true;
  EXPECT_EQ(CacheEffort(o), 5000);
  o.optimize = false;
  o.strategy = "exact";
  EXPECT_EQ(CacheEffort(o), 5000);
  o.strategy = "best_fit_area";
  o.capacity = 100;
  EXPECT_EQ(CacheEffort(o), 0);  // a heuristic by name never searches
  o.strategy = "auto";
  EXPECT_EQ(CacheEffort(o), 5000);
}

// An entry for a planned problem.
struct Planned {
  planner::Problem problem;
  planner::PlanOptions options;
  std::string key;
  planner::PlanResult result;
  std::string entry;
};
Planned PlanSome(uint32_t seed) {
  Planned p;
  p.problem = planner::testing::RandomProblem(100, seed, 64);
  p.key = BuffersCacheKey(p.problem, p.options);
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanBuffers(p.problem, p.options, nullptr, nullptr);
  EXPECT_TRUE(r.ok());
  p.result = *std::move(r);
  p.entry = EncodeCacheEntry(p.key, p.options, p.result);
  return p;
}

TEST(CacheEntryTest, RoundTrips) {
  const Planned p = PlanSome(1);
  absl::StatusOr<CacheEntry> e = DecodeCacheEntry(p.entry, p.key);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->choices.solution.offsets, p.result.solution.offsets);
  EXPECT_EQ(e->choices.solution.arena_size, p.result.solution.arena_size);
  EXPECT_EQ(e->choices.strategy, p.result.strategy);
  EXPECT_EQ(e->choices.shared_objects.object_of,
            p.result.shared_objects.object_of);
  EXPECT_EQ(e->time_budget_ms, 1000);
}

TEST(CacheEntryTest, TruncatedFlippedOrForeignEntriesAreDataLoss) {
  const Planned p = PlanSome(2);
  for (size_t n = 0; n < p.entry.size(); n += 7) {
    EXPECT_TRUE(absl::IsDataLoss(
        DecodeCacheEntry(p.entry.substr(0, n), p.key).status()))
        << n;
  }
  for (size_t i = 0; i < p.entry.size(); i += 5) {
    std::string flipped = p.entry;
    flipped[i] ^= 0x10;
    EXPECT_TRUE(absl::IsDataLoss(DecodeCacheEntry(flipped, p.key).status()))
        << i;
  }
  const Planned other = PlanSome(3);
  absl::Status s = DecodeCacheEntry(p.entry, other.key).status();
  EXPECT_TRUE(absl::IsDataLoss(s));
  EXPECT_THAT(s.message(), HasSubstr("another key"));
}

// An entry forged with a valid checksum (anyone who can write to the store
// can make one when no secret signs entries): a list longer than the
// request's buffers, or more memory spaces than a plan may have, is
// refused before anything is allocated for it.
TEST(CacheEntryTest, ListsLongerThanTheRequestAreDataLoss) {
  const Planned p = PlanSome(4);
  const size_t n = p.problem.buffers.size();
  EXPECT_TRUE(DecodeCacheEntry(p.entry, p.key, n).ok());
  absl::Status s = DecodeCacheEntry(p.entry, p.key, n - 1).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("malformed"));
  planner::PlanResult spaces = p.result;
  spaces.memory_spaces.resize(planner::kMaxMemorySpaces + 1);
  spaces.memory_space_of.assign(n, 0);
  const std::string forged = EncodeCacheEntry(p.key, p.options, spaces);
  EXPECT_TRUE(absl::IsDataLoss(DecodeCacheEntry(forged, p.key, n).status()));
  spaces.memory_spaces.resize(planner::kMaxMemorySpaces);
  EXPECT_TRUE(
      DecodeCacheEntry(EncodeCacheEntry(p.key, p.options, spaces), p.key, n)
          .ok());
}

// A store in memory, shared by several caches as Redis is by replicas; it
// can be made to fail, and its entries can be rewritten.
class FakeStore : public PlanStore {
 public:
  absl::string_view name() const override { return "fake"; }
  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  absl::Status Put(const std::string& key, const std::string& entry) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    entries_[key] = entry;
    ++puts_;
    return absl::OkStatus();
  }
  absl::Status Drop(const std::string& key) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("down");
    entries_.erase(key);
    return absl::OkStatus();
  }
  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  std::map<std::string, std::string> entries() {
    absl::MutexLock lock(&mu_);
    return entries_;
  }
  void Set(const std::string& key, const std::string& entry) {
    absl::MutexLock lock(&mu_);
    entries_[key] = entry;
  }
  int puts() {
    absl::MutexLock lock(&mu_);
    return puts_;
  }

 private:
  absl::Mutex mu_;
  bool down_ = false;
  int puts_ = 0;
  std::map<std::string, std::string> entries_;
};

// Counts what the cache reports.
class CountingListener : public PlanCacheListener {
 public:
  void StoreCall(absl::string_view op, absl::Duration, bool failed) override {
    store_calls.fetch_add(1);
    if (failed) store_failures.fetch_add(1);
  }
  void Refused(absl::string_view tier) override { refused.fetch_add(1); }
  std::atomic<int> store_calls{0}, store_failures{0}, refused{0};
};

void ExpectSamePlan(const planner::PlanResult& a,
                    const planner::PlanResult& b) {
  EXPECT_EQ(a.solution.offsets, b.solution.offsets);
  EXPECT_EQ(a.solution.arena_size, b.solution.arena_size);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.lower_bound, b.lower_bound);
  EXPECT_EQ(a.shared_objects.object_of, b.shared_objects.object_of);
}

TEST(PlanCacheTest, SecondCallIsAVerifiedMemoryHit) {
  PlanCache cache({});
  const planner::Graph graph = planner::testing::RandomGraph(50, 9);
  const planner::PlanOptions options;
  CacheUse use;
  auto first = cache.PlanGraph(graph, options, nullptr, nullptr, &use);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  auto second = cache.PlanGraph(graph, options, nullptr, nullptr, &use);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(use, CacheUse::kMemoryHit);
  ExpectSamePlan(*first, *second);
  const PlanCache::Stats s = cache.stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.memory_hits, 1);
  EXPECT_EQ(s.entries, 1);
  EXPECT_GT(s.bytes, 0);
}

TEST(PlanCacheTest, RenamedGraphHitsUnderItsOwnNames) {
  PlanCache cache({});
  const planner::Graph graph = planner::testing::RandomGraph(30, 2);
  planner::Graph renamed = graph;
  auto rename = [](std::string* n) { *n = "copy_of_" + *n; };
  for (planner::Tensor& t : renamed.tensors) rename(&t.name);
  for (planner::Op& op : renamed.ops) {
    rename(&op.name);
    for (std::string& n : op.inputs) rename(&n);
    for (std::string& n : op.outputs) rename(&n);
  }
  for (std::string& n : renamed.inputs) rename(&n);
  for (std::string& n : renamed.outputs) rename(&n);
  CacheUse use;
  auto a = cache.PlanGraph(graph, {}, nullptr, nullptr, &use);
  auto b = cache.PlanGraph(renamed, {}, nullptr, nullptr, &use);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(use, CacheUse::kMemoryHit);
  ExpectSamePlan(*a, *b);
  for (size_t t = 0; t < b->tensors.size(); ++t) {
    EXPECT_EQ(b->tensors[t].name, renamed.tensors[t].name);
  }
}

TEST(PlanCacheTest, StaysWithinItsBytesEvictingTheLeastRecent) {
  const Planned one = PlanSome(1);
  const int64_t per_entry =
      static_cast<int64_t>(one.entry.size() + one.key.size()) + 128;
  PlanCacheOptions options;
  options.max_bytes = per_entry * 3 + per_entry / 2;  // three entries fit
  PlanCache cache(options);
  CacheUse use;
  std::vector<planner::Problem> problems;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    problems.push_back(planner::testing::RandomProblem(100, seed, 64));
    ASSERT_TRUE(
        cache.PlanBuffers(problems.back(), {}, nullptr, nullptr, &use).ok());
    EXPECT_LE(cache.stats().bytes, options.max_bytes);
  }
  EXPECT_EQ(cache.stats().entries, 3);
  EXPECT_EQ(cache.stats().evictions, 3);
  // The three most recent are kept; the first was evicted.
  ASSERT_TRUE(cache.PlanBuffers(problems[5], {}, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMemoryHit);
  ASSERT_TRUE(cache.PlanBuffers(problems[0], {}, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMiss);
}

TEST(PlanCacheTest, ReplicasShareThroughTheStore) {
  FakeStore store;
  PlanCacheOptions options;
  options.store = &store;
  PlanCache a(options), b(options);
  const planner::Problem p = planner::testing::RandomProblem(200, 5, 64);
  CacheUse use;
  auto made = a.PlanBuffers(p, {}, nullptr, nullptr, &use);
  EXPECT_EQ(use, CacheUse::kMiss);
  auto served = b.PlanBuffers(p, {}, nullptr, nullptr, &use);
  ASSERT_TRUE(made.ok() && served.ok());
  EXPECT_EQ(use, CacheUse::kStoreHit);
  ExpectSamePlan(*made, *served);
  ASSERT_TRUE(b.PlanBuffers(p, {}, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMemoryHit);  // b kept it in process too
}

TEST(PlanCacheTest, AStoreThatFailsNeverFailsACall) {
  FakeStore store;
  store.SetDown(true);
  CountingListener listener;
  PlanCacheOptions options;
  options.store = &store;
  options.listener = &listener;
  options.max_bytes = 0;  // nothing in process: every call asks the store
  PlanCache cache(options);
  const planner::Problem p = planner::testing::RandomProblem(50, 5, 64);
  CacheUse use;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cache.PlanBuffers(p, {}, nullptr, nullptr, &use).ok());
    EXPECT_EQ(use, CacheUse::kMiss);
  }
  EXPECT_EQ(listener.store_failures.load(), 6);  // a get and a put each
  store.SetDown(false);
  ASSERT_TRUE(cache.PlanBuffers(p, {}, nullptr, nullptr, &use).ok());
  ASSERT_TRUE(cache.PlanBuffers(p, {}, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kStoreHit);
}

// A poisoned entry: a well-formed entry for the right key, checksum
// included, whose plan puts two tensors that are live together at the
// same offset. It is refused, dropped, and the plan recomputed.
TEST(PlanCacheTest, PoisonedEntryIsNeverReturned) {
  FakeStore store;
  CountingListener listener;
  PlanCacheOptions options;
  options.store = &store;
  options.listener = &listener;
  PlanCache cache(options);
  Planned p = PlanSome(7);
  planner::PlanResult poisoned = p.result;
  const auto& b = poisoned.problem.buffers;
  bool done = false;
  for (size_t i = 0; i < b.size() && !done; ++i) {
    for (size_t j = i + 1; j < b.size() && !done; ++j) {
      if (planner::LifetimesOverlap(b[i], b[j])) {
        poisoned.solution.offsets[j] = poisoned.solution.offsets[i];
        done = true;
      }
    }
  }
  ASSERT_TRUE(done);
  store.Set(p.key, EncodeCacheEntry(p.key, p.options, poisoned));
  CacheUse use;
  auto r = cache.PlanBuffers(p.problem, p.options, nullptr, nullptr, &use);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  ExpectSamePlan(*r, p.result);
  EXPECT_EQ(listener.refused.load(), 1);
  EXPECT_EQ(cache.stats().refused, 1);
  // Replaced by the good plan.
  EXPECT_EQ(store.entries().at(p.key), p.entry);
}

TEST(PlanCacheTest, MoreEffortRecomputesAndReplacesLessKeeps) {
  FakeStore store;
  PlanCacheOptions options;
  options.store = &store;
  options.max_bytes = 0;
  PlanCache cache(options);
  const planner::Problem p = planner::testing::DenseProblem(60, 11, 1);
  planner::PlanOptions o;
  o.optimize = true;
  o.time_budget = absl::Seconds(60);
  const std::string key = BuffersCacheKey(p, o);
  auto effort_kept = [&] {
    return DecodeCacheEntry(store.entries().at(key), key)->effort;
  };
  CacheUse use;
  o.effort = 200;
  ASSERT_TRUE(cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  ASSERT_TRUE(cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kStoreHit);
  o.effort = 400;  // more: recomputed, replaces
  ASSERT_TRUE(cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  EXPECT_EQ(effort_kept(), 400);
  o.effort = 100;  // less: recomputed, the entry stays
  ASSERT_TRUE(cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  EXPECT_EQ(effort_kept(), 400);
  o.effort = 400;
  ASSERT_TRUE(cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok());
  EXPECT_EQ(use, CacheUse::kStoreHit);
}

// --optimize within `budget`: on DenseProblem(400, 3, 1) every heuristic
// and the search end far above the bound, so the search runs its whole
// budget.
planner::PlanOptions OptimizeWithin(absl::Duration budget) {
  planner::PlanOptions o;
  o.optimize = true;
  o.time_budget = budget;
  return o;
}

TEST(PlanCacheTest, TimeLimitedPlansAreNotKept) {
  PlanCache cache({});
  const planner::Problem p = planner::testing::DenseProblem(400, 3, 1);
  const planner::PlanOptions o = OptimizeWithin(absl::Milliseconds(30));
  CacheUse use;
  auto r = cache.PlanBuffers(p, o, nullptr, nullptr, &use);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->time_limited) << "the search ended within 30 ms";
  EXPECT_EQ(cache.stats().entries, 0);
}

// Identical requests at once: one computes, the others wait and hit; a call
// that arrives as the first lands (after its lookup missed, before its
// take-off) hits memory too instead of computing again.
TEST(PlanCacheTest, ConcurrentIdenticalRequestsComputeOnce) {
  PlanCache cache({});
  // Every heuristic ends above the bound here (skyline_area reaches it on
  // seed 21, and without a search the first call ends before the others
  // arrive).
  const planner::Problem p = planner::testing::DenseProblem(120, 22, 1);
  planner::PlanOptions o;
  o.optimize = true;
  o.effort = 20000;  // a search long enough for the others to arrive
  o.time_budget = absl::Seconds(60);
  constexpr int kCalls = 6;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  absl::Notification go;  // all at once
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      CacheUse use;
      if (cache.PlanBuffers(p, o, nullptr, nullptr, &use).ok()) ++ok;
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().memory_hits, kCalls - 1);
}

// Identical calls whose search the budget cuts: computed once too; the
// others get that plan, time_limited as it is, and nothing is kept.
TEST(PlanCacheTest, IdenticalCallsShareAPlanTheBudgetCut) {
  PlanCache cache({});
  const planner::Problem p = planner::testing::DenseProblem(400, 3, 1);
  const planner::PlanOptions o = OptimizeWithin(absl::Milliseconds(300));
  constexpr int kCalls = 4;
  std::vector<std::thread> threads;
  std::atomic<int> limited{0};
  absl::Notification go;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      CacheUse use;
      auto r = cache.PlanBuffers(p, o, nullptr, nullptr, &use);
      if (r.ok() && r->time_limited) ++limited;
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(limited.load(), kCalls);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().memory_hits, kCalls - 1);
  EXPECT_EQ(cache.stats().entries, 0);
}

// Throws std::bad_alloc from the first call's miss, as the planner would
// run out of memory in it, after the other call has begun waiting.
class ThrowingOnceListener : public PlanCacheListener {
 public:
  void Miss() override {
    if (thrown_.exchange(true)) return;
    computing.Notify();
    absl::SleepFor(absl::Milliseconds(500));  // the other call waits
    throw std::bad_alloc();
  }
  absl::Notification computing;

 private:
  std::atomic<bool> thrown_{false};
};

// A flight that ends in an exception lets an identical call waiting for it
// go at once: it plans itself (without the landing on the way out it
// would wait to its deadline, or for ever without one).
TEST(PlanCacheTest, AFlightEndedByAnExceptionLetsItsWaitersGo) {
  ThrowingOnceListener listener;
  PlanCacheOptions options;
  options.listener = &listener;
  PlanCache cache(options);
  const planner::Problem p = planner::testing::DenseProblem(100, 3, 1);
  std::atomic<bool> threw{false};
  std::thread first([&] {
    CacheUse use;
    try {
      (void)cache.PlanBuffers(p, {}, nullptr, nullptr, &use);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  });
  listener.computing.WaitForNotification();
  const base::CancelToken cancel(absl::Now() + absl::Seconds(20));
  const absl::Time start = absl::Now();
  CacheUse use = CacheUse::kMemoryHit;
  auto r = cache.PlanBuffers(p, {}, nullptr, &cancel, &use);
  const absl::Duration took = absl::Now() - start;
  first.join();
  EXPECT_TRUE(threw.load());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(use, CacheUse::kMiss);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_LT(took, absl::Seconds(10));  // the 500 ms wait and its own plan
}

// A plan its own deadline cut short (the budget ends before the deadline)
// is not shared with an identical call that waited for it given longer:
// that call plans itself (it got the 300 ms call's plan, 29% larger on
// MiniMalloc's D, where its own budget was 20 s).
TEST(PlanCacheTest, APlanCutByItsCallersDeadlineIsNotShared) {
  PlanCache cache({});
  const planner::Problem p = planner::testing::DenseProblem(400, 3, 1);
  const planner::PlanOptions o = OptimizeWithin(absl::Milliseconds(1500));
  std::atomic<bool> first_limited{false};
  std::thread first([&] {
    const base::CancelToken cancel(absl::Now() + absl::Milliseconds(400));
    CacheUse use;
    auto r = cache.PlanBuffers(p, o, nullptr, &cancel, &use);
    first_limited = r.ok() && r->time_limited;
  });
  absl::SleepFor(absl::Milliseconds(100));
  CacheUse use;
  auto r = cache.PlanBuffers(p, o, nullptr, nullptr, &use);
  first.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(first_limited.load());
  EXPECT_EQ(use, CacheUse::kMiss);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_EQ(cache.stats().memory_hits, 0);
}

// A call with another budget is not the same call: it does not wait for a
// longer search to end.
TEST(PlanCacheTest, ACallWithAnotherBudgetDoesNotWait) {
  PlanCache cache({});
  // Every heuristic and the search end far above the bound here (7.5%;
  // on seed 5 the search now proves the bound within 100 ms, on seed 4
  // the skyline pass reaches it): the first call searches for its whole
  // budget.
  const planner::Problem p = planner::testing::DenseProblem(400, 3, 1);
  const planner::PlanOptions slow = OptimizeWithin(absl::Seconds(4));
  std::thread first([&] {
    CacheUse use;
    (void)cache.PlanBuffers(p, slow, nullptr, nullptr, &use);
  });
  absl::SleepFor(absl::Milliseconds(100));
  planner::PlanOptions quick = slow;
  quick.time_budget = absl::Milliseconds(100);
  const absl::Time start = absl::Now();
  CacheUse use;
  auto r = cache.PlanBuffers(p, quick, nullptr, nullptr, &use);
  // Far from the first call's 4 s (it once took over 1 s in a full ctest
  // -j2 run, beside the first call's search on a busy machine).
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(use, CacheUse::kMiss);
  first.join();
  EXPECT_EQ(cache.stats().misses, 2);
}

// A waiting call is bounded by its own deadline, and a deadline shorter
// than the budget ends its wait where its budget would end: it then plans
// itself in what is left (before, it waited to its deadline and had no
// plan).
TEST(PlanCacheTest, AWaitingCallKeepsItsOwnDeadline) {
  PlanCache cache({});
  const planner::Problem p = planner::testing::DenseProblem(300, 8, 1);
  planner::PlanOptions slow;
  slow.optimize = true;
  slow.effort = 5'000'000;
  slow.time_budget = absl::Seconds(1.5);
  std::thread first([&] {
    CacheUse use;
    (void)cache.PlanBuffers(p, slow, nullptr, nullptr, &use);
  });
  absl::SleepFor(absl::Milliseconds(100));
  // Its budget ends 100 ms before its deadline (a tenth of the time left):
  // room for the heuristics under the sanitizers too.
  base::CancelToken cancel(absl::Now() + absl::Seconds(1));
  const absl::Time start = absl::Now();
  CacheUse use;
  auto r = cache.PlanBuffers(p, slow, nullptr, &cancel, &use);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1.5));
  EXPECT_EQ(use, CacheUse::kMiss);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->time_limited);
  first.join();
}

// engine::Plan with a cache: the response says where the plan came from,
// and is otherwise the computed one.
TEST(PlanCacheTest, ResponsesSayTheyCameFromTheCache) {
  PlanCache cache({});
  v1::PlanRequest request = Parse(kMlp);
  auto first = PlanToResponse(request, Limits{}, nullptr, nullptr, &cache);
  auto second = PlanToResponse(request, Limits{}, nullptr, nullptr, &cache);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->cached());
  EXPECT_TRUE(second->cached());
  // With no_timings, the same bytes whether cached or not.
  request.set_no_timings(true);
  v1::PlanResponse computed = *first;
  computed.clear_stage_micros();
  auto third = PlanToResponse(request, Limits{}, nullptr, nullptr, &cache);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->cached());
  EXPECT_EQ(third->SerializeAsString(), computed.SerializeAsString());
  EXPECT_EQ(cache.stats().memory_hits, 2);
}

}  // namespace
}  // namespace memplan::engine
