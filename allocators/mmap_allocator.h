// MNN's mmap allocator: every block is a file of its own, made in a
// directory (mkstemp), grown to the block's size and mapped shared, so the
// kernel pages it out to that file instead of to swap: for blocks larger
// than RAM, or memory a process should shed first. The file's name is
// removed as soon as the file is open (even earlier than after the map),
// so nothing is ever left in the directory, even if the process dies; its
// storage is freed when the block is unmapped (Deallocate, destruction).
//
//   allocators::MmapOptions options;
//   options.directory = "/var/tmp";           // default: $TMPDIR, else /tmp
//   allocators::MmapAllocator files(options);
//   void* p = files.Allocate(size_t{1} << 30, 4096);  // a 1 GiB file
//   if (p == nullptr) std::cerr << files.LastFailure() << "\n";
//   absl::Status s = files.Deallocate(p);     // unmapped, storage freed
//
// MmapSubAllocator is the same file per block as a source for another
// allocator (MNN puts its BufferAllocator over one; sub_allocator.h).
#ifndef MEMPLAN_ALLOCATORS_MMAP_ALLOCATOR_H_
#define MEMPLAN_ALLOCATORS_MMAP_ALLOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"
#include "allocators/internal/live_blocks.h"
#include "allocators/sub_allocator.h"

namespace memplan::allocators {

struct MmapOptions {
  // Where the files are made. Default "": $TMPDIR when set and not empty,
  // else /tmp (DefaultMmapDirectory()).
  std::string directory;
  // Reserve each file's storage when it is made (posix_fallocate), so a
  // full disk fails the allocation instead of killing the process with
  // SIGBUS when a page is first written. Default true.
  bool reserve_storage = true;
  // Blocks mapped at once, at most: each is a mapping, and a process may
  // hold only vm.max_map_count (65530 by default) of them, its threads'
  // stacks and libraries included. One more is refused (a failure).
  // Default 16384.
  int64_t max_blocks = 16384;
};

// $TMPDIR when set and not empty, else "/tmp".
std::string DefaultMmapDirectory();

// One file per block. Sizes are rounded up to pages; any power-of-two
// alignment is met. Thread-safe (the file work needs no lock).
class MmapSubAllocator final : public SubAllocator {
 public:
  // Default options.
  MmapSubAllocator();
  explicit MmapSubAllocator(const MmapOptions& options);

  // nullptr when the file cannot be made, grown or mapped, the alignment
  // is not a power of two, or max_blocks are mapped; LastFailure() says
  // why.
  void* Alloc(size_t alignment, size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;

  // Why the latest refused Alloc was refused, naming the directory or the
  // file and the system's reason (OK when none was refused).
  absl::Status LastFailure() const;
  // The directory files are made in.
  const std::string& directory() const { return directory_; }

 private:
  const std::string directory_;
  const bool reserve_storage_;      // MmapOptions::reserve_storage
  const int64_t max_blocks_;        // MmapOptions::max_blocks
  std::atomic<int64_t> blocks_{0};  // mapped now
  mutable absl::Mutex mu_;
  absl::Status last_failure_ ABSL_GUARDED_BY(mu_);
};

// The "mmap" allocator: MmapSubAllocator behind the Allocator interface,
// with stats and checked frees. Nothing is cached: a block is a file from
// Allocate to Deallocate. Stats count page-rounded bytes (a 64-byte block
// takes a 4 KiB page), and bytes_reserved equals bytes_in_use. A refused
// allocation returns nullptr, counts as a failure, and LastFailure() says
// why (the directory is missing or not writable, the disk is full, the
// file may not grow that large). Thread-safe.
class MmapAllocator final : public Allocator {
 public:
  // Default options.
  MmapAllocator();
  explicit MmapAllocator(const MmapOptions& options);
  MmapAllocator(const MmapAllocator&) = delete;
  MmapAllocator& operator=(const MmapAllocator&) = delete;
  // Unmaps every block still live (pointers dangle): no file survives.
  ~MmapAllocator() override;

  [[nodiscard]] void* Allocate(size_t size, size_t alignment) override;
  absl::Status Deallocate(void* p) override;
  AllocatorStats GetStats() const override;
  std::string_view Name() const override { return "mmap"; }

  // See MmapSubAllocator::LastFailure.
  absl::Status LastFailure() const { return files_.LastFailure(); }
  // Blocks (files) mapped now.
  int64_t NumBlocks() const;
  const std::string& directory() const { return files_.directory(); }

 private:
  MmapSubAllocator files_;
  internal::LiveBlocks live_;  // with their mapped (page-rounded) bytes
};

}  // namespace memplan::allocators

#endif  // MEMPLAN_ALLOCATORS_MMAP_ALLOCATOR_H_
