// cache_bench: the plan cache's figures (hit latency against recomputation).
// For each request, through engine::PlanToResponse as the server runs it
// (without gRPC): the plan computed without a cache, served from the
// in-process cache, and, with --redis, served from Redis by a second cache
// that keeps nothing in process (another replica). Medians of --runs runs
// (the computation: of --compute_runs).
//
//   cache_bench [--redis=redis://127.0.0.1:6379] [--runs=21]
//               [--effort=3000000] [--threads=2]
//
// Requests: examples/resnet50.json (default options), the same with
// optimize and --effort, a MiniMalloc challenging instance (D) with
// optimize and a 10 s budget (the budget cuts the search: not kept), the
// same bounded by --effort instead (a search of seconds, kept), and
// 1,000,000 random buffers (default options).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/worker_pool.h"
#include "bench/median.h"
#include "engine/plan.h"
#include "engine/plan_cache.h"
#include "formats/file_io.h"
#include "formats/minimalloc_csv.h"
#include "formats/request_json.h"
#include "planner/testing/random_problems.h"
#include "proto/convert.h"
#include "server/redis_store.h"

ABSL_FLAG(std::string, redis, "",
          "redis://HOST:PORT of a Redis for the store figures; empty: none");
ABSL_FLAG(int, runs, 21, "runs per hit figure (median)");
ABSL_FLAG(int, compute_runs, 3, "runs per computation figure (median)");
ABSL_FLAG(int64_t, effort, 3'000'000, "effort of the searching requests");
ABSL_FLAG(int, threads, 2, "worker threads");
ABSL_FLAG(int, random_buffers, 1'000'000, "buffers of the random request");

namespace memplan {
namespace {

struct Case {
  std::string name;
  v1::PlanRequest request;
};

v1::PlanRequest FromJson(const std::string& path) {
  absl::StatusOr<std::string> text =
      formats::ReadFile(path, formats::kDefaultMaxInputBytes);
  if (!text.ok()) return {};
  absl::StatusOr<v1::PlanRequest> r = formats::ParseRequestJson(*text, path);
  return r.ok() ? *r : v1::PlanRequest();
}

v1::PlanRequest FromCsv(const std::string& path) {
  v1::PlanRequest r;
  absl::StatusOr<std::string> text =
      formats::ReadFile(path, formats::kDefaultMaxInputBytes);
  if (!text.ok()) return r;
  absl::StatusOr<formats::MinimallocCsv> csv =
      formats::ReadMinimallocCsv(*text, path);
  if (csv.ok()) api::BuffersToProto(csv->problem, r.mutable_buffers());
  return r;
}

void Searching(v1::PlanRequest* r) {
  r->mutable_options()->set_optimize(true);
  r->mutable_options()->set_effort(absl::GetFlag(FLAGS_effort));
  r->mutable_options()->set_time_budget_ms(60000);
}

std::vector<Case> Cases() {
  const std::string src = MEMPLAN_SOURCE_DIR;
  std::vector<Case> cases;
  cases.push_back(
      {"resnet50.json, default", FromJson(src + "/examples/resnet50.json")});
  Case optimized = cases.back();
  optimized.name = "resnet50.json, optimize + effort";
  Searching(&optimized.request);
  cases.push_back(optimized);
  const std::string d = src + "/bench/data/minimalloc/D.1048576.csv";
  Case budget{"minimalloc D.1048576.csv, optimize, 10 s budget", FromCsv(d)};
  budget.request.mutable_options()->set_optimize(true);
  budget.request.mutable_options()->set_time_budget_ms(10000);
  cases.push_back(budget);
  Case search{"minimalloc D.1048576.csv, optimize + effort", FromCsv(d)};
  Searching(&search.request);
  cases.push_back(search);
  Case random{absl::StrCat(absl::GetFlag(FLAGS_random_buffers),
                           " random buffers, default"),
              {}};
  api::BuffersToProto(planner::testing::RandomProblem(
                          absl::GetFlag(FLAGS_random_buffers), 1, 64),
                      random.request.mutable_buffers());
  cases.push_back(random);
  return cases;
}

// Seconds of one PlanToResponse; *cached says whether it was a hit.
double Time(const v1::PlanRequest& request, base::WorkerPool* workers,
            engine::PlanCache* cache, bool* cached, bool* time_limited) {
  engine::Limits limits;
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlanResponse> r =
      engine::PlanToResponse(request, limits, workers, nullptr, cache);
  const double s = absl::ToDoubleSeconds(absl::Now() - start);
  if (!r.ok()) {
    std::fprintf(stderr, "plan failed: %s\n",
                 std::string(r.status().message()).c_str());
    return -1;
  }
  if (cached != nullptr) *cached = r->cached();
  if (time_limited != nullptr) *time_limited = r->time_limited();
  return s;
}

double MedianOf(int runs, const std::function<double()>& one) {
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) v.push_back(one());
  return bench::Median(v);
}

int Run() {
  base::WorkerPool workers(absl::GetFlag(FLAGS_threads), 64);
  std::unique_ptr<server::RedisStore> store;
  if (!absl::GetFlag(FLAGS_redis).empty()) {
    absl::StatusOr<std::unique_ptr<server::RedisStore>> s =
        server::RedisStore::Open(absl::GetFlag(FLAGS_redis), {});
    if (!s.ok() || !(*s)->WaitUntilUp(absl::Seconds(2))) {
      std::fprintf(stderr, "cannot reach %s\n",
                   absl::GetFlag(FLAGS_redis).c_str());
      return 2;
    }
    store = *std::move(s);
  }
  std::printf("| request | computed | in-process hit | Redis hit | entry |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const Case& c : Cases()) {
    bool limited = false;
    const double compute = MedianOf(absl::GetFlag(FLAGS_compute_runs), [&] {
      return Time(c.request, &workers, nullptr, nullptr, &limited);
    });
    if (limited) {  // the budget cut it: returned, not kept
      std::printf("| %s | %.3f ms | not kept (time_limited) | - | - |\n",
                  c.name.c_str(), compute * 1e3);
      std::fflush(stdout);
      continue;
    }
    engine::PlanCacheOptions options;
    options.store = store.get();
    engine::PlanCache cache(options);
    bool cached = false;
    Time(c.request, &workers, &cache, &cached, nullptr);  // the miss
    const int64_t entry = cache.stats().bytes;
    const double memory = MedianOf(absl::GetFlag(FLAGS_runs), [&] {
      return Time(c.request, &workers, &cache, &cached, nullptr);
    });
    const bool memory_hit = cached;
    std::string redis = "-";
    if (store != nullptr) {
      options.max_bytes = 0;  // another replica, reading Redis every time
      engine::PlanCache replica(options);
      const double hit = MedianOf(absl::GetFlag(FLAGS_runs), [&] {
        return Time(c.request, &workers, &replica, &cached, nullptr);
      });
      redis = cached ? absl::StrFormat("%.3f ms", hit * 1e3) : "not a hit";
    }
    std::printf("| %s | %.3f ms | %s | %s | %lld B |\n", c.name.c_str(),
                compute * 1e3,
                memory_hit ? absl::StrFormat("%.3f ms", memory * 1e3).c_str()
                           : "not a hit",
                redis.c_str(), static_cast<long long>(entry));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return memplan::Run();
}
