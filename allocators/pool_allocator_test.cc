#include "allocators/pool_allocator.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "allocators/testing/stress.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

// Every test runs on both lookups, locked and unlocked.
struct PoolCase {
  PoolLookup lookup;  // list scan or size index
  bool locked;        // PoolAllocator or UnlockedPoolAllocator
};

class PoolAllocatorTest : public ::testing::TestWithParam<PoolCase> {
 protected:
  // A pool of the case's kind with the given ratio and drop threshold.
  std::unique_ptr<Allocator> Make(uint32_t ratio = 192, size_t drop = 10) {
    PoolOptions options;
    options.lookup = GetParam().lookup;
    options.size_compare_ratio = ratio;
    options.size_drop_threshold = drop;
    if (GetParam().locked) return std::make_unique<PoolAllocator>(options);
    return std::make_unique<UnlockedPoolAllocator>(options);
  }

  // The pool-specific counters of either class.
  static PoolCounters CountersOf(const Allocator& a) {
    if (auto* p = dynamic_cast<const PoolAllocator*>(&a)) return p->Counters();
    return dynamic_cast<const UnlockedPoolAllocator&>(a).Counters();
  }

  // Allocates blocks of the given sizes, then frees them in that order, so
  // they are cached in that order.
  static std::vector<void*> Cache(Allocator& a,
                                  const std::vector<size_t>& sizes) {
    std::vector<void*> ptrs;
    for (size_t s : sizes) ptrs.push_back(a.Allocate(s, 64));
    for (void* p : ptrs) EXPECT_TRUE(a.Deallocate(p).ok());
    return ptrs;
  }
};

TEST_P(PoolAllocatorTest, ReusesBlockWithinRatio) {
  auto a = Make();
  void* p = a->Allocate(1000, 64);
  ASSERT_TRUE(a->Deallocate(p).ok());
  void* q = a->Allocate(800, 64);  // 1000 * 192 / 256 = 750 <= 800
  EXPECT_EQ(q, p);
  EXPECT_EQ(a->GetStats().bytes_in_use, 1000);  // the whole block
  ASSERT_TRUE(a->Deallocate(q).ok());
  void* r = a->Allocate(700, 64);  // 750 > 700: too wasteful
  EXPECT_NE(r, p);
  void* s = a->Allocate(1001, 64);  // larger than the cached block
  EXPECT_NE(s, p);
  const PoolCounters c = CountersOf(*a);
  EXPECT_EQ(c.hits, 1);
  EXPECT_EQ(c.misses, 3);
  ASSERT_TRUE(a->Deallocate(r).ok());
  ASSERT_TRUE(a->Deallocate(s).ok());
}

TEST_P(PoolAllocatorTest, RatioOf256MeansExactSizeOnly) {
  auto a = Make(/*ratio=*/256);
  void* p = a->Allocate(1000, 64);
  ASSERT_TRUE(a->Deallocate(p).ok());
  void* q = a->Allocate(999, 64);
  EXPECT_NE(q, p);
  void* r = a->Allocate(1000, 64);
  EXPECT_EQ(r, p);
  ASSERT_TRUE(a->Deallocate(q).ok());
  ASSERT_TRUE(a->Deallocate(r).ok());
}

// A miss larger than every cached block drops the smallest one.
TEST_P(PoolAllocatorTest, DropsSmallestWhenRequestIsLargerThanAll) {
  auto a = Make(192, /*drop=*/3);
  Cache(*a, {100, 200, 300});
  void* big = a->Allocate(1000, 64);
  const PoolCounters c = CountersOf(*a);
  EXPECT_EQ(c.drops, 1);
  EXPECT_EQ(c.cached_blocks, 2);
  const AllocatorStats s = a->GetStats();
  EXPECT_EQ(s.bytes_reserved, 200 + 300 + 1000);
  EXPECT_EQ(s.largest_free_block_bytes, 300);
  ASSERT_TRUE(a->Deallocate(big).ok());
}

// A miss smaller than every cached block drops the largest one.
TEST_P(PoolAllocatorTest, DropsLargestWhenRequestIsSmallerThanAll) {
  auto a = Make(192, /*drop=*/3);
  Cache(*a, {1000, 3000, 2000});
  void* small = a->Allocate(10, 64);
  const PoolCounters c = CountersOf(*a);
  EXPECT_EQ(c.drops, 1);
  EXPECT_EQ(c.cached_blocks, 2);
  EXPECT_EQ(a->GetStats().largest_free_block_bytes, 2000);
  ASSERT_TRUE(a->Deallocate(small).ok());
}

// No drop when the request is between cached sizes, or below the threshold.
TEST_P(PoolAllocatorTest, NoDropInBetweenOrBelowThreshold) {
  auto a = Make(192, /*drop=*/3);
  Cache(*a, {100, 5000, 3000});
  void* mid = a->Allocate(1000, 64);
  EXPECT_EQ(CountersOf(*a).drops, 0);
  EXPECT_EQ(CountersOf(*a).cached_blocks, 3);
  ASSERT_TRUE(a->Deallocate(mid).ok());

  auto b = Make(192, /*drop=*/10);
  Cache(*b, {100, 200, 300});
  void* big = b->Allocate(1000, 64);
  EXPECT_EQ(CountersOf(*b).drops, 0);
  ASSERT_TRUE(b->Deallocate(big).ok());
}

TEST_P(PoolAllocatorTest, UnknownPointerAndDoubleFreeAreErrors) {
  auto a = Make();
  void* p = a->Allocate(100, 64);
  int on_stack = 0;
  EXPECT_EQ(a->Deallocate(&on_stack).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(a->Deallocate(p).ok());
  EXPECT_EQ(a->Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a->Deallocate(nullptr).ok());
  EXPECT_EQ(CountersOf(*a).cached_blocks, 1);
  EXPECT_EQ(a->GetStats().bytes_in_use, 0);
}

TEST_P(PoolAllocatorTest, ClearFreesCachedBlocksOnly) {
  auto a = Make();
  Cache(*a, {100, 200});
  void* live = a->Allocate(5000, 64);
  if (auto* p = dynamic_cast<PoolAllocator*>(a.get())) {
    p->Clear();
  } else {
    dynamic_cast<UnlockedPoolAllocator*>(a.get())->Clear();
  }
  const AllocatorStats s = a->GetStats();
  EXPECT_EQ(s.bytes_reserved, 5000);
  EXPECT_EQ(s.largest_free_block_bytes, 0);
  EXPECT_EQ(s.fragmentation, 0.0);
  ASSERT_TRUE(a->Deallocate(live).ok());
}

TEST_P(PoolAllocatorTest, HonoursLargeAlignment) {
  auto a = Make();
  void* p = a->Allocate(100, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(a->Allocate(100, 3), nullptr);
  EXPECT_EQ(a->GetStats().num_alloc_failures, 1);
  ASSERT_TRUE(a->Deallocate(p).ok());
}

// The two lookups accept the same blocks but choose differently: the list
// takes the first fitting block in free order, the index the smallest.
TEST_P(PoolAllocatorTest, FirstFitVersusSmallestFit) {
  auto a = Make();
  std::vector<void*> cached = Cache(*a, {1000, 900});
  void* p = a->Allocate(800, 64);
  EXPECT_EQ(p,
            GetParam().lookup == PoolLookup::kListScan ? cached[0] : cached[1]);
  ASSERT_TRUE(a->Deallocate(p).ok());
}

TEST_P(PoolAllocatorTest, Names) {
  auto a = Make();
  const bool indexed = GetParam().lookup == PoolLookup::kSizeIndex;
  std::string expected = indexed ? "pool_indexed" : "pool";
  if (!GetParam().locked) expected += "_unlocked";
  EXPECT_EQ(a->Name(), expected);
}

INSTANTIATE_TEST_SUITE_P(
    Lookups, PoolAllocatorTest,
    ::testing::Values(PoolCase{PoolLookup::kListScan, true},
                      PoolCase{PoolLookup::kSizeIndex, true},
                      PoolCase{PoolLookup::kListScan, false},
                      PoolCase{PoolLookup::kSizeIndex, false}));

// 4 threads x 2000 operations on the locked pool, with marks at both ends
// of every block.
class LockedPoolStressTest : public ::testing::TestWithParam<PoolLookup> {};

TEST_P(LockedPoolStressTest, MultiThreadedStress) {
  PoolOptions options;
  options.lookup = GetParam();
  PoolAllocator a(options);
  testing::RunStress(a, 8192);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
  EXPECT_EQ(a.Counters().live_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Lookups, LockedPoolStressTest,
                         ::testing::Values(PoolLookup::kListScan,
                                           PoolLookup::kSizeIndex));

}  // namespace
}  // namespace memplan::allocators
