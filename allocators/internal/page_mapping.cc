#include "allocators/internal/page_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdint>

#include "allocators/allocator.h"

namespace memplan::allocators::internal {
namespace {

constexpr int kProtection = PROT_READ | PROT_WRITE;

// Flags of the mapping itself: shared for a file, so its pages are written
// back there; private for anonymous memory.
int MappingFlags(int fd) {
  return fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED;
}

// Over-reserves address space, maps the block at the first aligned address
// inside and gives the slack on both sides back.
void* MapOverAligned(size_t length, size_t alignment, int fd) {
  const size_t slack = alignment - PageSize();
  if (length > SIZE_MAX - slack) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t span = length + slack;
  void* reserved = mmap(nullptr, span, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  char* start = static_cast<char*>(reserved);
  char* aligned = reinterpret_cast<char*>(
      AlignUp(reinterpret_cast<uintptr_t>(start), alignment));
  if (mmap(aligned, length, kProtection, MappingFlags(fd) | MAP_FIXED, fd, 0) ==
      MAP_FAILED) {
    const int error = errno;
    munmap(reserved, span);
    errno = error;
    return nullptr;
  }
  if (aligned > start) munmap(start, static_cast<size_t>(aligned - start));
  char* end = aligned + length;
  if (start + span > end) munmap(end, static_cast<size_t>(start + span - end));
  return aligned;
}

}  // namespace

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t PageRounded(size_t bytes) {
  const size_t page = PageSize();
  if (bytes > SIZE_MAX - (page - 1)) return 0;
  return AlignUp(bytes, page);
}

void* MapAligned(size_t bytes, size_t alignment, int fd) {
  assert(IsPowerOfTwo(alignment));
  const size_t length = PageRounded(bytes);
  if (length == 0) {
    errno = bytes == 0 ? EINVAL : ENOMEM;
    return nullptr;
  }
  if (alignment > PageSize()) return MapOverAligned(length, alignment, fd);
  void* p = mmap(nullptr, length, kProtection, MappingFlags(fd), fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void Unmap(void* p, size_t bytes) {
  if (p == nullptr) return;
  [[maybe_unused]] const int rc = munmap(p, PageRounded(bytes));
  assert(rc == 0);
}

}  // namespace memplan::allocators::internal
