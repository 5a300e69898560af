// Aligned malloc as MNN's MNNMemoryAllocAlign and ncnn's fastMalloc do it:
// over-allocate with malloc, round the pointer up to the alignment and keep
// the pointer malloc returned in the word just before the aligned block.
// A few bytes of padding after each block let vectorized kernels read past
// the end without faulting.
//
//   void* p = allocators::AlignedMalloc(1000, 64);  // p % 64 == 0
//   allocators::AlignedFree(p);
//
//   allocators::AlignedAllocator a;  // the same, with stats and checks
//   void* q = a.Allocate(1000, 64);
//   absl::Status s = a.Deallocate(q);
#ifndef MEMPLAN_ALLOCATORS_ALIGNED_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_ALIGNED_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"
#include "allocators/internal/live_blocks.h"
#include "allocators/sub_allocator.h"

namespace memplan::allocators {

// Bytes readable past the end of every block (ncnn's NCNN_MALLOC_OVERREAD).
inline constexpr size_t kOverreadBytes = 64;

// Returns `size` bytes aligned to `alignment` (a power of two; values below
// sizeof(void*) are raised to it), followed by kOverreadBytes of padding, or
// nullptr when malloc fails or the request overflows. Free with AlignedFree.
// Thread-safe (as malloc).
void* AlignedMalloc(size_t size, size_t alignment);

// The bytes AlignedMalloc(size, alignment) asks malloc for: the block, the
// word holding malloc's pointer, the alignment's padding and the over-read
// (alignment raised as AlignedMalloc raises it); 0 when that overflows or
// the alignment is not a power of two.
size_t AlignedMallocBytes(size_t size, size_t alignment);

// Frees a block from AlignedMalloc; nullptr is a no-op. Any other pointer is
// undefined behaviour: use AlignedAllocator when pointers may be wrong.
void AlignedFree(void* p);

// AlignedMalloc as a source of blocks (MNN's DefaultAllocator, behind the
// buffer allocator): blocks keep the over-read padding. Thread-safe.
class AlignedSubAllocator final : public SubAllocator {
 public:
  void* Alloc(size_t alignment, size_t bytes) override {
    return AlignedMalloc(bytes, alignment);
  }
  void Free(void* ptr, size_t /*bytes*/) override { AlignedFree(ptr); }
};

// Allocator over AlignedMalloc that tracks live blocks, so a wrong pointer
// is an error rather than a crash, and keeps stats. A block counts the
// bytes asked of malloc for it (AlignedMallocBytes: 100 bytes at 64 count
// 236), as mmap counts its pages: what the system gave (malloc's own
// headers are not counted). Nothing is cached: bytes_reserved equals
// bytes_in_use and fragmentation is always 0. Thread-safe.
class AlignedAllocator final : public Allocator {
 public:
  AlignedAllocator() : live_("aligned") {}
  AlignedAllocator(const AlignedAllocator&) = delete;
  AlignedAllocator& operator=(const AlignedAllocator&) = delete;
  // Frees every block still live.
  ~AlignedAllocator() override;

  // Alignments below kDefaultAlignment are raised to it.
  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  std::string_view Name() const override { return "aligned"; }

 private:
  internal::LiveBlocks live_;  // with the requested sizes
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_ALIGNED_ALLOCATOR_H_
