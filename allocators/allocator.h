// memplan allocators: the dynamic allocators inference engines use, behind
// one interface, so a trace can be replayed on each and compared with a
// static plan (see trace.h).
//
//   absl::StatusOr<std::unique_ptr<allocators::Allocator>> a =
//       allocators::MakeAllocator("bfc");
//   void* p = (*a)->Allocate(4096, allocators::kDefaultAlignment);
//   if (p == nullptr) { /* out of memory */ }
//   absl::Status s = (*a)->Deallocate(p);
//   allocators::AllocatorStats stats = (*a)->GetStats();
//
// Allocators: "aligned" (aligned malloc, MNN/ncnn fastMalloc), "pool" and
// "pool_indexed" (ncnn PoolAllocator), "buffer" (MNN BufferAllocator, eager
// mode), "bfc" (TensorFlow best-fit with coalescing), "recurse" (MNN: a
// buffer allocator nested in another allocator), "mmap" (MNN: a file per
// block). Where the caching ones get their memory: sub_allocator.h.
#ifndef MEMPLAN_ALLOCATORS_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_ALLOCATOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/alignment.h"

namespace memplan::allocators {

// The alignment every allocator gives when asked for less (a cache line,
// enough for any SIMD load): base::kDefaultAlignment as a size.
inline constexpr size_t kDefaultAlignment = base::kDefaultAlignment;

// What an allocator reports; every byte count is in bytes. Counts of blocks
// include the allocator's rounding (a 4-byte request to BFC counts 256).
struct AllocatorStats {
  int64_t num_allocs = 0;          // successful Allocate calls (size > 0)
  int64_t num_alloc_failures = 0;  // Allocate calls that returned nullptr
  int64_t bytes_in_use = 0;        // handed out and not yet freed
  int64_t peak_bytes_in_use = 0;   // max of bytes_in_use over the lifetime
  int64_t largest_alloc_size = 0;  // largest single block handed out
  int64_t bytes_limit = 0;         // the most it may reserve; 0 = no limit
  int64_t bytes_reserved = 0;  // taken from the source: in use + cached free
  int64_t peak_bytes_reserved = 0;       // max of bytes_reserved
  int64_t largest_free_block_bytes = 0;  // largest reusable free block
  // 1 - largest_free_block / (bytes_reserved - bytes_in_use): 0 when the free
  // memory is one block (or nothing is free), near 1 when it is scattered.
  double fragmentation = 0.0;

  // Counts a successful Allocate that handed out `bytes`: num_allocs,
  // bytes_in_use and their peaks. Inline: every allocation calls it.
  void CountHandedOut(int64_t bytes) {
    ++num_allocs;
    bytes_in_use += bytes;
    peak_bytes_in_use = std::max(peak_bytes_in_use, bytes_in_use);
    largest_alloc_size = std::max(largest_alloc_size, bytes);
  }

  // One line per field, for logs and test failures.
  std::string DebugString() const;
};

// Computes AllocatorStats::fragmentation from free bytes and the largest
// free block.
double Fragmentation(int64_t free_bytes, int64_t largest_free_block);

// The interface every allocator implements. Implementations say whether
// they are thread-safe in their class comment.
class Allocator {
 public:
  virtual ~Allocator() = default;

  // Returns a block of at least `size` bytes aligned to `alignment` (a power
  // of two; smaller values are raised to what the allocator always gives), or
  // nullptr when out of memory or the alignment is not supported. A request
  // of 0 bytes returns nullptr and counts neither as an allocation nor as a
  // failure.
  [[nodiscard]] virtual void* Allocate(size_t size, size_t alignment) = 0;

  // Returns a block to the allocator. nullptr is a no-op. A pointer this
  // allocator did not hand out, or one already freed, gives INVALID_ARGUMENT
  // and changes nothing (never undefined behaviour).
  virtual absl::Status Deallocate(void* p) = 0;

  // A consistent snapshot of the counters.
  virtual AllocatorStats GetStats() const = 0;

  // A stable name (no spaces), used in reports and metric labels.
  virtual std::string_view Name() const = 0;
};

// The names MakeAllocator knows, in a fixed order:
// "bfc", "pool", "pool_indexed", "buffer", "aligned", "recurse", "mmap".
const std::vector<std::string>& AllocatorNames();

// Creates an allocator with default options by name; NOT_FOUND otherwise.
// "recurse" nests in a BufferAllocator of its own; "mmap" makes its files in
// $TMPDIR or /tmp.
absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(std::string_view name);

// True when `value` is a power of two (alignments must be).
inline bool IsPowerOfTwo(size_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

// Rounds `value` up to a multiple of `alignment` (a power of two).
inline size_t AlignUp(size_t value, size_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_ALLOCATOR_H_
