#include "allocators/recurse_allocator.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "allocators/bfc_allocator.h"
#include "allocators/buffer_allocator.h"
#include "allocators/testing/replay.h"
#include "allocators/testing/stress.h"
#include "allocators/trace.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Byte distance between two pointers.
ptrdiff_t Diff(const void* a, const void* b) {
  return static_cast<const char*>(a) - static_cast<const char*>(b);
}

// Options taking chunks of at least `bytes` from the parent.
RecurseAllocator::Options MinChunk(size_t bytes) {
  RecurseAllocator::Options options;
  options.min_chunk_bytes = bytes;
  return options;
}

BfcAllocator::Options SmallBfc(size_t limit) {
  BfcAllocator::Options options;
  options.memory_limit = limit;
  return options;
}

// Each block is a chunk of the parent's, counted by both.
TEST(RecurseAllocatorTest, ChunksComeFromTheParent) {
  BufferAllocator parent;
  RecurseAllocator child(parent);
  EXPECT_EQ(child.Name(), "recurse");
  EXPECT_EQ(&child.parent(), &parent);
  void* p = child.Allocate(1000, 64);
  ASSERT_NE(p, nullptr);
  const AllocatorStats s = child.GetStats();
  EXPECT_EQ(s.num_allocs, 1);
  EXPECT_EQ(s.bytes_in_use, 1024);
  EXPECT_EQ(s.bytes_reserved, 1024);
  EXPECT_EQ(child.NumChunks(), 1);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 1024);
  EXPECT_TRUE(child.Deallocate(p).ok());
}

// A freed block stays cached in the child (MNN: chunks go back on release
// only), and comes back for the next request.
TEST(RecurseAllocatorTest, FreedChunksStayUntilReleased) {
  BufferAllocator parent;
  RecurseAllocator child(parent);
  void* p = child.Allocate(4096, 64);
  ASSERT_TRUE(child.Deallocate(p).ok());
  EXPECT_EQ(child.GetStats().bytes_in_use, 0);
  EXPECT_EQ(child.GetStats().bytes_reserved, 4096);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 4096);
  void* again = child.Allocate(4096, 64);
  EXPECT_EQ(again, p);  // reused, the parent was not asked again
  EXPECT_EQ(parent.GetStats().num_allocs, 1);
  ASSERT_TRUE(child.Deallocate(again).ok());
  child.ReleaseFree();
  EXPECT_EQ(child.NumChunks(), 0);
  EXPECT_EQ(child.GetStats().bytes_reserved, 0);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 0);
}

// With a minimum chunk, small blocks are cut from one chunk of the parent
// and merge back into it when all are free.
TEST(RecurseAllocatorTest, SmallBlocksSplitOneChunkAndMergeBack) {
  BufferAllocator parent;
  RecurseAllocator child(parent, MinChunk(4096));
  void* a = child.Allocate(1000, 64);
  void* b = child.Allocate(1000, 64);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  EXPECT_EQ(Diff(b, a), 1024);
  EXPECT_EQ(child.NumChunks(), 1);
  EXPECT_EQ(parent.GetStats().num_allocs, 1);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 4096);
  AllocatorStats s = child.GetStats();
  EXPECT_EQ(s.bytes_in_use, 2048);
  EXPECT_EQ(s.bytes_reserved, 4096);
  EXPECT_EQ(s.largest_free_block_bytes, 2048);
  ASSERT_TRUE(child.Deallocate(a).ok());
  ASSERT_TRUE(child.Deallocate(b).ok());
  EXPECT_EQ(child.NumFreeBlocks(), 1);  // merged into the whole chunk
  EXPECT_EQ(child.GetStats().largest_free_block_bytes, 4096);
  EXPECT_EQ(child.Allocate(4096, 64), a);
}

// Three levels: BFC, a recurse allocator in it, another in that. Each
// level's reserved bytes are in use one level up, and destroying a level
// gives its chunks back, in use or not.
TEST(RecurseAllocatorTest, NestsAndUnwinds) {
  BfcAllocator root(SmallBfc(64 * kMiB));
  auto outer = std::make_unique<RecurseAllocator>(root, MinChunk(kMiB));
  auto inner = std::make_unique<RecurseAllocator>(*outer, MinChunk(64 << 10));
  char* p = static_cast<char*>(inner->Allocate(10000, 64));
  char* q = static_cast<char*>(inner->Allocate(300 << 10, 64));
  ASSERT_TRUE(p != nullptr && q != nullptr);
  p[0] = q[(300 << 10) - 1] = 1;
  const int64_t inner_reserved = inner->GetStats().bytes_reserved;
  EXPECT_EQ(inner_reserved, (64 << 10) + (300 << 10));
  EXPECT_EQ(outer->GetStats().bytes_in_use, inner_reserved);
  EXPECT_EQ(outer->GetStats().bytes_reserved, static_cast<int64_t>(kMiB));
  EXPECT_EQ(root.GetStats().bytes_in_use, static_cast<int64_t>(kMiB));
  inner.reset();  // p and q still in use: their chunks go back anyway
  EXPECT_EQ(outer->GetStats().bytes_in_use, 0);
  EXPECT_EQ(root.GetStats().bytes_in_use, static_cast<int64_t>(kMiB));
  outer.reset();
  EXPECT_EQ(root.GetStats().bytes_in_use, 0);
}

// When the parent refuses, the child fails the request and counts it.
TEST(RecurseAllocatorTest, ParentRefusalIsACountedFailure) {
  BfcAllocator root(SmallBfc(kMiB));
  RecurseAllocator child(root);
  EXPECT_EQ(child.Allocate(2 * kMiB, 64), nullptr);
  EXPECT_EQ(child.GetStats().num_alloc_failures, 1);
  EXPECT_EQ(child.GetStats().bytes_reserved, 0);
  void* p = child.Allocate(kMiB / 2, 64);
  EXPECT_NE(p, nullptr);
  EXPECT_TRUE(child.Deallocate(p).ok());
}

// An alignment above the child's gets a chunk of its own, aligned by the
// parent (MNN's "separate" allocation).
TEST(RecurseAllocatorTest, LargeAlignmentIsAChunkOfItsOwn) {
  BfcAllocator root(SmallBfc(64 * kMiB));
  RecurseAllocator child(root, MinChunk(kMiB));
  void* p = child.Allocate(100, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(child.GetStats().bytes_reserved, 128);  // not a 1 MiB chunk
  EXPECT_EQ(child.Allocate(100, 4096), nullptr);    // more than BFC aligns
  EXPECT_TRUE(child.Deallocate(p).ok());
}

TEST(RecurseAllocatorTest, UnknownPointerAndDoubleFreeAreErrors) {
  BufferAllocator parent;
  RecurseAllocator child(parent);
  void* p = child.Allocate(100, 64);
  EXPECT_EQ(child.Deallocate(static_cast<char*>(p) + 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(child.Deallocate(p).ok());
  EXPECT_EQ(child.Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
}

// The factory's "recurse" owns a BufferAllocator parent.
TEST(RecurseAllocatorTest, FactoryNestsInABufferAllocator) {
  absl::StatusOr<std::unique_ptr<Allocator>> a = MakeAllocator("recurse");
  ASSERT_TRUE(a.ok());
  auto* child = static_cast<RecurseAllocator*>(a->get());
  EXPECT_EQ(child->parent().Name(), "buffer");
  void* p = child->Allocate(5000, 64);
  EXPECT_EQ(child->parent().GetStats().bytes_in_use, 5056);
  EXPECT_TRUE(child->Deallocate(p).ok());
}

TEST(RecurseAllocatorTest, MultiThreadedStress) {
  BfcAllocator root(SmallBfc(256 * kMiB));
  {
    RecurseAllocator child(root, MinChunk(64 << 10));
    testing::RunStress(child, 16384);
    const AllocatorStats s = child.GetStats();
    EXPECT_EQ(s.bytes_in_use, 0);
    EXPECT_EQ(child.NumFreeBlocks(), child.NumChunks());  // all merged
    EXPECT_GE(root.GetStats().bytes_in_use, s.bytes_reserved);
  }
  EXPECT_EQ(root.GetStats().bytes_in_use, 0);
}

// The larson workload replayed on a child of BFC: nothing fails, the
// child's peak covers the trace's, and BFC gets everything back.
TEST(RecurseAllocatorTest, ReplaysLarson) {
  BfcAllocator root(SmallBfc(256 * kMiB));
  {
    RecurseAllocator child(root);
    const Trace trace = LarsonWorkload(2000, 32, 16, 65536, 3);
    absl::StatusOr<ReplayResult> r = ReplayTrace(trace, child);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->allocations, 2032);
    EXPECT_EQ(r->failures, 0);
    EXPECT_GE(r->peak_bytes_reserved, r->peak_bytes_in_use);
    EXPECT_EQ(child.GetStats().bytes_in_use, 0);
  }
  EXPECT_EQ(root.GetStats().bytes_in_use, 0);
}

// A static plan's arena is one chunk of the recurse allocator, itself one
// block of its parent.
TEST(RecurseAllocatorTest, ArenaOfAStaticPlan) {
  BufferAllocator parent;
  RecurseAllocator child(parent);
  const Trace trace = LarsonWorkload(300, 16, 16, 4096, 5);
  int64_t arena = 0;
  const std::vector<int64_t> offsets = testing::DisjointOffsets(trace, &arena);
  absl::StatusOr<ReplayResult> r =
      ReplayStaticPlan(trace, offsets, arena, child);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->allocations, 316);
  EXPECT_EQ(child.GetStats().num_allocs, 1);
  EXPECT_EQ(parent.GetStats().num_allocs, 1);
  EXPECT_EQ(child.GetStats().bytes_in_use, 0);  // the arena was returned
}

}  // namespace
}  // namespace memplan::allocators
