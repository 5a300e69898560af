#include "allocators/aligned_allocator.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "allocators/testing/stress.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

TEST(AlignedMallocTest, AlignsAndStoresOriginJustBefore) {
  for (size_t alignment = 1; alignment <= 4096; alignment *= 2) {
    for (size_t size : {size_t{1}, size_t{63}, size_t{1000}}) {
      void* p = AlignedMalloc(size, alignment);
      ASSERT_NE(p, nullptr);
      const auto addr = reinterpret_cast<uintptr_t>(p);
      EXPECT_EQ(addr % std::max(alignment, sizeof(void*)), 0u);
      // The origin malloc returned sits in the word before, at most one
      // alignment plus one word below.
      void* origin = *(static_cast<void**>(p) - 1);
      const auto o = reinterpret_cast<uintptr_t>(origin);
      EXPECT_LT(o, addr);
      EXPECT_LE(addr - o, std::max(alignment, sizeof(void*)) + sizeof(void*));
      // The block and its over-read padding are usable.
      std::memset(p, 0x5A, size + kOverreadBytes);
      AlignedFree(p);
    }
  }
}

TEST(AlignedMallocTest, RejectsBadRequests) {
  EXPECT_EQ(AlignedMalloc(16, 3), nullptr);
  EXPECT_EQ(AlignedMalloc(std::numeric_limits<size_t>::max() - 8, 64), nullptr);
  AlignedFree(nullptr);  // a no-op
}

TEST(AlignedAllocatorTest, StatsAndDefaultAlignment) {
  AlignedAllocator a;
  void* p = a.Allocate(100, 1);
  void* q = a.Allocate(300, 128);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 128, 0u);
  // Each block counts what malloc was asked for: the block, the word for
  // malloc's pointer, the alignment (at least 64) and the over-read. They
  // were not counted, and a replay's peak in use fell below the bound of
  // its own trace.
  const int64_t p_bytes = 100 + 8 + 64 + 64, q_bytes = 300 + 8 + 128 + 64;
  EXPECT_EQ(AlignedMallocBytes(100, 64), static_cast<size_t>(p_bytes));
  AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.bytes_in_use, p_bytes + q_bytes);
  EXPECT_EQ(s.bytes_reserved, p_bytes + q_bytes);
  EXPECT_EQ(s.largest_alloc_size, q_bytes);
  ASSERT_TRUE(a.Deallocate(q).ok());
  s = a.GetStats();
  EXPECT_EQ(s.bytes_in_use, p_bytes);
  EXPECT_EQ(s.peak_bytes_in_use, p_bytes + q_bytes);
  EXPECT_EQ(s.fragmentation, 0.0);
  ASSERT_TRUE(a.Deallocate(p).ok());
}

TEST(AlignedAllocatorTest, UnknownPointerAndDoubleFreeAreErrors) {
  AlignedAllocator a;
  void* p = a.Allocate(100, 64);
  EXPECT_EQ(a.Deallocate(static_cast<char*>(p) + 64).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(a.Deallocate(p).ok());
  EXPECT_EQ(a.Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Allocate(8, 12), nullptr);
  EXPECT_EQ(a.GetStats().num_alloc_failures, 1);
}

TEST(AlignedAllocatorTest, MultiThreadedStress) {
  AlignedAllocator a;
  testing::RunStress(a, 8192);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
}

}  // namespace
}  // namespace memplan::allocators
