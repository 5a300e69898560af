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
  absl::MutexLock lock(&mu_);
  for (const auto& [p, size] : live_) AlignedFree(p);
}

void* AlignedAllocator::Allocate(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  void* p = IsPowerOfTwo(alignment)
                ? AlignedMalloc(size, std::max(alignment, kDefaultAlignment))
                : nullptr;
  absl::MutexLock lock(&mu_);
  if (p == nullptr) {
    ++stats_.num_alloc_failures;
    return nullptr;
  }
  live_.emplace(p, size);
  const auto bytes = static_cast<int64_t>(size);
  stats_.CountHandedOut(bytes);
  return p;
}

absl::Status AlignedAllocator::Deallocate(void* p) {
  if (p == nullptr) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "aligned: pointer %p was not allocated here or was already freed",
          p));
    }
    stats_.bytes_in_use -= static_cast<int64_t>(it->second);
    live_.erase(it);
  }
  AlignedFree(p);
  return absl::OkStatus();
}

AllocatorStats AlignedAllocator::GetStats() const {
  absl::MutexLock lock(&mu_);
  AllocatorStats stats = stats_;
  stats.bytes_reserved = stats.bytes_in_use;
  stats.peak_bytes_reserved = stats.peak_bytes_in_use;
  return stats;
}

}  // namespace memplan::allocators
