#include "tests/fuzz/fuzz_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "planner/exact/exact_solver.h"
#include "planner/sections.h"
#include "planner/sweep.h"
#include "planner/verifier.h"

namespace memplan::fuzz {
namespace {

[[noreturn]] void Fail(const char* what, const planner::TensorPlacement& a,
                       const planner::TensorPlacement* b) {
  std::fprintf(stderr, "invalid plan: %s: '%s'%s%s\n", what, a.name.c_str(),
               b ? " and " : "", b ? b->name.c_str() : "");
  std::abort();
}

}  // namespace

engine::Limits SmallLimits() {
  engine::Limits limits;
  limits.max_tensors = 2000;
  limits.max_ops = 2000;
  limits.max_tensor_refs = 20000;
  limits.max_model_bytes = 1 << 20;
  limits.budgets.default_budget = absl::Milliseconds(20);
  limits.budgets.max_budget = absl::Milliseconds(50);
  return limits;
}

void CheckPlan(const planner::PlanResult& r) {
  const auto& t = r.tensors;
  const auto space = [&](int buffer) {
    return r.memory_space_of.empty() ? 0 : r.memory_space_of[buffer];
  };
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].buffer < 0) continue;
    const planner::Buffer& b = r.problem.buffers[t[i].buffer];
    const planner::Offset o = r.OffsetOf(i);
    if (o < 0 || o % b.alignment != 0)
      Fail("misaligned or negative", t[i], nullptr);
    const planner::Bytes arena =
        r.memory_spaces.empty()
            ? r.solution.arena_size
            : r.memory_spaces[space(t[i].buffer)].arena_size;
    if (o + t[i].size > arena) Fail("past the arena", t[i], nullptr);
    for (size_t j = i + 1; j < t.size(); ++j) {
      if (t[j].buffer < 0 || space(t[j].buffer) != space(t[i].buffer)) continue;
      if (t[i].in_place_of == t[j].name || t[j].in_place_of == t[i].name)
        continue;
      const bool same_time = t[i].start < t[j].end && t[j].start < t[i].end;
      const planner::Offset p = r.OffsetOf(j);
      const bool same_bytes = o < p + t[j].size && p < o + t[i].size;
      if (same_time && same_bytes) Fail("overlap", t[i], &t[j]);
    }
  }
}

namespace {

// The O(n log n) fallbacks (sweep.h) on the same buffers, which the plan
// itself reaches only past its work cap (millions of units): the offsets
// checked pair by pair, every object shared only by buffers live apart.
void CheckSweeps(const planner::Problem& problem) {
  absl::StatusOr<planner::Solution> offsets =
      planner::SweepOffsets(problem, nullptr);
  if (offsets.ok()) {
    if (absl::Status s = planner::VerifyAllPairs(problem, *offsets); !s.ok()) {
      std::fprintf(stderr, "invalid sweep plan: %s\n",
                   std::string(s.message()).c_str());
      std::abort();
    }
  } else if (!absl::IsInvalidArgument(offsets.status())) {
    std::fprintf(stderr, "sweep failed: %s\n",
                 offsets.status().ToString().c_str());
    std::abort();
  }
  absl::StatusOr<planner::SharedObjects> objects =
      planner::SweepSharedObjects(problem, nullptr);
  if (!objects.ok()) std::abort();
  const auto& b = problem.buffers;
  for (size_t i = 0; i < b.size(); ++i) {
    const int o = objects->object_of[i];
    if (o < 0 || o >= static_cast<int>(objects->size.size()) ||
        objects->size[o] < b[i].size) {
      std::fprintf(stderr, "buffer '%s' in a missing or small object\n",
                   b[i].name.c_str());
      std::abort();
    }
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (objects->object_of[j] == o && planner::LifetimesOverlap(b[i], b[j])) {
        std::fprintf(stderr, "'%s' and '%s' share an object while live\n",
                     b[i].name.c_str(), b[j].name.c_str());
        std::abort();
      }
    }
  }
}

// The exact search at zero slack, where it remembers failed states: the
// buffers (a few, unpinned) topped up to the highest live total by a filler
// in every stretch of time below it, so every stretch is exactly full. With
// and without remembered failures the search must reach the same verdict
// (when both finish), the remembering one in no more nodes.
void CheckZeroSlackSearch(const planner::Problem& problem) {
  const auto& b = problem.buffers;
  if (b.empty() || b.size() > 16) return;
  for (const planner::Buffer& buffer : b) {
    if (buffer.fixed_offset.has_value()) return;
  }
  const planner::Sections time = planner::SweepSections(problem);
  const std::vector<planner::Bytes> live =
      planner::SectionTotals(time, [&](int i) { return b[i].size; });
  const planner::Bytes height = *std::max_element(live.begin(), live.end());
  planner::Problem full = problem;
  full.capacity.reset();
  for (int k = 0; k < time.size(); ++k) {
    if (live[k] == height) continue;
    planner::Buffer filler;
    filler.name = "filler@" + std::to_string(time.begin[k]);
    filler.start = time.begin[k];
    filler.end = time.end[k];
    filler.size = height - live[k];
    full.buffers.push_back(filler);
  }
  planner::ExactOptions options;
  options.mode = planner::ExactMode::kCapacity;
  options.capacity = height;
  options.max_nodes = 2'000;
  absl::StatusOr<planner::ExactResult> with =
      planner::SolveExact(full, options, {});
  options.remember_failures = false;
  absl::StatusOr<planner::ExactResult> without =
      planner::SolveExact(full, options, {});
  if (!with.ok() || !without.ok()) {
    if (with.ok() != without.ok()) std::abort();
    return;
  }
  const bool both_finished =
      with->capacity_status != planner::CapacityStatus::kUnknown &&
      without->capacity_status != planner::CapacityStatus::kUnknown;
  if ((both_finished && with->capacity_status != without->capacity_status) ||
      with->nodes > without->nodes) {
    std::fprintf(stderr,
                 "zero-slack search: remembering failures changed the "
                 "verdict or cost nodes (%d/%lld against %d/%lld)\n",
                 static_cast<int>(with->capacity_status),
                 static_cast<long long>(with->nodes),
                 static_cast<int>(without->capacity_status),
                 static_cast<long long>(without->nodes));
    std::abort();
  }
}

}  // namespace

void CheckOtherPaths(const planner::Problem& problem) {
  CheckSweeps(problem);
  CheckZeroSlackSearch(problem);
}

void PlanAndCheck(const v1::PlanRequest& request) {
  base::CancelToken cancel(absl::Now() + absl::Seconds(2));
  absl::StatusOr<engine::PlanOutcome> outcome =
      engine::Plan(request, SmallLimits(), nullptr, &cancel);
  if (!outcome.ok()) return;
  CheckPlan(outcome->result);
  if (outcome->result.memory_spaces.empty()) {
    CheckOtherPaths(outcome->result.problem);
  }
}

}  // namespace memplan::fuzz
