#include "planner/time_index.h"

namespace memplan::planner {

int ChooseBlockLength(const Sections& time) {
  if (time.first.empty()) return 1;
  int64_t total = 0;
  for (size_t i = 0; i < time.first.size(); ++i) {
    total += time.last[i] - time.first[i];
  }
  const int64_t n = static_cast<int64_t>(time.first.size());
  return static_cast<int>(std::max<int64_t>(1, (total + n / 2) / n));
}

}  // namespace memplan::planner
