#include "planner/time_index.h"

namespace memplan::planner {

Step ChooseBlockLength(const Problem& problem) {
  if (problem.buffers.empty()) return 1;
  long double total = 0;
  for (const Buffer& b : problem.buffers) total += b.end - b.start;
  const long double mean = total / problem.buffers.size();
  return std::max<Step>(1, static_cast<Step>(mean + 0.5));
}

}  // namespace memplan::planner
