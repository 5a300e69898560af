// Allocator micro-benchmarks behind docs/research/allocators.md: the
// latency of an alloc+free pair on every allocator of the library and on
// glibc malloc side by side, TensorFlow's delayed-free pattern, and the
// ncnn pool's list scan against the size-indexed lookup. "mmap" makes its
// files in $TMPDIR (else /tmp); "mmap_sparse" is the same allocator
// without reserving the files' storage.
//
//   allocator_bench --benchmark_min_time=0.05
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Blocks are never touched: this measures the allocators' bookkeeping, not
// page faults (glibc serves 64 MiB with mmap/munmap every time).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "allocators/allocator.h"
#include "allocators/mmap_allocator.h"
#include "allocators/pool_allocator.h"
#include "benchmark/benchmark.h"

namespace memplan::allocators {
namespace {

constexpr size_t kAlignment = 64;

// glibc malloc/free behind the Allocator calls the loops use.
struct Glibc {
  void* Allocate(size_t size, size_t /*alignment*/) {
    return std::malloc(size);
  }
  void Deallocate(void* p) { std::free(p); }
};

// One allocator under test: the library's by name, glibc for
// "glibc_malloc", or MmapAllocator with reserve_storage off for
// "mmap_sparse".
class Subject {
 public:
  explicit Subject(const std::string& name) {
    if (name == "mmap_sparse") {
      MmapOptions options;
      options.reserve_storage = false;
      allocator_ = std::make_unique<MmapAllocator>(options);
    } else if (name != "glibc_malloc") {
      allocator_ = std::move(*MakeAllocator(name));
    }
  }
  void* Allocate(size_t size) {
    return allocator_ ? allocator_->Allocate(size, kAlignment)
                      : glibc_.Allocate(size, kAlignment);
  }
  void Deallocate(void* p) {
    if (allocator_) {
      allocator_->Deallocate(p).IgnoreError();
    } else {
      glibc_.Deallocate(p);
    }
  }

 private:
  std::unique_ptr<Allocator> allocator_;  // null for glibc
  Glibc glibc_;
};

// An alloc+free pair of state.range(0) bytes per iteration.
void BM_AllocFree(benchmark::State& state, const std::string& name) {
  Subject subject(name);
  const auto size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = subject.Allocate(size);
    benchmark::DoNotOptimize(p);
    subject.Deallocate(p);
  }
  state.SetLabel(name);
}

// TensorFlow's BM_AllocationDelayed: each block is freed state.range(0)
// allocations later; one free + one alloc per iteration.
void BM_Delayed(benchmark::State& state, const std::string& name) {
  static constexpr size_t kSizes[] = {256, 4096, 16384, 4096, 512, 1024, 1024};
  Subject subject(name);
  std::vector<void*> ring(static_cast<size_t>(state.range(0)), nullptr);
  size_t slot = 0, size_index = 0;
  for (auto _ : state) {
    if (ring[slot] != nullptr) subject.Deallocate(ring[slot]);
    void* fresh = subject.Allocate(kSizes[size_index++ % 7]);
    // DoNotOptimize on a local: on a vector element, GCC 12 with
    // benchmark 1.7's "+m,r" constraint dropped the frees above.
    benchmark::DoNotOptimize(fresh);
    ring[slot] = fresh;
    slot = (slot + 1) % ring.size();
  }
  for (void* p : ring) {
    if (p != nullptr) subject.Deallocate(p);
  }
  state.SetLabel(name);
}

// ncnn's pool with state.range(0) cached blocks of distinct sizes; each
// iteration asks for the largest size, which only the last cached block
// (in free order) can serve: a full scan for the list, one lookup for the
// index.
void BM_PoolLookup(benchmark::State& state, PoolLookup lookup) {
  PoolOptions options;
  options.lookup = lookup;
  options.size_drop_threshold = size_t{1} << 30;  // keep every block
  PoolAllocator pool(options);
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<void*> blocks;
  for (size_t i = 0; i < n; ++i)
    blocks.push_back(pool.Allocate(64 + 16 * i, 64));
  for (void* p : blocks) pool.Deallocate(p).IgnoreError();
  const size_t largest = 64 + 16 * (n - 1);
  for (auto _ : state) {
    void* p = pool.Allocate(largest, 64);
    benchmark::DoNotOptimize(p);
    pool.Deallocate(p).IgnoreError();
  }
  if (pool.Counters().misses != static_cast<int64_t>(n)) {
    state.SkipWithError("the cached block was not reused");
  }
  state.SetLabel(lookup == PoolLookup::kListScan ? "list" : "indexed");
}

// Every allocator name plus the glibc baseline and mmap without reserved
// storage.
std::vector<std::string> Subjects() {
  std::vector<std::string> names = AllocatorNames();
  names.insert(names.begin(), "glibc_malloc");
  names.push_back("mmap_sparse");
  return names;
}

// True for the allocators that make a file per block: at milliseconds per
// call, a timed run ends before a delayed-free ring of 100 or 1000 blocks
// has filled, so their delayed-free rows would time allocations alone.
bool MakesFiles(const std::string& name) { return name.rfind("mmap", 0) == 0; }

// Registers every benchmark; names read "<benchmark>/<subject>/<arg>".
void RegisterAll() {
  for (const std::string& name : Subjects()) {
    benchmark::RegisterBenchmark(("alloc_free/" + name).c_str(), BM_AllocFree,
                                 name)
        ->Arg(64)
        ->Arg(4096)
        ->Arg(1 << 20)
        ->Arg(64 << 20);
  }
  for (const std::string& name : Subjects()) {
    if (MakesFiles(name)) continue;
    benchmark::RegisterBenchmark(("delayed_free/" + name).c_str(), BM_Delayed,
                                 name)
        ->Arg(10)
        ->Arg(100)
        ->Arg(1000);
  }
  benchmark::RegisterBenchmark("pool_lookup/list", BM_PoolLookup,
                               PoolLookup::kListScan)
      ->Arg(4096);
  benchmark::RegisterBenchmark("pool_lookup/indexed", BM_PoolLookup,
                               PoolLookup::kSizeIndex)
      ->Arg(4096);
}

}  // namespace
}  // namespace memplan::allocators

int main(int argc, char** argv) {
  // Debian's abseil is built with Mutex deadlock detection on, which costs
  // a graph update per lock; production binaries turn it off the same way.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  memplan::allocators::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
