#include "planner/strategy.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/exact/exact_solver.h"
#include "planner/greedy.h"
#include "planner/hill_climb.h"
#include "planner/peak_window.h"
#include "planner/skyline.h"
#include "planner/sweep.h"

namespace memplan::planner {
namespace {

// How a request may use a strategy.
enum class Role {
  kQuick,      // a heuristic "auto" runs even without optimize
  kHeuristic,  // a heuristic "auto" runs with optimize
  kSearch,     // the exact search: after the heuristics, seeded by them
};

// One row of the registry.
struct Entry {
  std::string_view name;  // reported in responses and metrics
  Role role;              // what "auto" does with it
  GreedyOrder order;      // greedy rows only
  FitPolicy fit;          // greedy rows only
  // Builds the strategy of this row.
  std::unique_ptr<OffsetStrategy> (*make)(const Entry& entry);
};

std::unique_ptr<OffsetStrategy> MakeGreedy(const Entry& e) {
  return std::make_unique<GreedyStrategy>(e.order, e.fit);
}
std::unique_ptr<OffsetStrategy> MakeHillClimb(const Entry&) {
  return std::make_unique<HillClimbStrategy>();
}
std::unique_ptr<OffsetStrategy> MakeSkyline(const Entry& e) {
  return std::make_unique<SkylineStrategy>(
      e.order == GreedyOrder::kArea ? SkylineTies::kArea : SkylineTies::kSize);
}
std::unique_ptr<OffsetStrategy> MakePeakWindow(const Entry&) {
  return std::make_unique<PeakWindowStrategy>();
}
std::unique_ptr<OffsetStrategy> MakeSweep(const Entry&) {
  return std::make_unique<SweepStrategy>();
}
std::unique_ptr<OffsetStrategy> MakeExact(const Entry&) {
  return std::make_unique<ExactSolver>();
}

// Every strategy, in the fixed tie-break order: the first listed wins a
// tie. The hill climb over the best of the greedy orders comes after them
// (it wins only with a strictly smaller arena), the search last.
constexpr GreedyOrder kSize = GreedyOrder::kSize;
constexpr FitPolicy kBest = FitPolicy::kBestFit;
constexpr FitPolicy kFirst = FitPolicy::kFirstFit;
constexpr Entry kRegistry[] = {
    {"best_fit_size", Role::kQuick, kSize, kBest, MakeGreedy},
    {"first_fit_size", Role::kQuick, kSize, kFirst, MakeGreedy},
    {"best_fit_lifetime", Role::kHeuristic, GreedyOrder::kLifetime, kBest,
     MakeGreedy},
    {"first_fit_lifetime", Role::kHeuristic, GreedyOrder::kLifetime, kFirst,
     MakeGreedy},
    {"best_fit_area", Role::kHeuristic, GreedyOrder::kArea, kBest, MakeGreedy},
    {"first_fit_area", Role::kHeuristic, GreedyOrder::kArea, kFirst,
     MakeGreedy},
    {"best_fit_conflicts", Role::kHeuristic, GreedyOrder::kConflicts, kBest,
     MakeGreedy},
    {"first_fit_conflicts", Role::kHeuristic, GreedyOrder::kConflicts, kFirst,
     MakeGreedy},
    {"best_fit_breadth", Role::kHeuristic, GreedyOrder::kBreadth, kBest,
     MakeGreedy},
    {"first_fit_breadth", Role::kHeuristic, GreedyOrder::kBreadth, kFirst,
     MakeGreedy},
    {"skyline_area", Role::kHeuristic, GreedyOrder::kArea, kBest, MakeSkyline},
    {"skyline_size", Role::kHeuristic, kSize, kBest, MakeSkyline},
    {"sweep_best_fit", Role::kHeuristic, kSize, kBest, MakeSweep},
    {"peak_window", Role::kHeuristic, GreedyOrder::kConflicts, kBest,
     MakePeakWindow},
    {"hill_climb", Role::kHeuristic, kSize, kBest, MakeHillClimb},
    {"exact", Role::kSearch, kSize, kBest, MakeExact},
};

constexpr std::string_view kAuto = "auto";
constexpr size_t kMaxEchoedName = 64;  // bytes of a bad name put in errors

// The registry row of `name`, or null.
const Entry* Find(std::string_view name) {
  for (const Entry& e : kRegistry) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// The names of the rows with a role in `roles`, in registry order.
std::vector<std::string> NamesWith(std::initializer_list<Role> roles) {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) {
    if (std::find(roles.begin(), roles.end(), e.role) != roles.end()) {
      names.emplace_back(e.name);
    }
  }
  return names;
}

// The bad name as it may appear in a message, quoted: escaped, and cut so
// that a hostile request cannot make the error as large as itself.
// (abseil's string_view is its own type here, hence the conversions.)
std::string Echo(std::string_view name) {
  const size_t shown = std::min(name.size(), kMaxEchoedName);
  const std::string escaped =
      absl::CHexEscape(absl::string_view(name.data(), shown));
  if (shown == name.size()) return absl::StrCat("'", escaped, "'");
  return absl::StrCat("'", escaped, "...' (", name.size(), " bytes)");
}

}  // namespace

const std::vector<std::string>& HeuristicNames() {
  static const auto* names =
      new std::vector<std::string>(NamesWith({Role::kQuick, Role::kHeuristic}));
  return *names;
}

const std::vector<std::string>& QuickHeuristicNames() {
  // Greedy by size, best and first fit (TFLite's and tflite-micro's): they
  // reach the bound on typical graphs, and two runs keep a Plan RPC of a
  // few hundred tensors well under a millisecond. Above the bound a search
  // within a node cap follows; the rest is --optimize.
  static const auto* names =
      new std::vector<std::string>(NamesWith({Role::kQuick}));
  return *names;
}

const std::vector<std::string>& StrategyNames() {
  static const auto* names = new std::vector<std::string>(
      NamesWith({Role::kQuick, Role::kHeuristic, Role::kSearch}));
  return *names;
}

absl::Status CheckStrategyName(std::string_view name) {
  if (name.empty() || name == kAuto || Find(name) != nullptr) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown strategy ", Echo(name), "; valid: auto, ",
                   absl::StrJoin(StrategyNames(), ", ")));
}

absl::StatusOr<StrategyChoice> ResolveStrategy(std::string_view name,
                                               bool optimize) {
  if (absl::Status s = CheckStrategyName(name); !s.ok()) return s;
  StrategyChoice choice;
  if (name.empty() || name == kAuto) {
    choice.heuristics = QuickHeuristicNames();
    choice.search = optimize ? SearchWhen::kAlways : SearchWhen::kAboveBound;
    choice.optional.assign(choice.heuristics.size(), optimize);
    choice.optional[0] = false;  // the plan every request gets
    choice.capped = true;
    if (optimize) {
      choice.later = NamesWith({Role::kHeuristic});
      choice.default_steps = true;
    }
    return choice;
  }
  const Entry* entry = Find(name);
  if (entry->role == Role::kSearch) {
    choice.heuristics = QuickHeuristicNames();  // the search's seeds
    choice.search = SearchWhen::kAlways;
    choice.capped = true;
    choice.default_steps = true;
  } else {
    choice.heuristics = {std::string(name)};
  }
  choice.optional.assign(choice.heuristics.size(), false);
  return choice;
}

absl::StatusOr<std::unique_ptr<OffsetStrategy>> MakeStrategy(
    std::string_view name) {
  if (const Entry* entry = Find(name)) return entry->make(*entry);
  if (absl::Status s = CheckStrategyName(name); !s.ok()) return s;
  return absl::InvalidArgumentError(
      "strategy 'auto' is a choice of strategies (ResolveStrategy), not one");
}

std::string_view GreedyStrategyName(GreedyOrder order, FitPolicy fit) {
  for (const Entry& e : kRegistry) {
    if (e.make == MakeGreedy && e.order == order && e.fit == fit) {
      return e.name;
    }
  }
  return "greedy";  // unreachable: every order and fit has a row
}

}  // namespace memplan::planner
