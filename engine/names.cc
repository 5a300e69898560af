#include "engine/names.h"

#include <cstdint>
#include <string>
#include <utility>

#include "base/text.h"

namespace memplan::engine {
namespace {

// Polls a call's token once every base::kPollStride names of a walk,
// however the names are split into lists; stays stopped once it fired.
class NamePoll {
 public:
  explicit NamePoll(const base::CancelToken* cancel) : cancel_(cancel) {}
  // True once the call ended: the walk stops.
  bool Stop() {
    stopped_ = stopped_ || base::CancelledAt(cancel_, seen_++);
    return stopped_;
  }

 private:
  const base::CancelToken* cancel_;
  int64_t seen_ = 0;
  bool stopped_ = false;
};

// Applies the text rule to one name, in place, unless it is clean.
void Clean(std::string* name) {
  if (!base::IsSafeName(*name)) *name = base::SafeName(*name);
}

void CleanAll(google::protobuf::RepeatedPtrField<std::string>* names,
              NamePoll* poll) {
  for (std::string& name : *names) {
    if (poll->Stop()) return;
    Clean(&name);
  }
}

// Whether every name of `graph` is clean; true once the call ended (the
// caller checks it next, and nothing is planned).
bool GraphIsClean(const v1::Graph& graph, NamePoll* poll) {
  const auto all = [poll](const auto& names) {
    for (const std::string& name : names) {
      if (poll->Stop()) return true;
      if (!base::IsSafeName(name)) return false;
    }
    return true;
  };
  if (!base::IsSafeName(graph.name()) || !all(graph.inputs()) ||
      !all(graph.outputs())) {
    return false;
  }
  for (const v1::Tensor& t : graph.tensors()) {
    if (poll->Stop()) return true;
    if (!base::IsSafeName(t.name())) return false;
  }
  for (const v1::Op& op : graph.ops()) {
    if (poll->Stop()) return true;
    if (!base::IsSafeName(op.name()) || !all(op.inputs()) ||
        !all(op.outputs())) {
      return false;
    }
  }
  return true;
}

bool BuffersAreClean(const v1::PlanRequest& request, NamePoll* poll) {
  for (const v1::Buffer& b : request.buffers()) {
    if (poll->Stop()) return true;
    if (!base::IsSafeName(b.id())) return false;
  }
  return true;
}

// CleanGraphNames with the walk's poll.
void CleanGraph(v1::Graph* graph, NamePoll* poll) {
  Clean(graph->mutable_name());
  for (v1::Tensor& t : *graph->mutable_tensors()) {
    if (poll->Stop()) return;
    Clean(t.mutable_name());
  }
  for (v1::Op& op : *graph->mutable_ops()) {
    if (poll->Stop()) return;
    Clean(op.mutable_name());
    CleanAll(op.mutable_inputs(), poll);
    CleanAll(op.mutable_outputs(), poll);
  }
  CleanAll(graph->mutable_inputs(), poll);
  CleanAll(graph->mutable_outputs(), poll);
}

// The file name of a model's path, or the graph's name, cleaned: what the
// emitted files are titled with.
std::string InputName(const v1::PlanRequest& request) {
  if (request.has_model()) return base::SafeName(request.model().name());
  return base::SafeName(request.graph().name());
}

}  // namespace

void CleanGraphNames(v1::Graph* graph, const base::CancelToken* cancel) {
  NamePoll poll(cancel);
  CleanGraph(graph, &poll);
}

std::optional<v1::PlanRequest> CleanNames(const v1::PlanRequest& request,
                                          PlanOutcome* outcome,
                                          const base::CancelToken* cancel) {
  for (planner::MemorySpace& space : outcome->options.memory_spaces) {
    Clean(&space.name);
  }
  outcome->input_name = InputName(request);
  if (outcome->model.has_value()) {
    CleanGraphNames(outcome->model->graph, cancel);
    return std::nullopt;
  }
  NamePoll poll(cancel);
  if (GraphIsClean(request.graph(), &poll) && BuffersAreClean(request, &poll)) {
    return std::nullopt;
  }
  v1::PlanRequest clean = request;
  CleanGraph(clean.mutable_graph(), &poll);
  for (v1::Buffer& b : *clean.mutable_buffers()) {
    if (poll.Stop()) break;
    Clean(b.mutable_id());
  }
  if (!request.has_graph()) clean.clear_graph();
  return clean;
}

}  // namespace memplan::engine
