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
namespace internal {

// The free helper places of one call (a ThreadBudget's, or an outermost
// RunTogether's), and the handed tasks waiting for one. Shared: a handed
// task's worker may touch it after the owner has taken the task.
struct CallPlaces : std::enable_shared_from_this<CallPlaces> {
  explicit CallPlaces(int helpers) : helpers(helpers), free(helpers) {}

  const int helpers;  // the places in all
  std::atomic<int> free;
  // Tasks in `waiting` (read without the lock first: usually none).
  std::atomic<int> waiting_count{0};
  // Threads taking back a place they lent (LendPlace), none free: the
  // next place given back is theirs before any waiting task's.
  std::atomic<int> borrowers{0};
  absl::Mutex mu;
  absl::CondVar place_back;  // a place was given back (for borrowers)
  // Handed tasks a worker found no place for, oldest first (some may have
  // been taken by their owners since). Not owned: each task owns its
  // call's places.
  std::vector<std::weak_ptr<HandedTask::Shared>> waiting ABSL_GUARDED_BY(mu);
};

}  // namespace internal

struct HandedTask::Shared : std::enable_shared_from_this<Shared> {
  std::function<void()> task;
  WorkerPool* pool = nullptr;
  // The call it was made in, or null outside one.
  std::shared_ptr<internal::CallPlaces> places;

  mutable absl::Mutex mu;
  bool taken ABSL_GUARDED_BY(mu) = false;  // by a worker or the owner
  // A worker found no place free: waiting for one (or for the owner).
  bool waiting ABSL_GUARDED_BY(mu) = false;
  // Queued again with a place taken for it, not started yet: whoever
  // takes the task first has the place (the owner gives it back).
  bool holds_place ABSL_GUARDED_BY(mu) = false;
  bool done ABSL_GUARDED_BY(mu) = false;  // ran (or never will)

  // Takes the task for the owner's thread; false when a thread took it
  // before.
  bool TakeHere();
  // Runs the taken task on this thread and marks it done; on a worker
  // (`places` given) inside the call's places, the held one given back
  // before it is marked done.
  void Run(internal::CallPlaces* places);
  // A worker's first look at the task.
  void OnWorker();
  // A worker's run with the place taken for it (Wake).
  void OnWorkerWithPlace();
};

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
  // The free helper places of the outermost call (call_places): read only
  // while !closed, when the outermost call is still running.
  internal::CallPlaces* places = nullptr;
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
thread_local internal::CallPlaces* call_places = nullptr;

// Takes one free place, if there is one.
bool TakePlace(internal::CallPlaces* places) {
  int free = places->free.load();  // sequentially consistent: see OnWorker
  while (free > 0) {
    if (places->free.compare_exchange_weak(free, free - 1)) return true;
  }
  return false;
}

// Hands free places to the tasks waiting for one, oldest first, while
// there are both.
void Wake(internal::CallPlaces* places) {
  // Tasks let go of here are released after the lock (last: destroyed
  // first): a task's destructor never runs under it.
  std::vector<std::shared_ptr<HandedTask::Shared>> seen;
  absl::MutexLock lock(&places->mu);
  auto& waiting = places->waiting;
  size_t next_at = 0;
  for (; next_at < waiting.size(); ++next_at) {
    std::shared_ptr<HandedTask::Shared> next = waiting[next_at].lock();
    if (next == nullptr) continue;  // its HandedTask is gone
    // A lender takes its place back first (it then wakes the tasks).
    if (places->borrowers.load() > 0) break;
    seen.push_back(next);
    {
      absl::MutexLock task_lock(&next->mu);
      if (next->taken || !next->waiting) continue;  // its owner took it
      if (!TakePlace(places)) break;
      next->waiting = false;
      next->holds_place = true;
    }
    if (next->pool->TrySchedule([next] { next->OnWorkerWithPlace(); })) {
      continue;
    }
    // The pool is full: this task and those after it are their owners' to
    // run (each owner runs a waiting task rather than wait for it), and
    // the place is free again.
    bool give_back = false;
    {
      absl::MutexLock task_lock(&next->mu);
      give_back = next->holds_place;
      next->holds_place = false;
      if (!next->taken) next->waiting = true;
    }
    if (give_back) places->free.fetch_add(1);
    next_at = waiting.size();
    break;
  }
  waiting.erase(waiting.begin(), waiting.begin() + next_at);
  places->waiting_count.store(static_cast<int>(waiting.size()));
}

// Gives a held place back to its call: to the first task waiting for one,
// else to the free ones.
void GiveBack(internal::CallPlaces* places) {
  places->free.fetch_add(1);           // sequentially consistent: see OnWorker
  if (places->borrowers.load() > 0) {  // as OnWorker's count, for ~LendPlace
    absl::MutexLock lock(&places->mu);
    places->place_back.SignalAll();
  }
  if (places->waiting_count.load() > 0) Wake(places);
}

// Runs `work(thread)` with call_places set to `places` and current_team
// to `team` (may be null).
void WorkIn(internal::CallPlaces* places, Team* team,
            const absl::FunctionRef<void(int)>& work, int thread) {
  internal::CallPlaces* const outer = std::exchange(call_places, places);
  Team* const outer_team = std::exchange(current_team, team);
  work(thread);
  current_team = outer_team;
  call_places = outer;
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
    : places_(std::make_shared<internal::CallPlaces>(parallel.helpers())) {
  if (call_places == nullptr) call_places = places_.get();  // else adds none
}

ThreadBudget::~ThreadBudget() {
  if (call_places == places_.get()) call_places = nullptr;
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
          !TakePlace(team->places)) {
        return;
      }
      team->active.fetch_add(1, std::memory_order_relaxed);
      thread = team->next_thread++;
    }
    WorkIn(team->places, team->Recruiting(), *team->work, thread);
    GiveBack(team->places);
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
  const int free = team->places->free.load(std::memory_order_relaxed);
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
  // (Shared: a task handed inside this call may hold on to them.)
  std::shared_ptr<internal::CallPlaces> own;
  if (call_places == nullptr) {
    own = std::make_shared<internal::CallPlaces>(helpers);
  }
  internal::CallPlaces* const places =
      call_places != nullptr ? call_places : own.get();
  const int recruits =
      std::min(helpers, places->free.load(std::memory_order_relaxed));
  if (recruits <= 0 && recruit == Recruit::kAtStart) {
    // Every place of the call is working, and none is asked for later.
    WorkIn(places, nullptr, work, 0);
    return;
  }
  auto team = std::make_shared<Team>();
  team->work = &work;
  team->places = places;
  team->workers = parallel.workers;
  team->helpers = helpers;
  team->recruit = recruit;
  for (int h = 1; h <= recruits; ++h) {
    if (!AskForWorker(team)) break;  // the pool is full: fewer helpers
  }
  WorkIn(places, team->Recruiting(), work, 0);
  absl::MutexLock lock(&team->mu);
  team->closed = true;
  team->mu.Await(absl::Condition(
      +[](Team* t)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu) { return t->active == 0; },
      team.get()));
}

bool ShouldYield(const Parallelism& parallel, int thread) {
  if (current_team != nullptr) RecruitIntoFreePlaces(current_team);
  if (thread == 0 || parallel.workers == nullptr) return false;
  if (call_places != nullptr &&
      call_places->borrowers.load(std::memory_order_relaxed) > 0) {
    return true;  // a thread waits to take back the place it lent
  }
  return parallel.workers->queue_depth() >
         queued_helpers.load(std::memory_order_relaxed);
}

// Whether this thread's place is lent (LendPlace): it has one to lend.
thread_local bool place_lent = false;

LendPlace::LendPlace() {
  if (place_lent || call_places == nullptr || call_places->helpers == 0) {
    return;
  }
  place_lent = true;
  places_ = call_places->shared_from_this();
  GiveBack(places_.get());
}

LendPlace::~LendPlace() {
  if (places_ == nullptr) return;
  place_lent = false;
  internal::CallPlaces* const places = places_.get();
  if (TakePlace(places)) return;
  // Every place at work: wait for the next one given back (a task or a
  // split's worker that took the lent place ends), so that the call never
  // has more threads at work than its budget.
  places->borrowers.fetch_add(1);
  {
    absl::MutexLock lock(&places->mu);
    while (!TakePlace(places)) places->place_back.Wait(&places->mu);
  }
  places->borrowers.fetch_sub(1);
  // Places given back meanwhile beyond this one go to waiting tasks.
  if (places->waiting_count.load() > 0) Wake(places);
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

bool HandedTask::Shared::TakeHere() {
  bool give_back = false;
  {
    absl::MutexLock lock(&mu);
    if (taken) return false;
    taken = true;
    give_back = holds_place;
    holds_place = false;
  }
  // Queued again with a place for it: the place goes back to the call.
  if (give_back) GiveBack(places.get());
  return true;
}

void HandedTask::Shared::Run(internal::CallPlaces* in_places) {
  if (in_places == nullptr) {
    task();
  } else {
    WorkIn(
        in_places, nullptr, [this](int) { task(); }, 0);
  }
  task = nullptr;  // what it holds goes with it
  if (in_places != nullptr) GiveBack(in_places);
  absl::MutexLock lock(&mu);
  done = true;
}

void HandedTask::Shared::OnWorker() {
  bool run = false;
  {
    absl::MutexLock lock(&mu);
    if (taken) return;
    if (places == nullptr || TakePlace(places.get())) {
      taken = true;
      run = true;
    } else {
      waiting = true;
    }
  }
  if (run) {
    Run(places.get());
    return;
  }
  // No place free: the task waits for the next one the call gives back.
  {
    absl::MutexLock lock(&places->mu);
    places->waiting.push_back(weak_from_this());
    places->waiting_count.fetch_add(1);
  }
  // A place given back since the look above: GiveBack adds to `free`,
  // then reads the count; this adds to the count, then reads `free`
  // (Wake), all sequentially consistent, so one of the two sees the other.
  Wake(places.get());
}

void HandedTask::Shared::OnWorkerWithPlace() {
  {
    absl::MutexLock lock(&mu);
    if (taken) return;  // the owner took it, and gave the place back
    taken = true;
    holds_place = false;  // this thread's now
  }
  Run(places.get());
}

HandedTask::HandedTask(WorkerPool* pool, std::function<void()> task)
    : shared_(std::make_shared<Shared>()) {
  shared_->task = std::move(task);
  shared_->pool = pool;
  if (call_places != nullptr) {
    shared_->places = call_places->shared_from_this();
    // A call of one thread has no place for it: only its owner runs it.
    if (call_places->helpers == 0) return;
  }
  queued_ = pool != nullptr &&
            pool->TrySchedule([shared = shared_] { shared->OnWorker(); });
}

HandedTask::~HandedTask() {
  if (shared_->TakeHere()) {  // it never runs: what it holds goes now
    shared_->task = nullptr;
    return;
  }
  WaitDone();
}

void HandedTask::WaitDone() {
  // Only waiting: this thread's place is its call's meanwhile (the task's
  // own splits may take it).
  const LendPlace idle;
  absl::MutexLock lock(&shared_->mu);
  shared_->mu.Await(absl::Condition(&shared_->done));
}

bool HandedTask::StartedWithin(absl::Duration wait) {
  Shared* const s = shared_.get();
  absl::MutexLock lock(&s->mu);
  if (queued_) {
    s->mu.AwaitWithTimeout(absl::Condition(
                               +[](Shared* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                    t->mu) { return t->taken || t->waiting; },
                               s),
                           wait);
  }
  return s->taken;
}

bool HandedTask::Waiting() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->waiting && !shared_->taken;
}

bool HandedTask::Running() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->taken && !shared_->done;
}

bool HandedTask::RunHereIfNotStarted() {
  if (!shared_->TakeHere()) return false;
  shared_->Run(nullptr);
  return true;
}

void HandedTask::Join() {
  if (!RunHereIfNotStarted()) WaitDone();
}

}  // namespace memplan::base
