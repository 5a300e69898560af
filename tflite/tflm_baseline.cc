#include "tflite/tflm_baseline.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace memplan::formats {
namespace {

constexpr int kMaxNesting = 256;                // subgraphs running subgraphs
constexpr int64_t kMaxTflmSteps = 100'000'000;  // TFLM's re-walks of calls

// TFLM's AllocationInfoBuilder::MarkAllocationLifetimes, for the lifetimes
// TFLM's own planner works with.
class TflmLifetimes {
 public:
  TflmLifetimes(const TfliteModel& m, std::vector<TflmTensorUse>* uses)
      : m_(m), uses_(*uses), on_stack_(m.subgraph_count(), 0) {}

  // Walks subgraph `s` as TFLM does: inputs created at the current scope,
  // one scope per operator, one per subgraph an IF, WHILE or CALL_ONCE runs
  // (walked there, every time), outputs kept to the last scope.
  absl::Status Mark(int s, int depth) {
    if (depth > kMaxNesting || on_stack_[s]) {
      return Invalid(
          m_.name(), ": ", m_.SubgraphLabel(s),
          depth > kMaxNesting ? " is nested too deep" : " runs itself");
    }
    on_stack_[s] = 1;
    const tfl::SubGraph& g = m_.subgraph(s);
    for (int k = 0; k < Size(g.inputs()); ++k) Use(s, g.inputs()->Get(k), 1);
    for (int i = 0; i < m_.op_count(s); ++i) {
      if (++steps_ > kMaxTflmSteps) {
        return absl::ResourceExhaustedError(absl::StrCat(
            m_.name(), ": TFLM's walk of the subgraph calls takes more than ",
            kMaxTflmSteps, " steps"));
      }
      ++scope_;
      const tfl::Operator& op = m_.op(s, i);
      for (int k = 0; k < Size(op.outputs()); ++k) {
        Use(s, op.outputs()->Get(k), 0);
      }
      for (const SubgraphCall& call : TflmCalls(op)) {
        ++scope_;
        if (auto st = Mark(call.subgraph, depth + 1); !st.ok()) return st;
      }
      for (int k = 0; k < Size(op.inputs()); ++k) {
        Use(s, op.inputs()->Get(k), 2);
      }
      for (int k = 0; k < Size(op.outputs()); ++k) {
        Use(s, op.outputs()->Get(k), 2);
      }
    }
    for (int k = 0; k < Size(g.outputs()); ++k) Use(s, g.outputs()->Get(k), 1);
    on_stack_[s] = 0;
    return absl::OkStatus();
  }

 private:
  // TFLM follows IF, WHILE and CALL_ONCE only.
  std::vector<SubgraphCall> TflmCalls(const tfl::Operator& op) const {
    const int32_t code = m_.BuiltinCode(op);
    if (code != tfl::BuiltinOperator_IF && code != tfl::BuiltinOperator_WHILE &&
        code != tfl::BuiltinOperator_CALL_ONCE) {
      return {};
    }
    return m_.CalledSubgraphs(op);
  }

  // mode 0: created now (if not yet); 1: created and used now; 2: used now.
  void Use(int s, int t, int mode) {
    if (t < 0) return;
    TflmTensorUse& u = uses_[m_.global_index(s, t)];
    if (mode != 2 && u.first < 0) u.first = scope_;
    if (mode != 0) u.last = scope_;
  }

  const TfliteModel& m_;
  std::vector<TflmTensorUse>& uses_;
  std::vector<char> on_stack_;
  int scope_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<TflmTensorUse>> TflmTensorUses(
    const TfliteModel& model) {
  const TfliteModel* m = &model;
  std::vector<TflmTensorUse> uses(m->tensor_count());
  for (int s = 0; s < m->subgraph_count(); ++s) {
    for (int t = 0; t < m->tensor_count(s); ++t) {
      const tfl::Tensor& tensor = m->tensor(s, t);
      TflmTensorUse& u = uses[m->global_index(s, t)];
      u.variable = tensor.is_variable();
      bool empty = false;  // TFLM sizes tensors from `shape`
      for (int k = 0; k < Size(tensor.shape()); ++k) {
        empty = empty || tensor.shape()->Get(k) == 0;
      }
      u.planned = m->DataBytes(tensor) == 0 && !u.variable && !empty;
    }
  }
  TflmLifetimes lifetimes(*m, &uses);
  if (auto s = lifetimes.Mark(0, 0); !s.ok()) return s;
  return uses;
}

absl::StatusOr<std::vector<planner::TflmBuffer>> TflmRequests(
    const ImportedModel& model) {
  if (!model.tflm_uses_status.ok()) return model.tflm_uses_status;
  if (model.tflite == nullptr) {
    return absl::InvalidArgumentError("tflm baseline: not a TFLite model");
  }
  const std::vector<TflmTensorUse>* uses = &model.tflm_uses;
  std::vector<int64_t> size(uses->size(), 0);
  const TfliteModel* m = model.tflite.get();
  for (size_t i = 0; i < model.tflite_tensors.size(); ++i) {
    const TfliteTensorRef& ref = model.tflite_tensors[i];
    size[m->global_index(ref.subgraph, ref.tensor)] =
        model.graph.tensors(static_cast<int>(i)).size_bytes();
  }
  constexpr int64_t a = planner::kTflmAlignment;
  std::vector<planner::TflmBuffer> requests;
  int last_scope = 0;
  for (const TflmTensorUse& u : *uses)
    last_scope = std::max(last_scope, u.last);
  for (size_t g = 0; g < uses->size(); ++g) {
    const TflmTensorUse& u = (*uses)[g];
    if (u.planned && size[g] > 0) {
      requests.push_back({(size[g] + a - 1) / a * a, u.first, u.last, -1});
    }
  }
  for (size_t g = 0; g < uses->size(); ++g) {
    if ((*uses)[g].variable && size[g] > 0) {
      requests.push_back({(size[g] + a - 1) / a * a, 0, last_scope, -1});
    }
  }
  return requests;
}

}  // namespace memplan::formats
