// ncnn's PoolAllocator: freed blocks are cached ("budgets") and handed out
// again when a request is close enough in size; blocks in use ("payouts")
// are remembered so a free can be checked. Nothing is ever split or merged.
//
//   allocators::PoolAllocator pool;  // "pool": ncnn's list scan, locked
//   void* a = pool.Allocate(1000, 64);
//   absl::Status s = pool.Deallocate(a);  // cached, not freed
//   void* b = pool.Allocate(800, 64);     // b == a: 1000 * 0.75 <= 800
//   pool.Clear();                          // frees the cached blocks
//
// Reuse rule (ncnn): a cached block of `b` bytes serves a request of `s`
// bytes when s <= b && b * size_compare_ratio / 256 <= s. On a miss with at
// least size_drop_threshold blocks cached, one block goes back to the
// system: the smallest if every cached block is smaller than the request,
// the largest if every cached block is larger.
//
// Two lookups implement that same rule:
//  - kListScan ("pool"): ncnn's std::list, O(n) per call; takes the first
//    fitting block in the order blocks were freed.
//  - kSizeIndex ("pool_indexed"): a size-ordered btree, O(log n); takes the
//    smallest fitting block. A fitting block exists for one lookup exactly
//    when it exists for the other; the block chosen may differ.
#ifndef MEMPLAN_ALLOCATORS_POOL_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_POOL_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"

namespace memplan::allocators {

// How cached blocks are searched.
enum class PoolLookup {
  kListScan,   // ncnn's list scan, O(n)
  kSizeIndex,  // size-ordered index, O(log n)
};

// Options of both pool allocators.
struct PoolOptions {
  // Search structure. Default kListScan (ncnn's behaviour).
  PoolLookup lookup = PoolLookup::kListScan;
  // Reuse threshold in 1/256ths: a block of b bytes serves s bytes when
  // b * size_compare_ratio / 256 <= s. Default 192 (ncnn's 0.75).
  // REQUIRES <= 256.
  uint32_t size_compare_ratio = 192;
  // Cached blocks at which a miss drops one block. Default 10 (ncnn).
  size_t size_drop_threshold = 10;
  // Alignment of every block (larger requests are honoured). Default 64.
  // REQUIRES a power of two.
  size_t alignment = kDefaultAlignment;
};

// Pool-specific counters, beside AllocatorStats.
struct PoolCounters {
  int64_t hits = 0;           // requests served from a cached block
  int64_t misses = 0;         // requests that needed a new block
  int64_t drops = 0;          // cached blocks returned by the drop rule
  int64_t cached_blocks = 0;  // free blocks cached now
  int64_t live_blocks = 0;    // blocks handed out now
};

namespace internal {
class PoolCore;  // the policy and one lookup; defined in pool_allocator.cc
}  // namespace internal

// ncnn PoolAllocator. Thread-safe (one absl::Mutex; ncnn uses two).
class PoolAllocator final : public Allocator {
 public:
  explicit PoolAllocator(const PoolOptions& options = PoolOptions());
  PoolAllocator(const PoolAllocator&) = delete;
  PoolAllocator& operator=(const PoolAllocator&) = delete;
  // Frees cached blocks and blocks still handed out (pointers dangle).
  ~PoolAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  // "pool" or "pool_indexed".
  std::string_view Name() const override;

  // Frees every cached block (ncnn clear()); blocks in use stay.
  void Clear();
  PoolCounters Counters() const;

 private:
  const std::string_view name_;  // fixed by options.lookup
  mutable absl::Mutex mu_;
  std::unique_ptr<internal::PoolCore> core_ ABSL_PT_GUARDED_BY(mu_);
};

// ncnn UnlockedPoolAllocator: the same without a lock. Thread-compatible:
// callers serialize every call.
class UnlockedPoolAllocator final : public Allocator {
 public:
  explicit UnlockedPoolAllocator(const PoolOptions& options = PoolOptions());
  UnlockedPoolAllocator(const UnlockedPoolAllocator&) = delete;
  UnlockedPoolAllocator& operator=(const UnlockedPoolAllocator&) = delete;
  ~UnlockedPoolAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  // "pool_unlocked" or "pool_indexed_unlocked".
  std::string_view Name() const override;

  void Clear();
  PoolCounters Counters() const;

 private:
  const std::string_view name_;  // fixed by options.lookup
  std::unique_ptr<internal::PoolCore> core_;
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_POOL_ALLOCATOR_H_
