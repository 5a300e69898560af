#include "planner/validate.h"

#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "base/worker_pool.h"
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
  EXPECT_THAT(error({"x", -(Step{1} << 62) - 1, 3, 8}),
              HasSubstr("buffer 'x' has start -4611686018427387905 and end 3; "
                        "steps must lie within +-2^62"));
  EXPECT_THAT(error({"x", -(Step{1} << 62), Step{1} << 62, 8}),
              HasSubstr("a lifetime may span at most 2^62 steps"));
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

TEST(ValidateProblemTest, AcceptsNegativeAndHugeSteps) {
  // MiniMalloc's CSV allows any integer lifetimes (a SOMAS trace starts
  // buffers at -1); steps up to 2^62 and lifetimes 2^62 long are fine.
  Problem p;
  p.buffers = {{"a", -1, 3, 8},
               {"b", -(Step{1} << 62), 0, 8},
               {"c", 0, Step{1} << 62, 8},
               {"d", (Step{1} << 62) - 1, Step{1} << 62, 8}};
  EXPECT_TRUE(ValidateProblem(p).ok()) << ValidateProblem(p);
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

TEST(ValidateProblemTest, OverlappingPinsAreNamedTogether) {
  Problem p;
  // a and b overlap in time and bytes; c sits on a's bytes after a died.
  p.buffers = {{"a", 0, 4, 64, 1, Offset{0}},
               {"c", 4, 6, 64, 1, Offset{0}},
               {"b", 2, 5, 64, 1, Offset{32}}};
  absl::Status s = ValidateProblem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("buffers 'a' and 'b' are pinned to overlapping bytes"));
  p.buffers[2].fixed_offset = Offset{64};  // now b sits just above a and c
  EXPECT_TRUE(ValidateProblem(p).ok());
  p.buffers[2].fixed_offset = Offset{63};
  EXPECT_FALSE(ValidateProblem(p).ok());  // one byte under c's bytes... and a's
}

TEST(ValidateProblemTest, PinsPastTheCapacityAreTheUsersError) {
  Problem p;
  p.buffers = {{"a", 0, 4, 64, 1, Offset{100}}};
  p.capacity = 128;
  EXPECT_THAT(std::string(ValidateProblem(p).message()),
              HasSubstr("buffer 'a' is pinned at 100 and ends past the "
                        "capacity 128"));
  p.capacity = 164;
  EXPECT_TRUE(ValidateProblem(p).ok());
}

TEST(ValidateProblemTest, LongNamesAreCut) {
  Problem p;
  p.buffers = {{std::string(100000, 'x'), 3, 1, 8}};
  const absl::Status s = ValidateProblem(p);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(100000 chars)"));
  EXPECT_LT(s.message().size(), 300u);
}

constexpr int kLong = 200000;

// A valid list of kLong buffers named b0, b1, ...
Problem LongList() {
  Problem p;
  for (int i = 0; i < kLong; ++i) {
    p.buffers.push_back({"b" + std::to_string(i), i, i + 2, 8});
  }
  return p;
}

// ValidateProblem's message for `p` alone and on workers, which must agree.
std::string AnswerOnAnyThreads(const Problem& p) {
  base::WorkerPool pool(3, 64);
  std::vector<std::string> answers;
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    answers.push_back(std::string(ValidateProblem(p, {workers, 4}).message()));
  }
  EXPECT_EQ(answers[0], answers[1]);
  return answers[0];
}

// Lists long enough to be checked in buckets (on workers or not) name
// the first bad name in list order, as the one pass does.
TEST(ValidateProblemTest, LongListsNameTheFirstBadName) {
  const Problem valid = LongList();
  EXPECT_EQ(AnswerOnAnyThreads(valid), "");
  Problem p = valid;
  p.buffers[180000].name = "b3";
  p.buffers[150000].name = "b7";
  p.buffers[160000].name = "";
  EXPECT_EQ(AnswerOnAnyThreads(p), "duplicate buffer id 'b7'");
  p.buffers[140000].name = "";
  EXPECT_EQ(AnswerOnAnyThreads(p), "buffer #140000 has no id");
  p = valid;
  p.buffers[kLong - 1].name = "b0";  // the last against the first
  EXPECT_EQ(AnswerOnAnyThreads(p), "duplicate buffer id 'b0'");
}

// Checked in chunks on threads, a long list gets the error of the pass in
// list order: the first bad buffer, or the buffer whose size takes the sum
// past 2^62, whichever comes first; then the pins.
TEST(ValidateProblemTest, LongListsNameTheFirstBadBuffer) {
  const Problem valid = LongList();
  Problem p = valid;
  p.buffers[190000].size = 0;
  p.buffers[150000].end = p.buffers[150000].start;
  EXPECT_THAT(AnswerOnAnyThreads(p),
              HasSubstr("buffer 'b150000' has start 150000 >= end"));
  constexpr Bytes kHuge = (Bytes{1} << 61) + (Bytes{1} << 60);
  p = valid;
  p.buffers[100000].size = kHuge;
  p.buffers[170000].size = kHuge;  // the sum passes 2^62 here
  p.buffers[170001].size = -1;
  p.buffers[190000].size = 0;
  EXPECT_THAT(AnswerOnAnyThreads(p),
              HasSubstr("sizes overflow 64 bits at buffer 'b170000'"));
  p.buffers[169999].alignment = 3;
  EXPECT_THAT(AnswerOnAnyThreads(p), HasSubstr("buffer 'b169999' alignment 3"));
  p = valid;
  for (int i : {120000, 180000}) {
    p.buffers[i].start = 5;
    p.buffers[i].end = 10;
    p.buffers[i].fixed_offset = 0;
  }
  EXPECT_EQ(AnswerOnAnyThreads(p),
            "buffers 'b120000' and 'b180000' are pinned to overlapping bytes "
            "while both live");
}

// Names whose hashes collide (a hash of their length alone) are compared:
// the bucketed check gives the one pass's answer.
TEST(ValidateProblemTest, BucketedNameCheckComparesCollidingNames) {
  const auto weak = [](absl::string_view name) -> uint64_t {
    return name.size() * 0x0101010101010101u;
  };
  Problem p;
  for (int i = 0; i < 20000; ++i) {
    p.buffers.push_back({"n" + std::to_string(i), i, i + 1, 8});
  }
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    EXPECT_TRUE(
        internal::CheckNamesInBuckets(p, {workers, 4}, nullptr, weak).ok());
    Problem twice = p;
    twice.buffers[17000].name = "n12345";
    twice.buffers[15000].name = "n99";  // the first that repeats one
    EXPECT_EQ(internal::CheckNamesInBuckets(twice, {workers, 4}, nullptr, weak)
                  .message(),
              "duplicate buffer id 'n99'");
    const auto strong = [](absl::string_view name) -> uint64_t {
      return absl::HashOf(name);
    };
    EXPECT_EQ(
        internal::CheckNamesInBuckets(twice, {workers, 4}, nullptr, strong)
            .message(),
        "duplicate buffer id 'n99'");
  }
}

}  // namespace
}  // namespace memplan::planner
