// TensorFlow's BFC allocator (best-fit with coalescing), a version of Doug
// Lea's dlmalloc: memory comes from a sub-allocator in large regions, is
// cut into chunks, and chunks that are freed merge with free neighbours.
//
//   allocators::BfcAllocator::Options options;
//   options.memory_limit = 1 << 30;
//   allocators::BfcAllocator bfc(options);
//   void* p = bfc.Allocate(4, 64);        // one 256-byte chunk
//   absl::Status s = bfc.Deallocate(p);   // merged back into its region
//   std::string dump = bfc.MemoryDump();  // bins, then chunks by address
//
// How it works (as in TF's bfc_allocator.cc):
//  - Sizes are rounded up to 256 bytes (kMinAllocationSize). Free chunks sit
//    in 21 bins; bin i holds chunks of [256 << i, 256 << (i + 1)) bytes (the
//    last bin everything larger), each bin a set ordered by (size, address).
//  - Allocation searches from the smallest bin that could fit upward and
//    takes the smallest chunk that fits. The chunk is split when it is at
//    least twice the request, or when it would waste at least
//    kMaxInternalFragmentation (128 MiB) on padding.
//  - Chunks are addressed by handle (an index into a vector,
//    kInvalidChunkHandle as sentinel, freed handles recycled) and linked to
//    their physical neighbours (prev/next). A free merges the chunk with a
//    free next and a free prev neighbour.
//  - A region manager maps pointers to chunks: regions sorted by end
//    address (binary search), and per region one handle slot per 256 bytes.
//  - With allow_growth, regions start at initial_region_bytes and double;
//    when the sub-allocator refuses, the request backs off by 0.9 until it
//    fits or is too small. Regions never exceed the memory limit in total.
//  - With garbage_collection, wholly free regions are given back to the
//    sub-allocator before an allocation fails, so a larger region may fit.
//  - ReleaseFreeRegions() gives them back on demand (at the end of a call),
//    and destruction gives back every region, so with the default
//    SystemSubAllocator the process's memory returns to its baseline.
//
// Alignments up to 256 are always met; larger ones are not supported
// (Allocate returns nullptr). Thread-safe: one absl::Mutex.
#ifndef MEMPLAN_ALLOCATORS_BFC_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_BFC_ALLOCATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"
#include "allocators/sub_allocator.h"

namespace memplan::allocators {

namespace internal {

// A free list of equal-sized blocks: recycles the nodes of BFC's bins so
// that moving a chunk between bins does not call malloc. Blocks of any
// other size go to operator new/delete. Thread-compatible.
class NodeFreeList {
 public:
  NodeFreeList() = default;
  NodeFreeList(const NodeFreeList&) = delete;
  NodeFreeList& operator=(const NodeFreeList&) = delete;
  ~NodeFreeList();

  // A recycled block of `bytes` bytes, else a new one.
  void* Get(size_t bytes);
  // Keeps the block for reuse when it has the recycled size.
  void Put(void* p, size_t bytes);

 private:
  struct Link {
    Link* next;  // the next free block
  };
  Link* head_ = nullptr;    // free blocks
  size_t block_bytes_ = 0;  // the recycled size: the first one asked for
};

// A std::allocator replacement that draws from a NodeFreeList.
template <typename T>
class RecyclingAllocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  explicit RecyclingAllocator(NodeFreeList* list) : list_(list) {}
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>& other)  // NOLINT: rebind
      : list_(other.list()) {}

  T* allocate(size_t n) { return static_cast<T*>(list_->Get(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { list_->Put(p, n * sizeof(T)); }
  NodeFreeList* list() const { return list_; }

  friend bool operator==(const RecyclingAllocator& a,
                         const RecyclingAllocator& b) {
    return a.list_ == b.list_;
  }
  friend bool operator!=(const RecyclingAllocator& a,
                         const RecyclingAllocator& b) {
    return a.list_ != b.list_;
  }

 private:
  NodeFreeList* list_;  // not owned
};

}  // namespace internal

class BfcAllocator final : public Allocator {
 public:
  // Chunks are multiples of this many bytes, and aligned to it.
  static constexpr size_t kMinAllocationSize = 256;
  static constexpr int kNumBins = 21;
  // A fitting chunk is split if the padding would reach this (TF's rule).
  static constexpr size_t kMaxInternalFragmentation = size_t{128} << 20;

  struct Options {
    // The most the allocator takes from the sub-allocator, in total (one
    // above INT64_MAX is taken as that, rounded down to 256 bytes).
    // Default 1 GiB. REQUIRES > 0.
    size_t memory_limit = size_t{1} << 30;
    // true: start with a region of initial_region_bytes and grow by regions
    // that double. false: one region of memory_limit bytes on first use.
    // Default true.
    bool allow_growth = true;
    // The first region's size when allow_growth (TF: 2 MiB; below 256
    // bytes, 256). Default 2 MiB.
    size_t initial_region_bytes = size_t{2} << 20;
    // Give wholly free regions back before failing an allocation (TF's
    // garbage_collection). Default false.
    bool garbage_collection = false;
    // Reported by Name(). Default "bfc".
    std::string name = "bfc";
  };

  // Uses a SystemSubAllocator.
  explicit BfcAllocator(const Options& options);
  // REQUIRES: sub_allocator != nullptr.
  BfcAllocator(std::unique_ptr<SubAllocator> sub_allocator,
               const Options& options);
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;
  // Gives every region back (pointers still handed out dangle).
  ~BfcAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  std::string_view Name() const override { return options_.name; }

  // The chunk size behind a live pointer (rounded), or INVALID_ARGUMENT.
  absl::StatusOr<size_t> AllocatedSize(const void* p) const;
  // The size that was asked for, or INVALID_ARGUMENT.
  absl::StatusOr<size_t> RequestedSize(const void* p) const;
  // Regions taken from the sub-allocator now.
  int NumRegions() const;
  // Free chunks in all bins now.
  int NumFreeChunks() const;
  // The size the next region would have (grows by doubling).
  size_t CurrentRegionBytes() const;
  // Gives every wholly free region back to the sub-allocator now (TF's
  // garbage collection, on demand) and returns the bytes given back; when
  // no region is left, growth starts again from initial_region_bytes.
  // Regions with a chunk in use stay.
  int64_t ReleaseFreeRegions();
  // A human-readable dump: bins, then every chunk in address order.
  std::string MemoryDump() const;

  // Rounds a request up to a multiple of kMinAllocationSize.
  static size_t RoundedBytes(size_t bytes);
  // The bin a chunk of `bytes` bytes belongs to.
  static int BinNumForSize(size_t bytes);

 private:
  // The options as the allocator runs them (see Options).
  static Options Sane(Options options);

  using ChunkHandle = int32_t;  // index into chunks_
  static constexpr ChunkHandle kInvalidChunkHandle = -1;
  static constexpr int kInvalidBinNum = -1;

  // A piece of a region, free or in use.
  struct Chunk {
    char* ptr = nullptr;         // first byte
    size_t size = 0;             // bytes, a multiple of kMinAllocationSize
    size_t requested_size = 0;   // what the caller asked for; 0 when free
    int64_t allocation_id = -1;  // -1 when free
    ChunkHandle prev = kInvalidChunkHandle;  // physical neighbour below
    ChunkHandle next = kInvalidChunkHandle;  // physical neighbour above
    int bin_num = kInvalidBinNum;  // bin holding it, when free and binned
    bool in_use() const { return allocation_id != -1; }
  };

  // A lookup key: the smallest chunk of at least `size` bytes.
  struct SizeProbe {
    size_t size;  // bytes
  };
  // Orders free chunks by (size, address); a SizeProbe sorts before every
  // chunk of its size.
  struct ChunkOrder {
    using is_transparent = void;
    const std::vector<Chunk>* chunks;  // the allocator's chunk table
    bool operator()(ChunkHandle a, ChunkHandle b) const;
    bool operator()(ChunkHandle a, SizeProbe b) const;
    bool operator()(SizeProbe a, ChunkHandle b) const;
  };
  using FreeChunkSet = std::set<ChunkHandle, ChunkOrder,
                                internal::RecyclingAllocator<ChunkHandle>>;

  // A contiguous block from the sub-allocator, with one handle slot per
  // kMinAllocationSize bytes (the chunk starting there, if any).
  struct Region {
    char* ptr = nullptr;               // first byte
    size_t size = 0;                   // bytes
    std::vector<ChunkHandle> handles;  // size / kMinAllocationSize slots
    char* end() const { return ptr + size; }
  };

  // Maps pointers to chunk handles; regions sorted by end address.
  class RegionManager {
   public:
    void AddRegion(char* ptr, size_t size);
    void RemoveRegion(char* ptr);
    // The handle of the chunk starting exactly at p, or kInvalidChunkHandle.
    ChunkHandle GetHandle(const void* p) const;
    void SetHandle(const void* p, ChunkHandle h);
    void Erase(const void* p) { SetHandle(p, kInvalidChunkHandle); }
    const std::vector<Region>& regions() const { return regions_; }

   private:
    const Region* RegionFor(const void* p) const;
    std::vector<Region> regions_;  // sorted by end()
  };

  // The first region's size, from the options.
  size_t InitialRegionBytes() const;
  void* AllocateLocked(size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* FindChunkPtr(int bin_num, size_t rounded, size_t requested)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Extend(size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* AllocRegion(size_t rounded, size_t* bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DeallocateFreeRegions(size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<char*> FreeRegions(size_t* bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RegionIsFree(const Region& region) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeallocateRegion(char* ptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ChunkHandle AllocateChunk() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeallocateChunk(ChunkHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SplitChunk(ChunkHandle h, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Merge(ChunkHandle h1, ChunkHandle h2) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ChunkHandle TryToCoalesce(ChunkHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFreeChunkIntoBin(ChunkHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFreeChunkFromBin(ChunkHandle h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ChunkHandle LiveChunk(const void* p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t LargestFreeChunk() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const std::unique_ptr<SubAllocator> sub_allocator_;
  mutable absl::Mutex mu_;
  // Chunk table; handles index it. Bins' comparators point at it.
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  // Head of the recycled handles, linked through Chunk::next.
  ChunkHandle free_chunk_handles_ ABSL_GUARDED_BY(mu_) = kInvalidChunkHandle;
  internal::NodeFreeList bin_nodes_ ABSL_GUARDED_BY(mu_);  // before bins_
  std::vector<FreeChunkSet> bins_ ABSL_GUARDED_BY(mu_);    // kNumBins bins
  uint32_t nonempty_bins_ ABSL_GUARDED_BY(mu_) = 0;  // bit b: bins_[b] used
  RegionManager region_manager_ ABSL_GUARDED_BY(mu_);
  size_t curr_region_bytes_ ABSL_GUARDED_BY(mu_);  // next region's size
  int64_t next_allocation_id_ ABSL_GUARDED_BY(mu_) = 1;
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_BFC_ALLOCATOR_H_
