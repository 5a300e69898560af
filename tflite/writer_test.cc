#include "tflite/writer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "proto/convert.h"
#include "tflite/model.h"
#include "tflite/reader.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan::formats {
namespace {

namespace ts = ::memplan::tflite_schema;
using testing::ChainModel;
using testing::DecodedPlan;
using testing::DecodeOfflinePlan;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::TfliteBuilder;

const std::vector<int32_t> kOffsets = {0, -1, 256, 0};

std::string Write(const std::string& in, const std::vector<int32_t>& offsets) {
  absl::StatusOr<std::string> out = WriteOfflinePlan(in, "m.tflite", offsets);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

// Data of buffer `b` of a model, and where it starts in the file.
std::string BufferData(const std::string& bytes, int b, size_t* at = nullptr) {
  const ts::Buffer* buffer = ts::GetModel(bytes.data())->buffers()->Get(b);
  if (buffer->data() == nullptr) return "";
  const char* p = reinterpret_cast<const char*>(buffer->data()->data());
  if (at != nullptr) *at = static_cast<size_t>(p - bytes.data());
  return std::string(p, buffer->data()->size());
}

TEST(TfliteWriterTest, AddsThePlanAndKeepsEverythingElse) {
  TfliteBuilder b = ChainModel();
  b.metadata = {{"min_runtime_version", "1.5.0"}};
  b.signature = {{"input", 0}};
  const std::string in = b.Build();
  const std::string out = Write(in, kOffsets);
  ASSERT_TRUE(TfliteModel::Parse(out, "out").ok());  // the verifier passes
  const DecodedPlan plan = DecodeOfflinePlan(out);
  EXPECT_EQ(plan.entries, 1);
  EXPECT_EQ(plan.version, 1);
  EXPECT_EQ(plan.subgraphs, 1);
  EXPECT_EQ(plan.count, 4);
  EXPECT_THAT(plan.offsets, ElementsAreArray(kOffsets));

  const ts::Model* a = ts::GetModel(in.data());
  const ts::Model* z = ts::GetModel(out.data());
  EXPECT_EQ(z->description()->str(), a->description()->str());
  EXPECT_EQ(z->version(), a->version());
  ASSERT_EQ(z->subgraphs()->size(), 1u);
  const auto* ta = a->subgraphs()->Get(0)->tensors();
  const auto* tz = z->subgraphs()->Get(0)->tensors();
  ASSERT_EQ(tz->size(), ta->size());
  for (size_t t = 0; t < ta->size(); ++t) {
    EXPECT_EQ(tz->Get(t)->name()->str(), ta->Get(t)->name()->str());
    EXPECT_EQ(tz->Get(t)->buffer(), ta->Get(t)->buffer());
  }
  ASSERT_EQ(z->buffers()->size(), a->buffers()->size() + 1);
  for (size_t i = 0; i < a->buffers()->size(); ++i) {
    size_t pos_in = 0, pos_out = 0;
    EXPECT_EQ(BufferData(out, static_cast<int>(i), &pos_out),
              BufferData(in, static_cast<int>(i), &pos_in));
    EXPECT_EQ(pos_out % 64, pos_in % 64) << "buffer " << i;
  }
  ASSERT_EQ(z->metadata()->size(), 2u);
  EXPECT_EQ(z->metadata()->Get(0)->name()->str(), "min_runtime_version");
  EXPECT_EQ(BufferData(out, z->metadata()->Get(0)->buffer()), "1.5.0");
  ASSERT_EQ(z->signature_defs()->size(), 1u);
  EXPECT_EQ(z->signature_defs()->Get(0)->inputs()->Get(0)->name()->str(),
            "input");
}

TEST(TfliteWriterTest, AnExistingEntryIsReplacedNotRepeated) {
  TfliteBuilder b = ChainModel();
  b.metadata = {{"OfflineMemoryAllocation", std::string(12, '\1')},
                {"other", "x"},
                {"OfflineMemoryAllocation", std::string(8, '\2')}};
  const std::string out = Write(b.Build(), kOffsets);
  const DecodedPlan plan = DecodeOfflinePlan(out);
  EXPECT_EQ(plan.entries, 1);
  EXPECT_THAT(plan.offsets, ElementsAreArray(kOffsets));
  const ts::Model* z = ts::GetModel(out.data());
  ASSERT_EQ(z->metadata()->size(), 2u);
  EXPECT_EQ(z->metadata()->Get(0)->name()->str(), "OfflineMemoryAllocation");
  EXPECT_EQ(z->metadata()->Get(1)->name()->str(), "other");
}

TEST(TfliteWriterTest, WritingAPlannedModelAgainIsInPlace) {
  const std::string once = Write(ChainModel().Build(), kOffsets);
  EXPECT_EQ(Write(once, kOffsets), once);
  const std::vector<int32_t> other = {64, -1, 0, 64};
  const std::string changed = Write(once, other);
  EXPECT_EQ(changed.size(), once.size());
  EXPECT_THAT(DecodeOfflinePlan(changed).offsets, ElementsAreArray(other));
}

TEST(TfliteWriterTest, ABufferATensorUsesIsNeverOverwritten) {
  TfliteBuilder b = ChainModel();
  // w's data has the plan's length, and an entry points at its buffer.
  b.subgraphs[0].tensors[1].data = std::string(28, '\7');
  b.subgraphs[0].tensors[1].shape = {7};
  b.metadata_refs = {{"OfflineMemoryAllocation", 1}};
  const std::string out = Write(b.Build(), kOffsets);
  EXPECT_EQ(BufferData(out, 1), std::string(28, '\7'));
  EXPECT_THAT(DecodeOfflinePlan(out).offsets, ElementsAreArray(kOffsets));
}

TEST(TfliteWriterTest, WrongCountOrBadModelIsInvalid) {
  absl::StatusOr<std::string> out =
      WriteOfflinePlan(ChainModel().Build(), "m", {0, 1});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("the model has 4 tensors"));
  EXPECT_EQ(WriteOfflinePlan("junk", "m", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TfliteWriterTest, DataPastTheFlatbufferMovesWithIt) {
  TfliteBuilder b = ChainModel();
  b.subgraphs[0].tensors[1].data.clear();
  b.subgraphs[0].tensors[1].external = "external weights";
  const std::string in = b.Build();
  const std::string out = Write(in, kOffsets);
  for (const std::string* bytes : {&in, &out}) {
    absl::StatusOr<TfliteModel> m = TfliteModel::Parse(*bytes, "m");
    ASSERT_TRUE(m.ok()) << m.status();
    const ts::Buffer* buffer = m->model().buffers()->Get(1);
    ASSERT_GT(buffer->offset(), 1u);
    EXPECT_EQ(bytes->substr(buffer->offset(), buffer->size()),
              "external weights");
  }
}

TEST(TfliteWriterTest, FieldsTheSchemaDoesNotKnowAreKept) {
  TfliteBuilder b = ChainModel();
  b.subgraphs[0].tensors[2].extra = {{12, 0xABCD}};
  const std::string out = Write(b.Build(), kOffsets);
  const ts::Tensor* t =
      ts::GetModel(out.data())->subgraphs()->Get(0)->tensors()->Get(2);
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(t);
  EXPECT_EQ(table->GetField<uint32_t>(flatbuffers::FieldIndexToOffset(12), 0),
            0xABCDu);
}

TEST(TfliteWriterTest, ANewerRootTableIsRefusedUnlessWrittenInPlace) {
  TfliteBuilder b = ChainModel();
  b.model_extra = {{9, 5}};
  absl::StatusOr<std::string> out = WriteOfflinePlan(b.Build(), "m", kOffsets);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("field 9"));
  b.metadata = {{"OfflineMemoryAllocation", std::string(28, '\0')}};
  const std::string in_place = Write(b.Build(), kOffsets);
  EXPECT_THAT(DecodeOfflinePlan(in_place).offsets, ElementsAreArray(kOffsets));
}

TEST(TfliteWriterTest, AModelWithoutBuffersGetsASentinelFirst) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<ts::Tensor>> tensors;
  for (const char* name : {"x", "y"}) {
    tensors.push_back(ts::CreateTensor(fbb, fbb.CreateVector<int32_t>({4}),
                                       ts::TensorType_FLOAT32, 0,
                                       fbb.CreateString(name)));
  }
  std::vector<flatbuffers::Offset<ts::OperatorCode>> codes = {
      ts::CreateOperatorCode(fbb, ts::BuiltinOperator_RELU, 0, 1,
                             ts::BuiltinOperator_RELU)};
  std::vector<flatbuffers::Offset<ts::Operator>> ops = {ts::CreateOperator(
      fbb, 0, fbb.CreateVector<int32_t>({0}), fbb.CreateVector<int32_t>({1}))};
  std::vector<flatbuffers::Offset<ts::SubGraph>> graphs = {ts::CreateSubGraph(
      fbb, fbb.CreateVector(tensors), fbb.CreateVector<int32_t>({0}),
      fbb.CreateVector<int32_t>({1}), fbb.CreateVector(ops))};
  ts::FinishModelBuffer(fbb, ts::CreateModel(fbb, 3, fbb.CreateVector(codes),
                                             fbb.CreateVector(graphs)));
  const std::string in(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                       fbb.GetSize());
  ASSERT_EQ(ts::GetModel(in.data())->buffers(), nullptr);
  const std::string out = Write(in, {0, 16});
  EXPECT_EQ(ts::GetModel(out.data())->buffers()->size(), 2u);
  EXPECT_EQ(BufferData(out, 0), "");
  absl::StatusOr<ImportedModel> m = ImportTflite(out, "m", {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->stats.weights, 0);  // no tensor took the plan as data
  EXPECT_THAT(DecodeOfflinePlan(out).offsets, ElementsAreArray({0, 16}));
}

absl::StatusOr<planner::PlanResult> Plan(const ImportedModel& m,
                                         bool weights_in_arena) {
  planner::PlanOptions options;
  options.alignment = 16;
  options.weights_in_arena = weights_in_arena;
  return planner::PlanGraph(api::GraphFromProto(*m.graph), options, nullptr,
                            nullptr);
}

TEST(TfliteWriterTest, ConstantsAreOnlineEvenWhenPlannedInTheArena) {
  const std::string in = ChainModel().Build();
  absl::StatusOr<ImportedModel> m = ImportTflite(in, "m", {});
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<planner::PlanResult> plan = Plan(*m, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->OffsetOf(1), 0);  // w is in the arena
  absl::StatusOr<std::vector<int32_t>> offsets = OfflinePlanOffsets(*m, *plan);
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_EQ((*offsets)[1], -1);
  EXPECT_EQ((*offsets)[0], plan->OffsetOf(0));
  EXPECT_EQ((*offsets)[3], plan->OffsetOf(3));
  planner::PlanResult pools = *plan;
  pools.memory_spaces.push_back({});
  EXPECT_EQ(OfflinePlanOffsets(*m, pools).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// TFLite Micro allocates every tensor from the shape stored in the file
// and never resizes: a plan made with another batch (--dim batch=1 for a
// stored [8, 16]) would put its 512-byte tensors 64 bytes apart, live
// together. Such a plan is refused for the file; at the stored batch (or
// without --dim) it is written.
TEST(TfliteWriterTest, APlanOfOtherShapesThanTheFileSaysIsRefused) {
  TfliteBuilder b;
  auto& g = b.Subgraph("main");
  const int x = g.Tensor("x", {8, 16});
  const int h = g.Tensor("h", {8, 16});
  const int y = g.Tensor("y", {8, 16});
  for (int t : {x, h, y}) g.tensors[t].signature = {-1, 16};
  g.Op(ts::BuiltinOperator_RELU, {x}, {h});
  g.Op(ts::BuiltinOperator_RELU, {h}, {y});
  g.inputs = {x};
  g.outputs = {y};
  const std::string in = b.Build();
  for (int64_t batch : {1, 8}) {
    SCOPED_TRACE(batch);
    ModelOptions options;
    options.dims = {{"batch", batch}};
    absl::StatusOr<ImportedModel> m = ImportTflite(in, "m", options);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<planner::PlanResult> plan = Plan(*m, false);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::vector<int32_t>> offsets =
        OfflinePlanOffsets(*m, *plan);
    if (batch == 8) {
      EXPECT_TRUE(offsets.ok()) << offsets.status();
      continue;
    }
    EXPECT_EQ(offsets.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(offsets.status().message(),
                HasSubstr("tensor 'x' is planned at 64 bytes, but TFLite "
                          "Micro allocates 512 from the shape stored in the "
                          "file"));
  }
}

// A Vela model whose kept tensors reach past its scratch tensor's shape:
// the block memplan plans grows past that shape (TFLM allocates the tensor,
// the kept tensors stay at Vela's offsets), and the file is written all the
// same (the stored-shape check is for the tensors TFLM sizes itself).
TEST(TfliteWriterTest, AGrownVelaBlockIsWritten) {
  testing::TfliteBuilder b = testing::EthosUModel(false);
  std::vector<int32_t> words = {0, 1, 7};
  std::vector<int32_t> offsets = testing::VelaOffsets();
  offsets[5] = testing::kVelaScratch;  // y past the scratch tensor's end
  words.insert(words.end(), offsets.begin(), offsets.end());
  b.metadata = {{"OfflineMemoryAllocation", testing::Int32Words(words)}};
  const std::string in = b.Build();
  absl::StatusOr<ImportedModel> m = ImportTflite(in, "m", {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_THAT(m->warnings, ::testing::Contains(HasSubstr("grown from")));
  absl::StatusOr<planner::PlanResult> plan = Plan(*m, false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<std::vector<int32_t>> out = OfflinePlanOffsets(*m, *plan);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[5] - (*out)[3], testing::kVelaScratch);  // y: kept
}

// TFLM takes an offline offset as it is and aligns its own buffers to 16:
// a plan made with --alignment 1 whose tensor lands off 16 is refused.
TEST(TfliteWriterTest, OffsetsOffTflmsAlignmentAreRefused) {
  TfliteBuilder b;
  auto& g = b.Subgraph("main");
  const int x = g.Tensor("x", {5}, ts::TensorType_INT8);
  const int h = g.Tensor("h", {5}, ts::TensorType_INT8);
  const int y = g.Tensor("y", {5}, ts::TensorType_INT8);
  g.Op(ts::BuiltinOperator_RELU, {x}, {h});
  g.Op(ts::BuiltinOperator_RELU, {h}, {y});
  g.inputs = {x};
  g.outputs = {y};
  const std::string in = b.Build();
  absl::StatusOr<ImportedModel> m = ImportTflite(in, "m", {});
  ASSERT_TRUE(m.ok()) << m.status();
  planner::PlanOptions options;
  options.alignment = 1;
  absl::StatusOr<planner::PlanResult> plan = planner::PlanGraph(
      api::GraphFromProto(*m->graph), options, nullptr, nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  bool off_alignment = false;
  for (size_t t = 0; t < plan->tensors.size(); ++t) {
    off_alignment = off_alignment || plan->OffsetOf(t) % 16 != 0;
  }
  ASSERT_TRUE(off_alignment);  // x and h live together: one is at 5
  absl::StatusOr<std::vector<int32_t>> offsets = OfflinePlanOffsets(*m, *plan);
  EXPECT_EQ(offsets.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(offsets.status().message(),
              HasSubstr("not a multiple of 16 (TFLite Micro's buffer "
                        "alignment): plan with --alignment 16"));
  EXPECT_TRUE(OfflinePlanOffsets(*m, *Plan(*m, false)).ok());
}

// A token that has fired stops the planned model before it is written or
// read back: DEADLINE_EXCEEDED.
TEST(TfliteWriterTest, EmittingStopsWhenTheCallEnds) {
  const std::string in = ChainModel().Build();
  absl::StatusOr<ImportedModel> m = ImportTflite(in, "m", {});
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<planner::PlanResult> plan = Plan(*m, false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  base::CancelToken token;
  EXPECT_TRUE(EmitPlannedTflite(*m, *plan, &token).ok());
  token.Cancel();
  EXPECT_EQ(EmitPlannedTflite(*m, *plan, &token).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TfliteWriterTest, PlanningTheEmittedModelGivesTheSameFile) {
  const std::string in = ChainModel().Build();
  std::string previous = in;
  std::vector<std::string> files;
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<ImportedModel> m = ImportTflite(previous, "m", {});
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<planner::PlanResult> plan = Plan(*m, false);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::string> out = EmitPlannedTflite(*m, *plan);
    ASSERT_TRUE(out.ok()) << out.status();
    files.push_back(*out);
    previous = *out;
  }
  EXPECT_NE(files[0], in);
  EXPECT_EQ(files[1], files[0]);
  EXPECT_EQ(files[2], files[0]);
}

// The header TFLite Micro's memory_management.md (tflite-micro) documents,
// and Vela writes: [version, number of subgraphs, N]. TFLM reads N only;
// memplan writes version 1 and the subgraph count, and reads any header
// back: its own, Vela's (version 0), one whose word 1 is a subgraph index.
TEST(TfliteWriterTest, HeaderIsVersionSubgraphCountAndTensorCount) {
  TfliteBuilder b = ChainModel();
  testing::TestSubgraph& other = b.Subgraph("other");
  const int t = other.Tensor("t", {4});
  other.inputs = {t};
  other.outputs = {t};
  const std::string out = Write(b.Build(), {0, -1, 256, 0, 512});
  const DecodedPlan plan = DecodeOfflinePlan(out);
  EXPECT_EQ(plan.version, kOfflinePlanVersion);
  EXPECT_EQ(plan.subgraphs, 2);
  EXPECT_EQ(plan.count, 5);
  absl::StatusOr<TfliteModel> m = TfliteModel::Parse(out, "m");
  ASSERT_TRUE(m.ok()) << m.status();
  const TfliteOfflinePlan read = m->OfflinePlan();
  EXPECT_EQ(read.entries, 1);
  EXPECT_TRUE(read.usable);
  EXPECT_EQ(read.version, 1);
  EXPECT_EQ(read.subgraphs, 2);
  EXPECT_THAT(read.offsets, ElementsAreArray({0, -1, 256, 0, 512}));

  for (const std::vector<int32_t>& header :
       {std::vector<int32_t>{0, 1, 4}, std::vector<int32_t>{1, 0, 4}}) {
    TfliteBuilder vela = ChainModel();
    std::vector<int32_t> words = header;
    words.insert(words.end(), kOffsets.begin(), kOffsets.end());
    vela.metadata = {{"OfflineMemoryAllocation", testing::Int32Words(words)}};
    const std::string bytes = vela.Build();
    absl::StatusOr<TfliteModel> v = TfliteModel::Parse(bytes, "v");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->OfflinePlan().usable);
    EXPECT_EQ(v->OfflinePlan().version, header[0]);
    EXPECT_EQ(v->OfflinePlan().subgraphs, header[1]);
    EXPECT_THAT(v->OfflinePlan().offsets, ElementsAreArray(kOffsets));
    // Planned again, the header becomes memplan's; the entry is reused.
    const DecodedPlan again = DecodeOfflinePlan(Write(bytes, kOffsets));
    EXPECT_EQ(again.entries, 1);
    EXPECT_EQ(again.version, 1);
    EXPECT_EQ(again.subgraphs, 1);
  }
  TfliteBuilder wrong = ChainModel();
  wrong.metadata = {
      {"OfflineMemoryAllocation", testing::Int32Words({0, 1, 9, 0, 0})}};
  const std::string wrong_bytes = wrong.Build();
  absl::StatusOr<TfliteModel> w = TfliteModel::Parse(wrong_bytes, "w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->OfflinePlan().present);
  EXPECT_FALSE(w->OfflinePlan().usable);           // N is not the tensor count
  const std::string plain = ChainModel().Build();  // outlives the view
  absl::StatusOr<TfliteModel> none = TfliteModel::Parse(plain, "n");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->OfflinePlan().entries, 0);
  EXPECT_FALSE(none->OfflinePlan().present);
}

}  // namespace
}  // namespace memplan::formats
