#include "proto/convert.h"

#include <string>
#include <unordered_map>
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
  for (const v1::MemoryPool& m : o.memory_pools()) {
    options.memory_pools.push_back({m.name(), m.capacity_bytes()});
  }
  if (auto s = planner::ValidateMemoryPools(options.memory_pools); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.memory_pools: ", s.message()));
  }
  if (options.capacity.has_value() && !options.memory_pools.empty()) {
    return absl::InvalidArgumentError(
        "options.capacity and options.memory_pools cannot be combined: give "
        "each pool its capacity_bytes");
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
                     {op.outputs().begin(), op.outputs().end()},
                     op.in_place()});
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

namespace {

void SetMemoryPool(const planner::PlanResult& result, int buffer,
                   v1::Assignment* a);

// One assignment per planned buffer, and per tensor written in place (at
// its buffer's offset), in request order.
void AddAssignments(const planner::PlanResult& result,
                    v1::PlanResponse* response) {
  const auto& buffers = result.problem.buffers;
  const auto& in_place = result.in_place;
  const size_t total = buffers.size() + in_place.size();
  response->mutable_assignments()->Reserve(static_cast<int>(total));
  size_t next_buffer = 0, next_alias = 0;
  for (size_t position = 0; position < total; ++position) {
    v1::Assignment* a = response->add_assignments();
    if (next_alias < in_place.size() &&
        in_place[next_alias].position == static_cast<int>(position)) {
      const planner::InPlaceAssignment& t = in_place[next_alias++];
      a->set_name(t.name);
      a->set_offset(result.solution.offsets[t.buffer]);
      a->set_size(t.size);
      a->set_pool_id(result.pools.pool_of[t.buffer]);
      a->set_first_step(t.start);
      a->set_last_step(t.end - 1);
      a->set_in_place_of(t.in_place_of);
      SetMemoryPool(result, t.buffer, a);
      continue;
    }
    const size_t i = next_buffer++;
    a->set_name(buffers[i].name);
    a->set_offset(result.solution.offsets[i]);
    a->set_size(buffers[i].size);
    a->set_pool_id(result.pools.pool_of[i]);
    a->set_first_step(buffers[i].start);
    a->set_last_step(buffers[i].end - 1);
    a->set_persistent(buffers[i].persistent);
    SetMemoryPool(result, static_cast<int>(i), a);
  }
}

// Names the memory pool of planned buffer `buffer`, when there are pools.
void SetMemoryPool(const planner::PlanResult& result, int buffer,
                   v1::Assignment* a) {
  if (result.memory_pool_of.empty()) return;
  a->set_memory_pool(result.memory_pools[result.memory_pool_of[buffer]].name);
}

// One entry per memory pool.
void AddMemoryPools(const planner::PlanResult& result,
                    v1::PlanResponse* response) {
  for (const planner::MemoryPoolPlan& m : result.memory_pools) {
    v1::MemoryPoolPlan* out = response->add_memory_pools();
    out->set_name(m.name);
    out->set_capacity_bytes(m.capacity);
    out->set_arena_size_bytes(m.arena_size);
    out->set_lower_bound_bytes(m.lower_bound);
    out->set_buffers(m.buffers);
    out->set_strategy(m.strategy);
  }
}

}  // namespace

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
  AddAssignments(result, &response);
  AddMemoryPools(result, &response);
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

namespace {

// Points each in-place tensor at the buffer holding it, following chains
// (c in place of b in place of a) whatever their order in the response.
void ResolveInPlaceBuffers(planner::PlanResult* r) {
  std::unordered_map<std::string, int> buffer_of;
  for (size_t i = 0; i < r->problem.buffers.size(); ++i) {
    buffer_of[r->problem.buffers[i].name] = static_cast<int>(i);
  }
  for (size_t pass = 0; pass < r->in_place.size(); ++pass) {
    bool changed = false;
    for (planner::InPlaceAssignment& t : r->in_place) {
      auto it = buffer_of.find(t.in_place_of);
      if (t.buffer >= 0 || it == buffer_of.end()) continue;
      t.buffer = it->second;
      buffer_of[t.name] = t.buffer;
      changed = true;
    }
    if (!changed) break;
  }
}

}  // namespace

namespace {

// The memory pools of a response, and each planned buffer's pool.
void ReadMemoryPools(const v1::PlanResponse& response, planner::PlanResult* r) {
  if (response.memory_pools_size() == 0) return;
  std::unordered_map<std::string, int> index;
  for (const v1::MemoryPoolPlan& m : response.memory_pools()) {
    index[m.name()] = static_cast<int>(r->memory_pools.size());
    r->memory_pools.push_back({m.name(), m.capacity_bytes(),
                               m.arena_size_bytes(), m.lower_bound_bytes(),
                               m.buffers(), m.strategy()});
  }
  for (const v1::Assignment& a : response.assignments()) {
    if (!a.in_place_of().empty()) continue;
    auto it = index.find(a.memory_pool());
    r->memory_pool_of.push_back(it == index.end() ? 0 : it->second);
  }
}

}  // namespace

planner::PlanResult ResultFromProto(const v1::PlanResponse& response) {
  planner::PlanResult r;
  r.solution.arena_size = response.arena_size_bytes();
  r.lower_bound = response.lower_bound_bytes();
  r.naive_bytes = response.naive_bytes();
  r.strategy = response.strategy();
  r.proven_optimal = response.proven_optimal();
  for (int position = 0; position < response.assignments_size(); ++position) {
    const v1::Assignment& a = response.assignments(position);
    if (!a.in_place_of().empty()) {  // shares an earlier buffer's memory
      r.in_place.push_back({a.name(), a.in_place_of(), -1, position,
                            a.first_step(), a.last_step() + 1, a.size()});
      continue;
    }
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
  ResolveInPlaceBuffers(&r);
  ReadMemoryPools(response, &r);
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
