// The blocks an allocator that caches nothing has handed out, with its
// statistics: what AlignedAllocator and MmapAllocator share, so that a
// pointer that was not handed out is an error instead of a crash and
// bytes_reserved always equals bytes_in_use.
//
//   internal::LiveBlocks live("aligned");
//   live.Add(p, 1024);                    // or live.CountFailure()
//   absl::StatusOr<size_t> bytes = live.Remove(p);  // then free p
//   AllocatorStats stats = live.Stats();
#ifndef MEMPLAN_ALLOCATORS_INTERNAL_LIVE_BLOCKS_H_
#define MEMPLAN_ALLOCATORS_INTERNAL_LIVE_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"

namespace memplan::allocators::internal {

// Thread-safe.
class LiveBlocks {
 public:
  // `name` starts the messages of Remove ("aligned: pointer ...").
  explicit LiveBlocks(std::string_view name) : name_(name) {}

  // Records block `p` of `bytes` handed out.
  void Add(void* p, size_t bytes) {
    absl::MutexLock lock(&mu_);
    live_.emplace(p, bytes);
    stats_.CountHandedOut(static_cast<int64_t>(bytes));
  }

  // Counts a request the system refused.
  void CountFailure() {
    absl::MutexLock lock(&mu_);
    ++stats_.num_alloc_failures;
  }

  // Forgets block `p` and returns its bytes, for the caller to free it.
  // INVALID_ARGUMENT when `p` was not handed out or was already freed.
  absl::StatusOr<size_t> Remove(void* p) {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: pointer %p was not allocated here or was already freed", name_,
          p));
    }
    const size_t bytes = it->second;
    stats_.bytes_in_use -= static_cast<int64_t>(bytes);
    live_.erase(it);
    return bytes;
  }

  // Nothing is cached: reserved is what is in use.
  AllocatorStats Stats() const {
    absl::MutexLock lock(&mu_);
    AllocatorStats stats = stats_;
    stats.bytes_reserved = stats.bytes_in_use;
    stats.peak_bytes_reserved = stats.peak_bytes_in_use;
    return stats;
  }

  int64_t count() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(live_.size());
  }

  // Calls free_block(p, bytes) for every block still handed out; for the
  // owner's destructor.
  template <typename FreeBlock>
  void FreeAll(FreeBlock free_block) {
    absl::MutexLock lock(&mu_);
    for (const auto& [p, bytes] : live_) free_block(p, bytes);
    live_.clear();
  }

 private:
  const std::string_view name_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<void*, size_t> live_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memplan::allocators::internal

#endif  // MEMPLAN_ALLOCATORS_INTERNAL_LIVE_BLOCKS_H_
