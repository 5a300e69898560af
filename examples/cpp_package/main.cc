// Plans the eight buffers of "Efficient Memory Management for Deep Neural
// Net Inference" (Pisarchyk and Lee) with memplan's planner library and
// prints each offset, the arena and the lower bound: 124 bytes, optimal.
#include <cstdio>

#include "planner/planner.h"

int main() {
  using memplan::planner::Buffer;
  memplan::planner::Problem problem;
  const struct {
    const char* name;
    long long start, end, size;
  } kBuffers[] = {{"t0", 0, 2, 32}, {"t1", 1, 5, 28}, {"t2", 2, 6, 36},
                  {"t3", 3, 6, 16}, {"t4", 4, 6, 8},  {"t5", 5, 8, 64},
                  {"t6", 6, 9, 10}, {"t7", 7, 9, 40}};  // [start, end)
  for (const auto& b : kBuffers) {
    Buffer buffer;
    buffer.name = b.name;
    buffer.start = b.start;
    buffer.end = b.end;
    buffer.size = b.size;
    problem.buffers.push_back(buffer);
  }
  memplan::planner::PlanOptions options;
  options.alignment = 1;
  absl::StatusOr<memplan::planner::PlanResult> plan =
      memplan::planner::PlanBuffers(problem, options, nullptr, nullptr);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    std::printf("%s at %lld\n", problem.buffers[i].name.c_str(),
                static_cast<long long>(plan->solution.offsets[i]));
  }
  std::printf("arena %lld lower bound %lld\n",
              static_cast<long long>(plan->solution.arena_size),
              static_cast<long long>(plan->lower_bound));
  return 0;
}
