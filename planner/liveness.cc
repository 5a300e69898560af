#include "planner/liveness.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace memplan::planner {
namespace {

constexpr int kNone = -1;

// Indexes tensors by name and checks each tensor alone.
absl::StatusOr<absl::flat_hash_map<std::string, int>> IndexTensors(
    const Graph& graph) {
  absl::flat_hash_map<std::string, int> index;
  Bytes total = 0;
  for (int i = 0; i < static_cast<int>(graph.tensors.size()); ++i) {
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

// Resolves a name used by op `op_name`, failing for an unknown tensor.
absl::StatusOr<int> Resolve(const absl::flat_hash_map<std::string, int>& index,
                            const std::string& name, const std::string& op,
                            const char* role) {
  auto it = index.find(name);
  if (it == index.end()) {
    return Invalid("op '", op, "' ", role, " unknown tensor '", name, "'");
  }
  return it->second;
}

// Records producers, checking names of ops and that no tensor is produced
// twice.
absl::Status FindProducers(const Graph& graph,
                           const absl::flat_hash_map<std::string, int>& index,
                           Usage* usage) {
  absl::flat_hash_set<std::string> op_names;
  for (int step = 0; step < static_cast<int>(graph.ops.size()); ++step) {
    const Op& op = graph.ops[step];
    if (op.name.empty()) return Invalid("op #", step, " has no name");
    if (!op_names.insert(op.name).second) {
      return Invalid("duplicate op name '", op.name, "'");
    }
    for (const std::string& name : op.outputs) {
      absl::StatusOr<int> t = Resolve(index, name, op.name, "writes");
      if (!t.ok()) return t.status();
      int& producer = usage->producer[*t];
      if (producer != kNone) {
        return Invalid("tensor '", name, "' is produced twice, by op '",
                       graph.ops[producer].name, "' and by op '", op.name, "'");
      }
      producer = step;
    }
  }
  return absl::OkStatus();
}

// Records last consumers, checking every read comes after the write.
absl::Status FindConsumers(const Graph& graph,
                           const absl::flat_hash_map<std::string, int>& index,
                           Usage* usage) {
  for (int step = 0; step < static_cast<int>(graph.ops.size()); ++step) {
    const Op& op = graph.ops[step];
    for (const std::string& name : op.inputs) {
      absl::StatusOr<int> t = Resolve(index, name, op.name, "reads");
      if (!t.ok()) return t.status();
      int producer = usage->producer[*t];
      if (producer == step) {
        return Invalid("cycle: op '", op.name, "' reads its own output '", name,
                       "'");
      }
      if (producer > step) {
        return Invalid("op '", op.name, "' (step ", step, ") reads tensor '",
                       name, "' before op '", graph.ops[producer].name,
                       "' (step ", producer,
                       ") produces it: ops out of order, or a cycle");
      }
      usage->last_consumer[*t] = std::max(usage->last_consumer[*t], step);
    }
  }
  return absl::OkStatus();
}

// Decides each tensor's kind: graph inputs, then outputs, then weights
// (marked constant, or produced by no op) and variables; the rest are
// activations.
absl::Status ClassifyTensors(const Graph& graph,
                             const absl::flat_hash_map<std::string, int>& index,
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

}  // namespace

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
  }
  return "activation";
}

absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                        Bytes default_alignment,
                                        std::vector<TensorKind>* kinds) {
  const std::string label =
      graph.name.empty() ? "graph" : "graph '" + graph.name + "'";
  if (graph.tensors.empty()) return Invalid(label, " has no tensors");
  if (graph.ops.empty()) return Invalid(label, " has no ops");
  if (!IsValidAlignment(default_alignment)) {
    return Invalid("alignment ", default_alignment,
                   " is not a power of two up to 2^32");
  }
  absl::StatusOr<absl::flat_hash_map<std::string, int>> index =
      IndexTensors(graph);
  if (!index.ok()) return index.status();
  const size_t n = graph.tensors.size();
  Usage usage{std::vector<int>(n, kNone), std::vector<int>(n, kNone),
              std::vector<TensorKind>(n, TensorKind::kActivation)};
  if (auto s = FindProducers(graph, *index, &usage); !s.ok()) return s;
  if (auto s = FindConsumers(graph, *index, &usage); !s.ok()) return s;
  if (auto s = ClassifyTensors(graph, *index, &usage); !s.ok()) return s;

  const Step steps = static_cast<Step>(graph.ops.size());
  Problem problem;
  problem.buffers.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    const Tensor& tensor = graph.tensors[t];
    Buffer b;
    b.name = tensor.name;
    b.size = tensor.size_bytes;
    b.alignment = tensor.alignment != 0 ? tensor.alignment : default_alignment;
    b.persistent = usage.kind[t] != TensorKind::kActivation;
    if (b.persistent) {
      b.start = 0;
      b.end = steps;
    } else {
      b.start = usage.producer[t];
      b.end = std::max(usage.producer[t], usage.last_consumer[t]) + 1;
    }
    problem.buffers.push_back(std::move(b));
  }
  if (kinds != nullptr) *kinds = std::move(usage.kind);
  return problem;
}

}  // namespace memplan::planner
