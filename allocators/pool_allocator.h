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

// A lock that does nothing, for a pool whose callers serialize every call.
class ABSL_LOCKABLE NoLock {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {}
  void Unlock() ABSL_UNLOCK_FUNCTION() {}
};

// ncnn's pool allocator, parameterized by the lock around each call:
// PoolAllocator (absl::Mutex; thread-safe; ncnn uses two mutexes) and
// UnlockedPoolAllocator (NoLock; thread-compatible: callers serialize every
// call, as with ncnn's UnlockedPoolAllocator).
template <typename Lock>
class BasicPoolAllocator final : public Allocator {
 public:
  explicit BasicPoolAllocator(const PoolOptions& options = PoolOptions());
  BasicPoolAllocator(const BasicPoolAllocator&) = delete;
  BasicPoolAllocator& operator=(const BasicPoolAllocator&) = delete;
  // Frees cached blocks and blocks still handed out (pointers dangle).
  ~BasicPoolAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  // "pool" or "pool_indexed", with "_unlocked" appended without a lock.
  std::string_view Name() const override;

  // Frees every cached block (ncnn clear()); blocks in use stay.
  void Clear();
  PoolCounters Counters() const;

 private:
  const std::string_view name_;  // fixed by options.lookup and Lock
  mutable Lock mu_;
  std::unique_ptr<internal::PoolCore> core_ ABSL_PT_GUARDED_BY(mu_);
};

using PoolAllocator = BasicPoolAllocator<absl::Mutex>;
using UnlockedPoolAllocator = BasicPoolAllocator<NoLock>;
extern template class BasicPoolAllocator<absl::Mutex>;
extern template class BasicPoolAllocator<NoLock>;

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_POOL_ALLOCATOR_H_
