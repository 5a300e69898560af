#include "planner/validate.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status.h"

namespace memplan::planner {
namespace {

absl::Status Cancelled() {
  return absl::DeadlineExceededError("buffer list checks cancelled");
}

// A name as messages quote it: at most 64 characters of it.
std::string Clip(absl::string_view name) {
  if (name.size() <= 64) return std::string(name);
  return absl::StrCat(name.substr(0, 64), "... (", name.size(), " chars)");
}

// How messages name buffer i.
std::string Who(const Buffer& b, size_t i) {
  return b.name.empty() ? absl::StrCat("buffer #", i)
                        : absl::StrCat("buffer '", Clip(b.name), "'");
}

// A fixed offset must be non-negative, aligned, and end by kMaxTotalBytes.
absl::Status CheckFixedOffset(const Buffer& b,
                              absl::FunctionRef<std::string()> what) {
  const Offset o = *b.fixed_offset;
  if (o < 0) return Invalid(what(), " has negative fixed_offset ", o);
  if (o % b.alignment != 0) {
    return Invalid(what(), " fixed_offset ", o,
                   " is not a multiple of its alignment ", b.alignment);
  }
  Bytes end;
  if (__builtin_add_overflow(o, b.size, &end)) {
    return Invalid(what(), " fixed_offset + size overflows 64 bits");
  }
  if (end > kMaxTotalBytes) {
    return Invalid(what(), " fixed_offset ", o, " is past 2^62 bytes");
  }
  return absl::OkStatus();
}

// Steps within [-kMaxStep, kMaxStep], start < end, at most kMaxStep apart.
absl::Status CheckLifetime(const Buffer& b,
                           absl::FunctionRef<std::string()> what) {
  if (b.start < -kMaxStep || b.start > kMaxStep || b.end < -kMaxStep ||
      b.end > kMaxStep) {
    return Invalid(what(), " has start ", b.start, " and end ", b.end,
                   "; steps must lie within +-2^62");
  }
  if (b.start >= b.end) {
    return Invalid(what(), " has start ", b.start, " >= end ", b.end,
                   "; lifetimes are half-open [start, end)");
  }
  if (b.start < b.end - kMaxStep) {  // no overflow: both within +-2^62
    return Invalid(what(), " lives from step ", b.start, " to ", b.end,
                   "; a lifetime may span at most 2^62 steps");
  }
  return absl::OkStatus();
}

// The checks of one buffer that need nothing else.
absl::Status CheckBuffer(const Buffer& b,
                         absl::FunctionRef<std::string()> what) {
  if (absl::Status s = CheckLifetime(b, what); !s.ok()) return s;
  if (b.size <= 0) {
    return Invalid(what(), " has size ", b.size, "; sizes must be positive");
  }
  if (!IsValidAlignment(b.alignment)) {
    return Invalid(what(), " alignment ", b.alignment,
                   " is not a power of two up to 2^32");
  }
  if (b.fixed_offset.has_value()) return CheckFixedOffset(b, what);
  return absl::OkStatus();
}

// ValidateBuffers over buffers [begin, end), the sizes before them summing
// to *total (which it advances).
absl::Status ValidateRange(const Problem& problem, size_t begin, size_t end,
                           const base::CancelToken* cancel, Bytes* total) {
  for (size_t i = begin; i < end; ++i) {
    if (base::CancelledAt(cancel, i)) return Cancelled();
    const Buffer& b = problem.buffers[i];
    // The name is only spelled out in a message (not 1M strings per plan).
    const auto what = [&] { return Who(b, i); };
    if (absl::Status s = CheckBuffer(b, what); !s.ok()) return s;
    if (absl::Status s = AddToTotalSize(b.size, what, total); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Buffers pinned by fixed offsets are the user's plan: two that live at the
// same time must not share a byte, and none may end past the capacity.
// A sweep over time keeping the live pins ordered by offset: O(k log k).
absl::Status CheckPins(const Problem& problem,
                       const base::Parallelism& parallel,
                       const base::CancelToken* cancel) {
  // The pinned buffers, found in chunks on the threads.
  const std::vector<int> pinned = base::KeptInOrder(
      parallel, problem.buffers.size(),
      [&](size_t i) { return problem.buffers[i].fixed_offset.has_value(); });
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  std::vector<std::pair<Step, int>> events;  // (step, +1+i start, -1-i end)
  for (int i : pinned) {
    const Buffer& b = problem.buffers[i];
    if (problem.capacity.has_value() &&
        *b.fixed_offset + b.size > *problem.capacity) {
      return Invalid("buffer '", Clip(b.name), "' is pinned at ",
                     *b.fixed_offset, " and ends past the capacity ",
                     *problem.capacity);
    }
    events.emplace_back(b.start, i + 1);
    events.emplace_back(b.end, -(i + 1));
  }
  std::sort(events.begin(), events.end());  // ends before starts at a step
  std::set<std::pair<Offset, int>> live;    // (offset, buffer)
  for (size_t k = 0; k < events.size(); ++k) {
    if (base::CancelledAt(cancel, k)) return Cancelled();
    const auto& [step, code] = events[k];
    const int i = std::abs(code) - 1;
    const Buffer& b = problem.buffers[i];
    if (code < 0) {
      live.erase({*b.fixed_offset, i});
      continue;
    }
    auto next = live.lower_bound({*b.fixed_offset, -1});
    const Buffer* clash = nullptr;
    if (next != live.end() && next->first < *b.fixed_offset + b.size) {
      clash = &problem.buffers[next->second];
    } else if (next != live.begin()) {
      const Buffer& before = problem.buffers[std::prev(next)->second];
      if (*before.fixed_offset + before.size > *b.fixed_offset) {
        clash = &before;
      }
    }
    if (clash != nullptr) {
      return Invalid("buffers '", Clip(clash->name), "' and '", Clip(b.name),
                     "' are pinned to overlapping bytes while both live");
    }
    live.insert({*b.fixed_offset, i});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddToTotalSize(Bytes size, absl::FunctionRef<std::string()> what,
                            Bytes* total) {
  if (__builtin_add_overflow(*total, size, total) || *total > kMaxTotalBytes) {
    return Invalid("sizes overflow 64 bits at ", what(),
                   " (the sum of sizes must stay below 2^62)");
  }
  return absl::OkStatus();
}

absl::Status ValidateBuffers(const Problem& problem) {
  return ValidateBuffers(problem, nullptr);
}

absl::Status ValidateBuffers(const Problem& problem,
                             const base::CancelToken* cancel) {
  Bytes total = 0;
  return ValidateRange(problem, 0, problem.buffers.size(), cancel, &total);
}

namespace {

// Lists are checked in chunks of this many buffers.
constexpr size_t kCheckChunk = size_t{1} << 16;

// ValidateBuffers on the threads `parallel` gives: each chunk checks its
// buffers and sums their sizes at once; the first chunk with a bad buffer,
// or whose sizes take the running sum past the limit, is checked again from
// that sum, so the error is the one the pass in list order finds.
absl::Status ValidateBuffers(const Problem& problem,
                             const base::Parallelism& parallel,
                             const base::CancelToken* cancel) {
  const size_t n = problem.buffers.size();
  const int chunks = base::ChunkCount(n, kCheckChunk);
  if (parallel.helpers() == 0 || chunks < 2) {
    return ValidateBuffers(problem, cancel);
  }
  std::vector<uint8_t> bad(chunks, 0);
  std::vector<Bytes> sums(chunks, 0);  // past kMaxTotalBytes: too much
  base::ParallelForRange(
      parallel, n, kCheckChunk, [&](int c, size_t begin, size_t end) {
        if (cancel != nullptr && cancel->Cancelled()) return;
        for (size_t i = begin; i < end; ++i) {
          const Buffer& b = problem.buffers[i];
          if (!CheckBuffer(b, [] { return std::string(); }).ok()) {
            bad[c] = 1;
            return;
          }
          if (__builtin_add_overflow(sums[c], b.size, &sums[c]) ||
              sums[c] > kMaxTotalBytes) {
            sums[c] = kMaxTotalBytes + 1;
            return;
          }
        }
      });
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();
  Bytes total = 0;
  for (int c = 0; c < chunks; ++c) {
    if (bad[c] || sums[c] > kMaxTotalBytes - total) {
      const size_t begin = c * kCheckChunk;
      return ValidateRange(problem, begin, std::min(n, begin + kCheckChunk),
                           cancel, &total);
    }
    total += sums[c];
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// Non-empty, unique names: one pass over the list, one hash set.
absl::Status CheckNamesInOneSet(const Problem& problem,
                                const base::CancelToken* cancel) {
  absl::flat_hash_set<absl::string_view> names;
  names.reserve(problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (base::CancelledAt(cancel, i)) return Cancelled();
    const Buffer& b = problem.buffers[i];
    if (b.name.empty()) return Invalid(Who(b, i), " has no id");
    if (!names.insert(b.name).second) {
      return Invalid("duplicate buffer id '", Clip(b.name), "'");
    }
  }
  return absl::OkStatus();
}

// Lists of twice this many check their names in buckets
// (internal::CheckNamesInBuckets).
constexpr size_t kNameChunk = size_t{1} << 16;
constexpr int kNameBuckets = 256;

// A name's hash and its place in the list.
struct NameKey {
  uint64_t hash;
  size_t index;
};

int BucketOf(uint64_t hash) { return static_cast<int>(hash >> 56); }

}  // namespace

namespace internal {

absl::Status CheckNamesInBuckets(const Problem& problem,
                                 const base::Parallelism& parallel,
                                 const base::CancelToken* cancel,
                                 uint64_t (*hash_of)(absl::string_view)) {
  const std::vector<Buffer>& b = problem.buffers;
  const size_t n = b.size();
  const int chunks = base::ChunkCount(n, kNameChunk);
  const auto cancelled = [&] {
    return cancel != nullptr && cancel->Cancelled();
  };
  // Per chunk: the first empty name, and its names per bucket.
  std::vector<size_t> first_empty(std::max(chunks, 1), n);
  std::vector<size_t> at(static_cast<size_t>(chunks) * kNameBuckets, 0);
  base::ParallelForRange(
      parallel, n, kNameChunk, [&](int c, size_t begin, size_t end) {
        if (cancelled()) return;
        size_t* count = &at[static_cast<size_t>(c) * kNameBuckets];
        for (size_t i = begin; i < end; ++i) {
          if (b[i].name.empty()) {
            first_empty[c] = std::min(first_empty[c], i);
          } else {
            ++count[BucketOf(hash_of(b[i].name))];
          }
        }
      });
  if (cancelled()) return Cancelled();
  std::vector<size_t> bucket_start(kNameBuckets + 1, 0);
  size_t sum = 0;  // bucket by bucket, chunk by chunk: list order kept
  for (int d = 0; d < kNameBuckets; ++d) {
    bucket_start[d] = sum;
    for (int c = 0; c < chunks; ++c) {
      const size_t count = at[static_cast<size_t>(c) * kNameBuckets + d];
      at[static_cast<size_t>(c) * kNameBuckets + d] = sum;
      sum += count;
    }
  }
  bucket_start[kNameBuckets] = sum;
  std::vector<NameKey> keys(sum);
  base::ParallelForRange(
      parallel, n, kNameChunk, [&](int c, size_t begin, size_t end) {
        if (cancelled()) return;
        size_t* next = &at[static_cast<size_t>(c) * kNameBuckets];
        for (size_t i = begin; i < end; ++i) {
          if (b[i].name.empty()) continue;
          const uint64_t hash = hash_of(b[i].name);
          keys[next[BucketOf(hash)]++] = {hash, i};
        }
      });
  if (cancelled()) return Cancelled();
  // Per bucket, in list order: the first name that repeats one before it.
  // Names are compared only when their hashes are equal.
  std::vector<size_t> first_repeat(kNameBuckets, n);
  base::ParallelFor(parallel, kNameBuckets, [&](int d) {
    if (cancelled()) return;
    const auto begin = keys.begin() + bucket_start[d];
    const auto end = keys.begin() + bucket_start[d + 1];
    absl::flat_hash_map<uint64_t, size_t> first_of_hash;
    first_of_hash.reserve(end - begin);
    for (auto k = begin; k != end; ++k) {
      const auto [it, inserted] = first_of_hash.emplace(k->hash, k->index);
      if (inserted) continue;
      if (b[it->second].name == b[k->index].name) {
        first_repeat[d] = k->index;
        return;
      }
      // Two names of one 64-bit hash: compare this bucket's names.
      absl::flat_hash_set<absl::string_view> seen;
      for (auto j = begin; j != end; ++j) {
        if (!seen.insert(b[j->index].name).second) {
          first_repeat[d] = j->index;
          return;
        }
      }
      return;
    }
  });
  if (cancelled()) return Cancelled();
  const size_t bad =
      std::min(*std::min_element(first_empty.begin(), first_empty.end()),
               *std::min_element(first_repeat.begin(), first_repeat.end()));
  if (bad == n) return absl::OkStatus();
  if (b[bad].name.empty()) return Invalid(Who(b[bad], bad), " has no id");
  return Invalid("duplicate buffer id '", Clip(b[bad].name), "'");
}

}  // namespace internal

namespace {

// Non-empty, unique names; the first empty or repeated one in list order
// is the error, however the list is checked.
absl::Status CheckNames(const Problem& problem,
                        const base::Parallelism& parallel,
                        const base::CancelToken* cancel) {
  if (problem.buffers.size() < 2 * kNameChunk) {
    return CheckNamesInOneSet(problem, cancel);
  }
  return internal::CheckNamesInBuckets(
      problem, parallel, cancel,
      [](absl::string_view name) -> uint64_t { return absl::HashOf(name); });
}

}  // namespace

absl::Status ValidateProblem(const Problem& problem) {
  return ValidateProblem(problem, {});
}

absl::Status ValidateProblem(const Problem& problem,
                             const base::Parallelism& parallel,
                             const base::CancelToken* cancel) {
  if (problem.buffers.empty()) return Invalid("no buffers to plan");
  absl::Status names, buffers;
  base::ParallelFor(parallel, 2, [&](int k) {
    if (k == 0) {
      names = CheckNames(problem, parallel, cancel);
    } else {
      buffers = ValidateBuffers(problem, parallel, cancel);
      if (buffers.ok()) buffers = CheckPins(problem, parallel, cancel);
    }
  });
  return names.ok() ? buffers : names;
}

}  // namespace memplan::planner
