#include "planner/validate.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace memplan::planner {
namespace {

template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// How messages name buffer i.
std::string Who(const Buffer& b, size_t i) {
  return b.name.empty() ? absl::StrCat("buffer #", i)
                        : absl::StrCat("buffer '", b.name, "'");
}

// A fixed offset must be non-negative, aligned, and end by kMaxTotalBytes.
absl::Status CheckFixedOffset(const Buffer& b, const std::string& what) {
  const Offset o = *b.fixed_offset;
  if (o < 0) return Invalid(what, " has negative fixed_offset ", o);
  if (o % b.alignment != 0) {
    return Invalid(what, " fixed_offset ", o,
                   " is not a multiple of its alignment ", b.alignment);
  }
  Bytes end;
  if (__builtin_add_overflow(o, b.size, &end)) {
    return Invalid(what, " fixed_offset + size overflows 64 bits");
  }
  if (end > kMaxTotalBytes) {
    return Invalid(what, " fixed_offset ", o, " is past 2^62 bytes");
  }
  return absl::OkStatus();
}

// The checks of one buffer that need nothing else.
absl::Status CheckBuffer(const Buffer& b, const std::string& what) {
  if (b.start >= b.end) {
    return Invalid(what, " has start ", b.start, " >= end ", b.end,
                   "; lifetimes are half-open [start, end)");
  }
  if (b.size <= 0) {
    return Invalid(what, " has size ", b.size, "; sizes must be positive");
  }
  if (!IsValidAlignment(b.alignment)) {
    return Invalid(what, " alignment ", b.alignment,
                   " is not a power of two up to 2^32");
  }
  if (b.fixed_offset.has_value()) return CheckFixedOffset(b, what);
  return absl::OkStatus();
}

}  // namespace

absl::Status AddToTotalSize(Bytes size, absl::string_view what, Bytes* total) {
  if (__builtin_add_overflow(*total, size, total) || *total > kMaxTotalBytes) {
    return Invalid("sizes overflow 64 bits at ", what,
                   " (the sum of sizes must stay below 2^62)");
  }
  return absl::OkStatus();
}

absl::Status ValidateBuffers(const Problem& problem) {
  Bytes total = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    const std::string what = Who(b, i);
    if (absl::Status s = CheckBuffer(b, what); !s.ok()) return s;
    if (absl::Status s = AddToTotalSize(b.size, what, &total); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateProblem(const Problem& problem) {
  if (problem.buffers.empty()) return Invalid("no buffers to plan");
  absl::flat_hash_set<absl::string_view> names;
  names.reserve(problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.name.empty()) return Invalid(Who(b, i), " has no id");
    if (!names.insert(b.name).second) {
      return Invalid("duplicate buffer id '", b.name, "'");
    }
    if (b.start < 0) {
      return Invalid(Who(b, i), " has negative start ", b.start);
    }
  }
  return ValidateBuffers(problem);
}

}  // namespace memplan::planner
