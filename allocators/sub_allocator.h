// Where an allocator that caches memory gets its large blocks: TensorFlow's
// SubAllocator (BFC's regions), MNN's BufferAllocator::Allocator (a buffer
// allocator's chunks). Swapping the source changes where memory comes from
// without changing the allocator:
//
//   allocators::BfcAllocator server(allocators::BfcAllocator::Options());
//   allocators::BufferAllocator nested(
//       std::make_unique<allocators::ParentSubAllocator>(server),
//       allocators::BufferAllocator::Options());
//   void* p = nested.Allocate(1000, 64);  // a 1024-byte chunk of server's
//
// Sources: SystemSubAllocator (pages from the kernel, BFC's default),
// AlignedSubAllocator (aligned_allocator.h: aligned malloc, the buffer
// allocator's default), ParentSubAllocator (another Allocator: MNN's
// "recurse", see recurse_allocator.h), MmapSubAllocator (mmap_allocator.h:
// one file per block).
#ifndef MEMPLAN_ALLOCATORS_SUB_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_SUB_ALLOCATOR_H_

#include <cstddef>

#include "allocators/allocator.h"

namespace memplan::allocators {

// The allocators call a source under their own lock, so a source need only
// be thread-compatible unless it is shared (each class says which it is).
class SubAllocator {
 public:
  virtual ~SubAllocator() = default;
  // Returns `bytes` bytes aligned to `alignment` (a power of two), or
  // nullptr to refuse.
  virtual void* Alloc(size_t alignment, size_t bytes) = 0;
  // Returns a block from Alloc; `bytes` is the size it was asked for.
  virtual void Free(void* ptr, size_t bytes) = 0;
};

// Pages straight from the kernel (anonymous mmap), given back by munmap at
// Free: a region's memory leaves the process as soon as it is freed, which
// glibc's free() does not promise for blocks under its mmap threshold, so
// a server's memory can return to its baseline after a call. Sizes are
// rounded up to pages; any power-of-two alignment is met. Thread-safe.
class SystemSubAllocator final : public SubAllocator {
 public:
  void* Alloc(size_t alignment, size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
};

// Blocks from another Allocator, the parent (MNN's RecurseAllocator): Alloc
// is parent.Allocate, Free is parent.Deallocate, so the blocks of the
// allocator above are chunks of the parent's memory. Thread-safe when the
// parent is. The parent must outlive it.
class ParentSubAllocator final : public SubAllocator {
 public:
  explicit ParentSubAllocator(Allocator& parent) : parent_(parent) {}

  void* Alloc(size_t alignment, size_t bytes) override {
    return parent_.Allocate(bytes, alignment);
  }
  // REQUIRES: ptr came from Alloc and was not freed (asserted).
  void Free(void* ptr, size_t bytes) override;

  Allocator& parent() const { return parent_; }

 private:
  Allocator& parent_;  // not owned
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_SUB_ALLOCATOR_H_
