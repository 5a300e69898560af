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

void CleanAll(google::protobuf::RepeatedPtrField<std::string>* names) {
  for (std::string& name : *names) Clean(&name);
}

bool GraphIsClean(const v1::Graph& graph) {
  const auto all = [](const auto& names) {
    for (const std::string& name : names) {
      if (!base::IsSafeName(name)) return false;
    }
    return true;
  };
  if (!base::IsSafeName(graph.name()) || !all(graph.inputs()) ||
      !all(graph.outputs())) {
    return false;
  }
  for (const v1::Tensor& t : graph.tensors()) {
    if (!base::IsSafeName(t.name())) return false;
  }
  for (const v1::Op& op : graph.ops()) {
    if (!base::IsSafeName(op.name()) || !all(op.inputs()) ||
        !all(op.outputs())) {
      return false;
    }
  }
  return true;
}

bool BuffersAreClean(const v1::PlanRequest& request) {
  for (const v1::Buffer& b : request.buffers()) {
    if (!base::IsSafeName(b.id())) return false;
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

void CleanGraphNames(v1::Graph* graph) {
  Clean(graph->mutable_name());
  for (v1::Tensor& t : *graph->mutable_tensors()) Clean(t.mutable_name());
  for (v1::Op& op : *graph->mutable_ops()) {
    Clean(op.mutable_name());
    CleanAll(op.mutable_inputs());
    CleanAll(op.mutable_outputs());
  }
  CleanAll(graph->mutable_inputs());
  CleanAll(graph->mutable_outputs());
}

std::optional<v1::PlanRequest> CleanNames(const v1::PlanRequest& request,
                                          PlanOutcome* outcome) {
  for (planner::MemorySpace& space : outcome->options.memory_spaces) {
    Clean(&space.name);
  }
  outcome->input_name = InputName(request);
  if (outcome->model.has_value()) {
    CleanGraphNames(&outcome->model->graph);
    return std::nullopt;
  }
  if (GraphIsClean(request.graph()) && BuffersAreClean(request)) {
    return std::nullopt;
  }
  v1::PlanRequest clean = request;
  CleanGraphNames(clean.mutable_graph());
  for (v1::Buffer& b : *clean.mutable_buffers()) Clean(b.mutable_id());
  if (!request.has_graph()) clean.clear_graph();
  return clean;
}

}  // namespace memplan::engine
