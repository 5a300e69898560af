#include "base/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace memplan::base {
namespace {

// What the caller and its workers share. Workers hold it by shared_ptr: a
// worker task may start after the caller has returned, and then only reads
// `closed`.
struct Team : std::enable_shared_from_this<Team> {
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // the caller's call returned
  int next_thread ABSL_GUARDED_BY(mu) = 1;  // the next worker's number
  // The caller's function: called only while !closed (the caller is then
  // still inside RunTogether).
  const absl::FunctionRef<void(int)>* work = nullptr;
  // The free helper places of the outermost call (call_slots): read only
  // while !closed, when the outermost call is still running.
  std::atomic<int>* slots = nullptr;
  WorkerPool* workers = nullptr;
  int helpers = 0;  // the most workers at once
  Recruit recruit = Recruit::kAtStart;
  std::atomic<int> asked{0};  // worker tasks queued, not started
  // Workers inside work(): changed under `mu` (the caller awaits 0), read
  // without it too.
  std::atomic<int> active{0};

  // The team ShouldYield asks for workers for, on its threads: this one
  // when it recruits as places free, else none.
  Team* Recruiting() {
    return recruit == Recruit::kAsPlacesFree ? this : nullptr;
  }
};

// The team whose work this thread runs (null outside a RunTogether with
// workers): ShouldYield asks for workers for it.
thread_local Team* current_team = nullptr;

// The free helper places of the call this thread works on (its
// ThreadBudget, else its outermost RunTogether), or null outside one. A
// nested RunTogether (a split inside a split) recruits only into these
// places, so that the threads of one call never exceed its budget, however
// deep the splits go: more threads than cores only queue for them.
thread_local std::atomic<int>* call_slots = nullptr;

// Takes one free place, if there is one.
bool TakeSlot(std::atomic<int>* slots) {
  int free = slots->load(std::memory_order_relaxed);
  while (free > 0) {
    if (slots->compare_exchange_weak(free, free - 1,
                                     std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

// Runs `work(thread)` with call_slots set to `slots` and current_team to
// `team` (may be null).
void WorkIn(std::atomic<int>* slots, Team* team,
            const absl::FunctionRef<void(int)>& work, int thread) {
  std::atomic<int>* const outer = std::exchange(call_slots, slots);
  Team* const outer_team = std::exchange(current_team, team);
  work(thread);
  current_team = outer_team;
  call_slots = outer;
}

// Helper tasks queued in any pool and not started yet: a worker leaves
// for other work, not for another helper.
std::atomic<int> queued_helpers{0};

// A small file's text, at most `limit` bytes; empty where it cannot be read.
std::string ReadSmallFile(const std::string& path, size_t limit = 4096) {
  std::ifstream in(path);
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return text;
}

// The CPUs of the calling thread's affinity mask; 0 where it cannot be read.
int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

}  // namespace

namespace internal {

int CoresOfCpuMax(absl::string_view cpu_max) {
  const std::vector<absl::string_view> fields = absl::StrSplit(
      absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period) || quota <= 0 || period <= 0) {
    return 0;  // "max PERIOD" (no limit) or not a quota
  }
  const int64_t cores = quota / period + (quota % period != 0 ? 1 : 0);
  return static_cast<int>(std::min<int64_t>(cores, 1 << 20));
}

int CgroupQuotaCores(const std::string& root, absl::string_view self_cgroup) {
  for (absl::string_view line : absl::StrSplit(self_cgroup, '\n')) {
    if (!absl::ConsumePrefix(&line, "0::")) continue;  // v1 hierarchies
    if (line.empty() || line[0] != '/') return 0;
    int fewest = 0;
    // The group, then each group above it up to the root: at most one
    // level per '/' of the path.
    absl::string_view path = absl::StripTrailingAsciiWhitespace(line);
    while (true) {
      const int cores =
          CoresOfCpuMax(ReadSmallFile(root + std::string(path) + "/cpu.max"));
      if (cores > 0 && (fewest == 0 || cores < fewest)) fewest = cores;
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
    return fewest;
  }
  return 0;
}

}  // namespace internal

int UsableCores() {
  static const int quota = internal::CgroupQuotaCores(
      "/sys/fs/cgroup", ReadSmallFile("/proc/self/cgroup"));
  int cores = AffinityCores();
  if (cores <= 0) cores = 1;
  if (quota > 0) cores = std::min(cores, quota);
  return cores;
}

ThreadBudget::ThreadBudget(const Parallelism& parallel)
    : slots_(parallel.helpers()) {
  if (call_slots == nullptr) call_slots = &slots_;  // else adds none
}

ThreadBudget::~ThreadBudget() {
  if (call_slots == &slots_) call_slots = nullptr;
}

int Parallelism::helpers() const {
  if (workers == nullptr || max_threads <= 1) return 0;
  return std::min(max_threads - 1, workers->threads());
}

namespace {

// Queues one worker task for `team`; false when the pool is full.
bool AskForWorker(const std::shared_ptr<Team>& team) {
  queued_helpers.fetch_add(1, std::memory_order_relaxed);
  team->asked.fetch_add(1, std::memory_order_relaxed);
  const bool queued = team->workers->TrySchedule([team] {
    queued_helpers.fetch_sub(1, std::memory_order_relaxed);
    team->asked.fetch_sub(1, std::memory_order_relaxed);
    int thread = 0;
    {
      absl::MutexLock lock(&team->mu);
      // A place taken only while the call runs: it then still exists.
      if (team->closed || team->active >= team->helpers ||
          !TakeSlot(team->slots)) {
        return;
      }
      team->active.fetch_add(1, std::memory_order_relaxed);
      thread = team->next_thread++;
    }
    WorkIn(team->slots, team->Recruiting(), *team->work, thread);
    team->slots->fetch_add(1, std::memory_order_acq_rel);
    absl::MutexLock lock(&team->mu);
    team->active.fetch_sub(1, std::memory_order_relaxed);
  });
  if (!queued) {
    queued_helpers.fetch_sub(1, std::memory_order_relaxed);
    team->asked.fetch_sub(1, std::memory_order_relaxed);
  }
  return queued;
}

// Asks for a worker for `team` when a place of its call is free and no
// worker asked for will take it.
void RecruitIntoFreePlaces(Team* team) {
  const int free = team->slots->load(std::memory_order_relaxed);
  if (free <= 0) return;  // the common case: one relaxed load
  const int asked = team->asked.load(std::memory_order_relaxed);
  if (asked >= free ||
      team->active.load(std::memory_order_relaxed) + asked >= team->helpers) {
    return;  // those asked for take the places, or the team is full
  }
  {
    absl::MutexLock lock(&team->mu);
    if (team->closed || team->active >= team->helpers) return;
  }
  AskForWorker(team->shared_from_this());
}

}  // namespace

void RunTogether(const Parallelism& parallel,
                 absl::FunctionRef<void(int thread)> work, Recruit recruit) {
  const int helpers = parallel.helpers();
  if (helpers == 0) {
    Team* const outer_team = std::exchange(current_team, nullptr);
    work(0);
    current_team = outer_team;
    return;
  }
  // The outermost call's places, or this call's own.
  std::atomic<int> own{helpers};
  std::atomic<int>* const slots = call_slots != nullptr ? call_slots : &own;
  const int recruits =
      std::min(helpers, slots->load(std::memory_order_relaxed));
  if (recruits <= 0 && recruit == Recruit::kAtStart) {
    // Every place of the call is working, and none is asked for later.
    WorkIn(slots, nullptr, work, 0);
    return;
  }
  auto team = std::make_shared<Team>();
  team->work = &work;
  team->slots = slots;
  team->workers = parallel.workers;
  team->helpers = helpers;
  team->recruit = recruit;
  for (int h = 1; h <= recruits; ++h) {
    if (!AskForWorker(team)) break;  // the pool is full: fewer helpers
  }
  WorkIn(slots, team->Recruiting(), work, 0);
  absl::MutexLock lock(&team->mu);
  team->closed = true;
  team->mu.Await(absl::Condition(
      +[](Team* t)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) { return t->active == 0; },
      team.get()));
}

bool ShouldYield(const Parallelism& parallel, int thread) {
  if (current_team != nullptr) RecruitIntoFreePlaces(current_team);
  return thread > 0 && parallel.workers != nullptr &&
         parallel.workers->queue_depth() >
             queued_helpers.load(std::memory_order_relaxed);
}

void ParallelFor(const Parallelism& parallel, int chunks,
                 absl::FunctionRef<void(int chunk)> fn) {
  if (chunks <= 0) return;
  if (chunks == 1 || parallel.helpers() == 0) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  std::atomic<int> next{0};
  RunTogether(
      parallel,
      [&](int thread) {
        while (!ShouldYield(parallel, thread)) {
          const int c = next.fetch_add(1, std::memory_order_relaxed);
          if (c >= chunks) return;
          fn(c);
        }
      },
      Recruit::kAsPlacesFree);
}

void ParallelForRange(
    const Parallelism& parallel, size_t n, size_t chunk_size,
    absl::FunctionRef<void(int chunk, size_t begin, size_t end)> fn) {
  ParallelFor(parallel, ChunkCount(n, chunk_size), [&](int c) {
    const size_t begin = static_cast<size_t>(c) * chunk_size;
    fn(c, begin, std::min(n, begin + chunk_size));
  });
}

}  // namespace memplan::base
