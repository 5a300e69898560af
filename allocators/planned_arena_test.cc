#include "allocators/planned_arena.h"

#include <cstdint>
#include <utility>

#include "allocators/bfc_allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

using ::testing::HasSubstr;

// A BFC allocator with a fixed limit.
BfcAllocator::Options Limit(size_t bytes) {
  BfcAllocator::Options options;
  options.memory_limit = bytes;
  return options;
}

TEST(PlannedArenaTest, TensorsAtBasePlusOffset) {
  BfcAllocator bfc(Limit(1 << 20));
  {
    absl::StatusOr<PlannedArena> arena =
        PlannedArena::Create(bfc, 4096, {0, 1024, 0, 4000});
    ASSERT_TRUE(arena.ok()) << arena.status();
    char* base = static_cast<char*>(arena->base());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % PlannedArena::kArenaAlignment,
              0u);
    EXPECT_EQ(arena->Get(1), base + 1024);
    EXPECT_EQ(arena->Get(2), base);
    EXPECT_EQ(arena->Get(3), base + 4000);
    EXPECT_EQ(arena->AtOffset(512), base + 512);
    EXPECT_EQ(arena->num_tensors(), 4);
    EXPECT_EQ(arena->size(), 4096);
    EXPECT_EQ(bfc.GetStats().bytes_in_use, 4096);
  }
  EXPECT_EQ(bfc.GetStats().bytes_in_use, 0);  // returned on destruction
}

TEST(PlannedArenaTest, ResourceExhaustedWhenBfcCannotGiveTheBlock) {
  BfcAllocator bfc(Limit(1 << 20));
  absl::StatusOr<PlannedArena> arena = PlannedArena::Create(bfc, 2 << 20);
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(arena.status().message(), HasSubstr("bfc"));
}

TEST(PlannedArenaTest, OffsetOutsideArenaNamesTheTensor) {
  BfcAllocator bfc(Limit(1 << 20));
  absl::StatusOr<PlannedArena> arena =
      PlannedArena::Create(bfc, 1024, {0, 1024});
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(arena.status().message(), HasSubstr("tensor 1"));
  EXPECT_EQ(bfc.GetStats().num_allocs, 0);
}

TEST(PlannedArenaTest, MoveTransfersOwnershipOnce) {
  BfcAllocator bfc(Limit(1 << 20));
  {
    absl::StatusOr<PlannedArena> a = PlannedArena::Create(bfc, 1000, {0});
    ASSERT_TRUE(a.ok());
    PlannedArena b = std::move(*a);
    EXPECT_EQ(a->base(), nullptr);
    EXPECT_NE(b.base(), nullptr);
    absl::StatusOr<PlannedArena> c = PlannedArena::Create(bfc, 2000, {0});
    ASSERT_TRUE(c.ok());
    b = std::move(*c);  // frees b's old block
    EXPECT_EQ(bfc.GetStats().bytes_in_use, 2048);
  }
  EXPECT_EQ(bfc.GetStats().bytes_in_use, 0);
}

TEST(PlannedArenaTest, EmptyArenaTakesNothing) {
  BfcAllocator bfc(Limit(1 << 20));
  absl::StatusOr<PlannedArena> arena = PlannedArena::Create(bfc, 0);
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ(arena->base(), nullptr);
  EXPECT_EQ(bfc.GetStats().num_allocs, 0);
  EXPECT_EQ(PlannedArena::Create(bfc, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memplan::allocators
