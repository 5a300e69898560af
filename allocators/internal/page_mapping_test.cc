#include "allocators/internal/page_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "allocators/testing/proc_maps.h"
#include "gtest/gtest.h"

namespace memplan::allocators::internal {
namespace {

// True when every page of [p, p + bytes) is mapped (mincore fails with
// ENOMEM on a hole).
bool Mapped(void* p, size_t bytes) {
  std::vector<unsigned char> pages(PageRounded(bytes) / PageSize());
  return mincore(p, bytes, pages.data()) == 0;
}

TEST(PageMappingTest, RoundsToPages) {
  EXPECT_EQ(PageRounded(1), PageSize());
  EXPECT_EQ(PageRounded(PageSize()), PageSize());
  EXPECT_EQ(PageRounded(PageSize() + 1), 2 * PageSize());
  EXPECT_EQ(PageRounded(SIZE_MAX), 0u);
}

// Anonymous memory at alignments up to 64 MiB: aligned, zeroed, writable,
// gone after Unmap.
TEST(PageMappingTest, AnonymousAtEveryAlignment) {
  for (size_t alignment : {size_t{64}, PageSize(), size_t{1} << 16,
                           size_t{2} << 20, size_t{64} << 20}) {
    const size_t bytes = 3 * PageSize() + 5;
    auto* p = static_cast<unsigned char*>(MapAligned(bytes, alignment, -1));
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment;
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[bytes - 1], 0);
    p[0] = p[PageRounded(bytes) - 1] = 0xAB;  // the whole last page is ours
    Unmap(p, bytes);
    EXPECT_FALSE(Mapped(p, bytes)) << alignment;
  }
}

// The address space reserved to find an aligned spot is given back: a
// 64 MiB alignment would otherwise leave up to 64 MiB reserved behind.
TEST(PageMappingTest, OverAlignmentLeavesNoReservationBehind) {
  const size_t before = testing::InaccessibleBytes();
  void* p = MapAligned(PageSize(), size_t{64} << 20, -1);
  ASSERT_NE(p, nullptr);
  EXPECT_LT(testing::InaccessibleBytes(), before + (size_t{1} << 20));
  Unmap(p, PageSize());
}

// A file mapping is shared: what is written is in the file.
TEST(PageMappingTest, FileMappingWritesThroughToTheFile) {
  std::string path = ::testing::TempDir() + "/page_mapping_XXXXXX";
  const int fd = mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(unlink(path.c_str()), 0);
  const size_t bytes = 2 * PageSize();
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  auto* p = static_cast<char*>(MapAligned(bytes, size_t{1} << 20, fd));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{1} << 20), 0u);
  p[PageSize() + 7] = 'x';
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(PageSize() + 7)), 1);
  EXPECT_EQ(c, 'x');
  Unmap(p, bytes);
  EXPECT_FALSE(Mapped(p, bytes));
  close(fd);
}

TEST(PageMappingTest, RefusalsSetErrno) {
  errno = 0;
  EXPECT_EQ(MapAligned(0, PageSize(), -1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(MapAligned(SIZE_MAX - 10, PageSize(), -1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(MapAligned(PageSize(), PageSize(), /*fd=*/12345), nullptr);
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace memplan::allocators::internal
