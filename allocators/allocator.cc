#include "allocators/allocator.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "allocators/aligned_allocator.h"
#include "allocators/bfc_allocator.h"
#include "allocators/buffer_allocator.h"
#include "allocators/mmap_allocator.h"
#include "allocators/pool_allocator.h"
#include "allocators/recurse_allocator.h"

namespace memplan::allocators {

std::string AllocatorStats::DebugString() const {
  return absl::StrFormat(
      "num_allocs: %d\nnum_alloc_failures: %d\nbytes_in_use: %d\n"
      "peak_bytes_in_use: %d\nlargest_alloc_size: %d\nbytes_limit: %d\n"
      "bytes_reserved: %d\npeak_bytes_reserved: %d\n"
      "largest_free_block_bytes: %d\nfragmentation: %.4f\n",
      num_allocs, num_alloc_failures, bytes_in_use, peak_bytes_in_use,
      largest_alloc_size, bytes_limit, bytes_reserved, peak_bytes_reserved,
      largest_free_block_bytes, fragmentation);
}

double Fragmentation(int64_t free_bytes, int64_t largest_free_block) {
  if (free_bytes <= 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) /
                   static_cast<double>(free_bytes);
}

const std::vector<std::string>& AllocatorNames() {
  static const auto* names = new std::vector<std::string>{
      "bfc", "pool", "pool_indexed", "buffer", "aligned", "recurse", "mmap"};
  return *names;
}

absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(
    std::string_view name) {
  if (name == "bfc") {
    return std::make_unique<BfcAllocator>(BfcAllocator::Options());
  }
  if (name == "pool") return std::make_unique<PoolAllocator>();
  if (name == "pool_indexed") {
    PoolOptions options;
    options.lookup = PoolLookup::kSizeIndex;
    return std::make_unique<PoolAllocator>(options);
  }
  if (name == "buffer") return std::make_unique<BufferAllocator>();
  if (name == "aligned") return std::make_unique<AlignedAllocator>();
  if (name == "recurse") {
    // MNN's shape: a buffer allocator nested in another one.
    return std::make_unique<RecurseAllocator>(
        std::make_unique<BufferAllocator>(), RecurseAllocator::Options());
  }
  if (name == "mmap") return std::make_unique<MmapAllocator>();
  return absl::NotFoundError(
      absl::StrFormat("unknown allocator '%s' (known: %s)",
                      absl::string_view(name.data(), name.size()),
                      absl::StrJoin(AllocatorNames(), ", ")));
}

}  // namespace memplan::allocators
