#include "client/input.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::client {
namespace {

using ::testing::HasSubstr;

TEST(CsvTest, ReadsMiniMallocRowsWithAlignmentOne) {
  absl::StatusOr<Input> in =
      ParseCsv("id,lower,upper,size\n0,0,3,4\n1,3,9,4\n", "x.csv");
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->request.buffers_size(), 2);
  EXPECT_EQ(in->request.buffers(1).id(), "1");
  EXPECT_EQ(in->request.buffers(1).start(), 3);
  EXPECT_EQ(in->request.buffers(1).end(), 9);
  EXPECT_EQ(in->request.buffers(1).alignment(), 1);
  EXPECT_FALSE(in->csv_has_alignment);
}

TEST(CsvTest, ReadsAlignmentColumn) {
  absl::StatusOr<Input> in =
      ParseCsv("id,lower,upper,size,alignment\na,0,3,4,16\n", "x.csv");
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->request.buffers(0).alignment(), 16);
  EXPECT_TRUE(in->csv_has_alignment);
}

TEST(CsvTest, ErrorsNameTheLine) {
  EXPECT_THAT(
      std::string(ParseCsv("id,lower,upper,size\n0,0,3,4\n1,x,9,4\n", "b.csv")
                      .status()
                      .message()),
      HasSubstr("b.csv:3: lower 'x' is not an integer"));
  EXPECT_THAT(
      std::string(
          ParseCsv("id,lower,upper,size\n0,0,3\n", "b.csv").status().message()),
      HasSubstr("b.csv:2: expected 4 fields, found 3"));
  EXPECT_THAT(
      std::string(ParseCsv("id,lo,upper,size\n", "b.csv").status().message()),
      HasSubstr("b.csv:1: unknown column 'lo'"));
  EXPECT_THAT(
      std::string(
          ParseCsv("id,lower,upper,size\n", "b.csv").status().message()),
      HasSubstr("no buffers"));
}

TEST(JsonTest, ReadsRequestOrBareGraph) {
  absl::StatusOr<v1::PlanRequest> r = ParseJsonRequest(
      R"({"tensors": [{"name": "a", "size_bytes": 4}], "ops": []})", "g.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph().tensors(0).name(), "a");
  r = ParseJsonRequest(R"({"buffers": [{"id": "a", "size": 4}]})", "r.json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->buffers(0).size(), 4);
}

TEST(JsonTest, MalformedJsonNamesTheLine) {
  absl::StatusOr<v1::PlanRequest> r = ParseJsonRequest(
      "{\n  \"graph\": {\n    \"name\" \"x\"\n  }\n}\n", "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("m.json:3: malformed JSON"));
}

TEST(JsonTest, UnknownFieldIsNamed) {
  absl::StatusOr<v1::PlanRequest> r =
      ParseJsonRequest(R"({"graph": {"tensorz": []}})", "u.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tensorz"));
}

}  // namespace
}  // namespace memplan::client
