// Reading and writing whole files with the limits and messages a CLI user
// expects: input is bounded (standard input too), a directory is named as
// such, and output is written to a temporary file renamed into place, so
// nothing half-written is ever left at the destination.
//
//   absl::StatusOr<std::string> bytes =
//       formats::ReadFile("plan.json", formats::kDefaultMaxInputBytes);
//   absl::StatusOr<formats::FileBytes> model = formats::FileBytes::Open(
//       "model.onnx", formats::kDefaultMaxInputBytes,
//       formats::kMaxMappedBytes);
//   absl::Status s = formats::WriteFileAtomically("plan.h", text);
#ifndef MEMPLAN_FORMATS_FILE_IO_H_
#define MEMPLAN_FORMATS_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace memplan::formats {

// The payload of an open failure's status: errno, in decimal.
inline constexpr char kErrnoPayload[] = "memplan.errno";

// The default bound on one input file: 512 MiB.
inline constexpr int64_t kDefaultMaxInputBytes = int64_t{512} << 20;

// Reads `path` ("-" is standard input) whole. NOT_FOUND for a missing file
// or a directory ("is a directory"); RESOURCE_EXHAUSTED when the input is
// larger than `max_bytes` (standard input stops being read right there);
// UNAVAILABLE for other read errors. Messages name the path.
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path,
                                                   int64_t max_bytes);

// The bound on a file that is mapped rather than read: 2 GiB less one byte,
// the most a protobuf message or a flatbuffer can hold.
inline constexpr int64_t kMaxMappedBytes = (int64_t{1} << 31) - 1;

// A file's bytes: a regular file is mapped read-only, so that only the pages
// a reader touches are ever read (a model's weights, skipped by the lean
// model readers, are not); standard input is read whole into memory of its
// own that grows in place (never held twice, whatever its size: a 512 MiB
// limit costs 512 MiB at most); other files are read whole. Move-only;
// view() lives as long as the object. Thread-compatible.
class FileBytes {
 public:
  // Opens `path` ("-" is standard input). Errors as ReadFile; a regular file
  // may be up to `max_mapped_bytes`, anything read whole up to
  // `max_read_bytes` (standard input stops being read one byte past it).
  [[nodiscard]] static absl::StatusOr<FileBytes> Open(const std::string& path,
                                                      int64_t max_read_bytes,
                                                      int64_t max_mapped_bytes);

  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  absl::string_view view() const {
    return mapped_ != nullptr ? absl::string_view(mapped_, mapped_size_)
                              : absl::string_view(read_);
  }
  // Whether the bytes are a mapped file (else read into memory).
  bool mapped() const { return mapped_ != nullptr && !anonymous_; }
  // Drops the mapped pages holding `part` (a part of view()) from this
  // process's memory; reading them again maps them again. Nothing for bytes
  // read whole, or for a part under 64 KiB (the 2 MiB blocks around it
  // are dropped, neighbours included). For a reader that skips through a
  // large file.
  void Release(absl::string_view part) const;

 private:
  FileBytes() = default;
  void Unmap();
  // Reads standard input into an anonymous mapping (anonymous_).
  [[nodiscard]] absl::Status ReadStdin(int64_t max_bytes);

  const char* mapped_ = nullptr;  // the mapping, or null
  size_t mapped_size_ = 0;        // bytes of the file (of view())
  size_t mapping_size_ = 0;       // bytes mapped: >= mapped_size_
  bool anonymous_ = false;        // mapped_ holds standard input's bytes: its
                                  // pages are the only copy (never released)
  std::string read_;              // the bytes when not mapped
};

// Writes `contents` to `path` through a temporary file in the same
// directory and a rename; "-" writes to standard output. The file
// replaced keeps its mode (and its owner, when run as root); a hard link
// to it keeps the old contents. What is not a regular file is written in
// place as a shell's `>` writes it: through a symbolic link (the kernel's
// rules on following links apply), into a FIFO (waiting for its reader)
// or a device; this process's own standard output or error, however
// named (/dev/stdout, the file it is redirected to), is written to its
// descriptor. PERMISSION_DENIED naming the path when it cannot be written
// (no such directory, no right, a directory in the way, a full disk); the
// temporary file is removed on failure.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path,
                                               absl::string_view contents);

// One file of WriteFilesAtomically.
struct FileToWrite {
  std::string path;  // "-": standard output
  absl::string_view contents;
};

// Files that go together (a picture and its page): every one is written to
// its temporary file (or opened in place) first, and none is renamed into
// place or written unless all could be, so a full disk or a missing
// directory leaves every destination as it was. Errors as
// WriteFileAtomically. (A rename that fails after others succeeded, which
// needs the directory to change meanwhile, leaves those in place; so does
// a write in place that fails after the renames.) Standard output is
// written last.
[[nodiscard]] absl::Status WriteFilesAtomically(
    absl::Span<const FileToWrite> files);

// Writes `contents` to standard output and flushes it: PERMISSION_DENIED
// ("cannot write standard output: ...") when it fails (a full disk, a
// file system error), so output lost is never reported as success.
[[nodiscard]] absl::Status WriteStdout(absl::string_view contents);

// Flushes standard output (std::cout and stdio): the error as WriteStdout.
[[nodiscard]] absl::Status FlushStdout();

// Whether writing `a` and `b` would write one file, so that one output
// replaced the other: the same regular file however named (a link, ./x
// and x, a hard link), or, neither there yet, the same path once links
// are followed (a dangling link to the other). A terminal, a pipe or a
// device is not: it takes both. "-" (standard output) is only itself.
bool SameFile(const std::string& a, const std::string& b);

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_FILE_IO_H_
