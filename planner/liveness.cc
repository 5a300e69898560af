#include "planner/liveness.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/parallel.h"
#include "base/status.h"

namespace memplan::planner {
namespace {

constexpr int kNone = -1;

// Tensor indices by name; the names are the graph's own (not copied: one
// allocation a long name less, on every call).
using NameIndex = absl::flat_hash_map<absl::string_view, int>;

absl::Status Cancelled() {
  return absl::DeadlineExceededError("liveness analysis cancelled");
}

// Indexes tensors by name and checks each tensor alone.
absl::StatusOr<NameIndex> IndexTensors(const Graph& graph,
                                       const base::CancelToken* cancel) {
  NameIndex index;
  index.reserve(graph.tensors.size());  // no rehash as it fills
  Bytes total = 0;
  for (int i = 0; i < static_cast<int>(graph.tensors.size()); ++i) {
    if (base::CancelledAt(cancel, i)) return Cancelled();
    const Tensor& t = graph.tensors[i];
    if (t.name.empty()) return Invalid("tensor #", i, " has no name");
    if (!index.emplace(t.name, i).second) {
      return Invalid("duplicate tensor name '", t.name, "'");
    }
    if (t.size_bytes <= 0) {
      return Invalid("tensor '", t.name, "' has size ", t.size_bytes,
                     "; sizes must be positive");
    }
    if (t.alignment != 0 && !IsValidAlignment(t.alignment)) {
      return Invalid("tensor '", t.name, "' alignment ", t.alignment,
                     " is not a power of two up to 2^32");
    }
    if (auto s = AddToTotalSize(
            t.size_bytes, [&] { return absl::StrCat("tensor '", t.name, "'"); },
            &total);
        !s.ok()) {
      return s;
    }
  }
  return index;
}

// Per-tensor facts gathered from the op list.
struct Usage {
  std::vector<int> producer;       // op index, kNone for none
  std::vector<int> last_consumer;  // op index, kNone for none
  std::vector<TensorKind> kind;    // how a runtime treats each tensor
};

// The first op (by step) whose name is empty or repeats an earlier op's,
// with its error; none where every name is unique. Its own pass, so that
// it can run beside IndexTensors.
struct OpNameCheck {
  size_t step = std::numeric_limits<size_t>::max();
  absl::Status error;
};

OpNameCheck CheckOpNames(const Graph& graph, const base::CancelToken* cancel) {
  absl::flat_hash_set<absl::string_view> op_names;
  op_names.reserve(graph.ops.size());
  for (size_t step = 0; step < graph.ops.size(); ++step) {
    if (base::CancelledAt(cancel, step)) return {step, Cancelled()};
    const Op& op = graph.ops[step];
    if (op.name.empty()) return {step, Invalid("op #", step, " has no name")};
    if (!op_names.insert(op.name).second) {
      return {step, Invalid("duplicate op name '", op.name, "'")};
    }
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
                             const auto it = index.find(name);
                             return it == index.end() ? kNone : it->second;
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

// Decides each tensor's kind: graph inputs, then outputs, then weights
// (marked constant, or produced by no op) and variables; the rest are
// activations.
absl::Status ClassifyTensors(const Graph& graph, const NameIndex& index,
                             Usage* usage) {
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const Tensor& tensor = graph.tensors[t];
    if (tensor.constant && tensor.variable) {
      return Invalid("tensor '", tensor.name,
                     "' is marked both constant and variable");
    }
    if (tensor.constant || usage->producer[t] == kNone) {
      usage->kind[t] = TensorKind::kWeight;
    }
    if (tensor.variable) usage->kind[t] = TensorKind::kVariable;
  }
  for (const std::string& name : graph.outputs) {
    auto it = index.find(name);
    if (it == index.end()) return Invalid("unknown graph output '", name, "'");
    usage->kind[it->second] = TensorKind::kOutput;
  }
  for (const std::string& name : graph.inputs) {
    auto it = index.find(name);
    if (it == index.end()) return Invalid("unknown graph input '", name, "'");
    if (int p = usage->producer[it->second]; p != kNone) {
      return Invalid("graph input '", name, "' is produced by op '",
                     graph.ops[p].name, "'");
    }
    usage->kind[it->second] = TensorKind::kInput;
  }
  return absl::OkStatus();
}

// Marks the tensors listed as graph outputs (an input may be one too).
std::vector<bool> GraphOutputs(const Graph& graph, const NameIndex& index) {
  std::vector<bool> output(graph.tensors.size(), false);
  for (const std::string& name : graph.outputs) output[index.at(name)] = true;
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
  // The two name sets at once where the request has threads (the tensors'
  // first on one).
  absl::StatusOr<NameIndex> index;
  OpNameCheck op_names;
  base::ParallelFor(parallel, 2, [&](int k) {
    if (k == 0) {
      index = IndexTensors(graph, cancel);
    } else {
      op_names = CheckOpNames(graph, cancel);
    }
  });
  if (!index.ok()) return index.status();
  OpTensors tensors;
  if (!ResolveOps(graph, *index, parallel, cancel, &tensors)) {
    return Cancelled();
  }
  const size_t n = graph.tensors.size();
  Usage usage{std::vector<int>(n, kNone), std::vector<int>(n, kNone),
              std::vector<TensorKind>(n, TensorKind::kActivation)};
  if (auto s = FindProducers(graph, tensors, op_names, cancel, &usage);
      !s.ok()) {
    return s;
  }
  if (auto s = FindConsumers(graph, tensors, cancel, &usage); !s.ok()) {
    return s;
  }
  if (auto s = ClassifyTensors(graph, *index, &usage); !s.ok()) return s;
  if (cancel != nullptr && cancel->Cancelled()) return Cancelled();

  const std::vector<bool> output = GraphOutputs(graph, *index);
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
