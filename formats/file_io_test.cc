#include "formats/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/memplan_file_io_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileIoTest, ReadsAFileWithinTheLimit) {
  const std::string path = dir_ + "/a.txt";
  std::ofstream(path) << "hello";
  EXPECT_EQ(*ReadFile(path, 5), "hello");
  absl::StatusOr<std::string> over = ReadFile(path, 4);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("larger than 4 (the input limit, --max_input_bytes)"));
}

TEST_F(FileIoTest, MissingFilesAndDirectoriesAreNamed) {
  absl::StatusOr<std::string> missing = ReadFile(dir_ + "/nope", 100);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nope"));
  absl::StatusOr<std::string> dir = ReadFile(dir_, 100);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("is a directory"));
  // A newline in a path cannot start a line of its own in a message.
  absl::Status forged = ReadFile(dir_ + "/a\nmemplan: FORGED", 100).status();
  EXPECT_THAT(std::string(forged.message()), HasSubstr("a\\x0Amemplan"));
  EXPECT_THAT(
      std::string(WriteFileAtomically(dir_ + "/no/a\nb", "x").message()),
      HasSubstr("a\\x0Ab"));
}

TEST_F(FileIoTest, RegularFilesAreMappedUpToTheirOwnLimit) {
  const std::string path = dir_ + "/model.bin";
  std::ofstream(path, std::ios::binary) << std::string(100, 'x') << "end";
  // Larger than what may be read whole, within what may be mapped.
  absl::StatusOr<FileBytes> file = FileBytes::Open(path, 10, 1000);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->mapped());
  EXPECT_EQ(file->view().size(), 103u);
  EXPECT_EQ(file->view().substr(100), "end");
  FileBytes moved = *std::move(file);  // the mapping moves with it
  EXPECT_EQ(moved.view().substr(100), "end");

  absl::StatusOr<FileBytes> over = FileBytes::Open(path, 10, 102);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("larger than 102 (the most a model file may hold)"));
  EXPECT_EQ(FileBytes::Open(dir_ + "/nope", 10, 10).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FileBytes::Open(dir_, 10, 10).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FileIoTest, EmptyFilesAndPipesAreReadWhole) {
  const std::string empty = dir_ + "/empty";
  std::ofstream(empty).flush();
  absl::StatusOr<FileBytes> file = FileBytes::Open(empty, 10, 10);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->mapped());
  EXPECT_TRUE(file->view().empty());

  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << "abc"; });
  absl::StatusOr<FileBytes> piped = FileBytes::Open(fifo, 10, 1000);
  writer.join();
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_FALSE(piped->mapped());
  EXPECT_EQ(piped->view(), "abc");
}

TEST_F(FileIoTest, EndlessStreamStopsAtTheLimit) {
  // A FIFO never says how large it is: reading must stop at the limit.
  const std::string fifo = dir_ + "/zero";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::signal(SIGPIPE, SIG_IGN);  // the writer sees EPIPE once the reader stops
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    const std::string chunk(1 << 16, '\0');
    for (int i = 0; i < 64 && out; ++i) out << chunk;  // 4 MiB at most
  });
  absl::StatusOr<std::string> r = ReadFile(fifo, 1 << 20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  writer.join();  // its writes fail once the reader has closed the pipe
}

// An input that cannot be opened is NOT_FOUND (the CLI's exit 66) with
// its errno attached, for callers that tell a missing file from an
// unreadable one (the Python module).
TEST_F(FileIoTest, OpenFailuresCarryTheirErrno) {
  for (const std::string& path :
       {dir_ + "/missing.json", dir_ + "/missing/x.json"}) {
    absl::StatusOr<std::string> r = ReadFile(path, 100);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
    auto e = r.status().GetPayload(kErrnoPayload);
    ASSERT_TRUE(e.has_value()) << path;
    EXPECT_EQ(std::string(*e), std::to_string(ENOENT));
  }
  const std::string file = dir_ + "/file";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  absl::StatusOr<FileBytes> under_a_file =
      FileBytes::Open(file + "/x", 100, 100);
  EXPECT_EQ(under_a_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(*under_a_file.status().GetPayload(kErrnoPayload)),
            std::to_string(ENOTDIR));
}

TEST_F(FileIoTest, WritesAtomicallyAndLeavesNothingOnFailure) {
  const std::string path = dir_ + "/out.bin";
  ASSERT_TRUE(WriteFileAtomically(path, std::string("a\0b", 3)).ok());
  EXPECT_EQ(*ReadFile(path, 100), std::string("a\0b", 3));
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFile(path, 100), "new");
  absl::Status s = WriteFileAtomically(dir_ + "/no/such/dir/x", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot write"));
  s = WriteFileAtomically(dir_, "x");
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a directory"));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);  // out.bin only: no temporary file left behind
}

// What a shell's `>` keeps, a replacing write keeps: the file's mode, a
// symbolic link (its target replaced), a FIFO (written in place, not
// replaced by a file); a file name of 250 bytes leaves the temporary
// file room.
TEST_F(FileIoTest, ReplacingKeepsModesLinksAndSpecialFiles) {
  const std::string secret = dir_ + "/secret.h";
  ASSERT_TRUE(WriteFileAtomically(secret, "old").ok());
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  ASSERT_TRUE(WriteFileAtomically(secret, "new").ok());
  struct stat info;
  ASSERT_EQ(::stat(secret.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(*ReadFile(secret, 100), "new");

  const std::string link = dir_ + "/link.h";
  fs::create_symlink(secret, link);
  ASSERT_TRUE(WriteFileAtomically(link, "through").ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(*ReadFile(secret, 100), "through");

  const std::string dangling = dir_ + "/dangling.h";
  fs::create_symlink(dir_ + "/made.h", dangling);
  ASSERT_TRUE(WriteFileAtomically(dangling, "made").ok());
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(*ReadFile(dir_ + "/made.h", 100), "made");

  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> read;
  std::thread reader([&] { read = ReadFile(fifo, 100); });
  ASSERT_TRUE(WriteFileAtomically(fifo, "piped").ok());
  reader.join();
  EXPECT_EQ(*read, "piped");
  EXPECT_TRUE(fs::is_fifo(fifo));

  const std::string long_name = dir_ + "/" + std::string(250, 'a') + ".svg";
  ASSERT_TRUE(WriteFileAtomically(long_name, "long").ok());
  EXPECT_EQ(*ReadFile(long_name, 100), "long");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 6);  // no temporary file left behind
}

// In-place destinations are opened before anything is renamed: a link
// into a missing directory fails the call with every file as it was.
TEST_F(FileIoTest, InPlaceFilesAreOpenedBeforeAnyRename) {
  const std::string svg = dir_ + "/a.svg";
  ASSERT_TRUE(WriteFileAtomically(svg, "old").ok());
  const std::string link = dir_ + "/page.html";
  fs::create_symlink(dir_ + "/no/such/dir/x.html", link);
  absl::Status s = WriteFilesAtomically({{svg, "new svg"}, {link, "new html"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(*ReadFile(svg, 100), "old");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 2);  // a.svg and the link: no temporary file
}

// This process's standard output, however named, is written to its
// descriptor: appending where it appends (a rename would drop what it
// held, and the report written after it).
TEST_F(FileIoTest, StandardOutputByAnotherNameIsWrittenToIt) {
  const std::string log = dir_ + "/log.txt";
  ASSERT_TRUE(WriteFileAtomically(log, "OLD\n").ok());
  const int appending = ::open(log.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(appending, 0);
  std::cout.flush();
  const int saved = ::dup(STDOUT_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(appending, STDOUT_FILENO), STDOUT_FILENO);
  absl::Status by_dev = WriteFileAtomically("/dev/stdout", "one\n");
  absl::Status by_name = WriteFileAtomically(log, "two\n");
  std::cout.flush();
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  ::close(appending);
  EXPECT_TRUE(by_dev.ok()) << by_dev;
  EXPECT_TRUE(by_name.ok()) << by_name;
  EXPECT_EQ(*ReadFile(log, 100), "OLD\none\ntwo\n");
}

TEST_F(FileIoTest, SameFileHoweverSpelt) {
  const std::string a = dir_ + "/a.h";
  EXPECT_TRUE(SameFile(a, dir_ + "/./a.h"));  // neither there yet
  EXPECT_FALSE(SameFile(a, dir_ + "/b.h"));
  ASSERT_TRUE(WriteFileAtomically(a, "a").ok());
  ASSERT_EQ(::link(a.c_str(), (dir_ + "/hard.h").c_str()), 0);
  fs::create_symlink(a, dir_ + "/soft.h");
  EXPECT_TRUE(SameFile(a, dir_ + "/hard.h"));
  EXPECT_TRUE(SameFile(dir_ + "/soft.h", a));
  EXPECT_TRUE(SameFile("-", "-"));
  EXPECT_FALSE(SameFile("-", a));
  // A dangling link to a file not made yet is that file.
  fs::create_symlink(dir_ + "/made.svg", dir_ + "/dangling");
  EXPECT_TRUE(SameFile(dir_ + "/made.svg", dir_ + "/dangling"));
  fs::create_symlink("made.svg", dir_ + "/relative");
  EXPECT_TRUE(SameFile(dir_ + "/relative", dir_ + "/./made.svg"));
  // A device takes both outputs.
  EXPECT_FALSE(SameFile("/dev/null", "/dev/./null"));
}

// Resident kilobytes of the mapping holding `address` (/proc/self/smaps).
int64_t MappedKb(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2) {  // a mapping
      inside = from <= at && at < to;
      continue;
    }
    long long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %lld kB", &kb) == 1) {
      return kb;
    }
  }
  return -1;
}

// A large part's pages are dropped; a small part's are not (dropping the
// blocks around it would drop the neighbours a reader is about to read).
TEST_F(FileIoTest, ReleaseDropsTheBlocksOfLargePartsOnly) {
  const std::string path = dir_ + "/big.bin";
  std::ofstream(path) << std::string(size_t{8} << 20, 'x');
  absl::StatusOr<FileBytes> bytes = FileBytes::Open(path, 1 << 20, 1 << 30);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(bytes->mapped());
  const absl::string_view view = bytes->view();
  int64_t sum = 0;
  for (size_t i = 0; i < view.size(); i += 4096) sum += view[i];
  EXPECT_EQ(sum, 'x' * static_cast<int64_t>(view.size() / 4096));
  const int64_t all = MappedKb(view.data());
  ASSERT_GE(all, 8000);
  bytes->Release(view.substr(3 << 20, 100));  // a node's worth
  EXPECT_EQ(MappedKb(view.data()), all);
  bytes->Release(view.substr(3 << 20, 1 << 20));  // a tensor's
  EXPECT_LE(MappedKb(view.data()), all - 1024);
}

}  // namespace
}  // namespace memplan::formats
