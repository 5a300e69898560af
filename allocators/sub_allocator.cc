#include "allocators/sub_allocator.h"

#include <cassert>

#include "absl/status/status.h"
#include "allocators/internal/page_mapping.h"

namespace memplan::allocators {

void* SystemSubAllocator::Alloc(size_t alignment, size_t bytes) {
  if (bytes == 0 || !IsPowerOfTwo(alignment)) return nullptr;
  return internal::MapAligned(bytes, alignment, /*fd=*/-1);
}

void SystemSubAllocator::Free(void* ptr, size_t bytes) {
  internal::Unmap(ptr, bytes);
}

void ParentSubAllocator::Free(void* ptr, size_t /*bytes*/) {
  // A refusal means the allocator above lost track of its blocks.
  [[maybe_unused]] const absl::Status s = parent_.Deallocate(ptr);
  assert(s.ok());
}

}  // namespace memplan::allocators
