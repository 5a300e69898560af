#include "allocators/buffer_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "allocators/aligned_allocator.h"
#include "allocators/testing/stress.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

// Byte distance between two pointers.
ptrdiff_t Diff(const void* a, const void* b) {
  return static_cast<const char*>(a) - static_cast<const char*>(b);
}

TEST(BufferAllocatorTest, ReusesWholeFreeBlock) {
  BufferAllocator a;
  void* p = a.Allocate(1024, 64);
  ASSERT_TRUE(a.Deallocate(p).ok());
  void* q = a.Allocate(1024, 64);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.NumSourceBlocks(), 1);
  ASSERT_TRUE(a.Deallocate(q).ok());
}

TEST(BufferAllocatorTest, RoundsSizesToAlignment) {
  BufferAllocator a;
  void* p = a.Allocate(1, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(a.GetStats().bytes_in_use, 64);
  ASSERT_TRUE(a.Deallocate(p).ok());
}

// 1024 is split into 256 + 768, then 768 into 512 + 256; freeing merges
// bottom up, but only once every child of a parent is free.
TEST(BufferAllocatorTest, SplitsAndMergesBackRecursively) {
  BufferAllocator a;
  void* root = a.Allocate(1024, 64);
  ASSERT_TRUE(a.Deallocate(root).ok());
  void* b = a.Allocate(256, 64);
  EXPECT_EQ(b, root);
  void* c = a.Allocate(512, 64);
  EXPECT_EQ(Diff(c, root), 256);
  EXPECT_EQ(a.NumFreeBlocks(), 1);  // the last 256 bytes
  EXPECT_EQ(a.GetStats().bytes_in_use, 768);
  EXPECT_EQ(a.GetStats().largest_free_block_bytes, 256);

  ASSERT_TRUE(a.Deallocate(c).ok());  // 512 + 256 merge into 768
  EXPECT_EQ(a.NumFreeBlocks(), 1);
  EXPECT_EQ(a.GetStats().largest_free_block_bytes, 768);

  ASSERT_TRUE(a.Deallocate(b).ok());  // 256 + 768 merge into 1024
  EXPECT_EQ(a.NumFreeBlocks(), 1);
  EXPECT_EQ(a.GetStats().largest_free_block_bytes, 1024);
  void* again = a.Allocate(1024, 64);
  EXPECT_EQ(again, root);
  EXPECT_EQ(a.NumSourceBlocks(), 1);
  ASSERT_TRUE(a.Deallocate(again).ok());
}

// Free siblings do not merge while their parent still has a child in use.
TEST(BufferAllocatorTest, NoMergeWhileASiblingIsInUse) {
  BufferAllocator a;
  void* root = a.Allocate(1024, 64);
  ASSERT_TRUE(a.Deallocate(root).ok());
  void* b = a.Allocate(256, 64);
  void* c = a.Allocate(256, 64);  // from the 768: 256 + 512
  ASSERT_TRUE(a.Deallocate(b).ok());
  // Free: b (256), the 512 remainder; c still in use blocks both merges.
  EXPECT_EQ(a.NumFreeBlocks(), 2);
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.largest_free_block_bytes, 512);
  EXPECT_NEAR(s.fragmentation, 1.0 - 512.0 / 768.0, 1e-9);
  ASSERT_TRUE(a.Deallocate(c).ok());
  EXPECT_EQ(a.NumFreeBlocks(), 1);
}

// A larger alignment takes a free block that starts at a multiple of it,
// else a block of its own; freed, that block serves the next such request
// (reserved bytes grew with every request: 1000 x 1000 bytes at 128 held
// 1,024,000 bytes for a peak of 1,024).
TEST(BufferAllocatorTest, LargeAlignmentGetsAnAlignedBlockAndReusesIt) {
  BufferAllocator a;
  void* p = a.Allocate(4096, 64);
  const bool p_aligned = reinterpret_cast<uintptr_t>(p) % 4096 == 0;
  ASSERT_TRUE(a.Deallocate(p).ok());
  void* q = a.Allocate(100, 4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  EXPECT_EQ(a.NumSourceBlocks(), p_aligned ? 1 : 2);
  ASSERT_TRUE(a.Deallocate(q).ok());
  BufferAllocator b;
  for (int i = 0; i < 1000; ++i) {
    void* r = b.Allocate(1000, 128);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 128, 0u);
    ASSERT_TRUE(b.Deallocate(r).ok());
  }
  EXPECT_EQ(b.NumSourceBlocks(), 1);
  EXPECT_EQ(b.GetStats().peak_bytes_reserved, 1024);
}

TEST(BufferAllocatorTest, UnknownPointerAndDoubleFreeAreErrors) {
  BufferAllocator a;
  void* p = a.Allocate(1024, 64);
  EXPECT_EQ(a.Deallocate(static_cast<char*>(p) + 64).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(a.Deallocate(p).ok());
  EXPECT_EQ(a.Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.NumFreeBlocks(), 1);
}

TEST(BufferAllocatorTest, ReleaseFreeReturnsWhollyFreeSystemBlocks) {
  BufferAllocator a;
  void* p = a.Allocate(1024, 64);
  void* q = a.Allocate(2048, 64);
  ASSERT_TRUE(a.Deallocate(p).ok());
  a.ReleaseFree();
  EXPECT_EQ(a.NumSourceBlocks(), 1);
  EXPECT_EQ(a.GetStats().bytes_reserved, 2048);
  ASSERT_TRUE(a.Deallocate(q).ok());
  a.ReleaseFree();
  EXPECT_EQ(a.NumSourceBlocks(), 0);
  EXPECT_EQ(a.GetStats().bytes_reserved, 0);
}

// Random alloc/free: live blocks never overlap, in-use bytes add up, and
// everything merges back into whole system blocks at the end.
TEST(BufferAllocatorTest, RandomOpsKeepBlocksDisjoint) {
  BufferAllocator a;
  std::mt19937 rng(7);
  std::map<char*, size_t> live;  // pointer -> rounded size
  int64_t in_use = 0;
  for (int op = 0; op < 3000; ++op) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t size = 1 + rng() % 5000;
      char* p = static_cast<char*>(a.Allocate(size, 64));
      ASSERT_NE(p, nullptr);
      live.emplace(p, AlignUp(size, 64));
      in_use += static_cast<int64_t>(AlignUp(size, 64));
    } else {
      auto it =
          std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      ASSERT_TRUE(a.Deallocate(it->first).ok());
      in_use -= static_cast<int64_t>(it->second);
      live.erase(it);
    }
    for (auto it = live.begin(); std::next(it) != live.end() && !live.empty();
         ++it) {
      ASSERT_LE(it->first + it->second, std::next(it)->first);
    }
    ASSERT_EQ(a.GetStats().bytes_in_use, in_use);
  }
  for (auto& [p, size] : live) ASSERT_TRUE(a.Deallocate(p).ok());
  EXPECT_EQ(a.NumFreeBlocks(), a.NumSourceBlocks());
}

// A source that counts what it hands out, over aligned malloc.
class CountingSource final : public SubAllocator {
 public:
  explicit CountingSource(int64_t* outstanding) : outstanding_(outstanding) {}
  void* Alloc(size_t alignment, size_t bytes) override {
    *outstanding_ += static_cast<int64_t>(bytes);
    return malloc_.Alloc(alignment, bytes);
  }
  void Free(void* ptr, size_t bytes) override {
    *outstanding_ -= static_cast<int64_t>(bytes);
    malloc_.Free(ptr, bytes);
  }

 private:
  AlignedSubAllocator malloc_;
  int64_t* outstanding_;  // not owned
};

// Blocks come from the given source, at least min_source_bytes at a time;
// all of them go back to it on destruction.
TEST(BufferAllocatorTest, InjectedSourceAndMinimumBlock) {
  int64_t outstanding = 0;
  {
    BufferAllocator::Options options;
    options.min_source_bytes = 10000;  // rounded up to 10048
    options.name = "buffer_min";
    BufferAllocator a(std::make_unique<CountingSource>(&outstanding), options);
    EXPECT_EQ(a.Name(), "buffer_min");
    void* p = a.Allocate(100, 64);
    void* q = a.Allocate(100, 64);
    EXPECT_EQ(Diff(q, p), 128);  // both cut from one source block
    EXPECT_EQ(outstanding, 10048);
    EXPECT_EQ(a.NumSourceBlocks(), 1);
    EXPECT_EQ(a.GetStats().bytes_reserved, 10048);
    void* big = a.Allocate(20000, 64);  // larger than the minimum: exact
    EXPECT_EQ(outstanding, 10048 + 20032);
    ASSERT_TRUE(a.Deallocate(p).ok());
    ASSERT_TRUE(a.Deallocate(big).ok());
    a.ReleaseFree();  // the 20032-byte block is wholly free, p's is not
    EXPECT_EQ(outstanding, 10048);
  }
  EXPECT_EQ(outstanding, 0);  // q's block went back at destruction
}

TEST(BufferAllocatorTest, MultiThreadedStress) {
  BufferAllocator a;
  testing::RunStress(a, 8192);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
  EXPECT_EQ(a.NumFreeBlocks(), a.NumSourceBlocks());
}

TEST(DeferredBufferAllocatorTest, HeaderExample) {
  DeferredBufferAllocator plan;
  auto x = plan.Alloc(1000);
  auto y = plan.Alloc(500);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(plan.Free(*x).ok());
  auto z = plan.Alloc(1000);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(plan.Pointer(*z).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(plan.Compute().ok());
  EXPECT_EQ(plan.TotalSize(), 1536u);
  EXPECT_EQ(*plan.Offset(*x), *plan.Offset(*z));  // x died before z
  EXPECT_EQ(*plan.Offset(*y), 1024u);
  EXPECT_EQ(Diff(*plan.Pointer(*y), *plan.Pointer(*x)), 1024);
}

TEST(DeferredBufferAllocatorTest, Errors) {
  DeferredBufferAllocator plan;
  EXPECT_EQ(plan.Alloc(0).status().code(), absl::StatusCode::kInvalidArgument);
  {  // SIZE_MAX rounded up to 0 bytes and was recorded
    DeferredBufferAllocator huge;
    EXPECT_EQ(huge.Alloc(SIZE_MAX).status().code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(huge.Alloc(size_t{1} << 61).ok());
    EXPECT_TRUE(huge.Alloc(size_t{1} << 61).ok());
    EXPECT_EQ(huge.Alloc(64).status().code(),
              absl::StatusCode::kResourceExhausted);
  }
  auto x = plan.Alloc(64);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(plan.Free(7).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(plan.Free(*x).ok());
  EXPECT_EQ(plan.Free(*x).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(plan.Compute().ok());
  EXPECT_EQ(plan.Compute().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.Alloc(64).status().code(),
            absl::StatusCode::kFailedPrecondition);
  plan.Reset();
  EXPECT_TRUE(plan.Alloc(64).ok());
}

// Random traces: blocks whose lifetimes overlap get disjoint bytes, the
// total is at least the peak live sum, and every byte is writable.
TEST(DeferredBufferAllocatorTest, RandomTracesGiveDisjointOffsets) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    DeferredBufferAllocator plan;
    std::vector<int64_t> live;
    std::vector<std::pair<int64_t, int64_t>> life;  // [birth, death)
    int64_t clock = 0, live_bytes = 0, peak = 0;
    for (int op = 0; op < 300; ++op) {
      if (live.empty() || rng() % 2 == 0) {
        auto id = plan.Alloc(1 + rng() % 4000);
        ASSERT_TRUE(id.ok());
        live.push_back(*id);
        life.emplace_back(clock++, INT64_MAX);
        live_bytes += static_cast<int64_t>(*plan.Size(*id));
      } else {
        const size_t i = rng() % live.size();
        ASSERT_TRUE(plan.Free(live[i]).ok());
        life[live[i]].second = clock++;
        live_bytes -= static_cast<int64_t>(*plan.Size(live[i]));
        live.erase(live.begin() + static_cast<ptrdiff_t>(i));
      }
      peak = std::max(peak, live_bytes);
    }
    ASSERT_TRUE(plan.Compute().ok());
    EXPECT_GE(static_cast<int64_t>(plan.TotalSize()), peak);
    for (size_t i = 0; i < life.size(); ++i) {
      std::memset(*plan.Pointer(static_cast<int64_t>(i)), 0xAB,
                  *plan.Size(static_cast<int64_t>(i)));
      for (size_t j = i + 1; j < life.size(); ++j) {
        if (life[i].first >= life[j].second || life[j].first >= life[i].second)
          continue;
        const size_t oi = *plan.Offset(i), oj = *plan.Offset(j);
        ASSERT_TRUE(oi + *plan.Size(i) <= oj || oj + *plan.Size(j) <= oi)
            << "seed " << seed << " blocks " << i << " and " << j;
      }
    }
  }
}

}  // namespace
}  // namespace memplan::allocators
