#include "allocators/planned_arena.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace memplan::allocators {

absl::StatusOr<PlannedArena> PlannedArena::Create(
    Allocator& source, int64_t arena_size, std::vector<int64_t> offsets) {
  if (arena_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("arena size %d is negative", arena_size));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] >= arena_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %d: offset %d is outside the arena of %d bytes", i,
          offsets[i], arena_size));
    }
  }
  char* base = nullptr;
  if (arena_size > 0) {
    base = static_cast<char*>(
        source.Allocate(static_cast<size_t>(arena_size), kArenaAlignment));
    if (base == nullptr) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "allocator '%s' cannot give an arena of %d bytes",
          absl::string_view(source.Name().data(), source.Name().size()),
          arena_size));
    }
  }
  return PlannedArena(&source, base, arena_size, std::move(offsets));
}

PlannedArena::PlannedArena(PlannedArena&& other) noexcept
    : source_(other.source_),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      offsets_(std::move(other.offsets_)) {}

PlannedArena& PlannedArena::operator=(PlannedArena&& other) noexcept {
  if (this != &other) {
    Release();
    source_ = other.source_;
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    offsets_ = std::move(other.offsets_);
  }
  return *this;
}

PlannedArena::~PlannedArena() { Release(); }

void PlannedArena::Release() {
  if (base_ == nullptr) return;
  // Cannot fail: the block came from source_ and is freed once.
  source_->Deallocate(base_).IgnoreError();
  base_ = nullptr;
}

}  // namespace memplan::allocators
