#include "formats/request_json.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;

TEST(RequestJsonTest, ReadsARequestOrABareGraph) {
  absl::StatusOr<v1::PlanRequest> r = ParseRequestJson(
      R"({"tensors": [{"name": "a", "size_bytes": 4}], "ops": []})", "g.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph().tensors(0).name(), "a");
  r = ParseRequestJson(R"({"buffers": [{"id": "a", "size": 4}]})", "r.json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->buffers(0).size(), 4);
  // A key named "ops" deeper down does not make a request a bare graph.
  r = ParseRequestJson(
      R"({"graph": {"ops": [{"name": "x"}]}, "options": {"strategy": "ops"}})",
      "r.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph().ops(0).name(), "x");
}

TEST(RequestJsonTest, AByteOrderMarkIsSkipped) {
  absl::StatusOr<v1::PlanRequest> r = ParseRequestJson(
      "\xef\xbb\xbf{\"buffers\": [{\"id\": \"a\", \"size\": 4}]}", "r.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->buffers(0).size(), 4);
}

TEST(RequestJsonTest, MalformedJsonNamesTheLine) {
  absl::StatusOr<v1::PlanRequest> r = ParseRequestJson(
      "{\n  \"graph\": {\n    \"name\" \"x\"\n  }\n}\n", "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("m.json:3: malformed JSON"));
}

TEST(RequestJsonTest, UnknownFieldIsNamed) {
  absl::StatusOr<v1::PlanRequest> r =
      ParseRequestJson(R"({"graph": {"tensorz": []}})", "u.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tensorz"));
}

TEST(RequestJsonTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<v1::PlanRequest> r = ParseRequestJson(deep, "deep.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("deep.json: JSON nested 100000 levels deep"));
  // Brackets inside strings do not count.
  r = ParseRequestJson(
      absl::StrCat(R"({"graph": {"name": ")", std::string(100, '['),
                   R"(\"", "tensors": []}})"),
      "s.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph().name(), std::string(100, '[') + "\"");
}

TEST(RequestJsonTest, ToJsonIsStableWithSortedMapsAndEveryField) {
  v1::PlanResponse response;
  for (const char* stage : {"verify", "liveness", "pools", "offsets"}) {
    (*response.mutable_stage_micros())[stage] = 7;
  }
  const std::string json = ToJson(response);
  const std::string stages = json.substr(json.find("\"stage_micros\""));
  EXPECT_LT(stages.find("\"liveness\""), stages.find("\"offsets\""));
  EXPECT_LT(stages.find("\"offsets\""), stages.find("\"pools\""));
  EXPECT_LT(stages.find("\"pools\""), stages.find("\"verify\""));
  EXPECT_THAT(json, HasSubstr("\"arena_size_bytes\": \"0\""));
  EXPECT_EQ(json, ToJson(response));
  EXPECT_EQ(json.back(), '\n');
}

// `message` as protobuf's own printer writes it whole, with ToJson's
// options, and the final newline ToJson adds.
std::string ProtobufsOwnJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string whole;
  EXPECT_TRUE(
      google::protobuf::util::MessageToJsonString(message, &whole, options)
          .ok());
  if (whole.empty() || whole.back() != '\n') whole += "\n";
  return whole;
}

TEST(RequestJsonTest, LongListsPrintAsProtobufPrintsTheWholeMessage) {
  // Lists longer than 64 are printed element by element and spliced in:
  // the bytes must be protobuf's own for the whole message.
  v1::PlanResponse response;
  response.set_arena_size_bytes(1 << 20);
  for (int i = 0; i < 200; ++i) {
    v1::Assignment* a = response.add_assignments();
    a->set_name(absl::StrCat("t\"", i, "\n"));
    a->set_offset(64 * i);
    a->set_size(64);
  }
  for (int i = 0; i < 70; ++i) response.add_pools()->set_size_bytes(i);
  response.add_memory_pools();  // short: printed with the rest
  (*response.mutable_stage_micros())["offsets"] = 7;
  response.add_warnings("assignments: []");
  const std::string whole = ProtobufsOwnJson(response);
  const std::string json = ToJson(response);
  EXPECT_EQ(json, whole);
  EXPECT_THAT(json, HasSubstr("\"name\": \"t\\\"199\\n\""));
}

TEST(RequestJsonTest, LongListsPrintTheSameBytesOnThreads) {
  // 5,000 assignments: five chunks of 1,024, the last one short, printed
  // on the caller and three workers, joined in order.
  v1::PlanResponse response;
  for (int i = 0; i < 5000; ++i) {
    v1::Assignment* a = response.add_assignments();
    a->set_name(absl::StrCat("t", i));
    a->set_offset(64 * i);
    a->set_size(64 + i);
  }
  response.add_warnings("after the list");
  const std::string whole = ProtobufsOwnJson(response);
  base::WorkerPool workers(3, 16);
  for (int threads : {1, 2, 4}) {
    const std::string json = ToJson(response, {&workers, threads});
    // Compared by hand: gtest's diff of two 1 MB texts takes minutes.
    const size_t at =
        std::mismatch(json.begin(), json.end(), whole.begin(), whole.end())
            .first -
        json.begin();
    EXPECT_TRUE(json == whole)
        << threads << " threads: " << json.size() << " bytes against "
        << whole.size() << ", first difference at byte " << at << ": "
        << json.substr(at < 60 ? 0 : at - 60, 120);
  }
}

}  // namespace
}  // namespace memplan::formats
