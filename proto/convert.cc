#include "proto/convert.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/liveness.h"

namespace memplan::api {
namespace {

constexpr int64_t kDefaultAlignment = 64;

}  // namespace

absl::StatusOr<planner::PlanOptions> OptionsFromProto(const v1::PlanOptions& o,
                                                      const Limits& limits) {
  planner::PlanOptions options;
  if (o.alignment() != 0) {
    if (!planner::IsPowerOfTwo(o.alignment())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options.alignment ", o.alignment(), " is not a power of two"));
    }
    options.alignment = o.alignment();
  }
  if (!o.strategy().empty()) options.strategy = o.strategy();
  options.optimize = o.optimize();
  if (o.time_budget_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.time_budget_ms ", o.time_budget_ms(), " is negative"));
  }
  options.time_budget = o.time_budget_ms() == 0
                            ? limits.default_time_budget
                            : std::min(absl::Milliseconds(o.time_budget_ms()),
                                       limits.max_time_budget);
  if (o.has_capacity()) {
    if (o.capacity() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.capacity ", o.capacity(), " must be positive"));
    }
    options.capacity = o.capacity();
  }
  return options;
}

namespace {

planner::Problem BuffersFromProto(
    const google::protobuf::RepeatedPtrField<v1::Buffer>& buffers,
    int64_t default_alignment) {
  planner::Problem problem;
  problem.buffers.reserve(buffers.size());
  for (const v1::Buffer& b : buffers) {
    planner::Buffer out;
    out.name = b.id();
    out.start = b.start();
    out.end = b.end();
    out.size = b.size();
    out.alignment = b.has_alignment() ? b.alignment() : default_alignment;
    if (b.has_fixed_offset()) out.fixed_offset = b.fixed_offset();
    problem.buffers.push_back(std::move(out));
  }
  return problem;
}

absl::Status CheckLimits(const v1::PlanRequest& request, const Limits& limits) {
  const int64_t tensors =
      request.graph().tensors_size() + request.buffers_size();
  if (tensors > limits.max_tensors) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request has ", tensors,
                     " tensors/buffers; this server plans at most ",
                     limits.max_tensors, " per request"));
  }
  if (request.graph().ops_size() > limits.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the graph has ", request.graph().ops_size(),
        " ops; this server plans at most ", limits.max_ops, " per request"));
  }
  return absl::OkStatus();
}

}  // namespace

planner::Graph GraphFromProto(const v1::Graph& graph) {
  planner::Graph g;
  g.name = graph.name();
  g.tensors.reserve(graph.tensors_size());
  for (const v1::Tensor& t : graph.tensors()) {
    g.tensors.push_back({t.name(), t.size_bytes(), t.alignment()});
  }
  g.ops.reserve(graph.ops_size());
  for (const v1::Op& op : graph.ops()) {
    g.ops.push_back({op.name(),
                     {op.inputs().begin(), op.inputs().end()},
                     {op.outputs().begin(), op.outputs().end()}});
  }
  g.inputs.assign(graph.inputs().begin(), graph.inputs().end());
  g.outputs.assign(graph.outputs().begin(), graph.outputs().end());
  return g;
}

absl::StatusOr<PlanInput> FromProto(const v1::PlanRequest& request,
                                    const Limits& limits) {
  const bool has_graph = request.has_graph();
  const bool has_buffers = request.buffers_size() > 0;
  if (has_graph == has_buffers) {
    return absl::InvalidArgumentError(
        has_graph ? "the request has both a graph and buffers; send one"
                  : "the request has neither a graph nor buffers (empty "
                    "graph)");
  }
  if (auto s = CheckLimits(request, limits); !s.ok()) return s;
  absl::StatusOr<planner::PlanOptions> options =
      OptionsFromProto(request.options(), limits);
  if (!options.ok()) return options.status();
  PlanInput input;
  input.options = *std::move(options);
  if (has_graph) {
    input.graph = GraphFromProto(request.graph());
  } else {
    input.buffers =
        BuffersFromProto(request.buffers(), request.options().alignment() != 0
                                                ? request.options().alignment()
                                                : kDefaultAlignment);
  }
  return input;
}

v1::PlanResponse ToProto(const planner::PlanResult& result) {
  v1::PlanResponse response;
  response.set_arena_size_bytes(result.solution.arena_size);
  response.set_lower_bound_bytes(result.lower_bound);
  response.set_naive_bytes(result.naive_bytes);
  response.set_strategy(result.strategy);
  response.set_proven_optimal(result.proven_optimal);
  response.set_efficiency(
      result.lower_bound > 0
          ? static_cast<double>(result.solution.arena_size) / result.lower_bound
          : 1.0);
  const auto& buffers = result.problem.buffers;
  response.mutable_assignments()->Reserve(static_cast<int>(buffers.size()));
  for (size_t i = 0; i < buffers.size(); ++i) {
    v1::Assignment* a = response.add_assignments();
    a->set_name(buffers[i].name);
    a->set_offset(result.solution.offsets[i]);
    a->set_size(buffers[i].size);
    a->set_pool_id(result.pools.pool_of[i]);
    a->set_first_step(buffers[i].start);
    a->set_last_step(buffers[i].end - 1);
    a->set_persistent(buffers[i].persistent);
  }
  std::vector<int> members(result.pools.size.size(), 0);
  for (int p : result.pools.pool_of) ++members[p];
  for (size_t p = 0; p < result.pools.size.size(); ++p) {
    v1::Pool* pool = response.add_pools();
    pool->set_id(static_cast<int>(p));
    pool->set_size_bytes(result.pools.size[p]);
    pool->set_members(members[p]);
  }
  response.set_pool_bytes(result.pools.TotalBytes());
  for (const planner::StageTime& s : result.stages) {
    (*response.mutable_stage_micros())[s.stage] = s.micros;
  }
  return response;
}

planner::PlanResult ResultFromProto(const v1::PlanResponse& response) {
  planner::PlanResult r;
  r.solution.arena_size = response.arena_size_bytes();
  r.lower_bound = response.lower_bound_bytes();
  r.naive_bytes = response.naive_bytes();
  r.strategy = response.strategy();
  r.proven_optimal = response.proven_optimal();
  for (const v1::Assignment& a : response.assignments()) {
    planner::Buffer b;
    b.name = a.name();
    b.start = a.first_step();
    b.end = a.last_step() + 1;
    b.size = a.size();
    b.persistent = a.persistent();
    r.problem.buffers.push_back(std::move(b));
    r.solution.offsets.push_back(a.offset());
    r.pools.pool_of.push_back(a.pool_id());
  }
  for (const v1::Pool& p : response.pools()) {
    r.pools.size.push_back(p.size_bytes());
  }
  // Stages in pipeline order, as the planner reports them.
  for (const char* stage :
       {"liveness", "interference", "pools", "offsets", "verify"}) {
    auto it = response.stage_micros().find(stage);
    if (it != response.stage_micros().end()) {
      r.stages.push_back({stage, it->second});
    }
  }
  return r;
}

absl::StatusOr<planner::PlanResult> PlanToResult(
    const v1::PlanRequest& request, const Limits& limits,
    planner::WorkerPool* pool, const planner::CancelToken* cancel) {
  absl::StatusOr<PlanInput> input = FromProto(request, limits);
  if (!input.ok()) return input.status();
  return input->graph.has_value()
             ? planner::PlanGraph(*input->graph, input->options, pool, cancel)
             : planner::PlanBuffers(*std::move(input->buffers), input->options,
                                    pool, cancel);
}

absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request,
                                      const Limits& limits,
                                      planner::WorkerPool* pool,
                                      const planner::CancelToken* cancel) {
  absl::StatusOr<planner::PlanResult> result =
      PlanToResult(request, limits, pool, cancel);
  if (!result.ok()) return result.status();
  return ToProto(*result);
}

}  // namespace memplan::api
