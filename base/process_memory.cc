#include "base/process_memory.h"

#include <malloc.h>

// A sanitizer's allocator takes no glibc settings but can be purged (the
// sanitizers' common allocator interface; GCC ships no header for it).
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
extern "C" void __sanitizer_purge_allocator();
#endif

namespace memplan::base {

bool KeepFreedMemory(int arenas) {
  if (kSanitizerAllocator) return false;
  // mallopt returns 1 on success. M_MMAP_MAX 0: large blocks come from the
  // heap too; M_TRIM_THRESHOLD -1: the heap never shrinks; M_ARENA_MAX: the
  // threads take turns over that many arenas (mallopt(3)).
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  const bool shared = mallopt(M_ARENA_MAX, arenas < 1 ? 1 : arenas) == 1;
  return no_mmap && no_trim && shared;
}

void ReturnFreedMemory() {
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
  __sanitizer_purge_allocator();
#else
  malloc_trim(0);
#endif
}

}  // namespace memplan::base
