// The run-time side of a static memory plan: one block of arena_size bytes
// taken from an allocator (normally the BFC allocator that serves the rest
// of the process), and each tensor at base + its planned offset.
//
//   allocators::BfcAllocator bfc(allocators::BfcAllocator::Options());
//   absl::StatusOr<allocators::PlannedArena> arena =
//       allocators::PlannedArena::Create(bfc, /*arena_size=*/4096,
//                                        /*offsets=*/{0, 1024, 0});
//   float* t1 = static_cast<float*>(arena->Get(1));  // base + 1024
//   // The block goes back to `bfc` when `arena` is destroyed.
//
// Thread-compatible; the source allocator must outlive the arena.
#ifndef MEMPLAN_ALLOCATORS_PLANNED_ARENA_H_
#define MEMPLAN_ALLOCATORS_PLANNED_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "allocators/allocator.h"

namespace memplan::allocators {

class PlannedArena {
 public:
  // Every arena starts at a multiple of this.
  static constexpr size_t kArenaAlignment = 64;

  // Takes arena_size bytes from `source`. offsets[i] is tensor i's offset;
  // each must lie in [0, arena_size) (INVALID_ARGUMENT otherwise, naming the
  // tensor). RESOURCE_EXHAUSTED when `source` cannot give the block. An
  // arena of 0 bytes holds nothing and takes nothing.
  [[nodiscard]] static absl::StatusOr<PlannedArena> Create(
      Allocator& source, int64_t arena_size, std::vector<int64_t> offsets = {});

  PlannedArena(PlannedArena&& other) noexcept;
  PlannedArena& operator=(PlannedArena&& other) noexcept;
  PlannedArena(const PlannedArena&) = delete;
  PlannedArena& operator=(const PlannedArena&) = delete;
  // Gives the block back to the source allocator.
  ~PlannedArena();

  // Tensor `index`'s memory. REQUIRES 0 <= index < num_tensors().
  void* Get(int index) const {
    return base_ + offsets_[static_cast<size_t>(index)];
  }
  // base + offset. REQUIRES 0 <= offset < size().
  void* AtOffset(int64_t offset) const { return base_ + offset; }
  void* base() const { return base_; }
  int64_t size() const { return size_; }
  int num_tensors() const { return static_cast<int>(offsets_.size()); }

 private:
  PlannedArena(Allocator* source, char* base, int64_t size,
               std::vector<int64_t> offsets)
      : source_(source),
        base_(base),
        size_(size),
        offsets_(std::move(offsets)) {}
  // Returns the block to the source (idempotent).
  void Release();

  Allocator* source_ = nullptr;   // where the block came from
  char* base_ = nullptr;          // the block; nullptr when empty or moved
  int64_t size_ = 0;              // bytes
  std::vector<int64_t> offsets_;  // offsets_[i]: tensor i's offset
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_PLANNED_ARENA_H_
