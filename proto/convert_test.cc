#include "proto/convert.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace memplan::api {
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

v1::PlanRequest Parse(const std::string& json) {
  v1::PlanRequest request;
  auto status = google::protobuf::util::JsonStringToMessage(json, &request);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return request;
}

TEST(ConvertTest, PlansAGraphFromContractJson) {
  absl::StatusOr<v1::PlanResponse> r =
      Plan(Parse(kGraphJson), Limits{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // x, w, y persistent (256+128+256) plus h (512): nothing can share.
  EXPECT_EQ(r->lower_bound_bytes(), 1152);
  EXPECT_EQ(r->naive_bytes(), 1152);
  EXPECT_EQ(r->arena_size_bytes(), 1152);
  ASSERT_EQ(r->assignments_size(), 4);
  EXPECT_EQ(r->assignments(2).name(), "h");
  EXPECT_EQ(r->assignments(2).first_step(), 0);
  EXPECT_EQ(r->assignments(2).last_step(), 1);
  EXPECT_TRUE(r->assignments(0).persistent());
  EXPECT_FALSE(r->assignments(2).persistent());
  EXPECT_EQ(r->pools_size(), 4);
  EXPECT_TRUE(r->proven_optimal());
  EXPECT_FALSE(r->strategy().empty());
  EXPECT_TRUE(r->stage_micros().contains("liveness"));
  EXPECT_TRUE(r->stage_micros().contains("verify"));
}

TEST(ConvertTest, PlansBuffersWithAlignmentAndFixedOffsets) {
  v1::PlanRequest request = Parse(R"({"buffers": [
      {"id": "a", "start": 0, "end": 2, "size": 100, "alignment": 1},
      {"id": "b", "start": 1, "end": 3, "size": 100, "fixed_offset": 128},
      {"id": "c", "start": 2, "end": 4, "size": 50}]})");
  absl::StatusOr<v1::PlanResponse> r =
      Plan(request, Limits{}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->assignments(1).offset(), 128);
  EXPECT_EQ(r->assignments(2).offset() % 64, 0);  // default alignment 64
  EXPECT_EQ(r->assignments(0).last_step(), 1);
  EXPECT_EQ(r->lower_bound_bytes(), 200);
}

TEST(ConvertTest, NeitherOrBothIsInvalid) {
  EXPECT_THAT(std::string(FromProto(v1::PlanRequest(), {}).status().message()),
              HasSubstr("neither a graph nor buffers"));
  v1::PlanRequest both = Parse(kGraphJson);
  both.add_buffers()->set_id("x");
  EXPECT_THAT(std::string(FromProto(both, {}).status().message()),
              HasSubstr("both a graph and buffers"));
}

TEST(ConvertTest, OverTheTensorLimitIsResourceExhausted) {
  Limits limits;
  limits.max_tensors = 3;
  absl::StatusOr<PlanInput> in = FromProto(Parse(kGraphJson), limits);
  EXPECT_EQ(in.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(in.status().message()), HasSubstr("at most 3"));
}

TEST(ConvertTest, BadOptionsAreInvalid) {
  v1::PlanRequest r = Parse(kGraphJson);
  r.mutable_options()->set_alignment(48);
  EXPECT_THAT(std::string(FromProto(r, {}).status().message()),
              HasSubstr("options.alignment 48 is not a power of two"));
  r = Parse(kGraphJson);
  r.mutable_options()->set_capacity(0);
  EXPECT_THAT(std::string(FromProto(r, {}).status().message()),
              HasSubstr("options.capacity 0 must be positive"));
  r = Parse(kGraphJson);
  r.mutable_options()->set_time_budget_ms(-1);
  EXPECT_EQ(FromProto(r, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConvertTest, InPlaceOutputsAreReportedInRequestOrderAtTheirInputsOffset) {
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
  absl::StatusOr<v1::PlanResponse> r =
      Plan(request, Limits{}, nullptr, nullptr);
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
  EXPECT_EQ(r->arena_size_bytes(), 256 + 512 + 256);
  // Back to the planner's view for the report: the alias finds its buffer.
  planner::PlanResult back = ResultFromProto(*r);
  ASSERT_EQ(back.in_place.size(), 1u);
  EXPECT_EQ(back.in_place[0].position, 1);
  EXPECT_EQ(back.problem.buffers[back.in_place[0].buffer].name, "h");
}

TEST(ConvertTest, MemoryPoolsAreReportedPerPoolAndPerAssignment) {
  v1::PlanRequest request = Parse(R"({
    "buffers": [{"id": "a", "start": 0, "end": 2, "size": 64},
                {"id": "b", "start": 1, "end": 3, "size": 64},
                {"id": "c", "start": 0, "end": 3, "size": 1024}],
    "options": {"alignment": 64,
                "memory_pools": [{"name": "sram", "capacity_bytes": 128},
                                 {"name": "dram"}]}})");
  absl::StatusOr<v1::PlanResponse> r =
      Plan(request, Limits{}, nullptr, nullptr);
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
  const std::string report = planner::FormatReport(ResultFromProto(*r));
  EXPECT_THAT(report, HasSubstr("sram"));
  EXPECT_THAT(report, HasSubstr("unbounded"));
}

TEST(ConvertTest, BadMemoryPoolsAreInvalid) {
  v1::PlanRequest request = Parse(kGraphJson);
  request.mutable_options()->add_memory_pools()->set_name("x");
  request.mutable_options()->add_memory_pools()->set_name("x");
  EXPECT_EQ(Plan(request, Limits{}, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.mutable_options()->mutable_memory_pools(1)->set_name("y");
  request.mutable_options()->set_capacity(100000);
  absl::Status s = Plan(request, Limits{}, nullptr, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot be combined"));
}

}  // namespace
}  // namespace memplan::api
