#include "allocators/pool_allocator.h"

#include <algorithm>
#include <cstdint>
#include <list>
#include <type_traits>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "allocators/aligned_allocator.h"

namespace memplan::allocators {
namespace internal {

// The reuse policy and the bookkeeping both lookups share; subclasses keep
// the cached ("budget") and live ("payout") blocks. Thread-compatible.
class PoolCore {
 public:
  explicit PoolCore(const PoolOptions& options) : options_(options) {}
  virtual ~PoolCore() = default;

  // The pool's name when locked; "_unlocked" is appended otherwise.
  virtual std::string_view BaseName() const = 0;
  // Frees every cached block.
  virtual void Clear() = 0;
  // Frees every block, cached or live (destruction).
  virtual void FreeAll() = 0;

  // ncnn fastMalloc: a cached block if one fits, else the drop rule and a
  // new block.
  void* Allocate(size_t size, size_t alignment) {
    if (size == 0) return nullptr;
    if (!IsPowerOfTwo(alignment)) return Fail();
    if (void* p = TakeCached(size, alignment)) return p;
    MaybeDrop(size);
    void* p = AlignedMalloc(size, std::max(alignment, options_.alignment));
    if (p == nullptr) return Fail();
    ++counters_.misses;
    AddPayout(p, size);
    OnHandedOut(size);
    return p;
  }

  // ncnn fastFree: the block goes back to the cache; unknown pointers are an
  // error (ncnn frees them blindly).
  absl::Status Deallocate(void* p) {
    if (p == nullptr) return absl::OkStatus();
    size_t size = 0;
    if (!RemovePayout(p, &size)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: pointer %p was not allocated here or was already freed",
          BaseName(), p));
    }
    AddBudget(size, p);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    cached_bytes_ += static_cast<int64_t>(size);
    return absl::OkStatus();
  }

  // Counters plus what only the lookup knows.
  AllocatorStats Stats() const {
    AllocatorStats stats = stats_;
    stats.bytes_reserved = stats.bytes_in_use + cached_bytes_;
    stats.largest_free_block_bytes = LargestBudget();
    stats.fragmentation =
        Fragmentation(cached_bytes_, stats.largest_free_block_bytes);
    return stats;
  }

  PoolCounters Counters() const {
    PoolCounters counters = counters_;
    counters.cached_blocks = NumBudgets();
    counters.live_blocks = NumPayouts();
    return counters;
  }

 protected:
  // True when a cached block of `block` bytes at `p` may serve the request.
  bool Fits(size_t block, const void* p, size_t size, size_t alignment) const {
    return size <= block &&
           (block * options_.size_compare_ratio >> 8) <= size &&
           (reinterpret_cast<uintptr_t>(p) & (alignment - 1)) == 0;
  }

  // Bookkeeping for a cached block that a request took.
  void* OnHit(void* p, size_t block) {
    ++counters_.hits;
    cached_bytes_ -= static_cast<int64_t>(block);
    AddPayout(p, block);
    OnHandedOut(block);
    return p;
  }

  // Bookkeeping for a cached block the drop rule freed.
  void OnDrop(void* p, size_t block) {
    ++counters_.drops;
    cached_bytes_ -= static_cast<int64_t>(block);
    stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved,
                                          stats_.bytes_in_use + cached_bytes_);
    AlignedFree(p);
  }

  // Resets the byte counters after Clear/FreeAll.
  void OnCacheCleared() { cached_bytes_ = 0; }

  const PoolOptions options_;

 private:
  // A fitting cached block moved to the payouts, or nullptr.
  virtual void* TakeCached(size_t size, size_t alignment) = 0;
  // On a miss: frees one cached block when the drop rule says so.
  virtual void MaybeDrop(size_t size) = 0;
  virtual void AddBudget(size_t size, void* p) = 0;
  virtual void AddPayout(void* p, size_t size) = 0;
  // Removes `p` from the payouts and reports its size; false if unknown.
  virtual bool RemovePayout(void* p, size_t* size) = 0;
  virtual int64_t LargestBudget() const = 0;
  virtual int64_t NumBudgets() const = 0;
  virtual int64_t NumPayouts() const = 0;

  // Counts a failed request; returns nullptr for the caller.
  void* Fail() {
    ++stats_.num_alloc_failures;
    return nullptr;
  }

  // Counts a block handed out.
  void OnHandedOut(size_t block) {
    const auto bytes = static_cast<int64_t>(block);
    stats_.CountHandedOut(bytes);
    stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved,
                                          stats_.bytes_in_use + cached_bytes_);
  }

  AllocatorStats stats_;
  PoolCounters counters_;
  int64_t cached_bytes_ = 0;
};

namespace {

using Block = std::pair<size_t, void*>;  // (size in bytes, pointer)

// ncnn's lookup: two lists scanned front to back.
class ListPoolCore final : public PoolCore {
 public:
  using PoolCore::PoolCore;
  ~ListPoolCore() override { FreeAll(); }

  std::string_view BaseName() const override { return "pool"; }

  void Clear() override {
    for (const Block& b : budgets_) AlignedFree(b.second);
    budgets_.clear();
    OnCacheCleared();
  }

  void FreeAll() override {
    Clear();
    for (const Block& b : payouts_) AlignedFree(b.second);
    payouts_.clear();
  }

 private:
  void* TakeCached(size_t size, size_t alignment) override {
    for (auto it = budgets_.begin(); it != budgets_.end(); ++it) {
      if (Fits(it->first, it->second, size, alignment)) {
        const Block b = *it;
        budgets_.erase(it);
        return OnHit(b.second, b.first);
      }
    }
    return nullptr;
  }

  void MaybeDrop(size_t size) override {
    if (budgets_.empty() || budgets_.size() < options_.size_drop_threshold) {
      return;
    }
    auto it_min = budgets_.begin();
    auto it_max = budgets_.begin();
    for (auto it = budgets_.begin(); it != budgets_.end(); ++it) {
      if (it->first < it_min->first) it_min = it;
      if (it->first > it_max->first) it_max = it;
    }
    auto victim = budgets_.end();
    if (it_max->first < size)
      victim = it_min;
    else if (it_min->first > size)
      victim = it_max;
    if (victim == budgets_.end()) return;
    OnDrop(victim->second, victim->first);
    budgets_.erase(victim);
  }

  void AddBudget(size_t size, void* p) override {
    budgets_.emplace_back(size, p);
  }
  void AddPayout(void* p, size_t size) override {
    payouts_.emplace_back(size, p);
  }

  bool RemovePayout(void* p, size_t* size) override {
    for (auto it = payouts_.begin(); it != payouts_.end(); ++it) {
      if (it->second == p) {
        *size = it->first;
        payouts_.erase(it);
        return true;
      }
    }
    return false;
  }

  int64_t LargestBudget() const override {
    size_t largest = 0;
    for (const Block& b : budgets_) largest = std::max(largest, b.first);
    return static_cast<int64_t>(largest);
  }
  int64_t NumBudgets() const override {
    return static_cast<int64_t>(budgets_.size());
  }
  int64_t NumPayouts() const override {
    return static_cast<int64_t>(payouts_.size());
  }

  std::list<Block> budgets_;  // cached free blocks, in the order freed
  std::list<Block> payouts_;  // blocks handed out
};

// The indexed lookup: budgets ordered by size, payouts hashed.
class IndexedPoolCore final : public PoolCore {
 public:
  using PoolCore::PoolCore;
  ~IndexedPoolCore() override { FreeAll(); }

  std::string_view BaseName() const override { return "pool_indexed"; }

  void Clear() override {
    for (const auto& [size, p] : budgets_) AlignedFree(p);
    budgets_.clear();
    OnCacheCleared();
  }

  void FreeAll() override {
    Clear();
    for (const auto& [p, size] : payouts_) AlignedFree(p);
    payouts_.clear();
  }

 private:
  // The smallest block >= size is the likeliest to pass the ratio test: if
  // it fails, every larger block fails too (unless alignment rejects it).
  void* TakeCached(size_t size, size_t alignment) override {
    for (auto it = budgets_.lower_bound(size); it != budgets_.end(); ++it) {
      if (!Fits(it->first, it->second, size, alignment)) {
        if (it->first * options_.size_compare_ratio >> 8 > size) break;
        continue;  // only alignment failed: a larger block may do
      }
      const Block b(it->first, it->second);
      budgets_.erase(it);
      return OnHit(b.second, b.first);
    }
    return nullptr;
  }

  void MaybeDrop(size_t size) override {
    if (budgets_.empty() || budgets_.size() < options_.size_drop_threshold) {
      return;
    }
    auto it_min = budgets_.begin();
    auto it_max = std::prev(budgets_.end());
    auto victim = budgets_.end();
    if (it_max->first < size)
      victim = it_min;
    else if (it_min->first > size)
      victim = it_max;
    if (victim == budgets_.end()) return;
    OnDrop(victim->second, victim->first);
    budgets_.erase(victim);
  }

  void AddBudget(size_t size, void* p) override { budgets_.emplace(size, p); }
  void AddPayout(void* p, size_t size) override { payouts_.emplace(p, size); }

  bool RemovePayout(void* p, size_t* size) override {
    auto it = payouts_.find(p);
    if (it == payouts_.end()) return false;
    *size = it->second;
    payouts_.erase(it);
    return true;
  }

  int64_t LargestBudget() const override {
    return budgets_.empty()
               ? 0
               : static_cast<int64_t>(std::prev(budgets_.end())->first);
  }
  int64_t NumBudgets() const override {
    return static_cast<int64_t>(budgets_.size());
  }
  int64_t NumPayouts() const override {
    return static_cast<int64_t>(payouts_.size());
  }

  absl::btree_multimap<size_t, void*> budgets_;  // size -> cached block
  absl::flat_hash_map<void*, size_t> payouts_;   // live block -> size
};

// Builds the core the options ask for.
std::unique_ptr<PoolCore> MakeCore(const PoolOptions& options) {
  if (options.lookup == PoolLookup::kSizeIndex) {
    return std::make_unique<IndexedPoolCore>(options);
  }
  return std::make_unique<ListPoolCore>(options);
}

}  // namespace
}  // namespace internal

namespace {

// Holds a pool's lock for one call.
template <typename Lock>
class ABSL_SCOPED_LOCKABLE Hold {
 public:
  explicit Hold(Lock* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~Hold() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  Lock* const mu_;
};

// The allocator's name: the lookup, and whether calls are locked.
std::string_view PoolName(PoolLookup lookup, bool locked) {
  if (lookup == PoolLookup::kSizeIndex) {
    return locked ? "pool_indexed" : "pool_indexed_unlocked";
  }
  return locked ? "pool" : "pool_unlocked";
}

}  // namespace

template <typename Lock>
BasicPoolAllocator<Lock>::BasicPoolAllocator(const PoolOptions& options)
    : name_(PoolName(options.lookup, !std::is_same_v<Lock, NoLock>)),
      core_(internal::MakeCore(options)) {}

template <typename Lock>
BasicPoolAllocator<Lock>::~BasicPoolAllocator() = default;

template <typename Lock>
void* BasicPoolAllocator<Lock>::Allocate(size_t size, size_t alignment) {
  Hold<Lock> hold(&mu_);
  return core_->Allocate(size, alignment);
}

template <typename Lock>
absl::Status BasicPoolAllocator<Lock>::Deallocate(void* p) {
  Hold<Lock> hold(&mu_);
  return core_->Deallocate(p);
}

template <typename Lock>
AllocatorStats BasicPoolAllocator<Lock>::GetStats() const {
  Hold<Lock> hold(&mu_);
  return core_->Stats();
}

template <typename Lock>
std::string_view BasicPoolAllocator<Lock>::Name() const {
  return name_;
}

template <typename Lock>
void BasicPoolAllocator<Lock>::Clear() {
  Hold<Lock> hold(&mu_);
  core_->Clear();
}

template <typename Lock>
PoolCounters BasicPoolAllocator<Lock>::Counters() const {
  Hold<Lock> hold(&mu_);
  return core_->Counters();
}

template class BasicPoolAllocator<absl::Mutex>;
template class BasicPoolAllocator<NoLock>;

}  // namespace memplan::allocators
