#include "base/process_memory.h"

#include <malloc.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "base/worker_pool.h"
#include "gtest/gtest.h"

namespace memplan::base {
namespace {

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Page faults taken while a fresh 64 MiB block is written, a byte per
// 4 KiB page (through a volatile pointer: the writes must happen).
int64_t FaultsToFill64MiB() {
  constexpr size_t kBytes = size_t{64} << 20;
  const int64_t before = MinorFaults();
  std::unique_ptr<char[]> block(new char[kBytes]);
  volatile char* bytes = block.get();
  for (size_t i = 0; i < kBytes; i += 4096) bytes[i] = 1;
  return MinorFaults() - before;
}

// The process's resident memory, from /proc/self/statm (pages).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

TEST(KeepFreedMemoryTest, FreedBlocksAreReusedWithoutFaults) {
  if (kSanitizerAllocator) {
    // glibc's settings do not reach a sanitizer's allocator: the function
    // must say so, and there is nothing to measure.
    EXPECT_FALSE(KeepFreedMemory());
    return;
  }
  ASSERT_TRUE(KeepFreedMemory());
  // 4 KiB pages only, so that the faults count pages whatever the host's
  // transparent huge page setting or GLIBC_TUNABLES.
  ASSERT_EQ(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0);
  // The first block faults its 16,384 pages in; once freed and kept, the
  // second reuses them. With glibc's defaults both would be mmapped afresh
  // and fault 16,384 times each.
  const int64_t first = FaultsToFill64MiB();
  const int64_t second = FaultsToFill64MiB();
  EXPECT_GT(first, 1000);
  EXPECT_LT(second, 100) << "first block: " << first << " faults";
}

// The malloc arenas in use, as malloc_info(3) lists them (<heap nr=...>).
int Arenas() {
  char* text = nullptr;
  size_t length = 0;
  FILE* out = open_memstream(&text, &length);
  if (out == nullptr) return -1;
  malloc_info(0, out);
  std::fclose(out);
  const std::string xml(text, length);
  std::free(text);
  int count = 0;
  for (size_t at = xml.find("<heap nr="); at != std::string::npos;
       at = xml.find("<heap nr=", at + 1)) {
    ++count;
  }
  return count;
}

TEST(KeepFreedMemoryTest, ThreadsShareTheArenasAskedFor) {
  if (kSanitizerAllocator) {
    EXPECT_FALSE(KeepFreedMemory(2));
    return;
  }
  ASSERT_TRUE(KeepFreedMemory(2));
  // Eight threads allocating at once, each holding its block until all
  // have one: with glibc's default limit (eight per core) each would get
  // an arena of its own.
  constexpr int kThreads = 8;
  absl::Barrier* all_hold = new absl::Barrier(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([all_hold] {
      std::unique_ptr<char[]> block(new char[4096]);
      volatile char* bytes = block.get();
      bytes[0] = 1;
      if (all_hold->Block()) delete all_hold;
    });
  }
  for (std::thread& t : threads) t.join();
  const int arenas = Arenas();
  EXPECT_GE(arenas, 1);
  EXPECT_LE(arenas, 2);
}

TEST(KeptMemoryArenasTest, OneForEveryTwoThreadsFromTwoToEight) {
  EXPECT_EQ(KeptMemoryArenas(0), 2);  // one core, no workers
  EXPECT_EQ(KeptMemoryArenas(2), 2);
  EXPECT_EQ(KeptMemoryArenas(5), 2);
  EXPECT_EQ(KeptMemoryArenas(8), 4);
  EXPECT_EQ(KeptMemoryArenas(16), 8);
  EXPECT_EQ(KeptMemoryArenas(64), 8);
}

TEST(KeepFreedMemoryTest, ReturnFreedMemoryGivesKeptMemoryBack) {
  if (kSanitizerAllocator) {
    ReturnFreedMemory();  // must be harmless; nothing to measure
    return;
  }
  ASSERT_TRUE(KeepFreedMemory());
  // 64 MiB in blocks of 1 MiB, written and freed: kept, they stay resident.
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.emplace_back(new char[size_t{1} << 20]);
    volatile char* bytes = blocks.back().get();
    for (size_t j = 0; j < (size_t{1} << 20); j += 4096) bytes[j] = 1;
  }
  const int64_t filled = ResidentBytes();
  blocks.clear();
  const int64_t kept = ResidentBytes();
  EXPECT_GT(kept, filled - (int64_t{8} << 20)) << "freed memory was not kept";
  ReturnFreedMemory();
  EXPECT_LT(ResidentBytes(), kept - (int64_t{48} << 20))
      << "resident after the blocks were freed: " << kept;
}

// The VmFlags line of the mapping holding `address` in /proc/self/smaps
// ("" when none holds it).
// A mapping's first line in /proc/self/maps or smaps: "begin-end perms
// ..." (addresses in hex); nullopt for any other line.
struct Mapping {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  std::string perms;
  bool Holds(const void* address) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(address);
    return begin <= at && at < end;
  }
};
std::optional<Mapping> MappingOf(const std::string& line) {
  Mapping m;
  char dash = 0;
  std::istringstream header(line);
  if (header >> std::hex >> m.begin >> dash >> m.end >> m.perms &&
      dash == '-') {
    return m;
  }
  return std::nullopt;
}

std::string VmFlagsAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    if (std::optional<Mapping> m = MappingOf(line)) {
      inside = m->Holds(address);
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool KernelHasTransparentHugePages() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

TEST(KeepFreedMemoryOnHugePagesTest, LaterLargeBlocksLieOnHugePageMemory) {
  if (kSanitizerAllocator) {
    EXPECT_FALSE(KeepFreedMemoryOnHugePages());  // no glibc heap to ask on
    return;
  }
  if (!KernelHasTransparentHugePages()) {
    EXPECT_FALSE(KeepFreedMemoryOnHugePages());  // madvise refuses
    return;
  }
  // Before: a block from the heap as it grows lies on ordinary memory
  // (unless GLIBC_TUNABLES asked glibc for huge pages everywhere).
  ASSERT_TRUE(KeepFreedMemory());
  std::unique_ptr<char[]> before(new char[size_t{8} << 20]);
  if (std::getenv("GLIBC_TUNABLES") == nullptr) {
    EXPECT_EQ(VmFlagsAt(before.get() + (size_t{4} << 20)).find(" hg"),
              std::string::npos);
  }
  ASSERT_TRUE(KeepFreedMemoryOnHugePages(size_t{256} << 20));
  // After: blocks the heap hands out next lie where the kernel was asked
  // for huge pages ("hg" in the mapping's VmFlags, proc(5)), also once
  // freed and handed out again.
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<char[]> after(new char[size_t{64} << 20]);
    const std::string flags = VmFlagsAt(after.get() + (size_t{32} << 20));
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
}

// The size of the mapping holding `address` in /proc/self/maps, if it is
// readable and writable (0 otherwise, or when none holds it).
size_t WritableMappingBytesAt(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::optional<Mapping> m = MappingOf(line);
    if (m && m->Holds(address)) {
      return m->perms.rfind("rw", 0) == 0 ? m->end - m->begin : 0;
    }
  }
  return 0;
}

TEST(GrowHeapsInLargeStepsTest, ANewThreadsHeapIsWritableWhole) {
  if (kSanitizerAllocator) {
    EXPECT_FALSE(GrowHeapsInLargeSteps());  // no glibc heap to grow
    return;
  }
  ASSERT_TRUE(GrowHeapsInLargeSteps());
  // The first thread after main gets an arena of its own, on a heap glibc
  // maps for it. Grown in large steps, the heap is writable whole from its
  // first block on; by default only the first 132 KiB or so are, and each
  // later page takes an mprotect call of its own.
  size_t writable = 0;
  std::thread([&writable] {
    std::unique_ptr<char[]> block(new char[1024]);
    writable = WritableMappingBytesAt(block.get());
  }).join();
  EXPECT_GE(writable, kHeapGrowthBytes / 2)
      << "the new thread's heap is writable over " << writable << " bytes";
}

// Writes and frees `bytes` in 4 KiB blocks on the calling thread: with
// heaps grown in large steps, its heap keeps them as its free top.
void FillAndFree(size_t bytes) {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (size_t i = 0; i < bytes / 4096; ++i) {
    blocks.emplace_back(new char[4096]);
    volatile char* block = blocks.back().get();
    block[0] = 1;
  }
}

TEST(ReturnFreedMemoryTest, TheWorkersHeapTopsGoBack) {
  WorkerPool pool(2, 8);
  const auto on_each_worker = [&pool](const std::function<void()>& task) {
    pool.RunOnEachThread(task);
  };
  if (kSanitizerAllocator) {
    ReturnFreedMemory(on_each_worker);  // must be harmless; nothing to measure
    return;
  }
  ASSERT_TRUE(GrowHeapsInLargeSteps());
  const int64_t before = ResidentBytes();
  // Each worker writes and frees 24 MiB: its heap keeps them (M_TOP_PAD),
  // and malloc_trim does not reach a worker's heap top.
  pool.RunOnEachThread([] { FillAndFree(size_t{24} << 20); });
  ReturnFreedMemory();
  const int64_t kept = ResidentBytes() - before;
  EXPECT_GT(kept, int64_t{32} << 20) << "the workers' heaps kept nothing";
  ReturnFreedMemory(on_each_worker);
  EXPECT_LT(ResidentBytes() - before, int64_t{8} << 20)
      << "kept before: " << kept;
  // The heaps grow in large steps again afterwards.
  size_t writable = 0;
  pool.RunOnEachThread([&writable] {
    FillAndFree(size_t{1} << 20);
    std::unique_ptr<char[]> block(new char[1024]);
    writable = WritableMappingBytesAt(block.get());
  });
  EXPECT_GE(writable, kHeapGrowthBytes / 2);
}

TEST(ReturnThreadHeapTopTest, TheCallingThreadsHeapTopGoesBack) {
  if (kSanitizerAllocator) {
    ReturnThreadHeapTop();  // must be harmless
    return;
  }
  ASSERT_TRUE(GrowHeapsInLargeSteps());
  const int64_t before = ResidentBytes();
  int64_t kept = 0;
  int64_t after = 0;
  std::thread([&] {
    FillAndFree(size_t{48} << 20);
    kept = ResidentBytes() - before;
    ReturnThreadHeapTop();
    after = ResidentBytes() - before;
  }).join();
  EXPECT_GT(kept, int64_t{32} << 20) << "the thread's heap kept nothing";
  EXPECT_LT(after, int64_t{8} << 20) << "kept before: " << kept;
}

// Writes a fresh block of `bytes`, a byte per page, and frees it.
void WriteAndFreeBlock(size_t bytes) {
  std::unique_ptr<char[]> block(new char[bytes]);
  volatile char* written = block.get();
  for (size_t i = 0; i < bytes; i += 4096) written[i] = 1;
}

TEST(FixMallocThresholdsTest, AHeapKeepsItsTopUntilItIsGivenBack) {
  if (kSanitizerAllocator) {
    EXPECT_FALSE(FixMallocThresholds());  // no glibc thresholds to set
    return;
  }
  ASSERT_TRUE(FixMallocThresholds());
  const int64_t before = ResidentBytes();
  int64_t kept = 0;
  int64_t after = 0;
  int64_t kept_again = 0;
  std::thread([&] {
    // 24 MiB: from the thread's heap (glibc's default would map it apart
    // and unmap it on free), and freed, the heap's top (under 64 MiB).
    WriteAndFreeBlock(size_t{24} << 20);
    kept = ResidentBytes() - before;
    ReturnThreadHeapTop();
    after = ResidentBytes() - before;
    // The threshold is back: the heap keeps its top again.
    WriteAndFreeBlock(size_t{24} << 20);
    kept_again = ResidentBytes() - before;
  }).join();
  EXPECT_GT(kept, int64_t{16} << 20) << "the thread's heap kept nothing";
  EXPECT_LT(after, int64_t{8} << 20) << "kept before: " << kept;
  EXPECT_GT(kept_again, int64_t{16} << 20) << "the threshold stayed at 0";
}

TEST(MallocAsksForHugePagesTest, ReadsGlibcsTunable) {
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before == nullptr ? "" : before;
  const auto asks = [](const char* tunables) {
    if (tunables == nullptr) {
      unsetenv("GLIBC_TUNABLES");
    } else {
      setenv("GLIBC_TUNABLES", tunables, /*overwrite=*/1);
    }
    return MallocAsksForHugePages();
  };
  const bool glibc = !kSanitizerAllocator;
  EXPECT_EQ(asks("glibc.malloc.hugetlb=1"), glibc);
  EXPECT_EQ(asks("glibc.malloc.top_pad=0:glibc.malloc.hugetlb=2"), glibc);
  EXPECT_FALSE(asks("glibc.malloc.hugetlb=0"));
  EXPECT_FALSE(asks("glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0"));
  EXPECT_FALSE(asks("glibc.malloc.hugetlb=10"));
  EXPECT_FALSE(asks("xglibc.malloc.hugetlb=1"));
  EXPECT_FALSE(asks(""));
  EXPECT_FALSE(asks(nullptr));
  if (before == nullptr) {
    unsetenv("GLIBC_TUNABLES");
  } else {
    setenv("GLIBC_TUNABLES", saved.c_str(), /*overwrite=*/1);
  }
}

}  // namespace
}  // namespace memplan::base
