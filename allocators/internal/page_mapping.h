// Page mappings at any power-of-two alignment, for the sources that take
// memory straight from the kernel: SystemSubAllocator (anonymous memory)
// and MmapSubAllocator (a file). Private to allocators/.
//
//   void* p = internal::MapAligned(1 << 20, 1 << 16, /*fd=*/-1);
//   // p % 65536 == 0, 1 MiB of zeroed memory
//   internal::Unmap(p, 1 << 20);
//
// Thread-safe (system calls only).
#ifndef MEMPLAN_ALLOCATORS_INTERNAL_PAGE_MAPPING_H_
#define MEMPLAN_ALLOCATORS_INTERNAL_PAGE_MAPPING_H_

#include <cstddef>

namespace memplan::allocators::internal {

// The kernel's page size in bytes.
size_t PageSize();

// `bytes` rounded up to whole pages; 0 when that overflows.
size_t PageRounded(size_t bytes);

// Maps PageRounded(bytes) bytes, readable and writable, at an address
// aligned to `alignment` (a power of two; anything below the page size
// gives page alignment): private anonymous memory when fd < 0, else the
// file `fd` from offset 0, shared (REQUIRES: the file is that long).
// Returns nullptr with errno set when the kernel refuses.
void* MapAligned(size_t bytes, size_t alignment, int fd);

// Unmaps what MapAligned(bytes, ...) returned.
void Unmap(void* p, size_t bytes);

}  // namespace memplan::allocators::internal

#endif  // MEMPLAN_ALLOCATORS_INTERNAL_PAGE_MAPPING_H_
