#include "engine/names.h"

#include <string>
#include <utility>

#include "base/text.h"

namespace memplan::engine {
namespace {

// Applies the text rule to one name, in place, unless it is clean.
void Clean(std::string* name) {
  if (!base::IsSafeName(*name)) *name = base::SafeName(*name);
}

void CleanAll(google::protobuf::RepeatedPtrField<std::string>* names,
              const base::CancelToken* cancel) {
  for (int i = 0; i < names->size(); ++i) {
    if (base::CancelledAt(cancel, i)) return;
    Clean(names->Mutable(i));
  }
}

// Whether every name of `graph` is clean; true once `cancel` fires (the
// caller checks it next, and nothing is planned).
bool GraphIsClean(const v1::Graph& graph, const base::CancelToken* cancel) {
  const auto all = [cancel](const auto& names) {
    for (int i = 0; i < names.size(); ++i) {
      if (base::CancelledAt(cancel, i)) return true;
      if (!base::IsSafeName(names[i])) return false;
    }
    return true;
  };
  if (!base::IsSafeName(graph.name()) || !all(graph.inputs()) ||
      !all(graph.outputs())) {
    return false;
  }
  for (int i = 0; i < graph.tensors_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return true;
    if (!base::IsSafeName(graph.tensors(i).name())) return false;
  }
  for (int i = 0; i < graph.ops_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return true;
    const v1::Op& op = graph.ops(i);
    if (!base::IsSafeName(op.name()) || !all(op.inputs()) ||
        !all(op.outputs())) {
      return false;
    }
  }
  return true;
}

bool BuffersAreClean(const v1::PlanRequest& request,
                     const base::CancelToken* cancel) {
  for (int i = 0; i < request.buffers_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return true;
    if (!base::IsSafeName(request.buffers(i).id())) return false;
  }
  return true;
}

// The file name of a model's path, or the graph's name, cleaned: what the
// emitted files are titled with.
std::string InputName(const v1::PlanRequest& request) {
  if (request.has_model()) return base::SafeName(request.model().name());
  return base::SafeName(request.graph().name());
}

}  // namespace

void CleanGraphNames(v1::Graph* graph, const base::CancelToken* cancel) {
  Clean(graph->mutable_name());
  for (int i = 0; i < graph->tensors_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return;
    Clean(graph->mutable_tensors(i)->mutable_name());
  }
  for (int i = 0; i < graph->ops_size(); ++i) {
    if (base::CancelledAt(cancel, i)) return;
    v1::Op& op = *graph->mutable_ops(i);
    Clean(op.mutable_name());
    CleanAll(op.mutable_inputs(), cancel);
    CleanAll(op.mutable_outputs(), cancel);
  }
  CleanAll(graph->mutable_inputs(), cancel);
  CleanAll(graph->mutable_outputs(), cancel);
}

std::optional<v1::PlanRequest> CleanNames(const v1::PlanRequest& request,
                                          PlanOutcome* outcome,
                                          const base::CancelToken* cancel) {
  for (planner::MemorySpace& space : outcome->options.memory_spaces) {
    Clean(&space.name);
  }
  outcome->input_name = InputName(request);
  if (outcome->model.has_value()) {
    CleanGraphNames(&outcome->model->graph, cancel);
    return std::nullopt;
  }
  if (GraphIsClean(request.graph(), cancel) &&
      BuffersAreClean(request, cancel)) {
    return std::nullopt;
  }
  v1::PlanRequest clean = request;
  CleanGraphNames(clean.mutable_graph(), cancel);
  for (int i = 0; i < clean.buffers_size(); ++i) {
    if (base::CancelledAt(cancel, i)) break;
    Clean(clean.mutable_buffers(i)->mutable_id());
  }
  if (!request.has_graph()) clean.clear_graph();
  return clean;
}

}  // namespace memplan::engine
