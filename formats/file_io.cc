#include "formats/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/text.h"

namespace memplan::formats {
namespace {

// The reason of the last failed system call.
std::string Reason() { return std::strerror(errno); }

// A path as a message shows it: a newline or another control character in
// it escaped, so that it cannot forge a line of its own.
std::string Shown(const std::string& path) { return base::SafeText(path); }

// NOT_FOUND for an input that cannot be opened (missing, unreadable: the
// CLI's exit 66), carrying errno (kErrnoPayload) for callers that tell
// those apart (the Python module's FileNotFoundError, PermissionError).
absl::Status CannotOpen(const std::string& path) {
  const int error = errno;
  absl::Status s = absl::NotFoundError(
      absl::StrCat("cannot open ", Shown(path), ": ", std::strerror(error)));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(error)));
  return s;
}

// Reads from `fd` until end of file, failing past `max_bytes`.
absl::StatusOr<std::string> ReadBounded(int fd, const std::string& name,
                                        int64_t max_bytes) {
  std::string out;
  char chunk[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot read ", name, ": ", Reason()));
    }
    if (got == 0) return out;
    if (static_cast<int64_t>(out.size()) + got > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name, " is larger than ", max_bytes,
                       " bytes (the input limit, --max_input_bytes)"));
    }
    out.append(chunk, static_cast<size_t>(got));
  }
}

// Writes all of `contents` to `fd`.
bool WriteAll(int fd, absl::string_view contents) {
  while (!contents.empty()) {
    const ssize_t put = ::write(fd, contents.data(), contents.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    contents.remove_prefix(static_cast<size_t>(put));
  }
  return true;
}

absl::Status CannotWrite(const std::string& path, const std::string& why) {
  return absl::PermissionDeniedError(
      absl::StrCat("cannot write ", Shown(path), ": ", why));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     int64_t max_bytes) {
  if (path == "-")
    return ReadBounded(STDIN_FILENO, "standard input", max_bytes);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return CannotOpen(path);
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(Shown(path), " is a directory, not a file"));
  }
  if (S_ISREG(info.st_mode) && info.st_size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Shown(path), " is ", info.st_size, " bytes, larger than ",
                     max_bytes, " (the input limit, --max_input_bytes)"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return CannotOpen(path);
  }
  absl::StatusOr<std::string> bytes = ReadBounded(fd, Shown(path), max_bytes);
  ::close(fd);
  return bytes;
}

absl::Status FileBytes::ReadStdin(int64_t max_bytes) {
  // Address space is reserved by doubling, and moved, not copied, when it
  // grows (mremap); only the pages read into are ever touched.
  const size_t limit = static_cast<size_t>(std::max<int64_t>(max_bytes, 0));
  size_t capacity = size_t{1} << 20;
  void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("cannot read standard input: ", Reason()));
  }
  mapped_ = static_cast<const char*>(p);
  mapping_size_ = capacity;
  anonymous_ = true;
  size_t size = 0;
  while (true) {
    if (size == capacity) {
      void* q = ::mremap(p, capacity, 2 * capacity, MREMAP_MAYMOVE);
      if (q == MAP_FAILED) {
        return absl::UnavailableError(
            absl::StrCat("cannot read standard input: ", Reason()));
      }
      p = q;
      capacity *= 2;
      mapped_ = static_cast<const char*>(p);
      mapping_size_ = capacity;
    }
    // One byte past the limit at most: enough to tell it is over.
    const size_t want = std::min(capacity - size, limit + 1 - size);
    const ssize_t got = ::read(STDIN_FILENO, static_cast<char*>(p) + size,
                               std::min<size_t>(want, size_t{1} << 20));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot read standard input: ", Reason()));
    }
    if (got == 0) break;
    size += static_cast<size_t>(got);
    mapped_size_ = size;
    if (size > limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("standard input is larger than ", max_bytes,
                       " bytes (the input limit, --max_input_bytes)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FileBytes> FileBytes::Open(const std::string& path,
                                          int64_t max_read_bytes,
                                          int64_t max_mapped_bytes) {
  FileBytes file;
  if (path == "-") {
    if (auto s = file.ReadStdin(max_read_bytes); !s.ok()) return s;
    return file;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) ||
      info.st_size == 0) {
    absl::StatusOr<std::string> bytes = ReadFile(path, max_read_bytes);
    if (!bytes.ok()) return bytes.status();
    file.read_ = *std::move(bytes);
    return file;
  }
  if (info.st_size > max_mapped_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Shown(path), " is ", info.st_size, " bytes, larger than ",
                     max_mapped_bytes, " (the most a model file may hold)"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return CannotOpen(path);
  }
  const size_t size = static_cast<size_t>(info.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string why = p == MAP_FAILED ? Reason() : "";
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("cannot map ", Shown(path), ": ", why));
  }
  file.mapped_ = static_cast<const char*>(p);
  file.mapped_size_ = size;
  file.mapping_size_ = size;
  return file;
}

FileBytes::FileBytes(FileBytes&& other) noexcept
    : mapped_(std::exchange(other.mapped_, nullptr)),
      mapped_size_(std::exchange(other.mapped_size_, 0)),
      mapping_size_(std::exchange(other.mapping_size_, 0)),
      anonymous_(std::exchange(other.anonymous_, false)),
      read_(std::move(other.read_)) {}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    Unmap();
    mapped_ = std::exchange(other.mapped_, nullptr);
    mapped_size_ = std::exchange(other.mapped_size_, 0);
    mapping_size_ = std::exchange(other.mapping_size_, 0);
    anonymous_ = std::exchange(other.anonymous_, false);
    read_ = std::move(other.read_);
  }
  return *this;
}

FileBytes::~FileBytes() { Unmap(); }

void FileBytes::Release(absl::string_view part) const {
  // Dropping the blocks around a small part would drop its neighbours too,
  // which the reader may be about to read: a model of 100,000 small nodes
  // spent 2 s of system time mapping its pages again (a madvise per node).
  constexpr size_t kSmallestReleased = size_t{64} << 10;
  if (mapped_ == nullptr || anonymous_ || part.size() < kSmallestReleased ||
      part.data() < mapped_ ||
      part.data() + part.size() > mapped_ + mapped_size_) {
    return;
  }
  // File pages may be mapped as large folios of up to 2 MiB, and dropping
  // part of one keeps the rest mapped: drop whole 2 MiB blocks around
  // `part`. A private read-only file mapping holds only the file's pages,
  // so dropping loses nothing; what is read again is mapped again.
  constexpr uintptr_t kBlock = uintptr_t{2} << 20;
  const uintptr_t base = reinterpret_cast<uintptr_t>(mapped_);
  const uintptr_t end = base + mapped_size_;
  const uintptr_t at = reinterpret_cast<uintptr_t>(part.data());
  const uintptr_t from = std::max(base, at / kBlock * kBlock);
  const uintptr_t to =
      std::min(end, (at + part.size() + kBlock - 1) / kBlock * kBlock);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (from + page - 1) / page * page;  // base is aligned
  if (to > first) {
    ::madvise(reinterpret_cast<void*>(first), to - first, MADV_DONTNEED);
  }
}

void FileBytes::Unmap() {
  if (mapped_ != nullptr) {
    ::munmap(const_cast<char*>(mapped_), mapping_size_);
    mapped_ = nullptr;
    mapped_size_ = 0;
    mapping_size_ = 0;
    anonymous_ = false;
  }
}

namespace {

// Where a file named `path` is written:
//  - a regular file (or none yet) is replaced: a temporary file beside it,
//    renamed onto it (the directory entry, never anything a link points
//    to);
//  - a symbolic link, a FIFO or a device is opened as a shell's `>` opens
//    it (the kernel's rules on following links apply) and written in
//    place after the renames;
//  - this process's own standard output or error (/dev/stdout, or the
//    file it is redirected to) is written to that descriptor, appending
//    where it appends.
struct Destination {
  std::string temp;       // the staged file, when replaced
  struct stat info = {};  // the replaced file's mode and owner
  bool exists = false;    // a regular file is replaced
  int fd = -1;            // opened in place, written after the renames
  bool created = false;   // ...and made by that open (removed on failure)
  int stdio = -1;         // STDOUT_FILENO or STDERR_FILENO
};

// Whether `info` is the file open as descriptor `fd`.
bool IsOpenAs(const struct stat& info, int fd) {
  struct stat open;
  return ::fstat(fd, &open) == 0 && open.st_dev == info.st_dev &&
         open.st_ino == info.st_ino;
}

// Removes what an in-place open made (its file through a dangling link).
void Discard(Destination* d) {
  if (d->fd < 0) return;
  if (d->created) {
    char target[4096];
    const std::string fd_path = absl::StrCat("/proc/self/fd/", d->fd);
    const ssize_t n = ::readlink(fd_path.c_str(), target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      ::unlink(target);
    }
  }
  ::close(d->fd);
  d->fd = -1;
}

// Creates a new file beside `path` (a short name, so that a long file
// name still has room), mode 0666 less the umask: its descriptor, or -1.
int CreateTemp(const std::string& path, std::string* temp) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  static std::atomic<uint64_t> counter{0};
  std::random_device random;
  for (int attempt = 0; attempt < 64; ++attempt) {
    *temp = absl::StrCat(dir, ".memplan-", ::getpid(), "-",
                         counter.fetch_add(1), "-", random() % 1000000);
    const int fd =
        ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

// Writes `contents` to a new temporary file beside `path` (d->temp), with
// the mode and owner of the file it replaces. Nothing is left on failure.
absl::Status Stage(const std::string& path, absl::string_view contents,
                   Destination* d) {
  const int fd = CreateTemp(path, &d->temp);
  if (fd < 0) {
    d->temp.clear();
    return CannotWrite(path, Reason());
  }
  if (d->exists) {
    // The owner first (root only; a failure keeps ours), then the mode,
    // without set-id bits.
    if (::geteuid() == 0) {
      [[maybe_unused]] const int owned =
          ::fchown(fd, d->info.st_uid, d->info.st_gid);
    }
    ::fchmod(fd, d->info.st_mode & 0777);
  }
  const bool written = WriteAll(fd, contents) && ::fsync(fd) == 0;
  const std::string why = written ? "" : Reason();
  if (::close(fd) != 0 || !written) {
    ::unlink(d->temp.c_str());
    d->temp.clear();
    return CannotWrite(path, why.empty() ? "write failed" : why);
  }
  return absl::OkStatus();
}

// Decides how `path` is written (Destination) and stages or opens it.
absl::Status Prepare(const std::string& path, absl::string_view contents,
                     Destination* d) {
  struct stat target;
  const bool there = ::stat(path.c_str(), &target) == 0;
  if (there && S_ISDIR(target.st_mode)) {
    return CannotWrite(path, "it is a directory");
  }
  if (there &&
      (IsOpenAs(target, STDOUT_FILENO) || IsOpenAs(target, STDERR_FILENO))) {
    d->stdio = IsOpenAs(target, STDOUT_FILENO) ? STDOUT_FILENO : STDERR_FILENO;
    return absl::OkStatus();
  }
  struct stat entry = {};
  const bool named = ::lstat(path.c_str(), &entry) == 0;
  if (!named || S_ISREG(entry.st_mode)) {
    d->exists = named;
    d->info = entry;
    return Stage(path, contents, d);
  }
  // A link, a FIFO (which waits for its reader here), a device: truncated
  // only once every file is ready.
  d->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (d->fd < 0) return CannotWrite(path, Reason());
  d->created = !there;
  return absl::OkStatus();
}

// Writes `contents` into the file opened in place (d->fd), and closes it.
absl::Status WriteInPlace(const std::string& path, absl::string_view contents,
                          Destination* d) {
  struct stat info;
  const int fd = std::exchange(d->fd, -1);
  bool written = true;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    written = ::ftruncate(fd, 0) == 0;
  }
  written = written && WriteAll(fd, contents);
  const std::string why = written ? "" : Reason();
  if (::close(fd) != 0 || !written) {
    return CannotWrite(path, why.empty() ? "write failed" : why);
  }
  return absl::OkStatus();
}

// The path `path` finally names, its links followed (a dangling one's
// target too): "" when unknown.
std::string FinalPath(std::string path) {
  for (int hop = 0; hop < 40; ++hop) {
    struct stat entry;
    if (::lstat(path.c_str(), &entry) != 0 || !S_ISLNK(entry.st_mode)) break;
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) return "";
    const std::string link(target, static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    path = link.front() == '/' || slash == std::string::npos
               ? link
               : path.substr(0, slash + 1) + link;
  }
  // absolute() first: libstdc++ leaves a missing relative "d.json" as it
  // is, and "./d.json" absolute.
  std::error_code error;
  std::filesystem::path p = std::filesystem::weakly_canonical(
      std::filesystem::absolute(path, error), error);
  return error ? std::string() : p.string();
}

}  // namespace

absl::Status WriteStdout(absl::string_view contents) {
  errno = 0;
  std::cout.write(contents.data(),
                  static_cast<std::streamsize>(contents.size()));
  const int error = std::cout.good() ? 0 : errno;
  absl::Status s = FlushStdout();
  if (!s.ok() && error != 0) {
    return CannotWrite("standard output", std::strerror(error));
  }
  return s;
}

absl::Status FlushStdout() {
  // The reason is the errno of the write that failed: known when it
  // failed here (a write that failed earlier left only its mark, and
  // usually fails again here).
  errno = 0;
  std::cout.flush();
  const bool stream_ok = std::cout.good();
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (stream_ok && flushed && std::ferror(stdout) == 0) {
    return absl::OkStatus();
  }
  return CannotWrite("standard output",
                     error != 0 ? std::strerror(error) : "write failed");
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  return WriteFilesAtomically({{path, contents}});
}

absl::Status WriteFilesAtomically(absl::Span<const FileToWrite> files) {
  std::vector<Destination> to(files.size());
  // On failure before the renames: every temporary file, and every file
  // an in-place open made, goes.
  const auto discard_all = [&to] {
    for (Destination& d : to) {
      if (!d.temp.empty()) ::unlink(d.temp.c_str());
      Discard(&d);
    }
  };
  for (size_t k = 0; k < files.size(); ++k) {
    if (files[k].path == "-") continue;
    if (absl::Status s = Prepare(files[k].path, files[k].contents, &to[k]);
        !s.ok()) {
      discard_all();
      return s;
    }
  }
  for (size_t k = 0; k < files.size(); ++k) {
    if (to[k].temp.empty()) continue;
    if (::rename(to[k].temp.c_str(), files[k].path.c_str()) != 0) {
      const std::string reason = Reason();
      discard_all();
      return CannotWrite(files[k].path, reason);
    }
    to[k].temp.clear();
  }
  absl::Status first_error;
  for (size_t k = 0; k < files.size(); ++k) {
    if (to[k].fd < 0) continue;
    absl::Status s = WriteInPlace(files[k].path, files[k].contents, &to[k]);
    if (first_error.ok()) first_error = s;
  }
  if (!first_error.ok()) return first_error;
  for (size_t k = 0; k < files.size(); ++k) {
    if (to[k].stdio != STDERR_FILENO) continue;
    std::fflush(stderr);
    if (!WriteAll(STDERR_FILENO, files[k].contents)) {
      return CannotWrite("standard error", Reason());
    }
  }
  for (size_t k = 0; k < files.size(); ++k) {
    if (files[k].path != "-" && to[k].stdio != STDOUT_FILENO) continue;
    if (absl::Status s = WriteStdout(files[k].contents); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool SameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (a == "-" || b == "-") return false;
  struct stat sa, sb;
  const bool a_there = ::stat(a.c_str(), &sa) == 0;
  const bool b_there = ::stat(b.c_str(), &sb) == 0;
  if (a_there && b_there) {
    // One regular file: one output would replace the other. A terminal,
    // a pipe or a device takes both.
    return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
  }
  if (a_there || b_there) return false;
  // Neither there yet: the path each finally names (./x and x; a link
  // to a file not made yet and that file).
  const std::string fa = FinalPath(a);
  return !fa.empty() && fa == FinalPath(b);
}

}  // namespace memplan::formats
