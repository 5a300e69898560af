#include "engine/process_memory.h"

#include <malloc.h>

namespace memplan::engine {

bool KeepFreedMemory() {
  if (kSanitizerAllocator) return false;
  // mallopt returns 1 on success. M_MMAP_MAX 0: large blocks come from the
  // heap too; M_TRIM_THRESHOLD -1: the heap never shrinks (mallopt(3)).
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  return no_mmap && no_trim;
}

}  // namespace memplan::engine
