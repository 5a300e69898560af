// MNN's recurse allocator: a buffer allocator (buffer_allocator.h) whose
// blocks are chunks of another allocator's memory, the parent, so
// allocators nest: a session's dynamic memory inside the runtime's, a
// call's inside the server's. Chunks are cached, split and merged as in
// BufferAllocator; they go back to the parent on ReleaseFree() (the wholly
// free ones) and on destruction (all of them).
//
//   allocators::BfcAllocator server(allocators::BfcAllocator::Options());
//   {
//     allocators::RecurseAllocator call(server);  // server must outlive it
//     void* p = call.Allocate(1000, 64);  // a 1024-byte chunk from server
//     absl::Status s = call.Deallocate(p);  // cached in call
//   }  // call's chunks are back in server
//
// GetStats() is this allocator's own view: bytes_reserved counts the chunks
// it holds from the parent (the parent's stats count them as in use, with
// the parent's own rounding). Thread-safe when the parent is (every
// allocator of this library is): the parent is called under this
// allocator's lock, never the other way round.
#ifndef MEMPLAN_ALLOCATORS_RECURSE_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_RECURSE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "allocators/allocator.h"
#include "allocators/buffer_allocator.h"

namespace memplan::allocators {

class RecurseAllocator final : public Allocator {
 public:
  struct Options {
    // Every size is rounded up to this, and chunks are aligned to it.
    // Default kDefaultAlignment (64). REQUIRES: a power of two.
    size_t alignment = kDefaultAlignment;
    // The smallest chunk asked of the parent; smaller requests split it.
    // Default 0: exactly the (rounded) request, as MNN does.
    size_t min_chunk_bytes = 0;
  };

  // Borrows `parent`, which must outlive this allocator. Default options.
  explicit RecurseAllocator(Allocator& parent);
  RecurseAllocator(Allocator& parent, const Options& options);
  // Owns `parent` (MakeAllocator("recurse") nests in a BufferAllocator).
  // REQUIRES: parent != nullptr.
  RecurseAllocator(std::unique_ptr<Allocator> parent, const Options& options);
  RecurseAllocator(const RecurseAllocator&) = delete;
  RecurseAllocator& operator=(const RecurseAllocator&) = delete;
  // Gives every chunk back to the parent, in use or not (pointers dangle).
  ~RecurseAllocator() override = default;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override {
    return chunks_.Allocate(size, alignment);
  }
  absl::Status Deallocate(void* p) override { return chunks_.Deallocate(p); }
  AllocatorStats GetStats() const override { return chunks_.GetStats(); }
  std::string_view Name() const override { return chunks_.Name(); }

  // Gives every wholly free chunk back to the parent now.
  void ReleaseFree() { chunks_.ReleaseFree(); }
  // Chunks held from the parent now.
  int64_t NumChunks() const { return chunks_.NumSourceBlocks(); }
  // Blocks in the free list now (for tests and debugging).
  int64_t NumFreeBlocks() const { return chunks_.NumFreeBlocks(); }
  Allocator& parent() const { return parent_; }

 private:
  // Declared first, destroyed last: chunks_ returns its chunks to it.
  const std::unique_ptr<Allocator> owned_parent_;  // null when borrowed
  Allocator& parent_;
  BufferAllocator chunks_;  // the buffer allocator over parent_
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_RECURSE_ALLOCATOR_H_
