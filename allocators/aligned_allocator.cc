#include "allocators/aligned_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_format.h"

namespace memplan::allocators {

size_t AlignedMallocBytes(size_t size, size_t alignment) {
  if (!IsPowerOfTwo(alignment)) return 0;
  alignment = std::max(alignment, sizeof(void*));
  const size_t extra = sizeof(void*) + alignment + kOverreadBytes;
  if (size > std::numeric_limits<size_t>::max() - extra) return 0;
  return size + extra;
}

void* AlignedMalloc(size_t size, size_t alignment) {
  const size_t bytes = AlignedMallocBytes(size, alignment);
  if (bytes == 0) return nullptr;
  alignment = std::max(alignment, sizeof(void*));
  auto* origin = static_cast<unsigned char*>(std::malloc(bytes));
  if (origin == nullptr) return nullptr;
  // The first aligned address that leaves room for the origin pointer.
  uintptr_t aligned =
      AlignUp(reinterpret_cast<uintptr_t>(origin) + sizeof(void*), alignment);
  auto** slot = reinterpret_cast<unsigned char**>(aligned) - 1;
  *slot = origin;
  return reinterpret_cast<void*>(aligned);
}

void AlignedFree(void* p) {
  if (p == nullptr) return;
  std::free(*(static_cast<unsigned char**>(p) - 1));
}

AlignedAllocator::~AlignedAllocator() {
  live_.FreeAll([](void* p, size_t) { AlignedFree(p); });
}

void* AlignedAllocator::Allocate(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  void* p = nullptr;
  if (IsPowerOfTwo(alignment)) {
    alignment = std::max(alignment, kDefaultAlignment);
    p = AlignedMalloc(size, alignment);
  }
  if (p == nullptr) {
    live_.CountFailure();
    return nullptr;
  }
  live_.Add(p, AlignedMallocBytes(size, alignment));
  return p;
}

absl::Status AlignedAllocator::Deallocate(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::StatusOr<size_t> bytes = live_.Remove(p);
  if (!bytes.ok()) return bytes.status();
  AlignedFree(p);
  return absl::OkStatus();
}

AllocatorStats AlignedAllocator::GetStats() const { return live_.Stats(); }

}  // namespace memplan::allocators
