#include "planner/portfolio.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/parallel.h"
#include "planner/verifier.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

// Problems with fewer buffers run every strategy on the calling thread.
constexpr size_t kInlineBelow = 2000;

// How long a caller with no member of its own waits for the workers to
// start theirs before it runs those not started: a woken worker takes
// microseconds to a few milliseconds on a loaded machine; one busy with
// another call's long task, seconds.
constexpr absl::Duration kWorkerWakeUp = absl::Milliseconds(5);
// How often a caller waiting for a member to start looks again whether
// any of its members still runs.
constexpr absl::Duration kMemberPoll = absl::Milliseconds(1);

// Verifies the plans from smallest arena up (ties in listed order) and
// returns the first that passes: usually one verification in all. The
// verification stops when `cancel` (may be null) does.
absl::StatusOr<PortfolioResult> FirstVerified(
    const Problem& problem, const std::vector<std::string>& strategies,
    std::vector<absl::StatusOr<Solution>>& results, const SolveContext* ctx) {
  const base::CancelToken* cancel = ctx == nullptr ? nullptr : ctx->cancel;
  // By time windows on the workers where the compressed time is at hand.
  const auto verify = [&](const Solution& solution) {
    if (ctx == nullptr || ctx->time == nullptr) {
      return Verify(problem, solution, cancel);
    }
    return Verify(problem, solution, cancel, *ctx->time, ctx->parallel);
  };
  std::vector<int> order;
  absl::Status first_error;
  for (int i = 0; i < static_cast<int>(results.size()); ++i) {
    if (results[i].ok()) {
      order.push_back(i);
    } else if (first_error.ok()) {
      first_error = results[i].status();
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return results[x]->arena_size < results[y]->arena_size;
  });
  for (int i : order) {
    if (ctx != nullptr && ctx->race != nullptr &&
        ctx->race->Beaten(results[i]->arena_size)) {
      // The smallest plan loses to the one raced beside: verifying it
      // would only delay the call (S_1's heuristics on 16 workers: 5 ms).
      PortfolioResult unverified{*std::move(results[i]), strategies[i]};
      unverified.verified = false;
      return unverified;
    }
    const absl::Time start = absl::Now();
    absl::Status s = verify(*results[i]);
    if (absl::IsDeadlineExceeded(s)) return s;
    if (s.ok()) {
      return PortfolioResult{*std::move(results[i]), strategies[i],
                             absl::ToInt64Microseconds(absl::Now() - start)};
    }
    first_error = absl::InternalError(
        absl::StrCat("strategy ", strategies[i],
                     " produced an invalid plan: ", s.message()));
  }
  return first_error.ok() ? absl::InvalidArgumentError("no strategy given")
                          : first_error;
}

}  // namespace

absl::StatusOr<PortfolioResult> RunPortfolio(
    const Problem& problem, const std::vector<std::string>& strategies,
    const SolveContext& ctx, base::WorkerPool* pool) {
  return RunPortfolio(problem, strategies,
                      std::vector<const SolveContext*>(strategies.size(), &ctx),
                      pool);
}

absl::StatusOr<PortfolioResult> RunPortfolio(
    const Problem& problem, const std::vector<std::string>& strategies,
    const std::vector<const SolveContext*>& contexts, base::WorkerPool* pool,
    Bytes lower_bound, const SolveContext* verify) {
  assert(contexts.size() == strategies.size());
  std::vector<absl::StatusOr<Solution>> results(
      strategies.size(), absl::UnknownError("strategy did not run"));
  // Small problems run inline: handing them to other threads costs more
  // than it saves, and the caller is one of many concurrent requests.
  if (problem.buffers.size() < kInlineBelow) pool = nullptr;
  // The first strategy (in list order) whose plan reached lower_bound.
  std::atomic<int> first_at_bound{std::numeric_limits<int>::max()};
  std::atomic<int> skipped{0};
  // Each member's own token, a child of its context's: cancelled once a
  // member listed before it reaches the bound. A member not yet started
  // is skipped, and one already running stops too: otherwise, with a
  // thread for every member, they all ran to the time budget where one
  // or two threads skipped them, and the call's time and time_limited
  // depended on the thread count.
  std::vector<std::unique_ptr<base::CancelToken>> cut(strategies.size());
  std::vector<SolveContext> cut_contexts;
  if (lower_bound > 0) {
    cut_contexts.reserve(strategies.size());
    for (size_t i = 0; i < strategies.size(); ++i) {
      const base::CancelToken* parent = contexts[i]->cancel;
      cut[i] = std::make_unique<base::CancelToken>(
          parent,
          parent != nullptr ? parent->deadline() : absl::InfiniteFuture());
      cut_contexts.push_back(*contexts[i]);
      cut_contexts.back().cancel = cut[i].get();
    }
  }
  const auto skip = [&](size_t i) {
    results[i] = absl::CancelledError(
        "skipped: a strategy listed before it reached the lower bound");
    skipped.fetch_add(1);
  };
  const auto run = [&](size_t i) {
    const int at = static_cast<int>(i);
    if (first_at_bound.load(std::memory_order_acquire) < at) return skip(i);
    absl::StatusOr<std::unique_ptr<OffsetStrategy>> strategy =
        MakeStrategy(strategies[i]);
    results[i] = strategy.ok() ? (*strategy)->Solve(
                                     problem, lower_bound > 0 ? cut_contexts[i]
                                                              : *contexts[i])
                               : strategy.status();
    const bool stopped_for_another =
        first_at_bound.load(std::memory_order_acquire) < at &&
        !(contexts[i]->cancel != nullptr && contexts[i]->cancel->Cancelled());
    if (stopped_for_another && !results[i].ok()) return skip(i);
    if (lower_bound > 0 && results[i].ok() &&
        results[i]->arena_size <= lower_bound) {
      int seen = first_at_bound.load(std::memory_order_relaxed);
      while (at < seen && !first_at_bound.compare_exchange_weak(
                              seen, at, std::memory_order_acq_rel)) {
      }
      for (size_t j = i + 1; j < cut.size(); ++j) cut[j]->Cancel();
    }
  };
  // On lists cut into time windows (those whose stages split over the
  // workers), the calling thread runs the first strategy itself and the
  // others go to the workers: it would only wait otherwise, and its large
  // arrays then come from its own malloc arena, whose freed memory the
  // next stages reuse (a worker's arena hands whole freed heaps back, to be
  // faulted in again: the order of a million buffers took 100-160 ms
  // instead of 25 in half the runs on 2 workers). Smaller lists stay on
  // the workers: with the caller taking one, the traces planned 10-20%
  // slower on 4 workers of this machine kind (BENCHMARKS.md, session 10).
  // What the pool cannot take, or no worker starts, runs on the caller in
  // list order, as all run without a pool (a strategy at the bound skips
  // those after it).
  const bool caller_first =
      pool != nullptr &&
      problem.buffers.size() >= 2 * static_cast<size_t>(kBuffersPerWindow);
  std::vector<size_t> here;
  std::deque<base::HandedTask> handed;
  if (caller_first && !strategies.empty()) here.push_back(0);
  for (size_t i = caller_first ? 1 : 0; i < strategies.size(); ++i) {
    if (pool == nullptr) {
      here.push_back(i);
    } else {
      handed.emplace_back(pool, [&run, i] { run(i); });
    }
  }
  for (size_t i : here) run(i);
  // A caller with no member of its own only waits for them: its place of
  // the request's threads goes to a member meanwhile (which then runs on a
  // worker of its own: a member run here would share the caller's malloc
  // arena with one on a worker; with two arenas bert_base's plan was 13%
  // slower on 2 workers).
  std::optional<base::LendPlace> idle;
  if (here.empty()) idle.emplace();
  // Then a member no worker has started runs here, in list order: at once
  // where a worker found every place of the request's threads at work
  // (base::HandedTask::Waiting), else once no member of this call runs on
  // a worker (the pool's threads busy with other calls' work, or its queue
  // full: none will free one for it soon, and the caller is then this
  // call's one thread at work). The call waits for its own members, never
  // for a busy pool. Where the caller had none, the workers get a moment
  // to start theirs.
  const absl::Time wake_by =
      absl::Now() + (here.empty() ? kWorkerWakeUp : absl::ZeroDuration());
  const auto members_running = [&handed] {
    return std::any_of(handed.begin(), handed.end(),
                       [](const base::HandedTask& m) { return m.Running(); });
  };
  for (base::HandedTask& member : handed) {
    while (
        !member.StartedWithin(std::max(wake_by - absl::Now(), kMemberPoll))) {
      // A member waiting for a place of the request's threads (all at
      // work): the caller, one of them, runs it rather than wait (having
      // taken back the place it lent, once one is free).
      if (member.Waiting() || (absl::Now() >= wake_by && !members_running())) {
        idle.reset();  // at work again
        member.RunHereIfNotStarted();
        break;
      }
    }
  }
  for (base::HandedTask& member : handed) member.Join();
  idle.reset();
  // By default the first strategy's context: one the request needs, its
  // token the call's.
  if (verify == nullptr && !contexts.empty()) verify = contexts[0];
  absl::StatusOr<PortfolioResult> won =
      FirstVerified(problem, strategies, results, verify);
  if (!won.ok() && absl::IsInternal(won.status()) && skipped.load() > 0) {
    // A plan at the bound failed verification (a bug somewhere): the
    // skipped strategies may have valid ones, so all of them run.
    return RunPortfolio(problem, strategies, contexts, pool, 0, verify);
  }
  if (won.ok()) won->skipped = skipped.load();
  return won;
}

}  // namespace memplan::planner
