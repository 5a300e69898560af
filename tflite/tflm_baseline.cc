#include "tflite/tflm_baseline.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace memplan::formats {
namespace {

constexpr int kMaxNesting = 256;                 // subgraphs running subgraphs
constexpr int64_t kMaxTflmScopes = 100'000'000;  // scopes TFLM's walk opens

// TFLM's AllocationInfoBuilder::MarkAllocationLifetimes, for the lifetimes
// TFLM's own planner works with. TFLM walks a subgraph again at every IF,
// WHILE or CALL_ONCE that runs it (exponential in the nesting when each
// subgraph runs the next twice); every such walk marks the subgraph's
// tensors at the same scopes relative to where it starts, and only the
// first walk's creations and the last walk's uses survive. So each subgraph
// is walked once, relative to 0, and placed at its first and last start:
// the same lifetimes, in time linear in the model.
class TflmLifetimes {
 public:
  TflmLifetimes(const TfliteModel& m, std::vector<TflmTensorUse>* uses)
      : m_(m),
        uses_(*uses),
        n_(m.subgraph_count()),
        state_(n_, kUnseen),
        span_(n_, 0),
        depth_(n_, -1),
        first_start_(n_, INT64_MAX),
        last_start_(n_, -1) {}

  absl::Status Run() {
    if (n_ == 0) return absl::OkStatus();
    if (auto s = Order(0, 0); !s.ok()) return s;
    if (span_[0] > kMaxTflmScopes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          m_.name(), ": TFLM's walk of the subgraph calls opens more than ",
          kMaxTflmScopes, " allocation scopes"));
    }
    // Callers before callees: each subgraph's starts are known when reached.
    std::reverse(post_order_.begin(), post_order_.end());
    depth_[0] = 0;
    first_start_[0] = last_start_[0] = 0;
    for (int s : post_order_) {
      if (auto st = PlaceCalls(s); !st.ok()) return st;
    }
    for (int s : post_order_) MarkOnce(s);
    return absl::OkStatus();
  }

 private:
  enum State : char { kUnseen, kOnStack, kDone };

  // TFLM follows IF, WHILE and CALL_ONCE only.
  std::vector<SubgraphCall> TflmCalls(const tfl::Operator& op) const {
    const int32_t code = m_.BuiltinCode(op);
    if (code != tfl::BuiltinOperator_IF && code != tfl::BuiltinOperator_WHILE &&
        code != tfl::BuiltinOperator_CALL_ONCE) {
      return {};
    }
    return m_.CalledSubgraphs(op);
  }

  // Depth-first from `s`: refuses a subgraph that runs itself, records the
  // post-order and each subgraph's span (the scopes one walk of it opens:
  // one per operator, and per call one plus the callee's span), saturated
  // past kMaxTflmScopes. The recursion is at most kMaxNesting deep.
  absl::Status Order(int s, int depth) {
    if (depth > kMaxNesting) {
      return Invalid(m_.name(), ": ", m_.SubgraphLabel(s),
                     " is nested too deep");
    }
    state_[s] = kOnStack;
    int64_t span = 0;
    for (int i = 0; i < m_.op_count(s); ++i) {
      span += 1;
      for (const SubgraphCall& call : TflmCalls(m_.op(s, i))) {
        const int c = call.subgraph;
        if (state_[c] == kOnStack) {
          return Invalid(m_.name(), ": ", m_.SubgraphLabel(c), " runs itself");
        }
        if (state_[c] == kUnseen) {
          if (auto st = Order(c, depth + 1); !st.ok()) return st;
        }
        span = std::min(span + 1 + span_[c], kMaxTflmScopes + 1);
      }
    }
    span_[s] = std::min(span, kMaxTflmScopes + 1);
    state_[s] = kDone;
    post_order_.push_back(s);
    return absl::OkStatus();
  }

  // For each call `s` makes: the callee's nesting depth (refused past
  // kMaxNesting, as TFLM's walk would reach it), its earliest and latest
  // start. REQUIRES every caller of `s` placed.
  absl::Status PlaceCalls(int s) {
    int64_t scope = 0;  // relative to the start of a walk of s
    for (int i = 0; i < m_.op_count(s); ++i) {
      ++scope;
      for (const SubgraphCall& call : TflmCalls(m_.op(s, i))) {
        const int c = call.subgraph;
        ++scope;
        depth_[c] = std::max(depth_[c], depth_[s] + 1);
        if (depth_[c] > kMaxNesting) {
          return Invalid(m_.name(), ": ", m_.SubgraphLabel(c),
                         " is nested too deep");
        }
        first_start_[c] = std::min(first_start_[c], first_start_[s] + scope);
        last_start_[c] = std::max(last_start_[c], last_start_[s] + scope);
        scope += span_[c];
      }
    }
    return absl::OkStatus();
  }

  // One walk of `s` as TFLM does it, relative to its start (inputs created
  // at the start, one scope per operator, a callee's scopes skipped,
  // outputs kept to the last scope); creations placed at the first start,
  // uses at the last.
  void MarkOnce(int s) {
    const tfl::SubGraph& g = m_.subgraph(s);
    int64_t scope = 0;
    auto use = [&](int t, int mode) {
      // mode 0: created now (if not yet); 1: created and used now; 2: used.
      if (t < 0) return;
      TflmTensorUse& u = uses_[m_.global_index(s, t)];
      if (mode != 2 && u.first < 0) {
        u.first = static_cast<int>(first_start_[s] + scope);
      }
      if (mode != 0) u.last = static_cast<int>(last_start_[s] + scope);
    };
    for (int k = 0; k < Size(g.inputs()); ++k) use(g.inputs()->Get(k), 1);
    for (int i = 0; i < m_.op_count(s); ++i) {
      ++scope;
      const tfl::Operator& op = m_.op(s, i);
      for (int k = 0; k < Size(op.outputs()); ++k) use(op.outputs()->Get(k), 0);
      for (const SubgraphCall& call : TflmCalls(op)) {
        scope += 1 + span_[call.subgraph];
      }
      for (int k = 0; k < Size(op.inputs()); ++k) use(op.inputs()->Get(k), 2);
      for (int k = 0; k < Size(op.outputs()); ++k) use(op.outputs()->Get(k), 2);
    }
    for (int k = 0; k < Size(g.outputs()); ++k) use(g.outputs()->Get(k), 1);
  }

  const TfliteModel& m_;
  std::vector<TflmTensorUse>& uses_;
  const int n_;
  std::vector<State> state_;
  std::vector<int64_t> span_;         // scopes one walk opens
  std::vector<int> depth_;            // longest chain of calls from 0
  std::vector<int64_t> first_start_;  // scope the first walk starts at
  std::vector<int64_t> last_start_;   // scope the last walk starts at
  std::vector<int> post_order_;       // callees before callers
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
  if (auto s = TflmLifetimes(*m, &uses).Run(); !s.ok()) return s;
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
        model.graph->tensors(static_cast<int>(i)).size_bytes();
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
