#include "planner/liveness.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/numeric/bits.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/parallel.h"
#include "base/status.h"

namespace memplan::planner {
namespace {

constexpr int kNone = -1;

// A name and its hash, computed once for the shard a name goes to and for
// the shard's own table.
struct HashedName {
  absl::string_view name;
  size_t hash;
};

HashedName Hashed(absl::string_view name) {
  return {name, absl::Hash<absl::string_view>{}(name)};
}

// Hashes a name once: a HashedName gives its own.
struct NameHash {
  using is_transparent = void;
  size_t operator()(absl::string_view name) const {
    return absl::Hash<absl::string_view>{}(name);
  }
  size_t operator()(const HashedName& h) const { return h.hash; }
};

// Compares names, hashed or not.
struct NameEq {
  using is_transparent = void;
  static absl::string_view View(absl::string_view name) { return name; }
  static absl::string_view View(const HashedName& h) { return h.name; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return View(a) == View(b);
  }
};

// Indices by name (the names are the graph's own, not copied: one
// allocation a long name less, on every call), in shards picked by the
// top bits of the name's hash: the threads of a large graph fill one
// shard each at once. What it holds never depends on the shard count.
class NameIndex {
 public:
  // The most shards: the hash's top bits that pick them.
  static constexpr int kShardBits = 6;
  static constexpr int kMaxShards = 1 << kShardBits;

  NameIndex() : NameIndex(1) {}
  // `shards`: a power of two up to kMaxShards.
  explicit NameIndex(int shards) : mask_(shards - 1), shards_(shards) {}

  int shards() const { return static_cast<int>(shards_.size()); }
  int ShardOf(size_t hash) const {
    return static_cast<int>((uint64_t{hash} >> (64 - kShardBits)) & mask_);
  }
  // The index `name` was given, kNone for none.
  int Find(const HashedName& name) const {
    const Shard& shard = shards_[ShardOf(name.hash)];
    const auto it = shard.find(name);
    return it == shard.end() ? kNone : it->second;
  }
  int Find(absl::string_view name) const { return Find(Hashed(name)); }

  // One shard's table, filled by one thread.
  using Shard = absl::flat_hash_map<absl::string_view, int, NameHash, NameEq>;
  Shard& shard(int k) { return shards_[k]; }

 private:
  uint64_t mask_;  // shards - 1: 0 for one shard, which every name is in
  std::vector<Shard> shards_;
};

// The threads from which the passes that cost more in all once split
// (hash tables in shards, compare-and-swap on shared arrays) are split:
// on 2 threads they took as long as, or longer than, one thread's pass
// (300,000 ops on this project's 2-vCPU machine; BENCHMARKS.md).
constexpr int kSplitFromThreads = 4;

// The threads `parallel` gives (the caller's included).
int ThreadsOf(const base::Parallelism& parallel) {
  return parallel.helpers() + 1;
}

// The shards of each name index filled on the threads `parallel` gives:
// one below kSplitFromThreads (the lists are indexed at once, a thread
// each), else half the threads rounded down to a power of two (a task per
// shard of each list).
int ShardsFor(const base::Parallelism& parallel) {
  const int threads = ThreadsOf(parallel);
  return threads < kSplitFromThreads
             ? 1
             : std::min(NameIndex::kMaxShards,
                        static_cast<int>(absl::bit_floor(
                            static_cast<unsigned>(threads / 2))));
}

// Names are hashed, and checked alone, in chunks of this many.
constexpr size_t kNameChunk = size_t{1} << 14;

// Whether an item fails a check of its own: a tensor its TensorError's, an
// op an empty name.
bool Bad(const Tensor& t) {
  return t.name.empty() || t.size_bytes <= 0 ||
         (t.alignment != 0 && !IsValidAlignment(t.alignment));
}
bool Bad(const Op& op) { return op.name.empty(); }

// The names of a list of items (the graph's tensors or ops) to index, and
// what IndexNames finds.
template <typename Item>
struct NameList {
  explicit NameList(const std::vector<Item>& list)
      : items(list), n(list.size()) {}
  const std::vector<Item>& items;
  size_t n;
  NameIndex index;             // each name at its first i; empty names left out
  size_t first_duplicate = 0;  // the first i whose name an earlier i has
  size_t first_bad = 0;        // the first i where Bad(); n for none of each
};

// Indexes the names of the tensors and the ops, each in its list's index
// (of ShardsFor(parallel) shards), on the threads `parallel` gives: one
// pass over each list, at once, for one shard; else every name hashed and
// checked (Bad) in chunks, then one task per shard of each list, filled in
// order of i so that a shard's first duplicate is the smallest i it holds
// that repeats a name, and the list's the smallest of its shards'. False
// once `cancel` (may be null) fires.
bool IndexNames(NameList<Tensor>* tensors, NameList<Op>* ops,
                const base::Parallelism& parallel,
                const base::CancelToken* cancel) {
  constexpr int kLists = 2;
  // fn(list) for list l: the tensors' (0) or the ops' (1).
  const auto on_list = [&](int l, auto fn) {
    if (l == 0) {
      fn(*tensors);
    } else {
      fn(*ops);
    }
  };
  const int shards = ShardsFor(parallel);
  size_t n[kLists];
  for (int l = 0; l < kLists; ++l) {
    on_list(l, [&](auto& list) {
      list.index = NameIndex(shards);
      list.first_duplicate = list.first_bad = n[l] = list.n;
    });
  }
  std::atomic<bool> cancelled{false};
  if (shards == 1) {
    base::ParallelFor(parallel, kLists, [&](int l) {
      on_list(l, [&](auto& list) {
        NameIndex::Shard& table = list.index.shard(0);
        table.reserve(list.n);  // no rehash as it fills
        for (size_t i = 0; i < list.n; ++i) {
          if (base::CancelledAt(cancel, static_cast<int64_t>(i))) {
            cancelled = true;
            return;
          }
          const auto& item = list.items[i];
          if (Bad(item)) list.first_bad = i;
          if (!item.name.empty() &&
              !table.emplace(item.name, static_cast<int>(i)).second) {
            list.first_duplicate = i;
            return;
          }
          if (list.first_bad < list.n) return;  // stops at its first fault
        }
      });
    });
    return !cancelled;
  }
  std::vector<size_t> hashes[kLists];
  std::vector<size_t> bad_in[kLists];
  int chunks_before[kLists + 1] = {0};
  for (int l = 0; l < kLists; ++l) {
    hashes[l].resize(n[l]);
    const int chunks = base::ChunkCount(n[l], kNameChunk);
    bad_in[l].assign(chunks, n[l]);
    chunks_before[l + 1] = chunks_before[l] + chunks;
  }
  base::ParallelFor(parallel, chunks_before[kLists], [&](int c) {
    if (cancel != nullptr && cancel->Cancelled()) {
      cancelled = true;
      return;
    }
    const int l = c < chunks_before[1] ? 0 : 1;
    const int chunk = c - chunks_before[l];
    on_list(l, [&](const auto& list) {
      const size_t first = static_cast<size_t>(chunk) * kNameChunk;
      const size_t last = std::min(list.n, first + kNameChunk);
      for (size_t i = first; i < last; ++i) {
        hashes[l][i] = NameHash{}(list.items[i].name);
        if (bad_in[l][chunk] == list.n && Bad(list.items[i])) {
          bad_in[l][chunk] = i;
        }
      }
    });
  });
  if (cancelled) return false;
  std::vector<size_t> duplicate_in(kLists * shards);
  base::ParallelFor(parallel, kLists * shards, [&](int task) {
    const int l = task / shards;
    const int k = task % shards;
    duplicate_in[task] = n[l];
    on_list(l, [&](auto& list) {
      NameIndex::Shard& table = list.index.shard(k);
      table.reserve(list.n / shards + list.n / shards / 16 + 16);
      for (size_t i = 0; i < list.n; ++i) {
        if (base::CancelledAt(cancel, static_cast<int64_t>(i))) {
          cancelled = true;
          return;
        }
        if (list.index.ShardOf(hashes[l][i]) != k) continue;
        const HashedName name{list.items[i].name, hashes[l][i]};
        if (name.name.empty()) continue;
        bool added = false;
        table.lazy_emplace(name, [&](const auto& make) {
          added = true;
          make(name.name, static_cast<int>(i));
        });
        if (!added) {
          duplicate_in[task] = i;
          return;
        }
      }
    });
  });
  if (cancelled) return false;
  for (int l = 0; l < kLists; ++l) {
    const auto shard_first = duplicate_in.begin() + l * shards;
    const size_t duplicate =
        *std::min_element(shard_first, shard_first + shards);
    const size_t bad = *std::min_element(bad_in[l].begin(), bad_in[l].end());
    on_list(l, [&](auto& list) {
      list.first_duplicate = duplicate;
      list.first_bad = bad;
    });
  }
  return true;
}

absl::Status Cancelled() {
  return absl::DeadlineExceededError("liveness analysis cancelled");
}

// The error of tensor #i (`duplicate`: its name is an earlier tensor's),
// checked in this order; OK when it has none.
absl::Status TensorError(const Tensor& t, size_t i, bool duplicate) {
  if (t.name.empty()) return Invalid("tensor #", i, " has no name");
  if (duplicate) return Invalid("duplicate tensor name '", t.name, "'");
  if (t.size_bytes <= 0) {
    return Invalid("tensor '", t.name, "' has size ", t.size_bytes,
                   "; sizes must be positive");
  }
  if (t.alignment != 0 && !IsValidAlignment(t.alignment)) {
    return Invalid("tensor '", t.name, "' alignment ", t.alignment,
                   " is not a power of two up to 2^32");
  }
  return absl::OkStatus();
}

// The tensors' first fault in tensor order, their names indexed in
// `names` (IndexNames): one of a tensor alone (TensorError) or the sum of
// sizes passing its limit. The sum is taken in chunks on the threads
// `parallel` gives, a chunk that passes the limit summed again alone.
absl::Status CheckTensors(const Graph& graph, const NameList<Tensor>& names,
                          const base::Parallelism& parallel,
                          const base::CancelToken* cancel) {
  const std::vector<Tensor>& tensors = graph.tensors;
  // The sizes before the first tensor with a fault are all positive; a
  // chunk's sum stops at kMaxTotalBytes + 1.
  const size_t first = std::min(names.first_duplicate, names.first_bad);
  std::vector<Bytes> sums(base::ChunkCount(first, kNameChunk), 0);
  std::atomic<bool> cancelled{false};
  base::ParallelForRange(
      parallel, first, kNameChunk, [&](int chunk, size_t begin, size_t end) {
        if (cancel != nullptr && cancel->Cancelled()) {
          cancelled = true;
          return;
        }
        Bytes sum = 0;
        for (size_t i = begin; i < end; ++i) {
          const Bytes size = tensors[i].size_bytes;
          sum = size > kMaxTotalBytes - sum ? kMaxTotalBytes + 1 : sum + size;
        }
        sums[chunk] = sum;
      });
  if (cancelled) return Cancelled();
  Bytes total = 0;
  for (size_t chunk = 0; chunk < sums.size(); ++chunk) {
    if (sums[chunk] <= kMaxTotalBytes - total) {
      total += sums[chunk];
      continue;
    }
    // The limit is passed in this chunk: at the tensor a sum in order
    // passes it.
    const size_t end = std::min(first, (chunk + 1) * kNameChunk);
    for (size_t i = chunk * kNameChunk; i < end; ++i) {
      const Tensor& t = tensors[i];
      if (auto s = AddToTotalSize(
              t.size_bytes,
              [&] { return absl::StrCat("tensor '", t.name, "'"); }, &total);
          !s.ok()) {
        return s;
      }
    }
  }
  if (first == tensors.size()) return absl::OkStatus();
  return TensorError(tensors[first], first, first == names.first_duplicate);
}

// Per-tensor facts gathered from the op list.
struct Usage {
  std::vector<int> producer;       // op index, kNone for none
  std::vector<int> last_consumer;  // op index, kNone for none
  std::vector<TensorKind> kind;    // how a runtime treats each tensor
};

// The first op (by step) whose name is empty or repeats an earlier op's,
// with its error; none where every name is unique. Its own pass over the
// names (on threads, a shard each), reported by FindProducers at its step.
struct OpNameCheck {
  size_t step = std::numeric_limits<size_t>::max();
  absl::Status error;
};

OpNameCheck CheckOpNames(const Graph& graph, const NameList<Op>& names) {
  const size_t unnamed = names.first_bad, duplicate = names.first_duplicate;
  if (unnamed < names.n && unnamed <= duplicate) {
    return {unnamed, Invalid("op #", unnamed, " has no name")};
  }
  if (duplicate < names.n) {
    return {duplicate,
            Invalid("duplicate op name '", graph.ops[duplicate].name, "'")};
  }
  return {};
}

// Every op's tensors by index, kNone for a name the graph has no tensor
// of: op k's outputs' at ids[begin[k], inputs[k]), its inputs' at
// ids[inputs[k], begin[k + 1]). The passes over them read no op until one
// fails.
struct OpTensors {
  std::vector<int> ids;
  std::vector<size_t> begin;   // per op, then the end of the last
  std::vector<size_t> inputs;  // per op
};

// Ops looked up, and buffers made, per chunk of these.
constexpr size_t kResolveChunk = size_t{1} << 12;
constexpr size_t kBufferChunk = size_t{1} << 14;

// Looks up every name the ops read and write, in chunks of ops on the
// threads `parallel` gives (the index is only read). False once `cancel`
// (may be null) fires.
bool ResolveOps(const Graph& graph, const NameIndex& index,
                const base::Parallelism& parallel,
                const base::CancelToken* cancel, OpTensors* out) {
  const size_t ops = graph.ops.size();
  out->begin.resize(ops + 1);
  out->inputs.resize(ops);
  size_t count = 0;
  for (size_t step = 0; step < ops; ++step) {
    out->begin[step] = count;
    count += graph.ops[step].outputs.size();
    out->inputs[step] = count;
    count += graph.ops[step].inputs.size();
  }
  out->begin[ops] = count;
  out->ids.resize(count);
  std::atomic<bool> cancelled{false};
  base::ParallelForRange(parallel, ops, kResolveChunk,
                         [&](int, size_t first, size_t last) {
                           if (cancel != nullptr && cancel->Cancelled()) {
                             cancelled = true;
                             return;
                           }
                           const auto find = [&index](const std::string& name) {
                             return index.Find(name);
                           };
                           for (size_t step = first; step < last; ++step) {
                             const Op& op = graph.ops[step];
                             int* id = out->ids.data() + out->begin[step];
                             for (const std::string& name : op.outputs)
                               *id++ = find(name);
                             for (const std::string& name : op.inputs)
                               *id++ = find(name);
                           }
                         });
  return !cancelled;
}

// Records producers, checking names of ops (`names`, CheckOpNames) and
// that no tensor is produced twice, op by op.
absl::Status FindProducers(const Graph& graph, const OpTensors& tensors,
                           const OpNameCheck& names,
                           const base::CancelToken* cancel, Usage* usage) {
  const int ops = static_cast<int>(graph.ops.size());
  for (int step = 0; step < ops; ++step) {
    if (base::CancelledAt(cancel, step)) return Cancelled();
    if (names.step == static_cast<size_t>(step)) return names.error;
    for (size_t k = tensors.begin[step]; k < tensors.inputs[step]; ++k) {
      const int t = tensors.ids[k];
      if (t != kNone && usage->producer[t] == kNone) {
        usage->producer[t] = step;
        continue;
      }
      const Op& op = graph.ops[step];
      const std::string& name = op.outputs[k - tensors.begin[step]];
      if (t == kNone) {
        return Invalid("op '", op.name, "' writes unknown tensor '", name, "'");
      }
      return Invalid("tensor '", name, "' is produced twice, by op '",
                     graph.ops[usage->producer[t]].name, "' and by op '",
                     op.name, "'");
    }
  }
  return absl::OkStatus();
}

// Records last consumers, checking every read comes after the write.
absl::Status FindConsumers(const Graph& graph, const OpTensors& tensors,
                           const base::CancelToken* cancel, Usage* usage) {
  const int ops = static_cast<int>(graph.ops.size());
  for (int step = 0; step < ops; ++step) {
    if (base::CancelledAt(cancel, step)) return Cancelled();
    for (size_t k = tensors.inputs[step]; k < tensors.begin[step + 1]; ++k) {
      const int t = tensors.ids[k];
      const int producer = t == kNone ? kNone : usage->producer[t];
      if (t != kNone && producer < step) {
        usage->last_consumer[t] = std::max(usage->last_consumer[t], step);
        continue;
      }
      const Op& op = graph.ops[step];
      const std::string& name = op.inputs[k - tensors.inputs[step]];
      if (t == kNone) {
        return Invalid("op '", op.name, "' reads unknown tensor '", name, "'");
      }
      if (producer == step) {
        return Invalid("cycle: op '", op.name, "' reads its own output '", name,
                       "'");
      }
      return Invalid("op '", op.name, "' (step ", step, ") reads tensor '",
                     name, "' before op '", graph.ops[producer].name,
                     "' (step ", producer,
                     ") produces it: ops out of order, or a cycle");
    }
  }
  return absl::OkStatus();
}

// Sets *v to `step` where it is kNone, from any thread; false where it
// was set.
bool Claim(int* v, int step) {
  int none = kNone;
  return __atomic_compare_exchange_n(v, &none, step, /*weak=*/false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// Raises *v to `step` where it is lower (kNone is), from any thread.
void RaiseTo(int* v, int step) {
  int seen = __atomic_load_n(v, __ATOMIC_RELAXED);
  while (seen < step &&
         !__atomic_compare_exchange_n(v, &seen, step, /*weak=*/true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

enum class UsageFound { kDone, kFault, kCancelled };

// FindProducers and FindConsumers in chunks of ops on the threads
// `parallel` gives, for a graph without faults: each tensor's producer is
// the one step writing it and its last consumer the greatest reading it,
// whatever the order the chunks ran in. kFault, with `usage` in any state,
// as soon as an op writes an unknown tensor or one another write (of its
// own op too) claimed, or reads one not produced before it: the passes in
// op order then find the first fault and word it.
UsageFound FindUsageOnThreads(const OpTensors& tensors,
                              const base::Parallelism& parallel,
                              const base::CancelToken* cancel, Usage* usage) {
  const size_t ops = tensors.inputs.size();
  std::atomic<bool> fault{false}, cancelled{false};
  const auto chunks = [&](auto each_op) {
    base::ParallelForRange(parallel, ops, kResolveChunk,
                           [&](int, size_t first, size_t last) {
                             if (cancel != nullptr && cancel->Cancelled()) {
                               cancelled = true;
                               return;
                             }
                             if (fault) return;
                             for (size_t step = last; step-- > first;) {
                               if (!each_op(step)) {
                                 fault = true;
                                 return;
                               }
                             }
                           });
  };
  int* producer = usage->producer.data();
  chunks([&](size_t step) {
    for (size_t k = tensors.begin[step]; k < tensors.inputs[step]; ++k) {
      const int t = tensors.ids[k];
      if (t == kNone || !Claim(&producer[t], static_cast<int>(step))) {
        return false;
      }
    }
    return true;
  });
  // Steps in falling order within a chunk: a tensor's greatest reader in
  // the chunk raises its last consumer first, and the others only read it.
  int* last_consumer = usage->last_consumer.data();
  if (!fault && !cancelled) {
    chunks([&](size_t step) {
      for (size_t k = tensors.inputs[step]; k < tensors.begin[step + 1]; ++k) {
        const int t = tensors.ids[k];
        if (t == kNone || producer[t] >= static_cast<int>(step)) return false;
        RaiseTo(&last_consumer[t], static_cast<int>(step));
      }
      return true;
    });
  }
  if (cancelled) return UsageFound::kCancelled;
  return fault ? UsageFound::kFault : UsageFound::kDone;
}

// Decides each tensor's kind: graph inputs, then outputs, then weights
// (marked constant, or produced by no op) and variables; the rest are
// activations. The pass over the tensors runs in chunks on the threads
// `parallel` gives (the first tensor marked both constant and variable is
// the error, as in one pass).
absl::Status ClassifyTensors(const Graph& graph, const NameIndex& index,
                             const base::Parallelism& parallel, Usage* usage) {
  const size_t n = graph.tensors.size();
  std::vector<size_t> both_in(base::ChunkCount(n, kBufferChunk), n);
  base::ParallelForRange(
      parallel, n, kBufferChunk, [&](int chunk, size_t first, size_t last) {
        for (size_t t = first; t < last; ++t) {
          const Tensor& tensor = graph.tensors[t];
          if (tensor.constant && tensor.variable) {
            both_in[chunk] = t;
            return;
          }
          if (tensor.constant || usage->producer[t] == kNone) {
            usage->kind[t] = TensorKind::kWeight;
          }
          if (tensor.variable) usage->kind[t] = TensorKind::kVariable;
        }
      });
  if (const size_t t = *std::min_element(both_in.begin(), both_in.end());
      t < n) {
    return Invalid("tensor '", graph.tensors[t].name,
                   "' is marked both constant and variable");
  }
  for (const std::string& name : graph.outputs) {
    const int t = index.Find(name);
    if (t == kNone) return Invalid("unknown graph output '", name, "'");
    usage->kind[t] = TensorKind::kOutput;
  }
  for (const std::string& name : graph.inputs) {
    const int t = index.Find(name);
    if (t == kNone) return Invalid("unknown graph input '", name, "'");
    if (int p = usage->producer[t]; p != kNone) {
      return Invalid("graph input '", name, "' is produced by op '",
                     graph.ops[p].name, "'");
    }
    usage->kind[t] = TensorKind::kInput;
  }
  return absl::OkStatus();
}

// Marks the tensors listed as graph outputs (an input may be one too).
std::vector<bool> GraphOutputs(const Graph& graph, const NameIndex& index) {
  std::vector<bool> output(graph.tensors.size(), false);
  for (const std::string& name : graph.outputs) output[index.Find(name)] = true;
  return output;
}

// Whether an input or output lives for the whole run whatever the policy:
// an input that is also an output (the caller reads it after the run), or
// a variable.
bool IsWholeRun(TensorKind kind, bool graph_output, const Tensor& tensor) {
  return (kind == TensorKind::kInput && graph_output) || tensor.variable;
}

// A tensor's steps: [start, end).
struct Lifetime {
  Step start = 0;
  Step end = 0;
};

// The lifetime of tensor `t` (liveness.h): activations from their producer
// to their last consumer, inputs from the start and outputs to the end
// (`io` may keep inputs whole), weights and variables for the whole run.
// `whole_run`: IsWholeRun.
Lifetime LifetimeOf(const Usage& usage, size_t t, bool whole_run, IoPolicy io,
                    Step steps) {
  const Step producer = usage.producer[t];
  const Step last_use = std::max(producer, Step{usage.last_consumer[t]});
  switch (usage.kind[t]) {
    case TensorKind::kActivation:
    case TensorKind::kScratch:
      return {producer, last_use + 1};
    case TensorKind::kInput:
      if (whole_run || io == IoPolicy::kKeepInputs) break;
      return {0, std::max(Step{0}, last_use) + 1};
    case TensorKind::kOutput:
      if (whole_run) break;
      return {std::max(Step{0}, producer), steps};
    case TensorKind::kWeight:
    case TensorKind::kVariable:
      break;
  }
  return {0, steps};
}

}  // namespace

absl::string_view IoPolicyName(IoPolicy policy) {
  switch (policy) {
    case IoPolicy::kRuntime:
      return "arena";
    case IoPolicy::kKeepInputs:
      return "arena_keep_inputs";
    case IoPolicy::kExclude:
      return "exclude";
  }
  return "arena";
}

absl::string_view TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kInput:
      return "input";
    case TensorKind::kOutput:
      return "output";
    case TensorKind::kWeight:
      return "weight";
    case TensorKind::kVariable:
      return "variable";
    case TensorKind::kScratch:
      return "scratch";
  }
  return "activation";
}

absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                        Bytes default_alignment,
                                        std::vector<TensorKind>* kinds,
                                        IoPolicy io) {
  return AnalyzeLiveness(graph, default_alignment, kinds, io, nullptr);
}

absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                        Bytes default_alignment,
                                        std::vector<TensorKind>* kinds,
                                        IoPolicy io,
                                        const base::CancelToken* cancel) {
  return AnalyzeLiveness(graph, default_alignment, kinds, io, cancel, {});
}

absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                        Bytes default_alignment,
                                        std::vector<TensorKind>* kinds,
                                        IoPolicy io,
                                        const base::CancelToken* cancel,
                                        const base::Parallelism& parallel) {
  const std::string label =
      graph.name.empty() ? "graph" : "graph '" + graph.name + "'";
  if (graph.tensors.empty()) return Invalid(label, " has no tensors");
  if (graph.ops.empty()) return Invalid(label, " has no ops");
  if (!IsValidAlignment(default_alignment)) {
    return Invalid("alignment ", default_alignment,
                   " is not a power of two up to 2^32");
  }
  // The tensors' and the ops' names indexed together (on threads, a task
  // per shard of each).
  NameList<Tensor> tensor_list(graph.tensors);
  NameList<Op> op_list(graph.ops);
  if (!IndexNames(&tensor_list, &op_list, parallel, cancel)) {
    return Cancelled();
  }
  if (auto s = CheckTensors(graph, tensor_list, parallel, cancel); !s.ok()) {
    return s;
  }
  const NameIndex& index = tensor_list.index;
  const OpNameCheck op_names = CheckOpNames(graph, op_list);
  op_list.index = NameIndex();  // its memory for what follows
  OpTensors tensors;
  if (!ResolveOps(graph, index, parallel, cancel, &tensors)) {
    return Cancelled();
  }
  const size_t n = graph.tensors.size();
  Usage usage{std::vector<int>(n, kNone), std::vector<int>(n, kNone),
              std::vector<TensorKind>(n, TensorKind::kActivation)};
  // On kSplitFromThreads threads or more where the graph has no fault;
  // else (or where one is met on threads) in op order, for the first.
  const bool on_threads =
      ThreadsOf(parallel) >= kSplitFromThreads && op_names.error.ok();
  UsageFound found = UsageFound::kFault;
  if (on_threads) {
    found = FindUsageOnThreads(tensors, parallel, cancel, &usage);
    if (found == UsageFound::kCancelled) return Cancelled();
  }
  if (found == UsageFound::kFault) {
    if (on_threads) {  // from the start
      std::fill(usage.producer.begin(), usage.producer.end(), kNone);
      std::fill(usage.last_consumer.begin(), usage.last_consumer.end(), kNone);
    }
    if (auto s = FindProducers(graph, tensors, op_names, cancel, &usage);
        !s.ok()) {
      return s;
    }
    if (auto s = FindConsumers(graph, tensors, cancel, &usage); !s.ok()) {
      return s;
    }
  }
  if (auto s = ClassifyTensors(graph, index, parallel, &usage); !s.ok()) {
    return s;
  }
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();

  const std::vector<bool> output = GraphOutputs(graph, index);
  const Step steps = static_cast<Step>(graph.ops.size());
  Problem problem;
  problem.buffers.resize(n);
  std::atomic<bool> cancelled{false};
  base::ParallelForRange(
      parallel, n, kBufferChunk, [&](int, size_t first, size_t last) {
        if (cancel != nullptr && cancel->Cancelled()) {
          cancelled = true;
          return;
        }
        for (size_t t = first; t < last; ++t) {
          const Tensor& tensor = graph.tensors[t];
          Buffer& b = problem.buffers[t];
          b.name = tensor.name;
          b.size = tensor.size_bytes;
          b.alignment =
              tensor.alignment != 0 ? tensor.alignment : default_alignment;
          b.persistent = usage.kind[t] != TensorKind::kActivation;
          const Lifetime life =
              LifetimeOf(usage, t, IsWholeRun(usage.kind[t], output[t], tensor),
                         io, steps);
          b.start = life.start;
          b.end = life.end;
        }
      });
  if (cancelled) return Cancelled();
  if (kinds != nullptr) *kinds = std::move(usage.kind);
  return problem;
}

}  // namespace memplan::planner
