#include "allocators/allocator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(AllocatorTest, NamesAndFactory) {
  EXPECT_THAT(AllocatorNames(),
              ElementsAre("bfc", "pool", "pool_indexed", "buffer", "aligned",
                          "recurse", "mmap"));
  for (const std::string& name : AllocatorNames()) {
    absl::StatusOr<std::unique_ptr<Allocator>> a = MakeAllocator(name);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ((*a)->Name(), name);
  }
  absl::StatusOr<std::unique_ptr<Allocator>> bad = MakeAllocator("tcmalloc");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("tcmalloc"));
}

TEST(AllocatorTest, Fragmentation) {
  EXPECT_EQ(Fragmentation(0, 0), 0.0);
  EXPECT_EQ(Fragmentation(100, 100), 0.0);
  EXPECT_DOUBLE_EQ(Fragmentation(100, 25), 0.75);
}

TEST(AllocatorTest, StatsDebugStringNamesEveryField) {
  AllocatorStats s;
  s.bytes_in_use = 1234;
  const std::string text = s.DebugString();
  EXPECT_THAT(text, HasSubstr("bytes_in_use: 1234"));
  EXPECT_THAT(text, HasSubstr("fragmentation"));
  EXPECT_THAT(text, HasSubstr("largest_free_block_bytes"));
}

// The contract every allocator keeps, run on each factory name.
class EveryAllocatorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Allocator>> a = MakeAllocator(GetParam());
    ASSERT_TRUE(a.ok());
    allocator_ = std::move(*a);
  }
  std::unique_ptr<Allocator> allocator_;
};

TEST_P(EveryAllocatorTest, ZeroBytesIsNullAndUncounted) {
  EXPECT_EQ(allocator_->Allocate(0, 64), nullptr);
  const AllocatorStats s = allocator_->GetStats();
  EXPECT_EQ(s.num_allocs, 0);
  EXPECT_EQ(s.num_alloc_failures, 0);
}

TEST_P(EveryAllocatorTest, UnknownPointerIsInvalidArgument) {
  int on_stack = 0;
  EXPECT_EQ(allocator_->Deallocate(&on_stack).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(allocator_->Deallocate(nullptr).ok());
}

TEST_P(EveryAllocatorTest, NonPowerOfTwoAlignmentFails) {
  EXPECT_EQ(allocator_->Allocate(64, 24), nullptr);
  EXPECT_EQ(allocator_->GetStats().num_alloc_failures, 1);
}

// Random alloc/free: blocks are aligned, live blocks never overlap, and
// the counters come back to zero in use.
TEST_P(EveryAllocatorTest, RandomOpsNeverOverlap) {
  std::mt19937 rng(42);
  std::map<char*, size_t> live;  // pointer -> requested size
  for (int op = 0; op < 2000; ++op) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t size = 1 + rng() % 20000;
      char* p = static_cast<char*>(allocator_->Allocate(size, 64));
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + size, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, p);
      }
      live.emplace(p, size);
    } else {
      auto it =
          std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      ASSERT_TRUE(allocator_->Deallocate(it->first).ok());
      live.erase(it);
    }
  }
  for (auto& [p, size] : live) ASSERT_TRUE(allocator_->Deallocate(p).ok());
  const AllocatorStats s = allocator_->GetStats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_GT(s.peak_bytes_in_use, 0);
  EXPECT_GE(s.peak_bytes_reserved, s.peak_bytes_in_use);
  EXPECT_GE(s.fragmentation, 0.0);
  EXPECT_LE(s.fragmentation, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Names, EveryAllocatorTest,
                         ::testing::ValuesIn(AllocatorNames()));

}  // namespace
}  // namespace memplan::allocators
