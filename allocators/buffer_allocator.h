// MNN's BufferAllocator in its two modes.
//
// Eager (BufferAllocator, the "buffer" allocator): blocks come from a
// source (aligned malloc by default) once and are never given back until
// ReleaseFree() or destruction.
// A freed block goes to a free list keyed by size. A request takes the
// smallest free block that is large enough (lower_bound); if that block is
// larger, it is split in two children that remember their parent, and the
// parent counts its children in use. When every child of a parent is free
// again, the children are merged back into the parent, and so on up.
//
//   allocators::BufferAllocator buffers;
//   void* a = buffers.Allocate(1024, 64);     // new 1024-byte block
//   absl::Status s = buffers.Deallocate(a);   // to the free list
//   void* b = buffers.Allocate(256, 64);      // b == a: split 256 + 768
//   s = buffers.Deallocate(b);                // both halves free: merged
//
// Deferred (DeferredBufferAllocator): during a planning pass the caller only
// records allocations and frees; Compute() then places every block at once
// (greedy by size, best fit between blocks whose lifetimes overlap) inside
// one block of TotalSize() bytes. Pointers exist only after Compute().
//
//   allocators::DeferredBufferAllocator plan;
//   auto x = plan.Alloc(1000);       // id 0: nothing allocated yet
//   auto y = plan.Alloc(500);        // id 1
//   absl::Status s = plan.Free(*x);
//   auto z = plan.Alloc(1000);       // id 2: may reuse x's bytes
//   s = plan.Compute();              // one block; TotalSize() == 1536
//   void* pz = *plan.Pointer(*z);
#ifndef MEMPLAN_ALLOCATORS_BUFFER_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_BUFFER_ALLOCATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"
#include "allocators/sub_allocator.h"

namespace memplan::allocators {

// MNN BufferAllocator, eager mode. Every size is rounded up to the
// allocator's alignment (default 64), so split halves stay aligned. A
// request for a larger alignment takes a free block that starts at a
// multiple of it, else a block of its own from the source (MNN's
// "separate" allocation), which joins the free list when freed.
// Blocks come from a SubAllocator (sub_allocator.h; MNN's
// BufferAllocator::Allocator): aligned malloc by default, another allocator
// for RecurseAllocator (recurse_allocator.h), files for MmapSubAllocator.
// Thread-safe (one absl::Mutex; MNN's is thread-compatible) when the source
// is thread-compatible and not shared, or thread-safe.
class BufferAllocator final : public Allocator {
 public:
  struct Options {
    // Every size is rounded up to this, and blocks are aligned to it.
    // Default kDefaultAlignment (64). REQUIRES: a power of two.
    size_t alignment = kDefaultAlignment;
    // The smallest block taken from the source (MNN's mMinAllocSize): a
    // smaller request takes a block this large and splits it, so a nested
    // allocator asks its parent less often. Default 0: exactly the
    // (rounded) request.
    size_t min_source_bytes = 0;
    // Reported by Name(). Default "buffer".
    std::string name = "buffer";
  };

  // Blocks from aligned malloc (AlignedSubAllocator), default options.
  BufferAllocator();
  // Blocks from aligned malloc.
  explicit BufferAllocator(const Options& options);
  // REQUIRES: source != nullptr.
  BufferAllocator(std::unique_ptr<SubAllocator> source, const Options& options);
  BufferAllocator(const BufferAllocator&) = delete;
  BufferAllocator& operator=(const BufferAllocator&) = delete;
  // Returns every source block, in use or not (pointers dangle).
  ~BufferAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  std::string_view Name() const override { return options_.name; }

  // Gives every wholly free source block back to the source (MNN's
  // release(false)); split blocks with a child in use stay.
  void ReleaseFree();
  // Blocks in the free list now (for tests and debugging).
  int64_t NumFreeBlocks() const;
  // Blocks taken from the source and not yet given back.
  int64_t NumSourceBlocks() const;

 private:
  using NodeHandle = int32_t;  // index into nodes_
  static constexpr NodeHandle kInvalidNode = -1;
  using FreeList = std::multimap<size_t, NodeHandle>;  // size -> free node

  // A block: a whole source block, or a half of a split parent.
  struct Node {
    char* ptr = nullptr;               // first byte
    size_t size = 0;                   // bytes, a multiple of alignment_
    NodeHandle parent = kInvalidNode;  // kInvalidNode for a source block
    std::array<NodeHandle, 2> children{kInvalidNode, kInvalidNode};  // split
    int use_count = 0;            // children in use or split further
    bool in_free_list = false;    // free_pos is valid
    FreeList::iterator free_pos;  // where the node sits in free_list_
  };

  NodeHandle NewNode() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFree(NodeHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseFree(NodeHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeHandle TakeFree(FreeList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeHandle TakeAlignedBlock(size_t need, size_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeHandle Split(NodeHandle h, size_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeHandle NewSourceBlock(size_t size, size_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeHandle TakeBlock(size_t need) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* HandOut(NodeHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnNode(NodeHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const size_t alignment_;         // options_.alignment
  const size_t min_source_bytes_;  // options_.min_source_bytes, aligned
  const std::unique_ptr<SubAllocator> source_;
  mutable absl::Mutex mu_;
  std::vector<Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeHandle> unused_nodes_ ABSL_GUARDED_BY(mu_);  // recyclable
  FreeList free_list_ ABSL_GUARDED_BY(mu_);
  // Pointer handed out -> its node.
  absl::flat_hash_map<void*, NodeHandle> used_ ABSL_GUARDED_BY(mu_);
  // Source blocks -> their root node.
  absl::flat_hash_map<void*, NodeHandle> roots_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

// MNN's deferred mode: record, Compute(), then use. The whole API is
// thread-compatible. Ids are dense, in allocation order from 0.
class DeferredBufferAllocator {
 public:
  using BlockId = int64_t;  // the index of the Alloc call

  // REQUIRES: alignment is a power of two.
  explicit DeferredBufferAllocator(size_t alignment = kDefaultAlignment);
  DeferredBufferAllocator(const DeferredBufferAllocator&) = delete;
  DeferredBufferAllocator& operator=(const DeferredBufferAllocator&) = delete;
  ~DeferredBufferAllocator();

  // Records a request of `size` bytes (rounded up to the alignment).
  // INVALID_ARGUMENT for 0 bytes, RESOURCE_EXHAUSTED when the requests
  // would pass 2^62 bytes in all (offsets could not be counted),
  // FAILED_PRECONDITION after Compute().
  absl::StatusOr<BlockId> Alloc(size_t size);
  // Records the end of a block's life; INVALID_ARGUMENT for an unknown id or
  // a second free, FAILED_PRECONDITION after Compute(). Blocks never freed
  // live to the end.
  absl::Status Free(BlockId id);
  // Places every block and allocates the single backing block.
  // RESOURCE_EXHAUSTED when that allocation fails, FAILED_PRECONDITION when
  // called twice. O(n^2) in the worst case (n blocks).
  absl::Status Compute();

  // Where a block starts inside the backing block; FAILED_PRECONDITION
  // before Compute(), INVALID_ARGUMENT for an unknown id.
  absl::StatusOr<size_t> Offset(BlockId id) const;
  // Base + Offset(id); same errors.
  absl::StatusOr<void*> Pointer(BlockId id) const;
  // Bytes of the backing block (0 before Compute() or with no blocks).
  size_t TotalSize() const { return total_size_; }
  // Bytes a block takes (its size rounded up to the alignment).
  absl::StatusOr<size_t> Size(BlockId id) const;
  // Forgets every record and frees the backing block.
  void Reset();

 private:
  // One recorded block.
  struct Record {
    size_t size = 0;    // bytes, rounded up to alignment_
    int64_t birth = 0;  // clock at Alloc
    int64_t death = 0;  // clock at Free; kNever if never freed
    size_t offset = 0;  // set by Compute()
  };
  static constexpr int64_t kNever = INT64_MAX;

  absl::Status CheckId(BlockId id) const;
  size_t Place(size_t index, const std::vector<size_t>& placed) const;

  const size_t alignment_;
  std::vector<Record> records_;
  int64_t clock_ = 0;      // advances at every Alloc and Free
  size_t total_ = 0;       // rounded bytes of every request
  bool computed_ = false;  // Compute() has run
  void* base_ = nullptr;   // the backing block
  size_t total_size_ = 0;  // its size
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_BUFFER_ALLOCATOR_H_
