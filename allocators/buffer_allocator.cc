#include "allocators/buffer_allocator.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "allocators/aligned_allocator.h"

namespace memplan::allocators {

BufferAllocator::BufferAllocator() : BufferAllocator(Options()) {}

BufferAllocator::BufferAllocator(const Options& options)
    : BufferAllocator(std::make_unique<AlignedSubAllocator>(), options) {}

BufferAllocator::BufferAllocator(std::unique_ptr<SubAllocator> source,
                                 const Options& options)
    : options_(options),
      alignment_(options.alignment),
      min_source_bytes_(AlignUp(options.min_source_bytes, options.alignment)),
      source_(std::move(source)) {
  assert(IsPowerOfTwo(alignment_) && source_ != nullptr);
}

BufferAllocator::~BufferAllocator() {
  absl::MutexLock lock(&mu_);
  for (const auto& [ptr, root] : roots_) source_->Free(ptr, nodes_[root].size);
}

// A node slot, recycled when possible.
BufferAllocator::NodeHandle BufferAllocator::NewNode() {
  if (!unused_nodes_.empty()) {
    NodeHandle h = unused_nodes_.back();
    unused_nodes_.pop_back();
    nodes_[h] = Node();
    return h;
  }
  nodes_.emplace_back();
  return static_cast<NodeHandle>(nodes_.size() - 1);
}

// Puts a node in the free list and remembers where.
void BufferAllocator::InsertFree(NodeHandle h) {
  Node& n = nodes_[h];
  assert(!n.in_free_list);
  n.free_pos = free_list_.emplace(n.size, h);
  n.in_free_list = true;
}

// Takes a node out of the free list.
void BufferAllocator::EraseFree(NodeHandle h) {
  Node& n = nodes_[h];
  assert(n.in_free_list);
  free_list_.erase(n.free_pos);
  n.in_free_list = false;
}

// Removes a free node for use; its parent now has one more child busy.
BufferAllocator::NodeHandle BufferAllocator::TakeFree(FreeList::iterator it) {
  const NodeHandle h = it->second;
  EraseFree(h);
  if (nodes_[h].parent != kInvalidNode) ++nodes_[nodes_[h].parent].use_count;
  return h;
}

// Splits node h into a used first child of `size` bytes and a free second
// child holding the rest; returns the first child.
BufferAllocator::NodeHandle BufferAllocator::Split(NodeHandle h, size_t size) {
  const NodeHandle first = NewNode();
  const NodeHandle second = NewNode();
  Node& parent = nodes_[h];
  nodes_[first].ptr = parent.ptr;
  nodes_[first].size = size;
  nodes_[first].parent = h;
  nodes_[second].ptr = parent.ptr + size;
  nodes_[second].size = parent.size - size;
  nodes_[second].parent = h;
  parent.children = {first, second};
  parent.use_count = 1;  // the first child
  InsertFree(second);
  return first;
}

// A fresh block from the source, as a root node; kInvalidNode on failure.
BufferAllocator::NodeHandle BufferAllocator::NewSourceBlock(size_t size,
                                                            size_t alignment) {
  void* p = source_->Alloc(alignment, size);
  if (p == nullptr) return kInvalidNode;
  const NodeHandle h = NewNode();
  nodes_[h].ptr = static_cast<char*>(p);
  nodes_[h].size = size;
  roots_.emplace(p, h);
  stats_.bytes_reserved += static_cast<int64_t>(size);
  stats_.peak_bytes_reserved =
      std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  return h;
}

// Records node h as handed out and returns its pointer.
void* BufferAllocator::HandOut(NodeHandle h) {
  const Node& n = nodes_[h];
  used_.emplace(n.ptr, h);
  const auto bytes = static_cast<int64_t>(n.size);
  stats_.CountHandedOut(bytes);
  return n.ptr;
}

// A block of exactly `need` bytes (a multiple of the alignment): the
// smallest free block that holds it, else a new source block, split when
// larger; kInvalidNode when the source refuses.
BufferAllocator::NodeHandle BufferAllocator::TakeBlock(size_t need) {
  auto it = free_list_.lower_bound(need);
  const NodeHandle h =
      it != free_list_.end()
          ? TakeFree(it)
          : NewSourceBlock(std::max(need, min_source_bytes_), alignment_);
  if (h == kInvalidNode || nodes_[h].size == need) return h;
  return Split(h, need);
}

// A block of exactly `need` bytes at a multiple of `alignment` (above the
// allocator's): the smallest of the first kAlignedScan free blocks large
// enough that starts there, split when larger; else a block of its own
// from the source (MNN's "separate" allocation). A freed one joins the
// free list, so a replay asking such alignments again reuses it: without
// the scan, reserved bytes grew with every such request.
BufferAllocator::NodeHandle BufferAllocator::TakeAlignedBlock(
    size_t need, size_t alignment) {
  constexpr int kAlignedScan = 64;
  int scanned = 0;
  for (auto it = free_list_.lower_bound(need);
       it != free_list_.end() && scanned < kAlignedScan; ++it, ++scanned) {
    const auto address = reinterpret_cast<uintptr_t>(nodes_[it->second].ptr);
    if (address % alignment != 0) continue;
    const NodeHandle h = TakeFree(it);
    return nodes_[h].size == need ? h : Split(h, need);
  }
  return NewSourceBlock(need, alignment);
}

void* BufferAllocator::Allocate(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  absl::MutexLock lock(&mu_);
  NodeHandle h = kInvalidNode;
  if (!IsPowerOfTwo(alignment)) {
    // Unsupported request: fall through to the failure count.
  } else if (size > SIZE_MAX - std::max(alignment, alignment_)) {
    // Too large to round: fall through to the failure count.
  } else if (alignment > alignment_) {
    h = TakeAlignedBlock(AlignUp(size, alignment_), alignment);
  } else {
    h = TakeBlock(AlignUp(size, alignment_));
  }
  if (h == kInvalidNode) {
    ++stats_.num_alloc_failures;
    return nullptr;
  }
  return HandOut(h);
}

// Frees node h into the list and merges every parent whose children are
// all free again, bottom up (MNN's returnMemory).
void BufferAllocator::ReturnNode(NodeHandle h) {
  InsertFree(h);
  NodeHandle parent = nodes_[h].parent;
  while (parent != kInvalidNode && --nodes_[parent].use_count == 0) {
    for (NodeHandle child : nodes_[parent].children) {
      EraseFree(child);
      unused_nodes_.push_back(child);
    }
    nodes_[parent].children = {kInvalidNode, kInvalidNode};
    InsertFree(parent);
    parent = nodes_[parent].parent;
  }
}

absl::Status BufferAllocator::Deallocate(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = used_.find(p);
  if (it == used_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: pointer %p was not allocated here or was already "
                        "freed",
                        options_.name, p));
  }
  const NodeHandle h = it->second;
  used_.erase(it);
  stats_.bytes_in_use -= static_cast<int64_t>(nodes_[h].size);
  ReturnNode(h);
  return absl::OkStatus();
}

AllocatorStats BufferAllocator::GetStats() const {
  absl::MutexLock lock(&mu_);
  AllocatorStats stats = stats_;
  stats.largest_free_block_bytes =
      free_list_.empty() ? 0 : static_cast<int64_t>(free_list_.rbegin()->first);
  stats.fragmentation = Fragmentation(stats.bytes_reserved - stats.bytes_in_use,
                                      stats.largest_free_block_bytes);
  return stats;
}

void BufferAllocator::ReleaseFree() {
  absl::MutexLock lock(&mu_);
  for (auto it = free_list_.begin(); it != free_list_.end();) {
    const NodeHandle h = it->second;
    Node& n = nodes_[h];
    if (n.parent != kInvalidNode) {
      ++it;
      continue;
    }
    it = free_list_.erase(it);
    n.in_free_list = false;
    stats_.bytes_reserved -= static_cast<int64_t>(n.size);
    roots_.erase(n.ptr);
    source_->Free(n.ptr, n.size);
    unused_nodes_.push_back(h);
  }
}

int64_t BufferAllocator::NumFreeBlocks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(free_list_.size());
}

int64_t BufferAllocator::NumSourceBlocks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(roots_.size());
}

DeferredBufferAllocator::DeferredBufferAllocator(size_t alignment)
    : alignment_(alignment) {
  assert(IsPowerOfTwo(alignment));
}

DeferredBufferAllocator::~DeferredBufferAllocator() { AlignedFree(base_); }

absl::StatusOr<DeferredBufferAllocator::BlockId> DeferredBufferAllocator::Alloc(
    size_t size) {
  if (computed_) {
    return absl::FailedPreconditionError("deferred: Alloc after Compute()");
  }
  if (size == 0) return absl::InvalidArgumentError("deferred: Alloc(0)");
  // Every offset is at most the sum of the sizes: kept where it cannot
  // wrap (nor the rounding up).
  constexpr size_t kMaxTotal = size_t{1} << 62;
  if (size > kMaxTotal - total_ ||
      AlignUp(size, alignment_) > kMaxTotal - total_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "deferred: Alloc(%d) takes the requests past 2^62 bytes", size));
  }
  Record r;
  r.size = AlignUp(size, alignment_);
  total_ += r.size;
  r.birth = clock_++;
  r.death = kNever;
  records_.push_back(r);
  return static_cast<BlockId>(records_.size() - 1);
}

// OK when `id` names a recorded block.
absl::Status DeferredBufferAllocator::CheckId(BlockId id) const {
  if (id < 0 || id >= static_cast<BlockId>(records_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("deferred: unknown block id %d", id));
  }
  return absl::OkStatus();
}

absl::Status DeferredBufferAllocator::Free(BlockId id) {
  if (computed_) {
    return absl::FailedPreconditionError("deferred: Free after Compute()");
  }
  if (absl::Status s = CheckId(id); !s.ok()) return s;
  Record& r = records_[id];
  if (r.death != kNever) {
    return absl::InvalidArgumentError(
        absl::StrFormat("deferred: block %d freed twice", id));
  }
  r.death = clock_++;
  return absl::OkStatus();
}

// Best fit for record `index` among the already placed records whose
// lifetimes overlap its own: the smallest gap that holds it, else the end.
size_t DeferredBufferAllocator::Place(size_t index,
                                      const std::vector<size_t>& placed) const {
  const Record& r = records_[index];
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end)
  for (size_t j : placed) {
    const Record& o = records_[j];
    if (o.birth < r.death && r.birth < o.death) {
      busy.emplace_back(o.offset, o.offset + o.size);
    }
  }
  std::sort(busy.begin(), busy.end());
  size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
  for (const auto& [begin, end] : busy) {
    if (begin > cursor && begin - cursor >= r.size &&
        begin - cursor < best_gap) {
      best = cursor;
      best_gap = begin - cursor;
    }
    cursor = std::max(cursor, end);
  }
  return best != SIZE_MAX ? best : cursor;
}

absl::Status DeferredBufferAllocator::Compute() {
  if (computed_) {
    return absl::FailedPreconditionError("deferred: Compute() called twice");
  }
  std::vector<size_t> order(records_.size());
  std::iota(order.begin(), order.end(), 0);
  // Greedy by size (TFLite, MNN): large blocks first, then earlier births.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return records_[a].size > records_[b].size;
  });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : order) {
    records_[i].offset = Place(i, placed);
    total = std::max(total, records_[i].offset + records_[i].size);
    placed.push_back(i);
  }
  if (total > 0) {
    base_ = AlignedMalloc(total, alignment_);
    if (base_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("deferred: cannot allocate %d bytes", total));
    }
  }
  total_size_ = total;
  computed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<size_t> DeferredBufferAllocator::Offset(BlockId id) const {
  if (!computed_) {
    return absl::FailedPreconditionError("deferred: Offset before Compute()");
  }
  if (absl::Status s = CheckId(id); !s.ok()) return s;
  return records_[id].offset;
}

absl::StatusOr<void*> DeferredBufferAllocator::Pointer(BlockId id) const {
  absl::StatusOr<size_t> offset = Offset(id);
  if (!offset.ok()) return offset.status();
  return static_cast<void*>(static_cast<char*>(base_) + *offset);
}

absl::StatusOr<size_t> DeferredBufferAllocator::Size(BlockId id) const {
  if (absl::Status s = CheckId(id); !s.ok()) return s;
  return records_[id].size;
}

void DeferredBufferAllocator::Reset() {
  AlignedFree(base_);
  base_ = nullptr;
  total_size_ = 0;
  records_.clear();
  clock_ = 0;
  computed_ = false;
}

}  // namespace memplan::allocators
