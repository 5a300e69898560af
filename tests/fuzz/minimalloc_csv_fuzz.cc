// libFuzzer target: any text as MiniMalloc CSV; what parses must write back
// to the same buffers, and plan to a valid arena.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "formats/minimalloc_csv.h"
#include "planner/planner.h"
#include "planner/verifier.h"
#include "tests/fuzz/fuzz_checks.h"

namespace {

bool SameBuffers(const memplan::planner::Problem& a,
                 const memplan::planner::Problem& b) {
  if (a.buffers.size() != b.buffers.size()) return false;
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const auto &x = a.buffers[i], &y = b.buffers[i];
    if (x.name != y.name || x.start != y.start || x.end != y.end ||
        x.size != y.size || x.alignment != y.alignment) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memplan;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<formats::MinimallocCsv> csv =
      formats::ReadMinimallocCsv(text, "fuzz.csv");
  if (!csv.ok()) return 0;
  // Names holding commas or line breaks cannot round-trip; others must.
  bool plain = true;
  for (const auto& b : csv->problem.buffers) {
    plain = plain && b.name.find_first_of(",\n\r") == std::string::npos;
  }
  if (plain) {
    absl::StatusOr<formats::MinimallocCsv> again = formats::ReadMinimallocCsv(
        formats::WriteMinimallocCsv(csv->problem, nullptr, true), "again.csv");
    if (!again.ok() || !SameBuffers(csv->problem, again->problem)) std::abort();
  }
  if (csv->problem.buffers.size() > 2000) return 0;
  planner::PlanOptions options;
  options.time_budget = absl::Milliseconds(20);
  base::CancelToken cancel(absl::Now() + absl::Seconds(2));
  absl::StatusOr<planner::PlanResult> plan =
      planner::PlanBuffers(csv->problem, options, nullptr, &cancel);
  if (!plan.ok()) return 0;
  if (!planner::VerifyAllPairs(plan->problem, plan->solution).ok())
    std::abort();
  fuzz::CheckPlan(*plan);
  fuzz::CheckOtherPaths(plan->problem);
  return 0;
}
