#include "allocators/mmap_allocator.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allocators/internal/page_mapping.h"

namespace memplan::allocators {
namespace {

constexpr char kFilePattern[] = "/memplan-mmap-XXXXXX";

// `error` (an errno value) as a status: "mmap: <what>: <reason>".
template <typename... Parts>
absl::Status SystemError(int error, const Parts&... what) {
  return absl::ErrnoToStatus(error, absl::StrCat("mmap: ", what...));
}

// Gives the open file `length` bytes (reserving its storage when asked)
// and maps it at `alignment`.
absl::StatusOr<void*> GrowAndMap(int fd, const std::string& path, size_t length,
                                 size_t alignment, bool reserve_storage) {
  const auto size = static_cast<off_t>(length);
  if (ftruncate(fd, size) != 0) {
    return SystemError(errno, "cannot grow '", path, "' to ", length, " bytes");
  }
  if (reserve_storage) {
    if (const int error = posix_fallocate(fd, 0, size); error != 0) {
      return SystemError(error, "cannot reserve ", length, " bytes for '", path,
                         "'");
    }
  }
  void* p = internal::MapAligned(length, alignment, fd);
  if (p == nullptr) {
    return SystemError(errno, "cannot map '", path, "' (", length, " bytes)");
  }
  return p;
}

// A new file of `length` bytes in `directory`, mapped. Its name is removed
// as soon as it is open, and the descriptor is closed once the file is
// mapped (the mapping keeps the file), so nothing outlives the mapping.
absl::StatusOr<void*> MapNewFile(const std::string& directory, size_t length,
                                 size_t alignment, bool reserve_storage) {
  std::string path = directory + kFilePattern;
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return SystemError(errno, "cannot create a file in '", directory, "'");
  }
  unlink(path.c_str());
  absl::StatusOr<void*> p =
      GrowAndMap(fd, path, length, alignment, reserve_storage);
  close(fd);
  return p;
}

// The bytes a block of `bytes` maps: whole pages, at most what a file may
// hold.
absl::StatusOr<size_t> MappedBytes(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("mmap: a block of 0 bytes");
  const size_t length = internal::PageRounded(bytes);
  if (length == 0 ||
      length > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap: ", bytes, " bytes is too large for a file"));
  }
  return length;
}

// A block of `bytes` in a new file of `directory`, or why there is none.
absl::StatusOr<void*> MapBlock(const std::string& directory,
                               bool reserve_storage, size_t bytes,
                               size_t alignment) {
  if (!IsPowerOfTwo(alignment)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mmap: alignment ", alignment, " is not a power of two"));
  }
  absl::StatusOr<size_t> length = MappedBytes(bytes);
  if (!length.ok()) return length.status();
  return MapNewFile(directory, *length, alignment, reserve_storage);
}

}  // namespace

std::string DefaultMmapDirectory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

MmapSubAllocator::MmapSubAllocator() : MmapSubAllocator(MmapOptions()) {}

MmapSubAllocator::MmapSubAllocator(const MmapOptions& options)
    : directory_(options.directory.empty() ? DefaultMmapDirectory()
                                           : options.directory),
      reserve_storage_(options.reserve_storage),
      max_blocks_(options.max_blocks) {}

void* MmapSubAllocator::Alloc(size_t alignment, size_t bytes) {
  absl::StatusOr<void*> p = absl::ResourceExhaustedError(absl::StrCat(
      "mmap: ", max_blocks_,
      " blocks are mapped already (MmapOptions::max_blocks: a process may "
      "map only vm.max_map_count regions)"));
  if (blocks_.fetch_add(1) < max_blocks_) {
    p = MapBlock(directory_, reserve_storage_, bytes, alignment);
    if (p.ok()) return *p;
  }
  blocks_.fetch_sub(1);
  absl::MutexLock lock(&mu_);
  last_failure_ = p.status();
  return nullptr;
}

void MmapSubAllocator::Free(void* ptr, size_t bytes) {
  internal::Unmap(ptr, bytes);
  blocks_.fetch_sub(1);
}

absl::Status MmapSubAllocator::LastFailure() const {
  absl::MutexLock lock(&mu_);
  return last_failure_;
}

MmapAllocator::MmapAllocator() : MmapAllocator(MmapOptions()) {}

MmapAllocator::MmapAllocator(const MmapOptions& options)
    : files_(options), live_("mmap") {}

MmapAllocator::~MmapAllocator() {
  live_.FreeAll([this](void* p, size_t bytes) { files_.Free(p, bytes); });
}

void* MmapAllocator::Allocate(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  void* p = files_.Alloc(alignment, size);  // file work outside the lock
  if (p == nullptr) {
    live_.CountFailure();
    return nullptr;
  }
  live_.Add(p, internal::PageRounded(size));
  return p;
}

absl::Status MmapAllocator::Deallocate(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::StatusOr<size_t> bytes = live_.Remove(p);
  if (!bytes.ok()) return bytes.status();
  files_.Free(p, *bytes);
  return absl::OkStatus();
}

AllocatorStats MmapAllocator::GetStats() const { return live_.Stats(); }

int64_t MmapAllocator::NumBlocks() const { return live_.count(); }

}  // namespace memplan::allocators
