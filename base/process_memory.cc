#include "base/process_memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

// A sanitizer's allocator takes no glibc settings but can be purged (the
// sanitizers' common allocator interface; GCC ships no header for it).
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
extern "C" void __sanitizer_purge_allocator();
#endif

namespace memplan::base {
namespace {

// Changes of M_TOP_PAD and M_TRIM_THRESHOLD: the step GrowHeapsInLargeSteps
// set (0 if none) and the threshold FixMallocThresholds or KeepFreedMemory
// set (none: glibc's sliding one), both 0 while a heap top is given back.
absl::Mutex pad_mu;
size_t heap_step ABSL_GUARDED_BY(pad_mu) = 0;
std::optional<int> trim_threshold ABSL_GUARDED_BY(pad_mu);

bool SetTrimThreshold(int bytes) {
  absl::MutexLock lock(&pad_mu);
  if (mallopt(M_TRIM_THRESHOLD, bytes) != 1) return false;
  trim_threshold = bytes;
  return true;
}

// A free of at least 64 KiB (glibc's FASTBIN_CONSOLIDATION_THRESHOLD) has
// glibc trim the top of the freeing thread's heap down to M_TOP_PAD; under
// 128 KiB (the lowest mmap threshold), the block comes from a heap, not
// from mmap.
constexpr size_t kTrimmingFree = size_t{96} << 10;

void TrimmingFree() {
  // volatile: the compiler may not drop the pair.
  void* volatile block = std::malloc(kTrimmingFree);
  std::free(block);
}

}  // namespace

bool KeepFreedMemory(int arenas) {
  if (kSanitizerAllocator) return false;
  // mallopt returns 1 on success. M_MMAP_MAX 0: large blocks come from the
  // heap too; M_TRIM_THRESHOLD -1: the heap never shrinks; M_ARENA_MAX: the
  // threads take turns over that many arenas (mallopt(3)).
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = SetTrimThreshold(-1);
  const bool shared = mallopt(M_ARENA_MAX, arenas < 1 ? 1 : arenas) == 1;
  // The workers' arena grows its heap in one step, not page by page.
  return no_mmap && no_trim && shared && GrowHeapsInLargeSteps();
}

bool MallocAsksForHugePages() {
  if (kSanitizerAllocator) return false;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  // name=value pairs separated by ':'; the last setting of a name counts.
  bool asks = false;
  for (absl::string_view pair : absl::StrSplit(tunables, ':')) {
    if (absl::ConsumePrefix(&pair, "glibc.malloc.hugetlb=")) {
      asks = pair == "1" || pair == "2";
    }
  }
  return asks;
}

bool GrowHeapsInLargeSteps(size_t bytes) {
  if (kSanitizerAllocator) return false;
  const size_t cap = static_cast<size_t>(std::numeric_limits<int>::max());
  bytes = std::min(bytes, cap);
  absl::MutexLock lock(&pad_mu);
  if (mallopt(M_TOP_PAD, static_cast<int>(bytes)) != 1) return false;
  heap_step = bytes;
  return true;
}

bool FixMallocThresholds(size_t largest_heap_block) {
  if (kSanitizerAllocator) return false;
  // glibc refuses an mmap threshold above 32 MiB (half a heap).
  const int block =
      static_cast<int>(std::min(largest_heap_block, kLargestHeapBlock));
  return mallopt(M_MMAP_THRESHOLD, block) == 1 && SetTrimThreshold(2 * block);
}

bool KeepFreedMemoryOnHugePages(size_t bytes, int arenas) {
  if (!KeepFreedMemory(arenas)) return false;
  // Half the machine's memory at most: a larger request for address space
  // alone may be refused by the kernel's overcommit heuristic.
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    bytes = std::min(
        bytes, static_cast<size_t>(pages) * static_cast<size_t>(page) / 2);
  }
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  if (bytes < 2 * kHugePage) return false;
  // With the settings above the block comes from the heap (no mmap) and,
  // freed, stays its free top (no trim): the arena hands the range out
  // again, on the pages asked for here. Only the block's header and the
  // top's are written; the rest is never touched.
  void* block = std::malloc(bytes);
  if (block == nullptr) return false;
  const uintptr_t at = reinterpret_cast<uintptr_t>(block);
  const uintptr_t begin = (at + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (at + bytes) & ~(kHugePage - 1);
  const bool asked =
      madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
  std::free(block);
  return asked;
}

void ReturnFreedMemory() {
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
  __sanitizer_purge_allocator();
#else
  malloc_trim(0);
#endif
}

void ReturnFreedMemory(
    absl::FunctionRef<void(const std::function<void()>&)> on_each_thread) {
  // M_TOP_PAD goes to 0 on each thread in turn, not for the whole round: a
  // worker busy with a call's task runs this only after it, and meanwhile
  // other threads' calls keep their step.
  on_each_thread(ReturnThreadHeapTop);
  ReturnFreedMemory();
}

void ReturnThreadHeapTop() {
  if (kSanitizerAllocator) return;
  absl::MutexLock lock(&pad_mu);
  if (heap_step > 0) mallopt(M_TOP_PAD, 0);
  if (trim_threshold.has_value()) mallopt(M_TRIM_THRESHOLD, 0);
  TrimmingFree();
  if (trim_threshold.has_value()) mallopt(M_TRIM_THRESHOLD, *trim_threshold);
  if (heap_step > 0) mallopt(M_TOP_PAD, static_cast<int>(heap_step));
}

}  // namespace memplan::base
