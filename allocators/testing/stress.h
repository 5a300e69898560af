// A multi-threaded stress run shared by the allocator tests: `threads`
// threads each do `ops` random allocations and frees (at most 32 live
// blocks each); every block carries its owner's mark at both ends, checked
// before it is freed, which a shared or overlapping block would break.
#ifndef MEMPLAN_ALLOCATORS_TESTING_STRESS_H_
#define MEMPLAN_ALLOCATORS_TESTING_STRESS_H_

#include <cstddef>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "allocators/allocator.h"
#include "gtest/gtest.h"

namespace memplan::allocators::testing {

inline void RunStress(Allocator& a, size_t max_size, int threads = 4,
                      int ops = 2000) {
  auto worker = [&a, max_size, ops](int thread) {
    std::mt19937 rng(thread);
    const char mark = static_cast<char>(thread + 1);
    std::vector<std::pair<char*, size_t>> live;
    for (int op = 0; op < ops; ++op) {
      if (live.size() < 32 && (live.empty() || rng() % 2 == 0)) {
        const size_t size = 1 + rng() % max_size;
        char* p = static_cast<char*>(a.Allocate(size, 64));
        ASSERT_NE(p, nullptr);
        p[0] = p[size - 1] = mark;
        live.emplace_back(p, size);
      } else {
        const size_t i = rng() % live.size();
        auto [p, size] = live[i];
        ASSERT_EQ(p[0], mark);
        ASSERT_EQ(p[size - 1], mark);
        ASSERT_TRUE(a.Deallocate(p).ok());
        live.erase(live.begin() + static_cast<ptrdiff_t>(i));
      }
    }
    for (auto [p, size] : live) ASSERT_TRUE(a.Deallocate(p).ok());
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (std::thread& t : pool) t.join();
}

}  // namespace memplan::allocators::testing

#endif  // MEMPLAN_ALLOCATORS_TESTING_STRESS_H_
