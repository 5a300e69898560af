#include "formats/minimalloc_csv.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;

std::string Error(absl::string_view text) {
  return std::string(ReadMinimallocCsv(text, "b.csv").status().message());
}

TEST(MinimallocCsvTest, ReadsRowsWithAlignmentOneByDefault) {
  absl::StatusOr<MinimallocCsv> csv =
      ReadMinimallocCsv("id,lower,upper,size\n0,0,3,4\n1,3,9,4\n", "x.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  ASSERT_EQ(csv->problem.buffers.size(), 2u);
  const planner::Buffer& b = csv->problem.buffers[1];
  EXPECT_EQ(b.name, "1");
  EXPECT_EQ(b.start, 3);
  EXPECT_EQ(b.end, 9);
  EXPECT_EQ(b.size, 4);
  EXPECT_EQ(b.alignment, 1);
  EXPECT_FALSE(csv->has_alignment);
  EXPECT_FALSE(csv->offsets.has_value());
}

// A spreadsheet's export starts with a UTF-8 byte order mark: not part of
// the first column's name.
TEST(MinimallocCsvTest, AByteOrderMarkIsSkipped) {
  absl::StatusOr<MinimallocCsv> csv =
      ReadMinimallocCsv("\xef\xbb\xbfid,lower,upper,size\n0,0,3,4\n", "x.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->problem.buffers.at(0).size, 4);
}

TEST(MinimallocCsvTest, ColumnsInAnyOrderWithAlignmentAndOffsets) {
  absl::StatusOr<MinimallocCsv> csv = ReadMinimallocCsv(
      "size,id,upper,lower,alignment,offset\n16,a,3,0,16,32\n", "x.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->problem.buffers[0].alignment, 16);
  EXPECT_EQ(csv->problem.buffers[0].size, 16);
  EXPECT_TRUE(csv->has_alignment);
  ASSERT_TRUE(csv->offsets.has_value());
  EXPECT_EQ((*csv->offsets)[0], 32);
}

TEST(MinimallocCsvTest, NegativeAndHugeTimesAreRead) {
  absl::StatusOr<MinimallocCsv> csv = ReadMinimallocCsv(
      "id,lower,upper,size\nx,-1,4611686018427387904,8\n", "x.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->problem.buffers[0].start, -1);
  EXPECT_EQ(csv->problem.buffers[0].end, int64_t{1} << 62);
}

TEST(MinimallocCsvTest, ErrorsNameTheLineTheBufferAndTheColumn) {
  EXPECT_THAT(Error("id,lower,upper,size\n0,0,3,4\n1,x,9,4\n"),
              HasSubstr("b.csv:3: buffer '1': lower 'x' is not an integer"));
  EXPECT_THAT(Error("id,lower,upper,size\nbig,0,3,9223372036854775808\n"),
              HasSubstr("b.csv:2: buffer 'big': size '9223372036854775808' "
                        "is out of range"));
  EXPECT_THAT(Error("id,lower,upper,size\nbig,0,3,9223372036854775807\n"),
              HasSubstr("buffer 'big': size '9223372036854775807' is out of "
                        "range"));
  EXPECT_THAT(Error("id,lower,upper,size\n0,0,3\n"),
              HasSubstr("b.csv:2: expected 4 fields, found 3"));
  EXPECT_THAT(Error("id,lo,upper,size\n"),
              HasSubstr("b.csv:1: unknown column 'lo'"));
  EXPECT_THAT(Error("id,id,upper,size\n"),
              HasSubstr("b.csv:1: duplicate column 'id'"));
  EXPECT_THAT(Error("id,upper,size\n"), HasSubstr("no 'lower' column"));
  EXPECT_THAT(Error("id,lower,upper,size\n"), HasSubstr("no buffers"));
  EXPECT_THAT(Error(""), HasSubstr("no buffers"));
}

// Ids are text: bytes that are not UTF-8 are refused, as in JSON; valid
// text the outputs must escape (U+FFFE, a backslash) is read as it is.
TEST(MinimallocCsvTest, IdsMustBeUtf8) {
  EXPECT_EQ(Error("id,lower,upper,size\nv\xff,0,3,4\n"),
            "b.csv:2: id 'v\\xFF' is not UTF-8 text");
  EXPECT_THAT(Error("id,lower,upper,size\n\xed\xa0\x80,0,3,4\n"),
              HasSubstr("is not UTF-8 text"));
  absl::StatusOr<MinimallocCsv> csv = ReadMinimallocCsv(
      "id,lower,upper,size\nu\xef\xbf\xbe,0,3,4\nw\\xFF,0,3,4\n", "x.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->problem.buffers[0].name, "u\xef\xbf\xbe");
  EXPECT_EQ(csv->problem.buffers[1].name, "w\\xFF");
}

TEST(MinimallocCsvTest, WritesWhatItReadsWithOffsets) {
  const std::string text =
      "id,lower,upper,size,alignment\na,0,3,4,16\nb,1,2,8,1\n";
  absl::StatusOr<MinimallocCsv> csv = ReadMinimallocCsv(text, "x.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(WriteMinimallocCsv(csv->problem, nullptr, true), text);
  planner::Solution solution{{0, 16}, 24};
  const std::string out = WriteMinimallocCsv(csv->problem, &solution, false);
  EXPECT_EQ(out, "id,lower,upper,size,offset\na,0,3,4,0\nb,1,2,8,16\n");
  absl::StatusOr<MinimallocCsv> again = ReadMinimallocCsv(out, "y.csv");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again->offsets, solution.offsets);
}

}  // namespace
}  // namespace memplan::formats
