#include "base/process_memory.h"

#include <malloc.h>

// A sanitizer's allocator takes no glibc settings but can be purged (the
// sanitizers' common allocator interface; GCC ships no header for it).
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
extern "C" void __sanitizer_purge_allocator();
#endif

namespace memplan::base {

bool KeepFreedMemory() {
  if (kSanitizerAllocator) return false;
  // mallopt returns 1 on success. M_MMAP_MAX 0: large blocks come from the
  // heap too; M_TRIM_THRESHOLD -1: the heap never shrinks (mallopt(3)).
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  // M_ARENA_MAX 1: the workers allocate from the one heap too, so what a
  // stage freed on one thread is reused by the next on another (with an
  // arena per thread, each would keep its own peak: the 1M-buffer plan's
  // peak RSS grew a third on 16 workers). The pipeline's threads allocate
  // little once a stage is set up, so sharing one lock costs little.
  const bool one_arena = mallopt(M_ARENA_MAX, 1) == 1;
  return no_mmap && no_trim && one_arena;
}

void ReturnFreedMemory() {
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
  __sanitizer_purge_allocator();
#else
  malloc_trim(0);
#endif
}

}  // namespace memplan::base
