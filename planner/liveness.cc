#include "planner/liveness.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memplan::planner {
namespace {

constexpr int kNone = -1;

template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

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
    if (auto s =
            AddToTotalSize(t.size_bytes, "tensor '" + t.name + "'", &total);
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
  std::vector<bool> persistent;
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

// Marks graph inputs, outputs and weights persistent.
absl::Status MarkPersistent(const Graph& graph,
                            const absl::flat_hash_map<std::string, int>& index,
                            Usage* usage) {
  for (const std::string& name : graph.inputs) {
    auto it = index.find(name);
    if (it == index.end()) return Invalid("unknown graph input '", name, "'");
    if (int p = usage->producer[it->second]; p != kNone) {
      return Invalid("graph input '", name, "' is produced by op '",
                     graph.ops[p].name, "'");
    }
    usage->persistent[it->second] = true;
  }
  for (const std::string& name : graph.outputs) {
    auto it = index.find(name);
    if (it == index.end()) return Invalid("unknown graph output '", name, "'");
    usage->persistent[it->second] = true;
  }
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    if (usage->producer[t] == kNone) usage->persistent[t] = true;  // weight
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Problem> AnalyzeLiveness(const Graph& graph,
                                        Bytes default_alignment) {
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
              std::vector<bool>(n, false)};
  if (auto s = FindProducers(graph, *index, &usage); !s.ok()) return s;
  if (auto s = FindConsumers(graph, *index, &usage); !s.ok()) return s;
  if (auto s = MarkPersistent(graph, *index, &usage); !s.ok()) return s;

  const Step steps = static_cast<Step>(graph.ops.size());
  Problem problem;
  problem.buffers.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    const Tensor& tensor = graph.tensors[t];
    Buffer b;
    b.name = tensor.name;
    b.size = tensor.size_bytes;
    b.alignment = tensor.alignment != 0 ? tensor.alignment : default_alignment;
    b.persistent = usage.persistent[t];
    if (b.persistent) {
      b.start = 0;
      b.end = steps;
    } else {
      b.start = usage.producer[t];
      b.end = std::max(usage.producer[t], usage.last_consumer[t]) + 1;
    }
    problem.buffers.push_back(std::move(b));
  }
  return problem;
}

namespace {

// The input of `op` (at `step`) whose memory output `out` may take, or
// kNone. `reused` marks inputs already taken by another output.
int InPlaceInput(const Op& op, Step step, int out,
                 const absl::flat_hash_map<absl::string_view, int>& index,
                 const std::vector<Buffer>& b,
                 const std::vector<bool>& reused) {
  if (b[out].persistent) return kNone;
  for (const std::string& name : op.inputs) {
    const int in = index.at(name);
    if (in == out || reused[in] || b[in].persistent) continue;
    if (b[in].end != step + 1) continue;  // read again later
    if (b[out].size > b[in].size || b[out].alignment != b[in].alignment) {
      continue;
    }
    return in;
  }
  return kNone;
}

}  // namespace

InPlaceMerge MergeInPlace(const Graph& graph, const Problem& tensors) {
  const auto& b = tensors.buffers;
  absl::flat_hash_map<absl::string_view, int> index;
  for (int t = 0; t < static_cast<int>(b.size()); ++t) index[b[t].name] = t;
  std::vector<int> root(b.size());
  for (size_t t = 0; t < b.size(); ++t) root[t] = static_cast<int>(t);
  std::vector<bool> reused(b.size(), false);
  std::vector<Step> end(b.size());
  for (size_t t = 0; t < b.size(); ++t) end[t] = b[t].end;
  InPlaceMerge merge;
  for (size_t step = 0; step < graph.ops.size(); ++step) {
    const Op& op = graph.ops[step];
    if (!op.in_place) continue;
    for (const std::string& name : op.outputs) {
      const int out = index.at(name);
      const int in =
          InPlaceInput(op, static_cast<Step>(step), out, index, b, reused);
      if (in == kNone) continue;
      reused[in] = true;
      root[out] = root[in];
      end[root[out]] = std::max(end[root[out]], b[out].end);
      merge.aliases.push_back({out, in, kNone});
    }
  }
  merge.buffer_of.assign(b.size(), kNone);
  for (size_t t = 0; t < b.size(); ++t) {
    if (root[t] != static_cast<int>(t)) continue;
    merge.buffer_of[t] = static_cast<int>(merge.problem.buffers.size());
    merge.problem.buffers.push_back(b[t]);
    merge.problem.buffers.back().end = end[t];
  }
  for (size_t t = 0; t < b.size(); ++t) {
    merge.buffer_of[t] = merge.buffer_of[root[t]];
  }
  for (InPlaceTensor& a : merge.aliases) a.buffer = merge.buffer_of[a.tensor];
  merge.problem.capacity = tensors.capacity;
  return merge;
}

}  // namespace memplan::planner
