#include "allocators/bfc_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "allocators/testing/stress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;

// Hands out address space only (PROT_NONE, no swap reserved): BFC never
// touches its memory, so tests may "allocate" gigabytes. Refuses regions
// larger than `refuse_above` and records every request.
class ReserveSubAllocator final : public SubAllocator {
 public:
  explicit ReserveSubAllocator(size_t refuse_above = SIZE_MAX)
      : refuse_above_(refuse_above) {}

  void* Alloc(size_t /*alignment*/, size_t bytes) override {
    requests.push_back(bytes);
    if (bytes > refuse_above_) return nullptr;
    void* p = mmap(nullptr, bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void Free(void* ptr, size_t bytes) override {
    munmap(ptr, bytes);
    ++frees;
  }

  std::vector<size_t> requests;  // every Alloc size, in order
  int frees = 0;                 // Free calls

 private:
  size_t refuse_above_;
};

// What a SubAllocator was asked for and gave back, kept outside it so it
// can be read after the BFC that owns the sub-allocator is gone.
struct RegionLedger {
  int allocs = 0;           // regions handed out
  int frees = 0;            // regions given back
  int64_t outstanding = 0;  // bytes handed out and not given back
};

// Real pages (SystemSubAllocator) with every call entered in a ledger.
class LedgerSubAllocator final : public SubAllocator {
 public:
  explicit LedgerSubAllocator(RegionLedger* ledger) : ledger_(ledger) {}
  void* Alloc(size_t alignment, size_t bytes) override {
    void* p = system_.Alloc(alignment, bytes);
    if (p != nullptr) {
      ++ledger_->allocs;
      ledger_->outstanding += static_cast<int64_t>(bytes);
    }
    return p;
  }
  void Free(void* ptr, size_t bytes) override {
    system_.Free(ptr, bytes);
    ++ledger_->frees;
    ledger_->outstanding -= static_cast<int64_t>(bytes);
  }

 private:
  SystemSubAllocator system_;
  RegionLedger* ledger_;  // not owned
};

// Resident bytes of this process (/proc/self/statm).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Options without growth: one region of `limit` bytes (TF's GPU default).
BfcAllocator::Options Fixed(size_t limit) {
  BfcAllocator::Options options;
  options.memory_limit = limit;
  options.allow_growth = false;
  return options;
}

// Options with growth from 2 MiB.
BfcAllocator::Options Growing(size_t limit, bool gc = false) {
  BfcAllocator::Options options;
  options.memory_limit = limit;
  options.allow_growth = true;
  options.garbage_collection = gc;
  return options;
}

// Asserts TF's CheckStats fields.
void ExpectStats(const Allocator& a, int64_t num_allocs, int64_t in_use,
                 int64_t peak, int64_t largest) {
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.num_allocs, num_allocs) << s.DebugString();
  EXPECT_EQ(s.bytes_in_use, in_use) << s.DebugString();
  EXPECT_EQ(s.peak_bytes_in_use, peak) << s.DebugString();
  EXPECT_EQ(s.largest_alloc_size, largest) << s.DebugString();
}

TEST(BfcAllocatorTest, BinNumForSize) {
  EXPECT_EQ(BfcAllocator::BinNumForSize(1), 0);
  EXPECT_EQ(BfcAllocator::BinNumForSize(511), 0);
  EXPECT_EQ(BfcAllocator::BinNumForSize(512), 1);
  EXPECT_EQ(BfcAllocator::BinNumForSize(256 << 20), 20);
  EXPECT_EQ(BfcAllocator::BinNumForSize(size_t{1} << 40), 20);
  EXPECT_EQ(BfcAllocator::RoundedBytes(1), 256u);
  EXPECT_EQ(BfcAllocator::RoundedBytes(257), 512u);
}

// TF NoDups: 1023 allocations of 1..1023 bytes, no duplicate or overlap.
TEST(BfcAllocatorTest, NoDups) {
  BfcAllocator a(Fixed(size_t{1} << 30));
  ExpectStats(a, 0, 0, 0, 0);
  std::vector<void*> ptrs;
  for (size_t s = 1; s < 1024; ++s) ptrs.push_back(a.Allocate(s, 1));
  ExpectStats(a, 1023, 654336, 654336, 1024);
  std::sort(ptrs.begin(), ptrs.end());
  for (size_t i = 1; i < ptrs.size(); ++i) {
    ASSERT_NE(ptrs[i], ptrs[i - 1]);
    const size_t requested = *a.RequestedSize(ptrs[i - 1]);
    ASSERT_GE(static_cast<char*>(ptrs[i]) - static_cast<char*>(ptrs[i - 1]),
              static_cast<ptrdiff_t>(requested));
  }
  for (void* p : ptrs) ASSERT_TRUE(a.Deallocate(p).ok());
  ExpectStats(a, 1023, 0, 654336, 1024);
}

// TF AllocationsAndDeallocations: random sizes, half freed, more allocated.
TEST(BfcAllocatorTest, RandomAllocationsDoNotOverlap) {
  BfcAllocator a(Fixed(size_t{1} << 30));
  std::mt19937 rng(123);
  auto size = [&] { return std::max<size_t>(rng() % 1048576, 100); };
  std::vector<void*> kept;
  for (int i = 0; i < 255; ++i) {
    void* p = a.Allocate(size(), 1);
    if (i % 2 == 1) {
      ASSERT_TRUE(a.Deallocate(p).ok());
    } else {
      kept.push_back(p);
    }
  }
  for (int i = 0; i < 255; ++i) kept.push_back(a.Allocate(size(), 1));
  std::sort(kept.begin(), kept.end());
  for (size_t i = 1; i < kept.size(); ++i) {
    ASSERT_GE(static_cast<char*>(kept[i]) - static_cast<char*>(kept[i - 1]),
              static_cast<ptrdiff_t>(*a.RequestedSize(kept[i - 1])));
  }
  for (void* p : kept) ASSERT_TRUE(a.Deallocate(p).ok());
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
}

// TF ExerciseCoalescing: after many cycles all memory is one chunk again,
// so the first allocation lands where the very first one did.
TEST(BfcAllocatorTest, ExerciseCoalescing) {
  BfcAllocator a(Fixed(size_t{1} << 30));
  void* first = a.Allocate(4096, 4);
  ASSERT_TRUE(a.Deallocate(first).ok());
  ExpectStats(a, 1, 0, 4096, 4096);
  for (int i = 0; i < 1024; ++i) {
    void* t1 = a.Allocate(4096, 4);
    void* t2 = a.Allocate(8 * kMiB, 8);
    void* t3 = a.Allocate(16384, 8);
    void* t4 = a.Allocate(40 * kMiB, 4);
    ASSERT_TRUE(t1 && t2 && t3 && t4);
    ASSERT_TRUE(a.Deallocate(t1).ok());
    ASSERT_TRUE(a.Deallocate(t2).ok());
    ASSERT_TRUE(a.Deallocate(t3).ok());
    ASSERT_TRUE(a.Deallocate(t4).ok());
  }
  ExpectStats(a, 4097, 0, 4096 + 8 * kMiB + 16384 + 40 * kMiB, 40 * kMiB);
  EXPECT_EQ(a.NumFreeChunks(), 1);
  void* again = a.Allocate(4096, 4);
  EXPECT_EQ(again, first);
  ASSERT_TRUE(a.Deallocate(again).ok());
}

TEST(BfcAllocatorTest, ZeroSizeReturnsNullWithoutCounting) {
  BfcAllocator a(Fixed(size_t{1} << 30));
  EXPECT_EQ(a.Allocate(0, 64), nullptr);
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.num_allocs, 0);
  EXPECT_EQ(s.num_alloc_failures, 0);
}

// TF AllocatedVsRequested: 4 bytes take a 256-byte chunk.
TEST(BfcAllocatorTest, AllocatedVsRequested) {
  BfcAllocator a(Fixed(size_t{1} << 30));
  void* p = a.Allocate(4, 4);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*a.RequestedSize(p), 4u);
  EXPECT_EQ(*a.AllocatedSize(p), 256u);
  EXPECT_EQ(a.GetStats().bytes_in_use, 256);
  ASSERT_TRUE(a.Deallocate(p).ok());
  EXPECT_FALSE(a.AllocatedSize(p).ok());
}

// TF TestCustomMemoryLimit, in both growth modes.
TEST(BfcAllocatorTest, CustomMemoryLimit) {
  for (bool growth : {false, true}) {
    BfcAllocator a(growth ? Growing(kMiB) : Fixed(kMiB));
    void* small = a.Allocate(256, 4);
    void* big = a.Allocate(4 * kMiB, 4);
    EXPECT_NE(small, nullptr);
    EXPECT_EQ(big, nullptr);
    EXPECT_EQ(a.GetStats().num_alloc_failures, 1);
    ASSERT_TRUE(a.Deallocate(small).ok());
  }
}

// A first region of 0 bytes never doubled (Allocate spun forever under the
// lock); a limit of SIZE_MAX let sizes wrap (SIZE_MAX - 10 came back as a
// 0-byte chunk) and the region size double past SIZE_MAX (a hang).
TEST(BfcAllocatorTest, ExtremeOptionsNeitherHangNorWrap) {
  BfcAllocator::Options zero = Growing(kMiB);
  zero.initial_region_bytes = 0;
  BfcAllocator a(zero);
  void* p = a.Allocate(1024, 64);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(a.Deallocate(p).ok());
  BfcAllocator::Options unbounded;
  unbounded.memory_limit = SIZE_MAX;
  BfcAllocator b(unbounded);
  EXPECT_EQ(b.GetStats().bytes_limit,
            std::numeric_limits<int64_t>::max() / 256 * 256);
  EXPECT_EQ(b.Allocate(SIZE_MAX - 10, 64), nullptr);
  EXPECT_EQ(b.Allocate((size_t{1} << 63) + 1, 64), nullptr);
  EXPECT_EQ(b.GetStats().num_alloc_failures, 2);
  void* q = b.Allocate(1000, 64);  // still serves what fits
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(b.Deallocate(q).ok());
}

// Filling the allocator never reserves more than the limit.
TEST(BfcAllocatorTest, MemoryLimitHolds) {
  const size_t limit = 10 * kMiB + 1000;  // not a multiple of 256
  BfcAllocator a(Growing(limit));
  std::vector<void*> ptrs;
  while (void* p = a.Allocate(1000, 8)) ptrs.push_back(p);
  const AllocatorStats s = a.GetStats();
  EXPECT_LE(s.bytes_reserved, static_cast<int64_t>(limit));
  EXPECT_LE(s.peak_bytes_reserved, static_cast<int64_t>(limit));
  EXPECT_EQ(s.bytes_limit, static_cast<int64_t>(limit));
  // 1000 bytes take 1024; at most one chunk's worth is left unused per region.
  EXPECT_GE(ptrs.size() * 1024,
            10 * kMiB - 1024 * static_cast<size_t>(a.NumRegions()));
  for (void* p : ptrs) ASSERT_TRUE(a.Deallocate(p).ok());
}

// TF's split rule: split when the chunk is at least twice the request, or
// when the leftover reaches kMaxInternalFragmentation (128 MiB).
TEST(BfcAllocatorTest, SplitRule) {
  {
    BfcAllocator a(Fixed(2 * kMiB));
    void* p = a.Allocate(kMiB + 1, 8);  // 2 MiB < 2 x (1 MiB + 256)
    EXPECT_EQ(*a.AllocatedSize(p), 2 * kMiB);
    ASSERT_TRUE(a.Deallocate(p).ok());
    void* q = a.Allocate(kMiB, 8);  // exactly half: split
    EXPECT_EQ(*a.AllocatedSize(q), kMiB);
    ASSERT_TRUE(a.Deallocate(q).ok());
  }
  auto reserve = std::make_unique<ReserveSubAllocator>();
  BfcAllocator big(std::move(reserve), Fixed(512 * kMiB));
  void* p = big.Allocate(300 * kMiB, 8);  // 212 MiB left >= 128 MiB: split
  EXPECT_EQ(*big.AllocatedSize(p), 300 * kMiB);
  ASSERT_TRUE(big.Deallocate(p).ok());
  void* q = big.Allocate(400 * kMiB, 8);  // 112 MiB left: no split
  EXPECT_EQ(*big.AllocatedSize(q), 512 * kMiB);
  ASSERT_TRUE(big.Deallocate(q).ok());
}

// Allocates 128 blocks of 4 MiB and frees all but the last.
std::vector<void*> FillAndFreeAllButLast(BfcAllocator& a) {
  std::vector<void*> ptrs;
  for (int i = 0; i < 128; ++i) ptrs.push_back(a.Allocate(4 * kMiB, 1));
  for (int i = 0; i < 127; ++i) EXPECT_TRUE(a.Deallocate(ptrs[i]).ok());
  return ptrs;
}

// TF PhysicalAllocatorOomsFragmentation: 512 MiB in regions of 4, 4, 8,
// ..., 256 MiB; with one 4 MiB block left in the last region, 508 MiB are
// free but no 508 MiB chunk exists. With or without garbage collection the
// request fails (collecting frees only 256 MiB); smaller ones succeed.
TEST(BfcAllocatorTest, FragmentationOoms) {
  for (bool gc : {false, true}) {
    BfcAllocator a(std::make_unique<ReserveSubAllocator>(),
                   Growing(512 * kMiB, gc));
    std::vector<void*> ptrs = FillAndFreeAllButLast(a);
    ASSERT_NE(ptrs.back(), nullptr);
    EXPECT_EQ(a.NumRegions(), 8);
    const AllocatorStats before = a.GetStats();
    EXPECT_EQ(before.bytes_reserved, static_cast<int64_t>(512 * kMiB));
    EXPECT_EQ(before.largest_free_block_bytes,
              static_cast<int64_t>(252 * kMiB));
    EXPECT_NEAR(before.fragmentation, 1.0 - 252.0 / 508.0, 1e-9);
    EXPECT_EQ(a.Allocate(508 * kMiB, 1), nullptr) << "gc=" << gc;
    EXPECT_EQ(a.NumRegions(), 8);  // nothing was collected
    void* mid = a.Allocate(252 * kMiB, 1);
    void* small = a.Allocate(128 * kMiB, 1);
    EXPECT_NE(mid, nullptr);
    EXPECT_NE(small, nullptr);
  }
}

// TF TestRegionDeallocation, through the allocation path: with garbage
// collection, the wholly free regions go back and a larger region fits.
TEST(BfcAllocatorTest, GarbageCollectionFreesWhollyFreeRegions) {
  for (bool gc : {false, true}) {
    auto sub = std::make_unique<ReserveSubAllocator>();
    ReserveSubAllocator* spy = sub.get();
    BfcAllocator a(std::move(sub), Growing(2048 * kMiB, gc));
    std::vector<void*> ptrs = FillAndFreeAllButLast(a);
    EXPECT_EQ(a.NumRegions(), 8);  // 4, 4, 8, ..., 256 MiB
    // 1536 MiB are unreserved: not enough without collecting 256 MiB more.
    void* big = a.Allocate(1600 * kMiB, 1);
    if (!gc) {
      EXPECT_EQ(big, nullptr);
      EXPECT_EQ(spy->frees, 0);
      continue;
    }
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(spy->frees, 7);
    EXPECT_EQ(a.NumRegions(), 2);  // the 256 MiB region and the new one
    // 256 MiB kept + a new region of all that the limit leaves (1792 MiB).
    EXPECT_EQ(a.GetStats().bytes_reserved, static_cast<int64_t>(2048 * kMiB));
    EXPECT_TRUE(a.Deallocate(ptrs.back()).ok());
    EXPECT_TRUE(a.Deallocate(big).ok());
  }
}

// On demand, every wholly free region goes back; a region with a chunk in
// use stays. With none left, growth starts again from 2 MiB.
TEST(BfcAllocatorTest, ReleaseFreeRegionsGivesBackWhatIsFree) {
  auto sub = std::make_unique<ReserveSubAllocator>();
  ReserveSubAllocator* spy = sub.get();
  BfcAllocator a(std::move(sub), Growing(1024 * kMiB));
  std::vector<void*> ptrs = FillAndFreeAllButLast(a);  // 8 regions
  EXPECT_EQ(a.ReleaseFreeRegions(), static_cast<int64_t>(256 * kMiB));
  EXPECT_EQ(spy->frees, 7);
  EXPECT_EQ(a.NumRegions(), 1);  // the 256 MiB region holding the last block
  EXPECT_EQ(a.GetStats().bytes_reserved, static_cast<int64_t>(256 * kMiB));
  EXPECT_EQ(a.GetStats().bytes_in_use, static_cast<int64_t>(4 * kMiB));
  EXPECT_EQ(a.ReleaseFreeRegions(), 0);  // nothing more is free
  ASSERT_TRUE(a.Deallocate(ptrs.back()).ok());
  EXPECT_EQ(a.ReleaseFreeRegions(), static_cast<int64_t>(256 * kMiB));
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.bytes_reserved, 0);
  EXPECT_EQ(s.peak_bytes_reserved, static_cast<int64_t>(512 * kMiB));
  EXPECT_EQ(a.NumRegions(), 0);
  EXPECT_EQ(a.NumFreeChunks(), 0);
  EXPECT_EQ(a.CurrentRegionBytes(), 2 * kMiB);
  void* again = a.Allocate(1000, 64);  // a fresh 2 MiB region
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(a.GetStats().bytes_reserved, static_cast<int64_t>(2 * kMiB));
  EXPECT_TRUE(a.Deallocate(again).ok());
}

// Destruction gives every region back to the sub-allocator, whether its
// chunks are in use or not.
TEST(BfcAllocatorTest, DestructionGivesBackEveryRegion) {
  RegionLedger ledger;
  {
    BfcAllocator a(std::make_unique<LedgerSubAllocator>(&ledger),
                   Growing(256 * kMiB));
    std::vector<void*> live;
    for (int i = 0; i < 40; ++i) live.push_back(a.Allocate(kMiB, 64));
    ASSERT_TRUE(a.Deallocate(live[3]).ok());
    EXPECT_GE(ledger.allocs, 4);  // 2, 4, 8, 16, 32 MiB regions
    EXPECT_EQ(ledger.outstanding, a.GetStats().bytes_reserved);
  }
  EXPECT_EQ(ledger.frees, ledger.allocs);
  EXPECT_EQ(ledger.outstanding, 0);
}

// What a call took leaves the process when it ends (issue 10): 128 MiB
// written and freed, then the regions released (or the allocator
// destroyed), and the resident memory is back near where it started. The
// margins are wide: other allocations of the test binary move RSS by far
// less than 32 MiB.
TEST(BfcAllocatorTest, ResidentMemoryReturnsToItsBaseline) {
  constexpr size_t kBlock = 128 * kMiB;
  for (bool destroy : {false, true}) {
    const int64_t baseline = ResidentBytes();
    auto a = std::make_unique<BfcAllocator>(Growing(512 * kMiB));
    void* p = a->Allocate(kBlock, 64);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x11, kBlock);
    EXPECT_GE(ResidentBytes(), baseline + static_cast<int64_t>(kBlock) * 3 / 4)
        << "the block was not resident: the test could not see it leave";
    ASSERT_TRUE(a->Deallocate(p).ok());
    EXPECT_GE(a->GetStats().bytes_reserved, static_cast<int64_t>(kBlock));
    if (destroy) {
      a.reset();
    } else {
      EXPECT_GE(a->ReleaseFreeRegions(), static_cast<int64_t>(kBlock));
      EXPECT_EQ(a->GetStats().bytes_reserved, 0);
    }
    EXPECT_LT(ResidentBytes(), baseline + 32 * static_cast<int64_t>(kMiB))
        << (destroy ? "after destruction" : "after ReleaseFreeRegions");
  }
}

// When the sub-allocator refuses, the region request backs off by 0.9
// until it is accepted, or until it is smaller than the request.
TEST(BfcAllocatorTest, GrowthBacksOffWhenSubAllocatorRefuses) {
  auto sub = std::make_unique<ReserveSubAllocator>(3 * kMiB);
  ReserveSubAllocator* spy = sub.get();
  BfcAllocator a(std::move(sub), Growing(64 * kMiB));
  void* first = a.Allocate(kMiB, 8);  // a 2 MiB region; next would be 4 MiB
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(a.CurrentRegionBytes(), 4 * kMiB);
  void* second = a.Allocate(2 * kMiB, 8);
  ASSERT_NE(second, nullptr);
  ASSERT_GE(spy->requests.size(), 3u);
  EXPECT_EQ(spy->requests[1], 4 * kMiB);
  for (size_t i = 2; i < spy->requests.size(); ++i) {
    const double ratio = static_cast<double>(spy->requests[i]) /
                         static_cast<double>(spy->requests[i - 1]);
    EXPECT_NEAR(ratio, 0.9, 0.001);
    EXPECT_EQ(spy->requests[i] % BfcAllocator::kMinAllocationSize, 0u);
  }
  EXPECT_LE(spy->requests.back(), 3 * kMiB);
  EXPECT_EQ(a.GetStats().bytes_reserved,
            static_cast<int64_t>(2 * kMiB + spy->requests.back()));
  // Nothing below 3 MiB holds 3.5 MiB: the back-off gives up.
  EXPECT_EQ(a.Allocate(3 * kMiB + kMiB / 2, 8), nullptr);
  EXPECT_TRUE(a.Deallocate(first).ok());
  EXPECT_TRUE(a.Deallocate(second).ok());
}

TEST(BfcAllocatorTest, UnknownPointersAreErrors) {
  BfcAllocator a(Fixed(kMiB));
  void* p = a.Allocate(1000, 64);
  ASSERT_NE(p, nullptr);
  int on_stack = 0;
  EXPECT_EQ(a.Deallocate(&on_stack).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Deallocate(static_cast<char*>(p) + 256).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Deallocate(static_cast<char*>(p) + 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a.Deallocate(p).ok());
  EXPECT_EQ(a.Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a.Deallocate(nullptr).ok());
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
}

TEST(BfcAllocatorTest, Alignment) {
  BfcAllocator a(Fixed(kMiB));
  void* p = a.Allocate(10, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(a.Allocate(10, 512), nullptr);  // larger than a chunk's alignment
  EXPECT_EQ(a.Allocate(10, 48), nullptr);   // not a power of two
  EXPECT_EQ(a.GetStats().num_alloc_failures, 2);
  EXPECT_TRUE(a.Deallocate(p).ok());
}

TEST(BfcAllocatorTest, MemoryDumpListsBinsThenChunksInAddressOrder) {
  BfcAllocator a(Fixed(kMiB));
  void* p = a.Allocate(300, 8);
  void* q = a.Allocate(5000, 8);
  const std::string dump = a.MemoryDump();
  EXPECT_THAT(dump, HasSubstr("Bin  0 (256 B)"));
  EXPECT_THAT(dump, HasSubstr("requested 300"));
  EXPECT_THAT(dump, HasSubstr("requested 5000"));
  EXPECT_LT(dump.find("Bin 20"), dump.find("Region"));
  EXPECT_LT(dump.find("requested 300"), dump.find("requested 5000"));
  EXPECT_TRUE(a.Deallocate(p).ok());
  EXPECT_TRUE(a.Deallocate(q).ok());
}

// 4 threads x 2000 operations; every block carries its owner's mark at
// both ends, which a shared or overlapping block would break.
TEST(BfcAllocatorTest, MultiThreadedStress) {
  BfcAllocator a(Growing(256 * kMiB));
  testing::RunStress(a, 65536);
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(a.NumFreeChunks(), a.NumRegions());  // everything coalesced
}

}  // namespace
}  // namespace memplan::allocators
