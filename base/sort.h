// Sorting that a CancelToken can stop, so that sorting a few million
// elements (the set-up of most stages) ends within a few milliseconds of a
// cancellation. SortOrCancel is std::sort in chunks, merged pairwise, with
// polls between; RadixSortOrCancel a stable LSD radix sort on a 64-bit key
// (a pass per byte that differs between keys, a poll between passes), a
// few times faster on the large arrays of the pipeline.
//
//   if (!planner::RadixSortOrCancel(
//           &events, [](const Event& e) { return StepKey(e.step); }, cancel)) {
//     return absl::DeadlineExceededError("cancelled");
//   }
#ifndef MEMPLAN_BASE_SORT_H_
#define MEMPLAN_BASE_SORT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "base/cancel.h"
#include "base/parallel.h"

namespace memplan::base {

// Elements sorted between two polls of the token: about a millisecond.
inline constexpr std::ptrdiff_t kSortChunk = 1 << 15;

// Sorts [first, last) by `less`; false (the range in some order) when
// `cancel` (may be null) was cancelled first. O(n log n).
template <typename RandomIt, typename Less>
[[nodiscard]] bool SortOrCancel(RandomIt first, RandomIt last, Less less,
                                const CancelToken* cancel) {
  const std::ptrdiff_t n = last - first;
  if (cancel == nullptr || n <= kSortChunk) {
    std::sort(first, last, less);
    return cancel == nullptr || !cancel->Cancelled();
  }
  for (std::ptrdiff_t lo = 0; lo < n; lo += kSortChunk) {
    if (cancel->Cancelled()) return false;
    std::sort(first + lo, first + std::min(n, lo + kSortChunk), less);
  }
  for (std::ptrdiff_t width = kSortChunk; width < n; width *= 2) {
    for (std::ptrdiff_t lo = 0; lo + width < n; lo += 2 * width) {
      if (cancel->Cancelled()) return false;
      std::inplace_merge(first + lo, first + lo + width,
                         first + std::min(n, lo + 2 * width), less);
    }
  }
  return true;
}

// A signed value as a radix key that orders the same way.
inline uint64_t SignedKey(int64_t v) {
  return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
}

// Sorts `items` by key(item) (a uint64_t), stable, with the caller's
// `scratch` (resized as needed; `items` and `scratch` may trade buffers):
// for sorting many arrays without an allocation each. A pass per byte in
// which the keys differ, whatever the length. False (items in some order)
// when `cancel` (may be null) was cancelled first.
template <typename T, typename KeyFn>
[[nodiscard]] bool RadixSortWith(std::vector<T>* items, std::vector<T>* scratch,
                                 KeyFn key, const CancelToken* cancel) {
  const size_t n = items->size();
  if (n < 2) return cancel == nullptr || !cancel->Cancelled();
  uint64_t differ = 0;
  const uint64_t first = key((*items)[0]);
  for (const T& item : *items) differ |= key(item) ^ first;
  scratch->resize(n);
  for (int shift = 0; shift < 64; shift += 8) {
    if (((differ >> shift) & 0xff) == 0) continue;
    if (cancel != nullptr && cancel->Cancelled()) return false;
    size_t start[257] = {};
    for (const T& item : *items) ++start[((key(item) >> shift) & 0xff) + 1];
    for (int d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (T& item : *items) {
      (*scratch)[start[(key(item) >> shift) & 0xff]++] = std::move(item);
    }
    items->swap(*scratch);
  }
  return cancel == nullptr || !cancel->Cancelled();
}

// RadixSortWith on the threads `parallel` gives (base/parallel.h): each
// pass counts and scatters fixed chunks of the items at once (the chunks
// depend on the length alone, so the order is the one RadixSortWith
// gives: stable, whatever the threads).
template <typename T, typename KeyFn>
[[nodiscard]] bool ParallelRadixSortWith(std::vector<T>* items,
                                         std::vector<T>* scratch, KeyFn key,
                                         const CancelToken* cancel,
                                         const Parallelism& parallel) {
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t n = items->size();
  if (parallel.helpers() == 0 || n < 2 * kChunk) {
    return RadixSortWith(items, scratch, key, cancel);
  }
  const int chunks = static_cast<int>((n + kChunk - 1) / kChunk);
  std::vector<uint64_t> differ(chunks, 0);
  const uint64_t first = key((*items)[0]);
  ParallelFor(parallel, chunks, [&](int c) {
    const size_t end = std::min(n, (c + 1) * kChunk);
    for (size_t i = c * kChunk; i < end; ++i)
      differ[c] |= key((*items)[i]) ^ first;
  });
  uint64_t all = 0;
  for (uint64_t d : differ) all |= d;
  scratch->resize(n);
  std::vector<size_t> start(static_cast<size_t>(chunks) * 256);
  for (int shift = 0; shift < 64; shift += 8) {
    if (((all >> shift) & 0xff) == 0) continue;
    if (cancel != nullptr && cancel->Cancelled()) return false;
    ParallelFor(parallel, chunks, [&](int c) {
      size_t* count = &start[static_cast<size_t>(c) * 256];
      std::fill(count, count + 256, 0);
      const size_t end = std::min(n, (c + 1) * kChunk);
      for (size_t i = c * kChunk; i < end; ++i) {
        ++count[(key((*items)[i]) >> shift) & 0xff];
      }
    });
    size_t sum = 0;  // digit by digit, chunk by chunk: stable
    for (int d = 0; d < 256; ++d) {
      for (int c = 0; c < chunks; ++c) {
        const size_t count = start[static_cast<size_t>(c) * 256 + d];
        start[static_cast<size_t>(c) * 256 + d] = sum;
        sum += count;
      }
    }
    ParallelFor(parallel, chunks, [&](int c) {
      size_t* at = &start[static_cast<size_t>(c) * 256];
      const size_t end = std::min(n, (c + 1) * kChunk);
      for (size_t i = c * kChunk; i < end; ++i) {
        T& item = (*items)[i];
        (*scratch)[at[(key(item) >> shift) & 0xff]++] = std::move(item);
      }
    });
    items->swap(*scratch);
  }
  return cancel == nullptr || !cancel->Cancelled();
}

// Below this many items RadixSortOrCancel calls std::stable_sort: a pass
// of the radix sort costs about 256 counters besides the items (a small
// graph's 200 lifetimes sorted in a pass or two cost a fifth of a
// stable_sort).
inline constexpr size_t kRadixSortFrom = 32;

// The same with its own scratch; below kRadixSortFrom items a
// std::stable_sort. O(n x bytes that differ).
template <typename T, typename KeyFn>
[[nodiscard]] bool RadixSortOrCancel(std::vector<T>* items, KeyFn key,
                                     const CancelToken* cancel) {
  if (items->size() < kRadixSortFrom) {
    std::stable_sort(items->begin(), items->end(),
                     [&](const T& a, const T& b) { return key(a) < key(b); });
    return cancel == nullptr || !cancel->Cancelled();
  }
  std::vector<T> scratch;
  return RadixSortWith(items, &scratch, key, cancel);
}

// RadixSortOrCancel on the threads `parallel` gives (the same order).
template <typename T, typename KeyFn>
[[nodiscard]] bool RadixSortOrCancel(std::vector<T>* items, KeyFn key,
                                     const CancelToken* cancel,
                                     const Parallelism& parallel) {
  if (items->size() < kRadixSortFrom) {
    return RadixSortOrCancel(items, key, cancel);
  }
  std::vector<T> scratch;
  return ParallelRadixSortWith(items, &scratch, key, cancel, parallel);
}

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_SORT_H_
