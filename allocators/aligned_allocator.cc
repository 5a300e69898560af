#include "allocators/aligned_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_format.h"

namespace memplan::allocators {

void* AlignedMalloc(size_t size, size_t alignment) {
  if (!IsPowerOfTwo(alignment)) return nullptr;
  alignment = std::max(alignment, sizeof(void*));
  const size_t extra = sizeof(void*) + alignment + kOverreadBytes;
  if (size > std::numeric_limits<size_t>::max() - extra) return nullptr;
  auto* origin = static_cast<unsigned char*>(std::malloc(size + extra));
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
  void* p = IsPowerOfTwo(alignment)
                ? AlignedMalloc(size, std::max(alignment, kDefaultAlignment))
                : nullptr;
  if (p == nullptr) {
    live_.CountFailure();
    return nullptr;
  }
  live_.Add(p, size);
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
