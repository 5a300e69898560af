// How a process that plans once and exits (the CLI, the benchmarks) asks
// glibc's malloc to keep the memory it frees for its next allocations.
//
// By default glibc gives every allocation above its mmap threshold (128 KiB,
// growing to 32 MiB) pages of its own and hands them back on free, and trims
// the heap's top past 128 KiB. A plan of a million buffers allocates and
// frees arrays of tens of megabytes stage after stage (the tensor list, the
// compressed time, the placement's index, the verifier's events, the JSON
// printer's strings), so every stage faults its pages in again, 4 KiB at a
// time: about a third of the 1M-buffer pipeline's time on this machine kind
// (BENCHMARKS.md, "Placement cost and scale"). Kept, freed memory is reused
// without a fault.
//
//   int main(int argc, char** argv) {
//     memplan::base::KeepFreedMemory();  // applies to later allocations
//     ...
//
// Not for a long-running server: memory a process keeps is not returned
// until it exits or calls ReturnFreedMemory(). (Kept memory did not make
// the server's plans faster: its stages run on different threads, whose
// arenas do not share freed blocks. The server only returns what its calls
// freed once it is idle, server/idle_memory.h.)
#ifndef MEMPLAN_BASE_PROCESS_MEMORY_H_
#define MEMPLAN_BASE_PROCESS_MEMORY_H_

#include <algorithm>
#include <cstddef>
#include <functional>

#include "absl/functional/function_ref.h"

namespace memplan::base {

// Whether malloc is a sanitizer's own (address, thread, memory), which
// glibc's settings do not reach (ASan's mallopt does nothing; under TSan
// glibc takes them but TSan does not allocate from it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMPLAN_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(hwaddress_sanitizer)
#define MEMPLAN_SANITIZER_ALLOCATOR 1
#endif
#endif
#ifdef MEMPLAN_SANITIZER_ALLOCATOR
inline constexpr bool kSanitizerAllocator = true;
#else
inline constexpr bool kSanitizerAllocator = false;
#endif

// The malloc arenas KeepFreedMemory shares among all threads. With one,
// memory a worker freed is reused by every other thread (each thread's own
// arena, glibc's default, keeps its own peak: the 1M-buffer plan's peak RSS
// grew a third on 16 workers), but every allocation takes its one lock: the
// trace plans allocate about 700,000 times (S_1), on up to seven threads at
// once (both heuristics, the peak window's sides and climbs, the shared
// objects), and two of the window's climbs at once took 2.4x as long as one
// alone (BENCHMARKS.md, "One large plan on many cores"). Two: the 1M plan's
// peak RSS +5-18% on 2 and 16 workers, the traces as fast as with an arena
// per thread on this machine kind's 2 vCPUs.
inline constexpr int kKeptMemoryArenas = 2;

// The most arenas KeptMemoryArenas gives.
inline constexpr int kMostKeptMemoryArenas = 8;

// The arenas for a process planning on `threads` threads: one for every
// two, from kKeptMemoryArenas up to kMostKeptMemoryArenas. On 16 cores two
// arenas still held the traces back (the peak window's larger side placed
// in 78 ms beside the heuristics, about 55 alone); eight planned S_1 and
// pangu_2.6B about 20% faster than two, and the 1M plan as fast, at +10%
// peak RSS against one core (BENCHMARKS.md, "On 16 cores").
constexpr int KeptMemoryArenas(int threads) {
  return std::clamp(threads / 2, kKeptMemoryArenas, kMostKeptMemoryArenas);
}

// Turns off mmap for large allocations and the heap's trimming, has the
// threads share `arenas` (>= 1) malloc arenas, and grows heaps in large
// steps (GrowHeapsInLargeSteps, below). False when the malloc
// in use does not take the settings: under a sanitizer with an allocator of
// its own (address, thread, memory), or if glibc refuses.
bool KeepFreedMemory(int arenas = kKeptMemoryArenas);

// The heap KeepFreedMemoryOnHugePages asks huge pages for by default:
// 1 GiB, more than the CLI's peak for a million buffers (about 750 MB),
// or half the machine's memory where that is less.
inline constexpr size_t kHugePageHeapBytes = size_t{1} << 30;

// KeepFreedMemory(arenas), then asks the kernel for transparent huge pages
// (madvise MADV_HUGEPAGE) over the main heap's next `bytes` (extended once
// and left untouched: nothing is resident until used), so that what the
// calling thread's arena hands out later faults in 2 MiB at a time, not
// 4 KiB. One plan of a million buffers otherwise faults about 180,000
// times, a quarter of the CLI's time on a virtual machine. The other
// arena's threads keep 4 KiB pages, and so does memory past `bytes`, or
// all of it after ReturnFreedMemory() (which gives the range back). False
// when nothing was asked: KeepFreedMemory returned false, the heap could
// not grow that far, or the kernel has no transparent huge pages. The
// kernel's setting decides the rest (`never` in
// /sys/kernel/mm/transparent_hugepage/enabled: no huge page).
bool KeepFreedMemoryOnHugePages(size_t bytes = kHugePageHeapBytes,
                                int arenas = kKeptMemoryArenas);

// The step GrowHeapsInLargeSteps has malloc's heaps grow by by default:
// 64 MiB, the whole of a secondary arena's heap (glibc's HEAP_MAX_SIZE on
// 64-bit), so that such a heap is writable from its creation on.
inline constexpr size_t kHeapGrowthBytes = size_t{64} << 20;

// Whether glibc's malloc asks the kernel for transparent huge pages: the
// tunable glibc.malloc.hugetlb is 1 or 2 in GLIBC_TUNABLES (the container
// image sets 1), as glibc read it at startup. False under a sanitizer's
// allocator.
bool MallocAsksForHugePages();

// Has malloc extend its heaps `bytes` at a time (M_TOP_PAD) instead of by
// what each allocation needs. Every thread but the first allocates from a
// secondary arena, whose heap glibc otherwise makes writable one page at a
// time: an mprotect call per 4 KiB (about 38,000 for the assignments of a
// 1M-buffer plan built on a server thread), and no transparent huge page
// can form there (glibc.malloc.hugetlb=1 then madvises a range that is not
// yet writable). Address space only: nothing is resident until used. Also
// fixes malloc's mmap threshold at its default (glibc turns off its
// adjustment once a setting is made). False under a sanitizer's allocator
// or if glibc refuses.
//
// Each secondary arena then keeps up to `bytes` of its heap's top resident
// after a large call, which ReturnFreedMemory() does not reach (malloc_trim
// trims only the main arena's top): a server gives it back with
// ReturnFreedMemory(on_each_thread) on the threads that did the work.
bool GrowHeapsInLargeSteps(size_t bytes = kHeapGrowthBytes);

// The largest block FixMallocThresholds has malloc's heaps serve by
// default: 32 MiB, where glibc's sliding mmap threshold stops growing
// (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit).
inline constexpr size_t kLargestHeapBlock = size_t{32} << 20;

// Has malloc serve blocks up to `largest_heap_block` (at most 32 MiB) from
// its heaps (larger ones get pages of their own) and trim a heap's free top on
// a free only past twice that: where glibc's sliding default ends up once a
// block that large was freed, but fixed from the start, so that
// ReturnThreadHeapTop() can lower the trim threshold while it gives a heap's
// top back and put it back after. Under the sliding default, which no call can
// read, each thread's heap kept up to 64 MiB of free top that no return reached
// (a server that planned 400,000 buffers held 70-100 MB more while idle, one
// time in three). False under a sanitizer's allocator or if glibc refuses.
bool FixMallocThresholds(size_t largest_heap_block = kLargestHeapBlock);

// Gives the free memory of every malloc arena back to the system
// (malloc_trim(0): the main heap's free top is released and free pages
// inside every heap are discarded), whether or not KeepFreedMemory() was
// called; under a sanitizer, its allocator's free memory
// (__sanitizer_purge_allocator; what sits in ASan's quarantine stays).
// Thread-safe; costs a walk over the free blocks, microseconds for a small
// heap.
void ReturnFreedMemory();

// ReturnFreedMemory(), and first the free tops of the heaps of the threads
// `on_each_thread` reaches, down to nothing: glibc shrinks a secondary
// arena's heap only on a large free from that arena, keeping M_TOP_PAD
// (GrowHeapsInLargeSteps) and anything under its trim threshold
// (FixMallocThresholds, KeepFreedMemory; up to 64 MiB under glibc's
// sliding default, which stays).
// `on_each_thread` must run the function it is given once on each of those
// threads and return after, e.g.
//
//   base::ReturnFreedMemory([&](const std::function<void()>& f) {
//     workers.RunOnEachThread(f);
//   });
//
// M_TOP_PAD is 0 while each thread's top goes back (a call running then
// may grow a heap in a smaller step); thread-safe with the functions here,
// not with other callers of mallopt.
void ReturnFreedMemory(
    absl::FunctionRef<void(const std::function<void()>&)> on_each_thread);

// Gives back the free top of the calling thread's heap (down to nothing:
// M_TOP_PAD 0 meanwhile, and the trim threshold too where
// FixMallocThresholds or KeepFreedMemory set it), as
// ReturnFreedMemory(on_each_thread) does on each of its threads: for a thread
// that is not a worker, once a large task it ran has freed what it allocated.
// Thread-safe; a malloc, a free and two mallopt calls, plus giving the pages
// back. Nothing under a sanitizer's allocator.
void ReturnThreadHeapTop();

}  // namespace memplan::base

#endif  // MEMPLAN_BASE_PROCESS_MEMORY_H_
