#include "allocators/mmap_allocator.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocators/buffer_allocator.h"
#include "allocators/internal/page_mapping.h"
#include "allocators/testing/proc_maps.h"
#include "allocators/testing/replay.h"
#include "allocators/testing/stress.h"
#include "allocators/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::allocators {
namespace {

namespace fs = std::filesystem;
using ::testing::Each;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::NotNull;

// Entries in a directory.
int CountEntries(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

// Open file descriptors of this process.
int CountDescriptors() { return CountEntries("/proc/self/fd"); }

// Each test gets a fresh directory for its files, checked empty and
// removed at the end.
class MmapAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/mmap_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern).string();  // as /proc/self/maps spells it
    options_.directory = dir_;
  }
  void TearDown() override {
    EXPECT_EQ(CountEntries(dir_), 0) << "a file was left in " << dir_;
    fs::remove_all(dir_);
  }
  // Mappings of files made in the test's directory.
  std::vector<testing::Mapping> Files() const {
    return testing::MappingsUnder(dir_ + "/");
  }

  std::string dir_;
  MmapOptions options_;
};

TEST_F(MmapAllocatorTest, BlocksAreAlignedZeroedAndWritable) {
  MmapAllocator files(options_);
  EXPECT_EQ(files.Name(), "mmap");
  EXPECT_EQ(files.directory(), dir_);
  for (size_t alignment : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
    const size_t size = 3 * internal::PageSize() + 1;
    auto* p = static_cast<unsigned char*>(files.Allocate(size, alignment));
    ASSERT_NE(p, nullptr) << files.LastFailure();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u);
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[size - 1], 0);
    std::memset(p, 0xC3, size);
    EXPECT_EQ(p[size / 2], 0xC3);
    EXPECT_TRUE(files.Deallocate(p).ok());
  }
  EXPECT_TRUE(files.LastFailure().ok());
}

// Stats count whole pages; nothing is cached.
TEST_F(MmapAllocatorTest, StatsCountPages) {
  MmapAllocator files(options_);
  const auto page = static_cast<int64_t>(internal::PageSize());
  void* small = files.Allocate(64, 64);
  void* large = files.Allocate(5 * internal::PageSize() + 10, 64);
  ASSERT_TRUE(small != nullptr && large != nullptr);
  AllocatorStats s = files.GetStats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.bytes_in_use, 7 * page);
  EXPECT_EQ(s.bytes_reserved, 7 * page);
  EXPECT_EQ(s.largest_alloc_size, 6 * page);
  EXPECT_EQ(files.NumBlocks(), 2);
  EXPECT_TRUE(files.Deallocate(large).ok());
  s = files.GetStats();
  EXPECT_EQ(s.bytes_in_use, page);
  EXPECT_EQ(s.bytes_reserved, page);
  EXPECT_EQ(s.peak_bytes_reserved, 7 * page);
  EXPECT_EQ(s.fragmentation, 0.0);
  EXPECT_TRUE(files.Deallocate(small).ok());
  EXPECT_EQ(files.GetStats().bytes_in_use, 0);
}

// One file per block; no name is ever left in the directory, no descriptor
// is kept, and the file's storage goes with the mapping.
TEST_F(MmapAllocatorTest, OneUnnamedFilePerBlockGoneAfterFree) {
  MmapAllocator files(options_);
  const int descriptors = CountDescriptors();
  void* a = files.Allocate(10000, 64);
  void* b = files.Allocate(10000, 64);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const std::vector<testing::Mapping> mapped = Files();
  ASSERT_EQ(mapped.size(), 2u);
  for (const testing::Mapping& m : mapped) {
    EXPECT_THAT(m.path, HasSubstr("memplan-mmap-"));
    EXPECT_THAT(m.path, EndsWith("(deleted)"));  // unlinked already
    EXPECT_EQ(m.perms, "rw-s");                  // shared: backed by the file
  }
  EXPECT_EQ(CountEntries(dir_), 0);
  EXPECT_EQ(CountDescriptors(), descriptors);
  EXPECT_TRUE(files.Deallocate(a).ok());
  EXPECT_EQ(Files().size(), 1u);
  EXPECT_TRUE(files.Deallocate(b).ok());
  EXPECT_TRUE(Files().empty());
}

TEST_F(MmapAllocatorTest, DestructionUnmapsEveryFile) {
  {
    MmapAllocator files(options_);
    for (int i = 0; i < 5; ++i) ASSERT_NE(files.Allocate(8192, 64), nullptr);
    EXPECT_EQ(Files().size(), 5u);
  }
  EXPECT_TRUE(Files().empty());
}

TEST_F(MmapAllocatorTest, MissingDirectoryIsACountedFailure) {
  options_.directory = dir_ + "/missing";
  MmapAllocator files(options_);
  EXPECT_EQ(files.Allocate(100, 64), nullptr);
  EXPECT_EQ(files.GetStats().num_alloc_failures, 1);
  EXPECT_EQ(files.GetStats().num_allocs, 0);
  const absl::Status why = files.LastFailure();
  EXPECT_EQ(why.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(why.message(),
              HasSubstr("cannot create a file in '" + dir_ + "/missing'"));
}

// A process may hold only vm.max_map_count mappings, its threads' stacks
// included: a replay with more live blocks would starve the whole server.
TEST_F(MmapAllocatorTest, BlocksPastMaxBlocksAreCountedFailures) {
  options_.max_blocks = 3;
  MmapAllocator files(options_);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(files.Allocate(100, 64));
  EXPECT_THAT(blocks, Each(NotNull()));
  EXPECT_EQ(files.Allocate(100, 64), nullptr);
  EXPECT_EQ(files.GetStats().num_alloc_failures, 1);
  EXPECT_EQ(files.LastFailure().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      files.LastFailure().message(),
      HasSubstr("3 blocks are mapped already (MmapOptions::max_blocks"));
  EXPECT_EQ(Files().size(), 3u);
  ASSERT_TRUE(files.Deallocate(blocks.back()).ok());
  blocks.back() = files.Allocate(100, 64);  // room again
  EXPECT_NE(blocks.back(), nullptr);
  for (void* p : blocks) EXPECT_TRUE(files.Deallocate(p).ok());
}

TEST_F(MmapAllocatorTest, FileAsDirectoryIsACountedFailure) {
  const std::string file = dir_ + "/plain";
  std::ofstream(file) << "x";
  options_.directory = file;
  {
    MmapAllocator files(options_);
    EXPECT_EQ(files.Allocate(100, 64), nullptr);
    EXPECT_EQ(files.GetStats().num_alloc_failures, 1);
    EXPECT_THAT(files.LastFailure().message(), HasSubstr("'" + file + "'"));
    EXPECT_THAT(files.LastFailure().message(), HasSubstr("Not a directory"));
  }
  fs::remove(file);
}

// Sets the file size limit for the test's life and ignores SIGXFSZ, which
// the kernel sends when a file would pass it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
    saved_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  void (*saved_handler_)(int) = nullptr;
};

TEST_F(MmapAllocatorTest, FileThatCannotGrowIsACountedFailure) {
  MmapAllocator files(options_);
  FileSizeLimit limit(256 << 10);
  EXPECT_EQ(files.Allocate(1 << 20, 64), nullptr);
  EXPECT_EQ(files.GetStats().num_alloc_failures, 1);
  EXPECT_THAT(files.LastFailure().message(), HasSubstr("cannot grow"));
  EXPECT_THAT(files.LastFailure().message(), HasSubstr("to 1048576 bytes"));
  void* small = files.Allocate(64 << 10, 64);  // under the limit
  EXPECT_NE(small, nullptr);
  EXPECT_TRUE(files.Deallocate(small).ok());
  EXPECT_TRUE(Files().empty());
}

TEST_F(MmapAllocatorTest, BadRequestsAreErrors) {
  MmapAllocator files(options_);
  EXPECT_EQ(files.Allocate(100, 48), nullptr);
  EXPECT_EQ(files.LastFailure().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(files.Allocate(SIZE_MAX - 5, 64), nullptr);
  EXPECT_THAT(files.LastFailure().message(), HasSubstr("too large"));
  EXPECT_EQ(files.GetStats().num_alloc_failures, 2);
  void* p = files.Allocate(100, 64);
  EXPECT_EQ(files.Deallocate(static_cast<char*>(p) + 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(files.Deallocate(p).ok());
  EXPECT_EQ(files.Deallocate(p).code(), absl::StatusCode::kInvalidArgument);
}

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(MmapAllocatorTest, DefaultDirectoryIsTmpdirElseTmp) {
  {
    ScopedEnv env("TMPDIR", dir_.c_str());
    MmapAllocator files;
    EXPECT_EQ(files.directory(), dir_);
    void* p = files.Allocate(100, 64);
    EXPECT_EQ(Files().size(), 1u);
    EXPECT_TRUE(files.Deallocate(p).ok());
  }
  ScopedEnv unset("TMPDIR", nullptr);
  EXPECT_EQ(DefaultMmapDirectory(), "/tmp");
  ScopedEnv empty("TMPDIR", "");
  EXPECT_EQ(MmapAllocator().directory(), "/tmp");
}

// MNN's combination: a buffer allocator whose blocks are files; a 1 MiB
// file serves several small blocks.
TEST_F(MmapAllocatorTest, BufferAllocatorOverFiles) {
  BufferAllocator::Options options;
  options.min_source_bytes = 1 << 20;
  {
    BufferAllocator buffers(std::make_unique<MmapSubAllocator>(options_),
                            options);
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(buffers.Allocate(4000, 64));
    EXPECT_EQ(Files().size(), 1u);
    EXPECT_EQ(buffers.GetStats().bytes_reserved, 1 << 20);
    for (void* p : blocks) EXPECT_TRUE(buffers.Deallocate(p).ok());
    EXPECT_EQ(Files().size(), 1u);  // cached until released
    buffers.ReleaseFree();
    EXPECT_TRUE(Files().empty());
  }
}

// Each free costs milliseconds where the file system discards freed
// blocks at once (ext4 mounted with -o discard): the runs are short.
TEST_F(MmapAllocatorTest, MultiThreadedStress) {
  MmapAllocator files(options_);
  testing::RunStress(files, 16384, /*threads=*/4, /*ops=*/500);
  EXPECT_EQ(files.GetStats().bytes_in_use, 0);
  EXPECT_EQ(files.GetStats().num_alloc_failures, 0);
  EXPECT_EQ(files.NumBlocks(), 0);
  EXPECT_TRUE(Files().empty());
}

TEST_F(MmapAllocatorTest, ReplaysLarson) {
  MmapAllocator files(options_);
  const Trace trace = LarsonWorkload(300, 32, 16, 65536, 4);
  absl::StatusOr<ReplayResult> r = ReplayTrace(trace, files);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->allocations, 332);
  EXPECT_EQ(r->failures, 0);
  EXPECT_EQ(r->peak_bytes_reserved, r->peak_bytes_in_use);
  EXPECT_EQ(files.GetStats().bytes_in_use, 0);
  EXPECT_TRUE(Files().empty());
}

// A static plan's arena is one file.
TEST_F(MmapAllocatorTest, ArenaOfAStaticPlanIsOneFile) {
  MmapAllocator files(options_);
  const Trace trace = LarsonWorkload(300, 16, 16, 4096, 5);
  int64_t arena = 0;
  const std::vector<int64_t> offsets = testing::DisjointOffsets(trace, &arena);
  absl::StatusOr<ReplayResult> r =
      ReplayStaticPlan(trace, offsets, arena, files);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->allocations, 316);
  EXPECT_EQ(files.GetStats().num_allocs, 1);
  EXPECT_EQ(files.GetStats().peak_bytes_in_use,
            static_cast<int64_t>(internal::PageRounded(arena)));
  EXPECT_TRUE(Files().empty());
}

}  // namespace
}  // namespace memplan::allocators
