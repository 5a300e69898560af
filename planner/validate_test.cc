#include "planner/validate.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::planner {
namespace {

using ::testing::HasSubstr;

TEST(ValidateProblemTest, AcceptsAValidList) {
  Problem p;
  p.buffers = {{"0", 0, 2, 10}, {"1", 1, 3, 20, 4, Offset{8}}};
  EXPECT_TRUE(ValidateProblem(p).ok());
}

TEST(ValidateProblemTest, NamesTheBadBuffer) {
  auto error = [](Buffer b) {
    Problem p;
    p.buffers = {{"ok", 0, 1, 8}, b};
    return std::string(ValidateProblem(p).message());
  };
  EXPECT_THAT(error({"x", 3, 3, 8}),
              HasSubstr("buffer 'x' has start 3 >= end 3"));
  EXPECT_THAT(error({"x", -1, 3, 8}),
              HasSubstr("buffer 'x' has negative start"));
  EXPECT_THAT(error({"x", 0, 3, 0}), HasSubstr("buffer 'x' has size 0"));
  EXPECT_THAT(error({"x", 0, 3, 8, 3}),
              HasSubstr("buffer 'x' alignment 3 is not a power of two"));
  EXPECT_THAT(error({"x", 0, 3, 8, 4, Offset{6}}),
              HasSubstr("buffer 'x' fixed_offset 6 is not a multiple"));
  EXPECT_THAT(error({"ok", 0, 3, 8}), HasSubstr("duplicate buffer id 'ok'"));
  EXPECT_THAT(error({"", 0, 3, 8}), HasSubstr("buffer #1 has no id"));
}

TEST(ValidateProblemTest, RejectsEmptyList) {
  EXPECT_EQ(ValidateProblem(Problem{}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateBuffersTest, AcceptsEmptyAndUnnamedButNamesTheBadOne) {
  EXPECT_TRUE(ValidateBuffers(Problem{}).ok());
  Problem p;
  p.buffers = {{"", 0, 2, 10}, {"", 1, 3, 20}};
  EXPECT_TRUE(ValidateBuffers(p).ok());
  p.buffers[1].size = -4;
  EXPECT_THAT(std::string(ValidateBuffers(p).message()),
              HasSubstr("buffer #1 has size -4"));
}

TEST(ValidateBuffersTest, SizesSummingPast2To62AreRefused) {
  Problem p;
  p.buffers = {
      {"a", 0, 1, Bytes{1} << 61}, {"b", 0, 1, Bytes{1} << 61}, {"c", 0, 1, 1}};
  EXPECT_THAT(std::string(ValidateBuffers(p).message()),
              HasSubstr("sizes overflow 64 bits at buffer 'c'"));
  p.buffers.pop_back();
  EXPECT_TRUE(ValidateBuffers(p).ok());
}

TEST(ValidateBuffersTest, FixedOffsetPast2To62IsRefused) {
  Problem p;
  p.buffers = {{"a", 0, 1, 8, 8, Offset{Bytes{1} << 62}}};
  EXPECT_THAT(std::string(ValidateBuffers(p).message()),
              HasSubstr("buffer 'a' fixed_offset"));
  p.buffers[0].fixed_offset = Offset{-8};
  EXPECT_THAT(std::string(ValidateBuffers(p).message()),
              HasSubstr("negative fixed_offset -8"));
}

TEST(ValidateTest, Alignments) {
  EXPECT_TRUE(IsPowerOfTwo(1));
  EXPECT_TRUE(IsPowerOfTwo(Bytes{1} << 62));
  EXPECT_FALSE(IsPowerOfTwo(0));
  EXPECT_FALSE(IsPowerOfTwo(-4));
  EXPECT_FALSE(IsPowerOfTwo(12));
  EXPECT_TRUE(IsValidAlignment(kMaxAlignment));
  EXPECT_FALSE(IsValidAlignment(kMaxAlignment * 2));
}

}  // namespace
}  // namespace memplan::planner
