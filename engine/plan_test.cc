#include "engine/plan.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/emit.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan::engine {
namespace {

using ::testing::HasSubstr;

// The contract's field names, as scripts send them through protobuf's JSON
// mapping.
constexpr char kGraphJson[] = R"({
  "graph": {
    "name": "mlp",
    "tensors": [{"name": "x", "size_bytes": 256}, {"name": "w", "size_bytes": 128},
                {"name": "h", "size_bytes": 512}, {"name": "y", "size_bytes": 256}],
    "ops": [{"name": "fc", "inputs": ["x", "w"], "outputs": ["h"]},
            {"name": "out", "inputs": ["h"], "outputs": ["y"]}],
    "inputs": ["x"], "outputs": ["y"]
  },
  "options": {"alignment": 64, "strategy": "auto"}
})";

// What the Plan RPC answers for `request`.
absl::StatusOr<v1::PlanResponse> PlanToResponse(const v1::PlanRequest& request,
                                                const Limits& limits = {}) {
  return PlanToResponse(request, limits, nullptr, nullptr);
}

v1::PlanRequest Parse(const std::string& json) {
  v1::PlanRequest request;
  auto status = google::protobuf::util::JsonStringToMessage(json, &request);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return request;
}

TEST(PlanTest, PlansAGraphFromContractJson) {
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(Parse(kGraphJson));
  ASSERT_TRUE(r.ok()) << r.status();
  // h (512) beside x at step 0 (x dies after fc) and beside y at step 1
  // (y is born at out): x and y share 256 bytes. The weight w (128) stays
  // in the model.
  EXPECT_EQ(r->lower_bound_bytes(), 768);
  EXPECT_EQ(r->naive_bytes(), 1024);
  EXPECT_EQ(r->arena_size_bytes(), 768);
  EXPECT_EQ(r->weights_bytes(), 128);
  EXPECT_EQ(r->schema_version(), 2);
  ASSERT_EQ(r->assignments_size(), 3);
  EXPECT_EQ(r->assignments(1).name(), "h");
  EXPECT_EQ(r->assignments(1).kind(), "activation");
  EXPECT_EQ(r->assignments(1).first_step(), 0);
  EXPECT_EQ(r->assignments(1).last_step(), 1);
  EXPECT_EQ(r->assignments(1).end_step(), 2);
  EXPECT_EQ(r->assignments(0).end_step(), 1);    // x: to its last use
  EXPECT_EQ(r->assignments(2).first_step(), 1);  // y: from its producer
  EXPECT_EQ(r->assignments(2).end_step(), 2);
  EXPECT_TRUE(r->assignments(0).persistent());
  EXPECT_EQ(r->assignments(0).kind(), "input");
  EXPECT_EQ(r->assignments(2).kind(), "output");
  EXPECT_FALSE(r->assignments(1).persistent());
  ASSERT_EQ(r->unplanned_size(), 1);
  EXPECT_EQ(r->unplanned(0).name(), "w");
  EXPECT_EQ(r->unplanned(0).kind(), "weight");
  EXPECT_EQ(r->unplanned(0).size(), 128);
  EXPECT_EQ(r->pools_size(), 2);  // x and y in one, h in the other
  EXPECT_EQ(r->options().weights(), "exclude");
  EXPECT_EQ(r->options().io(), "arena");
  EXPECT_EQ(r->options().alignment(), 64);
  EXPECT_EQ(r->options().strategy(), "auto");
  EXPECT_TRUE(r->proven_optimal());
  EXPECT_FALSE(r->strategy().empty());
  EXPECT_TRUE(r->stage_micros().contains("liveness"));
  EXPECT_TRUE(r->stage_micros().contains("verify"));
}

TEST(PlanTest, PlansBuffersWithAlignmentAndFixedOffsets) {
  v1::PlanRequest request = Parse(R"({"buffers": [
      {"id": "a", "start": 0, "end": 2, "size": 100, "alignment": 1},
      {"id": "b", "start": 1, "end": 3, "size": 100, "fixed_offset": 128},
      {"id": "c", "start": 2, "end": 4, "size": 50}]})");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->assignments(1).offset(), 128);
  EXPECT_EQ(r->assignments(2).offset() % 64, 0);  // default alignment 64
  EXPECT_EQ(r->assignments(0).last_step(), 1);
  EXPECT_EQ(r->lower_bound_bytes(), 200);
}

// A heuristic named by the request stops at its work cap (16 times the
// first plan's) and the O(n log n) fallback plans instead, saying so: the
// skyline on 40,000 buffers sharing one step ran past 45 s uncapped.
TEST(PlanTest, ANamedHeuristicStopsAtItsWorkCap) {
  v1::PlanRequest request;
  for (int i = 0; i < 40000; ++i) {
    v1::Buffer* b = request.add_buffers();
    b->set_id(absl::StrCat("b", i));
    b->set_start(0);
    b->set_end(1);
    b->set_size(1);
    b->set_alignment(1);
  }
  request.mutable_options()->set_strategy("skyline_area");
  request.set_no_timings(true);
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy(), "sweep_best_fit");
  EXPECT_EQ(r->arena_size_bytes(), 40000);
  EXPECT_THAT(r->warnings(),
              ::testing::Contains(HasSubstr(
                  "strategy skyline_area passed its work cap on this problem "
                  "(40000 buffers); the plan is sweep_best_fit's")));
}

TEST(PlanTest, WeightsInTheArenaAndCallerOwnedIo) {
  v1::PlanRequest request = Parse(kGraphJson);
  request.mutable_options()->set_weights("arena");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  // w (128) for the whole run beside x + h, then h + y.
  EXPECT_EQ(r->arena_size_bytes(), 128 + 768);
  EXPECT_EQ(r->assignments(1).kind(), "weight");
  EXPECT_EQ(r->weights_bytes(), 0);
  // With x kept for the whole run too: all four at step 1, the arena
  // memplan 0.1 planned (inputs and outputs held for the whole run).
  request.mutable_options()->set_io("arena_keep_inputs");
  r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arena_size_bytes(), 1152);
  EXPECT_EQ(r->options().io(), "arena_keep_inputs");
  request.mutable_options()->set_weights("exclude");
  request.mutable_options()->set_io("exclude");
  r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arena_size_bytes(), 512);  // h alone
  EXPECT_EQ(r->unplanned_size(), 3);
  request.mutable_options()->set_io("maybe");
  EXPECT_THAT(std::string(PlanToResponse(request).status().message()),
              HasSubstr("options.io 'maybe' is not \"arena\", "
                        "\"arena_keep_inputs\" or \"exclude\""));
}

TEST(PlanTest, SameRequestSameBytesWithoutTimings) {
  v1::PlanRequest request = Parse(kGraphJson);
  request.set_no_timings(true);
  absl::StatusOr<v1::PlanResponse> a = PlanToResponse(request);
  absl::StatusOr<v1::PlanResponse> b = PlanToResponse(request);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->stage_micros().empty());
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
}

TEST(PlanTest, NoneOrSeveralInputsAreInvalid) {
  EXPECT_THAT(std::string(PlanToResponse(v1::PlanRequest()).status().message()),
              HasSubstr("no graph, buffers or model"));
  v1::PlanRequest both = Parse(kGraphJson);
  both.add_buffers()->set_id("x");
  EXPECT_THAT(std::string(PlanToResponse(both).status().message()),
              HasSubstr("more than one of graph, buffers and model"));
}

TEST(PlanTest, OverTheLimitsIsResourceExhaustedNamingTheLimit) {
  Limits limits;
  limits.max_tensors = 3;
  absl::StatusOr<v1::PlanResponse> r =
      PlanToResponse(Parse(kGraphJson), limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(r.status().message()),
      HasSubstr(
          "at most 3 are planned (max_tensors: a server's --max_tensors)"));
  limits = {};
  limits.max_tensor_refs = 4;
  r = PlanToResponse(Parse(kGraphJson), limits);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("max_tensor_refs"));
}

TEST(PlanTest, BadOptionsAreInvalidBeforeAnyWork) {
  v1::PlanRequest r = Parse(kGraphJson);
  r.mutable_options()->set_alignment(48);
  EXPECT_THAT(std::string(PlanToResponse(r).status().message()),
              HasSubstr("options.alignment 48 is not a power of two"));
  r = Parse(kGraphJson);
  r.mutable_options()->set_capacity(0);
  EXPECT_THAT(std::string(PlanToResponse(r).status().message()),
              HasSubstr("options.capacity 0 must be positive"));
  r = Parse(kGraphJson);
  r.mutable_options()->set_time_budget_ms(-1);
  EXPECT_EQ(PlanToResponse(r).status().code(),
            absl::StatusCode::kInvalidArgument);
  r = Parse(kGraphJson);
  r.mutable_options()->set_strategy(std::string(100000, 'x'));
  absl::Status s = PlanToResponse(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown strategy"));
  EXPECT_LT(s.message().size(), 1000u);  // the name is cut, not echoed whole
  r = Parse(kGraphJson);
  r.add_emit("png");
  EXPECT_THAT(std::string(PlanToResponse(r).status().message()),
              HasSubstr("emit: unknown format 'png'"));
}

TEST(PlanTest, EmitRepeatsAndTooManyEntriesAreInvalidBeforeAnyWork) {
  v1::PlanRequest r = Parse(kGraphJson);
  r.add_emit("svg");
  r.add_emit("c_header");
  r.add_emit("svg");
  absl::Status s = PlanToResponse(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("emit: 'svg' is asked for more than once"));
  r = Parse(kGraphJson);
  r.add_emit("c_header");
  r.add_emit("c-header");  // the same format, spelled the other way
  s = PlanToResponse(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'c_header'"));
  r = Parse(kGraphJson);
  for (int i = 0; i < 800; ++i) r.add_emit("svg");
  s = PlanToResponse(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("800 entries; at most 8"));
  r = Parse(kGraphJson);
  r.add_emit("svg");
  r.add_emit("html");
  r.add_emit("c_header");
  absl::StatusOr<v1::PlanResponse> ok = PlanToResponse(r);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->files_size(), 3);
  EXPECT_EQ(ok->files(0).format(), "svg");
  EXPECT_EQ(ok->files(2).format(), "c_header");
}

TEST(PlanTest, InPlaceOutputsAreReportedInRequestOrderAtTheirInputsOffset) {
  // "h2" is listed before "h" and written in place of it.
  v1::PlanRequest request = Parse(R"({
    "graph": {
      "tensors": [{"name": "x", "size_bytes": 256},
                  {"name": "h2", "size_bytes": 512},
                  {"name": "h", "size_bytes": 512},
                  {"name": "y", "size_bytes": 256}],
      "ops": [{"name": "fc", "inputs": ["x"], "outputs": ["h"]},
              {"name": "relu", "inputs": ["h"], "outputs": ["h2"],
               "in_place": true},
              {"name": "out", "inputs": ["h2"], "outputs": ["y"]}],
      "inputs": ["x"], "outputs": ["y"]}})");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->assignments_size(), 4);
  std::vector<std::string> names;
  for (const v1::Assignment& a : r->assignments()) names.push_back(a.name());
  EXPECT_THAT(names, ::testing::ElementsAre("x", "h2", "h", "y"));
  const v1::Assignment& h2 = r->assignments(1);
  const v1::Assignment& h = r->assignments(2);
  EXPECT_EQ(h2.in_place_of(), "h");
  EXPECT_EQ(h.in_place_of(), "");
  EXPECT_EQ(h2.offset(), h.offset());
  EXPECT_EQ(h2.pool_id(), h.pool_id());
  EXPECT_EQ(h2.first_step(), 1);
  EXPECT_EQ(h2.last_step(), 2);
  // One 512-byte buffer for h and h2, beside x at step 0 and y at step 2:
  // x (read by fc only) and y (born at out) share 256 bytes.
  EXPECT_EQ(r->arena_size_bytes(), 512 + 256);
  // The tensor handed over keeps its own lifetime: h dies at step 1.
  EXPECT_EQ(h.first_step(), 0);
  EXPECT_EQ(h.last_step(), 1);
  EXPECT_EQ(h.end_step(), 2);
}

TEST(PlanTest, MemoryPoolsAreReportedPerPoolAndPerAssignment) {
  v1::PlanRequest request = Parse(R"({
    "buffers": [{"id": "a", "start": 0, "end": 2, "size": 64},
                {"id": "b", "start": 1, "end": 3, "size": 64},
                {"id": "c", "start": 0, "end": 3, "size": 1024}],
    "options": {"alignment": 64,
                "memory_pools": [{"name": "sram", "capacity_bytes": 128},
                                 {"name": "dram"}]}})");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->memory_pools_size(), 2);
  EXPECT_EQ(r->memory_pools(0).name(), "sram");
  EXPECT_EQ(r->memory_pools(0).capacity_bytes(), 128);
  EXPECT_EQ(r->memory_pools(0).arena_size_bytes(), 128);
  EXPECT_EQ(r->memory_pools(0).buffers(), 2);
  EXPECT_EQ(r->memory_pools(1).arena_size_bytes(), 1024);
  EXPECT_EQ(r->arena_size_bytes(), 128 + 1024);
  EXPECT_EQ(r->assignments(0).memory_pool(), "sram");
  EXPECT_EQ(r->assignments(1).memory_pool(), "sram");
  EXPECT_EQ(r->assignments(2).memory_pool(), "dram");
  EXPECT_EQ(r->assignments(2).offset(), 0);  // within dram
  const std::string report = planner::FormatReport(api::ResultFromProto(*r));
  EXPECT_THAT(report, HasSubstr("sram"));
  EXPECT_THAT(report, HasSubstr("unbounded"));
}

TEST(PlanTest, BadMemoryPoolsAreInvalid) {
  v1::PlanRequest request = Parse(kGraphJson);
  request.mutable_options()->add_memory_pools()->set_name("x");
  request.mutable_options()->add_memory_pools()->set_name("x");
  EXPECT_EQ(PlanToResponse(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.mutable_options()->mutable_memory_pools(1)->set_name("y");
  request.mutable_options()->set_capacity(100000);
  absl::Status s = PlanToResponse(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot be combined"));
}

TEST(PlanTest, TfliteModelsReportTheArenaTflmNeedsAndTheBaseline) {
  v1::PlanRequest request;
  request.mutable_model()->set_data(formats::testing::ChainModel().Build());
  request.mutable_model()->set_name("chain.tflite");  // format detected
  request.add_emit("c-header");                       // either spelling
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->runtime_arena_bytes(), 0);
  EXPECT_EQ(r->runtime_arena_bytes() % 16, 0);
  EXPECT_GE(r->runtime_arena_bytes(), r->arena_size_bytes());
  EXPECT_LT(r->runtime_arena_bytes(), r->arena_size_bytes() + 16);
  EXPECT_EQ(r->baseline().strategy(), "tflm_greedy");
  EXPECT_GE(r->baseline().arena_size_bytes(), r->lower_bound_bytes());
  ASSERT_EQ(r->files_size(), 1);
  EXPECT_EQ(r->files(0).format(), "c-header");
  EXPECT_THAT(r->files(0).data(), HasSubstr("TFLM_ARENA_BYTES"));
  // Other inputs need no rounding: the field stays 0.
  absl::StatusOr<v1::PlanResponse> g = PlanToResponse(Parse(kGraphJson));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->runtime_arena_bytes(), 0);
}

// A tensor without data that no op reads or writes is left to TFLite
// Micro by the offline plan, and TFLM places it in its arena all the same
// (400 bytes here, where the plan's tensors take 32): the runtime figure
// counts it, and a warning names it.
TEST(PlanTest, TensorsTflmPlacesItselfCountInTheRuntimeFigure) {
  formats::testing::TfliteBuilder b = formats::testing::ChainModel();
  b.subgraphs[0].Tensor("unused", {100});  // 400 bytes, no data, no op
  v1::PlanRequest request;
  request.mutable_model()->set_data(b.Build());
  request.mutable_model()->set_name("chain.tflite");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->runtime_arena_bytes(), 400);
  EXPECT_EQ(r->runtime_arena_bytes(), r->baseline().arena_size_bytes());
  EXPECT_EQ(r->weights_bytes(), 12);  // w's; 'unused' holds no data
  // Nor is it reported as a weight: an activation memplan leaves to TFLM.
  ASSERT_EQ(r->unplanned_size(), 2);
  for (const v1::UnplannedTensor& u : r->unplanned()) {
    EXPECT_EQ(u.kind(), u.name() == "unused" ? "activation" : "weight")
        << u.name();
  }
  // The C header says the same arena for TFLite Micro.
  request.add_emit("c_header");
  absl::StatusOr<v1::PlanResponse> h = PlanToResponse(request);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->files_size(), 1);
  EXPECT_THAT(h->files(0).data(),
              HasSubstr(absl::StrCat("_TFLM_ARENA_BYTES ",
                                     h->runtime_arena_bytes(), "\n")));
  EXPECT_THAT(r->warnings(),
              ::testing::Contains(HasSubstr(
                  "1 tensor(s) without data that TFLite Micro places itself")));
}

// TFLite models have TFLite Micro's lifetimes by default; keeping the
// inputs keeps the main graph's input to the end of the run, and the
// planned model still carries the plan.
TEST(PlanTest, TfliteInputsAreKeptForTheWholeRunWhenAsked) {
  v1::PlanRequest request;
  request.mutable_model()->set_data(formats::testing::ChainModel().Build());
  request.mutable_model()->set_name("chain.tflite");
  absl::StatusOr<v1::PlanResponse> r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  // Steps: model/inputs, ADD, RELU, model/outputs. x (192 bytes) dies after
  // ADD, so x + a, then a + y: 384 bytes.
  EXPECT_EQ(r->arena_size_bytes(), 384);
  ASSERT_EQ(r->assignments(0).name(), "x");
  EXPECT_EQ(r->assignments(0).end_step(), 2);
  request.mutable_options()->set_io("arena_keep_inputs");
  request.add_emit("tflite");
  r = PlanToResponse(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->options().io(), "arena_keep_inputs");
  EXPECT_EQ(r->assignments(0).kind(), "input");
  EXPECT_EQ(r->assignments(0).end_step(), 4);  // to the end of the run
  EXPECT_EQ(r->arena_size_bytes(), 3 * 192);   // x + a + y at RELU
  // The planned model holds x and y apart, where TFLM's lifetimes let them
  // share memory: offsets of x, w (-1: in the model), a, y.
  ASSERT_EQ(r->files_size(), 1);
  const std::vector<int32_t> offsets =
      formats::testing::DecodeOfflinePlan(r->files(0).data()).offsets;
  ASSERT_EQ(offsets.size(), 4u);
  EXPECT_GE(std::abs(offsets[0] - offsets[3]), 192);
}

// A call whose token has fired stops at the stage it is in: the model's
// import, each emitter (issue 31: they ran on after the deadline).
TEST(PlanTest, ACancelledCallStopsInTheImportAndTheEmitters) {
  base::CancelToken cancelled;
  cancelled.Cancel();
  v1::PlanRequest tflite;
  tflite.mutable_model()->set_data(formats::testing::ChainModel().Build());
  tflite.mutable_model()->set_name("chain.tflite");
  absl::StatusOr<PlanOutcome> imported =
      Plan(tflite, Limits{}, nullptr, &cancelled);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(imported.status().message(), HasSubstr("import cancelled"));
  // Planned, then emitted with a token that has fired.
  const v1::PlanRequest graph = Parse(kGraphJson);
  absl::StatusOr<PlanOutcome> planned = Plan(graph, Limits{}, nullptr, nullptr);
  ASSERT_TRUE(planned.ok()) << planned.status();
  for (const char* format : {"svg", "html", "c_header"}) {
    EXPECT_TRUE(Emit(format, *planned, graph).ok()) << format;
    absl::StatusOr<std::string> file =
        Emit(format, *planned, graph, &cancelled);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(file.status().message(),
                HasSubstr(absl::StrCat("emit ", format, " cancelled")));
  }
}

}  // namespace
}  // namespace memplan::engine
