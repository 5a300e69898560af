#include "allocators/bfc_allocator.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <new>
#include <utility>

#include "absl/numeric/bits.h"
#include "absl/strings/str_format.h"

namespace memplan::allocators {

namespace internal {

NodeFreeList::~NodeFreeList() {
  while (head_ != nullptr) {
    Link* next = head_->next;
    ::operator delete(head_);
    head_ = next;
  }
}

void* NodeFreeList::Get(size_t bytes) {
  if (bytes == block_bytes_ && head_ != nullptr) {
    Link* block = head_;
    head_ = head_->next;
    return block;
  }
  if (block_bytes_ == 0 && bytes >= sizeof(Link)) block_bytes_ = bytes;
  return ::operator new(bytes);
}

void NodeFreeList::Put(void* p, size_t bytes) {
  if (bytes != block_bytes_) {
    ::operator delete(p);
    return;
  }
  head_ = new (p) Link{head_};
}

}  // namespace internal

bool BfcAllocator::ChunkOrder::operator()(ChunkHandle a, ChunkHandle b) const {
  const Chunk& ca = (*chunks)[a];
  const Chunk& cb = (*chunks)[b];
  if (ca.size != cb.size) return ca.size < cb.size;
  return ca.ptr < cb.ptr;
}

bool BfcAllocator::ChunkOrder::operator()(ChunkHandle a, SizeProbe b) const {
  return (*chunks)[a].size < b.size;
}

bool BfcAllocator::ChunkOrder::operator()(SizeProbe a, ChunkHandle b) const {
  return a.size <= (*chunks)[b].size;
}

void BfcAllocator::RegionManager::AddRegion(char* ptr, size_t size) {
  Region region;
  region.ptr = ptr;
  region.size = size;
  region.handles.assign(size / kMinAllocationSize, kInvalidChunkHandle);
  auto it = std::upper_bound(
      regions_.begin(), regions_.end(), region.end(),
      [](const char* end, const Region& r) { return end < r.end(); });
  regions_.insert(it, std::move(region));
}

void BfcAllocator::RegionManager::RemoveRegion(char* ptr) {
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [ptr](const Region& r) { return r.ptr == ptr; });
  assert(it != regions_.end());
  regions_.erase(it);
}

// Binary search on end addresses: the first region ending after p.
const BfcAllocator::Region* BfcAllocator::RegionManager::RegionFor(
    const void* p) const {
  const char* c = static_cast<const char*>(p);
  auto it = std::upper_bound(
      regions_.begin(), regions_.end(), c,
      [](const char* q, const Region& r) { return q < r.end(); });
  if (it == regions_.end() || c < it->ptr) return nullptr;
  return &*it;
}

BfcAllocator::ChunkHandle BfcAllocator::RegionManager::GetHandle(
    const void* p) const {
  const Region* region = RegionFor(p);
  if (region == nullptr) return kInvalidChunkHandle;
  const size_t offset = static_cast<const char*>(p) - region->ptr;
  if (offset % kMinAllocationSize != 0) return kInvalidChunkHandle;
  return region->handles[offset / kMinAllocationSize];
}

void BfcAllocator::RegionManager::SetHandle(const void* p, ChunkHandle h) {
  auto* region = const_cast<Region*>(RegionFor(p));
  assert(region != nullptr);
  const size_t offset = static_cast<const char*>(p) - region->ptr;
  region->handles[offset / kMinAllocationSize] = h;
}

BfcAllocator::BfcAllocator(const Options& options)
    : BfcAllocator(std::make_unique<SystemSubAllocator>(), options) {}

// The options as the allocator runs them: a limit past what sizes and the
// stats can count (INT64_MAX) is that, rounded down to a chunk; a first
// region below one chunk is one chunk (0 would never double).
BfcAllocator::Options BfcAllocator::Sane(Options options) {
  constexpr size_t kMaxLimit =
      static_cast<size_t>(std::numeric_limits<int64_t>::max()) /
      kMinAllocationSize * kMinAllocationSize;
  options.memory_limit = std::min(options.memory_limit, kMaxLimit);
  options.initial_region_bytes =
      std::max(options.initial_region_bytes, kMinAllocationSize);
  return options;
}

BfcAllocator::BfcAllocator(std::unique_ptr<SubAllocator> sub_allocator,
                           const Options& options)
    : options_(Sane(options)), sub_allocator_(std::move(sub_allocator)) {
  assert(sub_allocator_ != nullptr && options.memory_limit > 0);
  absl::MutexLock lock(&mu_);
  curr_region_bytes_ = InitialRegionBytes();
  bins_.reserve(kNumBins);
  for (int b = 0; b < kNumBins; ++b) {
    bins_.emplace_back(ChunkOrder{&chunks_},
                       internal::RecyclingAllocator<ChunkHandle>(&bin_nodes_));
  }
  stats_.bytes_limit = static_cast<int64_t>(options_.memory_limit);
}

size_t BfcAllocator::InitialRegionBytes() const {
  return RoundedBytes(
      options_.allow_growth
          ? std::min(options_.memory_limit, options_.initial_region_bytes)
          : options_.memory_limit);
}

BfcAllocator::~BfcAllocator() {
  absl::MutexLock lock(&mu_);
  for (const Region& region : region_manager_.regions()) {
    sub_allocator_->Free(region.ptr, region.size);
  }
}

size_t BfcAllocator::RoundedBytes(size_t bytes) {
  return (bytes + kMinAllocationSize - 1) / kMinAllocationSize *
         kMinAllocationSize;
}

int BfcAllocator::BinNumForSize(size_t bytes) {
  const uint64_t v = std::max<size_t>(bytes, kMinAllocationSize) >> 8;
  return std::min(kNumBins - 1, static_cast<int>(absl::bit_width(v)) - 1);
}

void* BfcAllocator::Allocate(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  absl::MutexLock lock(&mu_);
  void* p = nullptr;
  if (IsPowerOfTwo(alignment) && alignment <= kMinAllocationSize &&
      size <= options_.memory_limit) {
    p = AllocateLocked(size);
  }
  if (p == nullptr) ++stats_.num_alloc_failures;
  return p;
}

// TF's AllocateRawInternal: a free chunk, else a new region, else garbage
// collection and a new region, else nullptr.
void* BfcAllocator::AllocateLocked(size_t size) {
  const size_t rounded = RoundedBytes(size);
  const int bin_num = BinNumForSize(rounded);
  if (void* p = FindChunkPtr(bin_num, rounded, size)) return p;
  if (Extend(rounded)) {
    if (void* p = FindChunkPtr(bin_num, rounded, size)) return p;
  }
  if (DeallocateFreeRegions(rounded) && Extend(rounded)) {
    if (void* p = FindChunkPtr(bin_num, rounded, size)) return p;
  }
  return nullptr;
}

// Best fit: the smallest chunk >= rounded, from the first bin that could
// hold one upward; splits it when TF's rule says so.
void* BfcAllocator::FindChunkPtr(int bin_num, size_t rounded,
                                 size_t requested) {
  // Only non-empty bins at or above bin_num are searched (a bitmap instead
  // of TF's walk over every bin; the same chunk is found).
  for (uint32_t mask = nonempty_bins_ & (~uint32_t{0} << bin_num); mask != 0;
       mask &= mask - 1) {
    FreeChunkSet& bin = bins_[absl::countr_zero(mask)];
    auto it = bin.lower_bound(SizeProbe{rounded});
    if (it == bin.end()) continue;
    const ChunkHandle h = *it;
    bin.erase(it);
    if (bin.empty()) nonempty_bins_ &= ~(uint32_t{1} << chunks_[h].bin_num);
    chunks_[h].bin_num = kInvalidBinNum;
    const size_t size = chunks_[h].size;
    if (size >= rounded * 2 || size - rounded >= kMaxInternalFragmentation) {
      SplitChunk(h, rounded);
    }
    Chunk& chunk = chunks_[h];
    chunk.requested_size = requested;
    chunk.allocation_id = next_allocation_id_++;
    const auto bytes = static_cast<int64_t>(chunk.size);
    stats_.CountHandedOut(bytes);
    return chunk.ptr;
  }
  return nullptr;
}

// A region from the sub-allocator of the current region size (capped by the
// limit), backing off by 0.9 while it refuses. Sets *bytes.
void* BfcAllocator::AllocRegion(size_t rounded, size_t* bytes) {
  static constexpr double kBackpedalFactor = 0.9;
  void* mem = sub_allocator_->Alloc(kMinAllocationSize, *bytes);
  while (mem == nullptr) {
    size_t smaller =
        RoundedBytes(static_cast<size_t>(*bytes * kBackpedalFactor));
    if (smaller >= *bytes) smaller = *bytes - kMinAllocationSize;
    *bytes = smaller;
    if (*bytes < rounded) return nullptr;
    mem = sub_allocator_->Alloc(kMinAllocationSize, *bytes);
  }
  return mem;
}

// TF's Extend: adds one region large enough for `rounded` bytes, as one
// free chunk. False when the limit or the sub-allocator forbids it.
bool BfcAllocator::Extend(size_t rounded) {
  const auto reserved = static_cast<size_t>(stats_.bytes_reserved);
  size_t available = options_.memory_limit - reserved;
  available = available / kMinAllocationSize * kMinAllocationSize;
  if (rounded > available) return false;
  bool increased = false;
  while (rounded > curr_region_bytes_) {
    curr_region_bytes_ =
        curr_region_bytes_ <= SIZE_MAX / 2 ? curr_region_bytes_ * 2 : rounded;
    increased = true;
  }
  size_t bytes = std::min(curr_region_bytes_, available);
  char* mem = static_cast<char*>(AllocRegion(rounded, &bytes));
  if (mem == nullptr) return false;
  if (!increased && curr_region_bytes_ <= SIZE_MAX / 2) curr_region_bytes_ *= 2;
  stats_.bytes_reserved += static_cast<int64_t>(bytes);
  stats_.peak_bytes_reserved =
      std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  region_manager_.AddRegion(mem, bytes);
  const ChunkHandle h = AllocateChunk();
  chunks_[h].ptr = mem;
  chunks_[h].size = bytes;
  region_manager_.SetHandle(mem, h);
  InsertFreeChunkIntoBin(h);
  return true;
}

// True when no chunk of the region is in use.
bool BfcAllocator::RegionIsFree(const Region& region) const {
  for (ChunkHandle h = region.handles[0]; h != kInvalidChunkHandle;
       h = chunks_[h].next) {
    if (chunks_[h].in_use()) return false;
  }
  return true;
}

// The wholly free regions; sets *bytes to their total size.
std::vector<char*> BfcAllocator::FreeRegions(size_t* bytes) const {
  std::vector<char*> free_regions;
  *bytes = 0;
  for (const Region& region : region_manager_.regions()) {
    if (!RegionIsFree(region)) continue;
    free_regions.push_back(region.ptr);
    *bytes += region.size;
  }
  return free_regions;
}

// TF's garbage collection: frees every wholly free region if that, with
// the unreserved bytes, could make room for `rounded` bytes.
bool BfcAllocator::DeallocateFreeRegions(size_t rounded) {
  if (!options_.garbage_collection) return false;
  size_t free_bytes = 0;
  const std::vector<char*> free_regions = FreeRegions(&free_bytes);
  if (free_bytes == 0) return false;
  const size_t available = options_.memory_limit -
                           static_cast<size_t>(stats_.bytes_reserved) +
                           free_bytes;
  if (rounded > available) return false;
  for (char* ptr : free_regions) DeallocateRegion(ptr);
  return true;
}

int64_t BfcAllocator::ReleaseFreeRegions() {
  absl::MutexLock lock(&mu_);
  size_t free_bytes = 0;
  for (char* ptr : FreeRegions(&free_bytes)) DeallocateRegion(ptr);
  if (region_manager_.regions().empty()) {
    curr_region_bytes_ = InitialRegionBytes();
  }
  return static_cast<int64_t>(free_bytes);
}

// Drops a wholly free region: its chunks, its bins entries, its memory.
void BfcAllocator::DeallocateRegion(char* ptr) {
  ChunkHandle h = region_manager_.GetHandle(ptr);
  size_t size = 0;
  while (h != kInvalidChunkHandle) {
    const ChunkHandle next = chunks_[h].next;
    size += chunks_[h].size;
    RemoveFreeChunkFromBin(h);
    DeallocateChunk(h);
    h = next;
  }
  sub_allocator_->Free(ptr, size);
  stats_.bytes_reserved -= static_cast<int64_t>(size);
  region_manager_.RemoveRegion(ptr);
}

// A chunk slot: a recycled handle, else a new one.
BfcAllocator::ChunkHandle BfcAllocator::AllocateChunk() {
  if (free_chunk_handles_ != kInvalidChunkHandle) {
    const ChunkHandle h = free_chunk_handles_;
    free_chunk_handles_ = chunks_[h].next;
    chunks_[h] = Chunk();
    return h;
  }
  chunks_.emplace_back();
  return static_cast<ChunkHandle>(chunks_.size() - 1);
}

// Recycles a handle through the free-handle list.
void BfcAllocator::DeallocateChunk(ChunkHandle h) {
  chunks_[h] = Chunk();
  chunks_[h].next = free_chunk_handles_;
  free_chunk_handles_ = h;
}

// Cuts `bytes` off the front of chunk h; the rest becomes a free chunk.
void BfcAllocator::SplitChunk(ChunkHandle h, size_t bytes) {
  const ChunkHandle h_new = AllocateChunk();  // may move chunks_
  Chunk& c = chunks_[h];
  Chunk& n = chunks_[h_new];
  n.ptr = c.ptr + bytes;
  n.size = c.size - bytes;
  c.size = bytes;
  n.prev = h;
  n.next = c.next;
  c.next = h_new;
  if (n.next != kInvalidChunkHandle) chunks_[n.next].prev = h_new;
  region_manager_.SetHandle(n.ptr, h_new);
  InsertFreeChunkIntoBin(h_new);
}

// Merges h2 into h1, its physical successor; both free and unbinned.
void BfcAllocator::Merge(ChunkHandle h1, ChunkHandle h2) {
  Chunk& c1 = chunks_[h1];
  Chunk& c2 = chunks_[h2];
  assert(!c1.in_use() && !c2.in_use() && c1.next == h2 && c2.prev == h1);
  c1.next = c2.next;
  if (c2.next != kInvalidChunkHandle) chunks_[c2.next].prev = h1;
  c1.size += c2.size;
  region_manager_.Erase(c2.ptr);
  DeallocateChunk(h2);
}

// Merges a newly freed chunk with free neighbours; returns the survivor.
BfcAllocator::ChunkHandle BfcAllocator::TryToCoalesce(ChunkHandle h) {
  const ChunkHandle next = chunks_[h].next;
  if (next != kInvalidChunkHandle && !chunks_[next].in_use()) {
    RemoveFreeChunkFromBin(next);
    Merge(h, next);
  }
  const ChunkHandle prev = chunks_[h].prev;
  if (prev != kInvalidChunkHandle && !chunks_[prev].in_use()) {
    RemoveFreeChunkFromBin(prev);
    Merge(prev, h);
    return prev;
  }
  return h;
}

void BfcAllocator::InsertFreeChunkIntoBin(ChunkHandle h) {
  Chunk& c = chunks_[h];
  assert(!c.in_use() && c.bin_num == kInvalidBinNum);
  c.bin_num = BinNumForSize(c.size);
  bins_[c.bin_num].insert(h);
  nonempty_bins_ |= uint32_t{1} << c.bin_num;
}

void BfcAllocator::RemoveFreeChunkFromBin(ChunkHandle h) {
  Chunk& c = chunks_[h];
  assert(!c.in_use() && c.bin_num != kInvalidBinNum);
  FreeChunkSet& bin = bins_[c.bin_num];
  [[maybe_unused]] const size_t erased = bin.erase(h);
  assert(erased == 1);
  if (bin.empty()) nonempty_bins_ &= ~(uint32_t{1} << c.bin_num);
  c.bin_num = kInvalidBinNum;
}

// The in-use chunk starting at p, or kInvalidChunkHandle.
BfcAllocator::ChunkHandle BfcAllocator::LiveChunk(const void* p) const {
  const ChunkHandle h = region_manager_.GetHandle(p);
  if (h == kInvalidChunkHandle || !chunks_[h].in_use()) {
    return kInvalidChunkHandle;
  }
  return h;
}

absl::Status BfcAllocator::Deallocate(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  const ChunkHandle h = LiveChunk(p);
  if (h == kInvalidChunkHandle) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: pointer %p was not allocated here or was already freed",
        options_.name, p));
  }
  Chunk& c = chunks_[h];
  stats_.bytes_in_use -= static_cast<int64_t>(c.size);
  c.allocation_id = -1;
  c.requested_size = 0;
  InsertFreeChunkIntoBin(TryToCoalesce(h));
  return absl::OkStatus();
}

int64_t BfcAllocator::LargestFreeChunk() const {
  for (int b = kNumBins - 1; b >= 0; --b) {
    if (!bins_[b].empty()) {
      return static_cast<int64_t>(chunks_[*bins_[b].rbegin()].size);
    }
  }
  return 0;
}

AllocatorStats BfcAllocator::GetStats() const {
  absl::MutexLock lock(&mu_);
  AllocatorStats stats = stats_;
  stats.largest_free_block_bytes = LargestFreeChunk();
  stats.fragmentation = Fragmentation(stats.bytes_reserved - stats.bytes_in_use,
                                      stats.largest_free_block_bytes);
  return stats;
}

absl::StatusOr<size_t> BfcAllocator::AllocatedSize(const void* p) const {
  absl::MutexLock lock(&mu_);
  const ChunkHandle h = LiveChunk(p);
  if (h == kInvalidChunkHandle) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %p is not a live allocation", options_.name, p));
  }
  return chunks_[h].size;
}

absl::StatusOr<size_t> BfcAllocator::RequestedSize(const void* p) const {
  absl::MutexLock lock(&mu_);
  const ChunkHandle h = LiveChunk(p);
  if (h == kInvalidChunkHandle) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %p is not a live allocation", options_.name, p));
  }
  return chunks_[h].requested_size;
}

int BfcAllocator::NumRegions() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(region_manager_.regions().size());
}

int BfcAllocator::NumFreeChunks() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const FreeChunkSet& bin : bins_) n += bin.size();
  return static_cast<int>(n);
}

size_t BfcAllocator::CurrentRegionBytes() const {
  absl::MutexLock lock(&mu_);
  return curr_region_bytes_;
}

std::string BfcAllocator::MemoryDump() const {
  absl::MutexLock lock(&mu_);
  // Per bin (by chunk size): chunks, chunks in use, bytes, bytes in use.
  std::array<std::array<int64_t, 4>, kNumBins> bins{};
  for (const Region& region : region_manager_.regions()) {
    for (ChunkHandle h = region.handles[0]; h != kInvalidChunkHandle;
         h = chunks_[h].next) {
      const Chunk& c = chunks_[h];
      auto& bin = bins[BinNumForSize(c.size)];
      const auto size = static_cast<int64_t>(c.size);
      bin[0] += 1;
      bin[1] += c.in_use() ? 1 : 0;
      bin[2] += size;
      bin[3] += c.in_use() ? size : 0;
    }
  }
  std::string out = absl::StrFormat(
      "%s: limit %d, reserved %d, in use %d, regions %d\n", options_.name,
      options_.memory_limit, stats_.bytes_reserved, stats_.bytes_in_use,
      region_manager_.regions().size());
  for (int b = 0; b < kNumBins; ++b) {
    absl::StrAppendFormat(
        &out, "Bin %2d (%d B): %d chunks, %d in use, %d B, %d B in use\n", b,
        kMinAllocationSize << b, bins[b][0], bins[b][1], bins[b][2],
        bins[b][3]);
  }
  for (const Region& region : region_manager_.regions()) {
    absl::StrAppendFormat(&out, "Region %p, %d B\n", region.ptr, region.size);
    for (ChunkHandle h = region.handles[0]; h != kInvalidChunkHandle;
         h = chunks_[h].next) {
      const Chunk& c = chunks_[h];
      absl::StrAppendFormat(&out, "  %p %d B %s", c.ptr, c.size,
                            c.in_use() ? "in use" : "free");
      if (c.in_use()) {
        absl::StrAppendFormat(&out, " requested %d id %d", c.requested_size,
                              c.allocation_id);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace memplan::allocators
