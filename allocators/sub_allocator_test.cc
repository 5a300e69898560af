#include "allocators/sub_allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "allocators/bfc_allocator.h"
#include "allocators/buffer_allocator.h"
#include "allocators/internal/page_mapping.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

// True when every page of [p, p + bytes) is mapped.
bool Mapped(void* p, size_t bytes) {
  std::vector<unsigned char> pages(internal::PageRounded(bytes) /
                                   internal::PageSize());
  return mincore(p, bytes, pages.data()) == 0;
}

TEST(SystemSubAllocatorTest, AlignedZeroedAndGoneAfterFree) {
  SystemSubAllocator system;
  for (size_t alignment : {size_t{256}, size_t{2} << 20}) {
    const size_t bytes = (size_t{3} << 20) + 256;
    auto* p = static_cast<unsigned char*>(system.Alloc(alignment, bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u);
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[bytes - 1], 0);
    std::memset(p, 0x5A, bytes);
    system.Free(p, bytes);
    EXPECT_FALSE(Mapped(p, bytes));  // given back to the kernel
  }
}

TEST(SystemSubAllocatorTest, RefusesZeroBytesAndBadAlignments) {
  SystemSubAllocator system;
  EXPECT_EQ(system.Alloc(256, 0), nullptr);
  EXPECT_EQ(system.Alloc(96, 4096), nullptr);
}

// The parent sees the blocks as its own allocations, and gets them back.
TEST(ParentSubAllocatorTest, BlocksAreTheParentsAllocations) {
  BufferAllocator parent;
  ParentSubAllocator source(parent);
  EXPECT_EQ(&source.parent(), &parent);
  void* p = source.Alloc(64, 1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 1024);
  source.Free(p, 1000);
  EXPECT_EQ(parent.GetStats().bytes_in_use, 0);
  EXPECT_EQ(source.Alloc(64, 0), nullptr);  // the parent's rule for 0 bytes
}

// BFC's regions can come from another allocator too: here a 1 MiB region
// of BFC is one block of a buffer allocator.
TEST(ParentSubAllocatorTest, BfcOverABufferAllocator) {
  BufferAllocator parent;
  {
    BfcAllocator::Options options;
    options.memory_limit = size_t{1} << 20;
    options.allow_growth = false;
    BfcAllocator bfc(std::make_unique<ParentSubAllocator>(parent), options);
    void* p = bfc.Allocate(1000, 64);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(parent.GetStats().bytes_in_use, int64_t{1} << 20);
    EXPECT_TRUE(bfc.Deallocate(p).ok());
  }
  EXPECT_EQ(parent.GetStats().bytes_in_use, 0);  // the region went back
}

}  // namespace
}  // namespace memplan::allocators
