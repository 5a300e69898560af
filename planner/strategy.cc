#include "planner/strategy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/exact_solver.h"
#include "planner/greedy.h"
#include "planner/hill_climb.h"

namespace memplan::planner {
namespace {

struct GreedyKind {
  const char* name;
  GreedyOrder order;
  FitPolicy fit;
};

// The heuristics in the fixed tie-break order: the first listed wins a tie.
constexpr GreedyKind kGreedy[] = {
    {"best_fit_size", GreedyOrder::kSize, FitPolicy::kBestFit},
    {"first_fit_size", GreedyOrder::kSize, FitPolicy::kFirstFit},
    {"best_fit_lifetime", GreedyOrder::kLifetime, FitPolicy::kBestFit},
    {"first_fit_lifetime", GreedyOrder::kLifetime, FitPolicy::kFirstFit},
    {"best_fit_area", GreedyOrder::kArea, FitPolicy::kBestFit},
    {"first_fit_area", GreedyOrder::kArea, FitPolicy::kFirstFit},
    {"best_fit_conflicts", GreedyOrder::kConflicts, FitPolicy::kBestFit},
    {"first_fit_conflicts", GreedyOrder::kConflicts, FitPolicy::kFirstFit},
    {"best_fit_breadth", GreedyOrder::kBreadth, FitPolicy::kBestFit},
    {"first_fit_breadth", GreedyOrder::kBreadth, FitPolicy::kFirstFit},
};

// The hill climb over the best of these orders comes last: it wins only
// with a strictly smaller arena.
constexpr char kHillClimb[] = "hill_climb";

}  // namespace

const std::vector<std::string>& HeuristicNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const GreedyKind& k : kGreedy) v->push_back(k.name);
    v->push_back(kHillClimb);
    return v;
  }();
  return *names;
}

const std::vector<std::string>& QuickHeuristicNames() {
  // Greedy by size, best and first fit (TFLite's and tflite-micro's): they
  // reach the bound on typical graphs, and two runs keep a Plan RPC of a
  // few hundred tensors well under a millisecond. The rest is --optimize.
  static const auto* names =
      new std::vector<std::string>{kGreedy[0].name, kGreedy[1].name};
  return *names;
}

const std::vector<std::string>& StrategyNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>(HeuristicNames());
    v->push_back("exact");
    return v;
  }();
  return *names;
}

absl::StatusOr<std::unique_ptr<OffsetStrategy>> MakeStrategy(
    std::string_view name) {
  for (const GreedyKind& k : kGreedy) {
    if (name == k.name) return std::make_unique<GreedyStrategy>(k.order, k.fit);
  }
  if (name == kHillClimb) return std::make_unique<HillClimbStrategy>();
  if (name == "exact") return std::make_unique<ExactSolver>();
  return absl::NotFoundError(
      absl::StrCat("unknown strategy '", std::string(name), "'; known: auto, ",
                   absl::StrJoin(StrategyNames(), ", ")));
}

}  // namespace memplan::planner
