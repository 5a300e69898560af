#include "proto/convert.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "base/text.h"
#include "planner/liveness.h"
#include "planner/strategy.h"

namespace memplan::api {
namespace {

// "auto", empty, or a strategy the planner knows (the registry's check),
// before any work.
absl::Status CheckStrategy(const std::string& name) {
  absl::Status s = planner::CheckStrategyName(name);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("options.strategy: ", s.message()));
}

// The time budget a request asks for, within `budgets`.
absl::StatusOr<absl::Duration> TimeBudget(int64_t ms, const Budgets& budgets) {
  if (ms < 0) return Invalid("options.time_budget_ms ", ms, " is negative");
  if (ms == 0) return budgets.default_budget;
  return std::min(absl::Milliseconds(ms), budgets.max_budget);
}

// "exclude"/"arena" choices of options.weights.
absl::StatusOr<bool> InArena(const std::string& value, const char* field,
                             bool by_default) {
  if (value.empty()) return by_default;
  if (value == "arena") return true;
  if (value == "exclude") return false;
  return Invalid("options.", field, " '", Clip(value),
                 "' is not \"arena\" or \"exclude\"");
}

// options.io: "arena" or empty (the default), "arena_keep_inputs",
// "exclude".
absl::StatusOr<planner::IoPolicy> IoFromProto(const std::string& value) {
  if (value.empty()) return planner::IoPolicy::kRuntime;
  for (planner::IoPolicy p :
       {planner::IoPolicy::kRuntime, planner::IoPolicy::kKeepInputs,
        planner::IoPolicy::kExclude}) {
    if (value == planner::IoPolicyName(p)) return p;
  }
  return Invalid("options.io '", Clip(value),
                 "' is not \"arena\", \"arena_keep_inputs\" or \"exclude\"");
}

// A pool name cut to at most `max` bytes, as the plan names the pool (the
// text rule is applied with the other names, engine/names.h).
std::string CutName(absl::string_view name, size_t max) {
  if (name.size() <= max) return std::string(name);
  return absl::StrCat(name.substr(0, max), "... (", name.size(), " chars)");
}

// Memory pools (planner memory spaces), checked together with capacity.
absl::Status SpacesFromProto(const v1::PlanOptions& o,
                             planner::PlanOptions* options) {
  if (o.memory_pools_size() > planner::kMaxMemorySpaces) {
    return Invalid("options.memory_pools: ", o.memory_pools_size(),
                   " pools; at most ", planner::kMaxMemorySpaces);
  }
  for (const v1::MemoryPool& m : o.memory_pools()) {
    options->memory_spaces.push_back(
        {CutName(m.name(), 256), m.capacity_bytes()});
  }
  if (auto s = planner::ValidateMemorySpaces(options->memory_spaces); !s.ok()) {
    return Invalid("options.memory_pools: ", s.message());
  }
  if (options->capacity.has_value() && !options->memory_spaces.empty()) {
    return Invalid(
        "options.capacity and options.memory_pools cannot be combined: give "
        "each pool its capacity_bytes");
  }
  return absl::OkStatus();
}

}  // namespace

std::string Clip(absl::string_view name, size_t max) {
  if (name.size() <= max) return base::SafeText(name);
  return absl::StrCat(base::SafeText(base::Utf8Prefix(name, max)), "... (",
                      name.size(), " chars)");
}

absl::StatusOr<planner::PlanOptions> OptionsFromProto(const v1::PlanOptions& o,
                                                      const Budgets& budgets) {
  planner::PlanOptions options;
  options.alignment = kDefaultAlignment;
  if (o.alignment() != 0) {
    if (!planner::IsPowerOfTwo(o.alignment()) ||
        o.alignment() > (int64_t{1} << 32)) {
      return Invalid("options.alignment ", o.alignment(),
                     " is not a power of two up to 2^32");
    }
    options.alignment = o.alignment();
  }
  if (auto s = CheckStrategy(o.strategy()); !s.ok()) return s;
  options.strategy = o.strategy().empty() ? "auto" : o.strategy();
  options.optimize = o.optimize();
  absl::StatusOr<absl::Duration> budget =
      TimeBudget(o.time_budget_ms(), budgets);
  if (!budget.ok()) return budget.status();
  options.time_budget = *budget;
  if (o.effort() < 0)
    return Invalid("options.effort ", o.effort(), " is negative");
  options.effort = o.effort();
  if (o.has_capacity()) {
    if (o.capacity() <= 0) {
      return Invalid("options.capacity ", o.capacity(), " must be positive");
    }
    options.capacity = o.capacity();
  }
  absl::StatusOr<bool> weights = InArena(o.weights(), "weights", false);
  if (!weights.ok()) return weights.status();
  options.weights_in_arena = *weights;
  absl::StatusOr<planner::IoPolicy> io = IoFromProto(o.io());
  if (!io.ok()) return io.status();
  options.io = *io;
  if (auto s = SpacesFromProto(o, &options); !s.ok()) return s;
  return options;
}

v1::PlanOptions OptionsToProto(const planner::PlanOptions& options) {
  v1::PlanOptions o;
  o.set_alignment(options.alignment);
  o.set_strategy(options.strategy);
  o.set_time_budget_ms(absl::ToInt64Milliseconds(options.time_budget));
  if (options.capacity.has_value()) o.set_capacity(*options.capacity);
  o.set_optimize(options.optimize);
  for (const planner::MemorySpace& m : options.memory_spaces) {
    v1::MemoryPool* pool = o.add_memory_pools();
    pool->set_name(m.name);
    pool->set_capacity_bytes(m.capacity);
  }
  o.set_weights(options.weights_in_arena ? "arena" : "exclude");
  o.set_io(std::string(planner::IoPolicyName(options.io)));
  o.set_effort(options.effort);
  return o;
}

planner::Graph GraphFromProto(const v1::Graph& graph,
                              const base::CancelToken* cancel) {
  planner::Graph g;
  g.name = graph.name();
  g.tensors.reserve(graph.tensors_size());
  for (const v1::Tensor& t : graph.tensors()) {
    if (base::CancelledAt(cancel, static_cast<int64_t>(g.tensors.size()))) {
      return g;
    }
    g.tensors.push_back(
        {t.name(), t.size_bytes(), t.alignment(), t.constant(), t.variable()});
    g.tensors.back().folded = t.folded();
  }
  g.ops.reserve(graph.ops_size());
  for (const v1::Op& op : graph.ops()) {
    if (base::CancelledAt(cancel, static_cast<int64_t>(g.ops.size()))) {
      return g;
    }
    g.ops.push_back({op.name(),
                     {op.inputs().begin(), op.inputs().end()},
                     {op.outputs().begin(), op.outputs().end()},
                     op.in_place()});
  }
  g.inputs.assign(graph.inputs().begin(), graph.inputs().end());
  g.outputs.assign(graph.outputs().begin(), graph.outputs().end());
  return g;
}

v1::Graph GraphToProto(const planner::Graph& graph) {
  v1::Graph g;
  g.set_name(graph.name);
  for (const planner::Tensor& t : graph.tensors) {
    v1::Tensor* out = g.add_tensors();
    out->set_name(t.name);
    out->set_size_bytes(t.size_bytes);
    out->set_alignment(t.alignment);
    out->set_constant(t.constant);
    out->set_variable(t.variable);
    out->set_folded(t.folded);
  }
  for (const planner::Op& op : graph.ops) {
    v1::Op* out = g.add_ops();
    out->set_name(op.name);
    for (const std::string& name : op.inputs) out->add_inputs(name);
    for (const std::string& name : op.outputs) out->add_outputs(name);
    out->set_in_place(op.in_place);
  }
  for (const std::string& name : graph.inputs) g.add_inputs(name);
  for (const std::string& name : graph.outputs) g.add_outputs(name);
  return g;
}

planner::Problem BuffersFromProto(
    const google::protobuf::RepeatedPtrField<v1::Buffer>& buffers,
    int64_t default_alignment, const base::CancelToken* cancel) {
  planner::Problem problem;
  problem.buffers.reserve(buffers.size());
  for (const v1::Buffer& b : buffers) {
    if (base::CancelledAt(cancel,
                          static_cast<int64_t>(problem.buffers.size()))) {
      return problem;
    }
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

void BuffersToProto(const planner::Problem& problem,
                    google::protobuf::RepeatedPtrField<v1::Buffer>* buffers) {
  buffers->Clear();
  buffers->Reserve(static_cast<int>(problem.buffers.size()));
  for (const planner::Buffer& b : problem.buffers) {
    v1::Buffer* out = buffers->Add();
    out->set_id(b.name);
    out->set_start(b.start);
    out->set_end(b.end);
    out->set_size(b.size);
    out->set_alignment(b.alignment);
    if (b.fixed_offset.has_value()) out->set_fixed_offset(*b.fixed_offset);
  }
}

namespace {

// The assignment for placed tensor `t` of `result`.
void FillAssignment(const planner::PlanResult& result, size_t t,
                    v1::Assignment* a) {
  const planner::TensorPlacement& p = result.tensors[t];
  a->set_name(p.name);
  a->set_offset(result.OffsetOf(t));
  a->set_size(p.size);
  if (!result.shared_objects.object_of.empty()) {
    a->set_pool_id(result.shared_objects.object_of[p.buffer]);
  }
  a->set_first_step(p.start);
  a->set_last_step(p.end - 1);
  a->set_end_step(p.end);
  a->set_persistent(p.kind != planner::TensorKind::kActivation &&
                    p.kind != planner::TensorKind::kScratch);
  // Empty strings are left unset (the same bytes on the wire): each set one
  // costs a string object of its own, on the heap or the arena.
  if (!p.in_place_of.empty()) a->set_in_place_of(p.in_place_of);
  a->set_kind(std::string(planner::TensorKindName(p.kind)));
  if (!result.memory_space_of.empty()) {
    const std::string& space =
        result.memory_spaces[result.memory_space_of[p.buffer]].name;
    if (!space.empty()) a->set_memory_pool(space);
  }
}

// One assignment per planned tensor and one UnplannedTensor per other, in
// request order. The assignments are made on the calling thread and filled
// in chunks on the threads `parallel` gives. False, the list unfinished,
// once `cancel` (may be null) fires.
bool AddTensors(const planner::PlanResult& result,
                const base::CancelToken* cancel,
                const base::Parallelism& parallel, v1::PlanResponse* response) {
  const size_t n = result.tensors.size();
  // Where each chunk's first assignment goes.
  std::vector<int> first(base::ChunkCount(n, kAssignmentChunk) + 1, 0);
  for (size_t t = 0; t < n; ++t) {
    if (base::CancelledAt(cancel, t)) return false;
    const planner::TensorPlacement& p = result.tensors[t];
    if (p.buffer >= 0) {
      ++first[t / kAssignmentChunk + 1];
      continue;
    }
    v1::UnplannedTensor* u = response->add_unplanned();
    u->set_name(p.name);
    u->set_size(p.size);
    u->set_kind(std::string(planner::TensorKindName(p.kind)));
  }
  for (size_t c = 1; c < first.size(); ++c) first[c] += first[c - 1];
  google::protobuf::RepeatedPtrField<v1::Assignment>* list =
      response->mutable_assignments();
  list->Reserve(first.back());
  for (int i = 0; i < first.back(); ++i) {
    if (base::CancelledAt(cancel, static_cast<size_t>(i))) return false;
    list->Add();
  }
  std::atomic<bool> ended{false};
  base::ParallelForRange(parallel, n, kAssignmentChunk,
                         [&](int c, size_t begin, size_t end) {
                           if (ended.load(std::memory_order_relaxed) ||
                               (cancel != nullptr && cancel->Cancelled())) {
                             ended = true;
                             return;
                           }
                           int next = first[c];
                           for (size_t t = begin; t < end; ++t) {
                             if (result.tensors[t].buffer >= 0) {
                               FillAssignment(result, t, list->Mutable(next++));
                             }
                           }
                         });
  return !ended.load();
}

// One entry per memory space ("memory pool" on the wire).
void AddMemorySpaces(const planner::PlanResult& result,
                     v1::PlanResponse* response) {
  for (const planner::MemorySpacePlan& m : result.memory_spaces) {
    v1::MemoryPoolPlan* out = response->add_memory_pools();
    out->set_name(m.name);
    out->set_capacity_bytes(m.capacity);
    out->set_arena_size_bytes(m.arena_size);
    out->set_lower_bound_bytes(m.lower_bound);
    out->set_buffers(m.buffers);
    out->set_strategy(m.strategy);
  }
}

// The shared objects ("pools" on the wire): id, size and member count.
void AddSharedObjects(const planner::PlanResult& result,
                      v1::PlanResponse* response) {
  const planner::SharedObjects& objects = result.shared_objects;
  std::vector<int> members(objects.size.size(), 0);
  for (int o : objects.object_of) ++members[o];
  for (size_t o = 0; o < objects.size.size(); ++o) {
    v1::Pool* pool = response->add_pools();
    pool->set_id(static_cast<int>(o));
    pool->set_size_bytes(objects.size[o]);
    pool->set_members(members[o]);
  }
  response->set_pool_bytes(objects.TotalBytes());
}

}  // namespace

v1::PlanResponse ToProto(const planner::PlanResult& result,
                         const planner::PlanOptions& options,
                         const ResponseOptions& response_options) {
  v1::PlanResponse response;
  ToProto(result, options, response_options, &response);
  return response;
}

void ToProto(const planner::PlanResult& result,
             const planner::PlanOptions& options,
             const ResponseOptions& response_options,
             v1::PlanResponse* response) {
  response->set_schema_version(kSchemaVersion);
  response->set_arena_size_bytes(result.solution.arena_size);
  response->set_lower_bound_bytes(result.lower_bound);
  response->set_unaligned_lower_bound_bytes(result.unaligned_lower_bound);
  response->set_naive_bytes(result.naive_bytes);
  response->set_weights_bytes(result.weights_bytes);
  response->set_strategy(result.strategy);
  response->set_proven_optimal(result.proven_optimal);
  response->set_time_limited(result.time_limited);
  response->set_efficiency(
      result.lower_bound > 0
          ? static_cast<double>(result.solution.arena_size) / result.lower_bound
          : 1.0);
  *response->mutable_options() = OptionsToProto(options);
  if (!AddTensors(result, response_options.cancel, response_options.parallel,
                  response)) {
    return;  // unfinished: the call has ended
  }
  AddMemorySpaces(result, response);
  AddSharedObjects(result, response);
  if (!response_options.no_timings) {
    for (const planner::StageTime& s : result.stages) {
      (*response->mutable_stage_micros())[s.stage] += s.micros;
    }
  }
}

namespace {

planner::TensorKind KindFromName(const std::string& name) {
  for (planner::TensorKind kind :
       {planner::TensorKind::kInput, planner::TensorKind::kOutput,
        planner::TensorKind::kWeight, planner::TensorKind::kVariable,
        planner::TensorKind::kScratch}) {
    if (planner::TensorKindName(kind) == name) return kind;
  }
  return planner::TensorKind::kActivation;
}

// Memory spaces of a response and each planned buffer's space.
void ReadMemorySpaces(const v1::PlanResponse& response,
                      planner::PlanResult* r) {
  if (response.memory_pools_size() == 0) return;
  absl::flat_hash_map<std::string, int> index;
  for (const v1::MemoryPoolPlan& m : response.memory_pools()) {
    index[m.name()] = static_cast<int>(r->memory_spaces.size());
    r->memory_spaces.push_back({m.name(), m.capacity_bytes(),
                                m.arena_size_bytes(), m.lower_bound_bytes(),
                                m.buffers(), m.strategy()});
  }
  for (const v1::Assignment& a : response.assignments()) {
    auto it = index.find(a.memory_pool());
    r->memory_space_of.push_back(it == index.end() ? 0 : it->second);
  }
}

}  // namespace

planner::PlanResult ResultFromProto(const v1::PlanResponse& response) {
  planner::PlanResult r;
  r.solution.arena_size = response.arena_size_bytes();
  r.lower_bound = response.lower_bound_bytes();
  r.unaligned_lower_bound = response.unaligned_lower_bound_bytes();
  r.naive_bytes = response.naive_bytes();
  r.weights_bytes = response.weights_bytes();
  r.strategy = response.strategy();
  r.proven_optimal = response.proven_optimal();
  r.time_limited = response.time_limited();
  r.io = IoFromProto(response.options().io()).value_or(planner::IoPolicy{});
  for (const v1::Assignment& a : response.assignments()) {
    const planner::Step end =
        a.end_step() != 0 ? a.end_step() : a.last_step() + 1;
    planner::Buffer b;
    b.name = a.name();
    b.start = a.first_step();
    b.end = end;
    b.size = a.size();
    b.persistent = a.persistent();
    r.tensors.push_back(
        {a.name(), KindFromName(a.kind()), a.size(), a.first_step(), end,
         static_cast<int>(r.problem.buffers.size()), a.in_place_of()});
    r.problem.buffers.push_back(std::move(b));
    r.solution.offsets.push_back(a.offset());
    r.shared_objects.object_of.push_back(a.pool_id());
  }
  for (const v1::UnplannedTensor& u : response.unplanned()) {
    r.tensors.push_back(
        {u.name(), KindFromName(u.kind()), u.size(), 0, 0, -1, ""});
  }
  for (const v1::Pool& p : response.pools()) {
    r.shared_objects.size.push_back(p.size_bytes());
  }
  ReadMemorySpaces(response, &r);
  // ("interference": what servers built before 2026-11-29 report.)
  for (const char* stage : {"liveness", "prepare", "interference", "pools",
                            "offsets", "search", "verify"}) {
    auto it = response.stage_micros().find(stage);
    if (it != response.stage_micros().end()) {
      r.stages.push_back({stage, it->second});
    }
  }
  return r;
}

}  // namespace memplan::api
