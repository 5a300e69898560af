#include "tflite/tflm_baseline.h"

#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tflite/model.h"
#include "tflite/testing/tflite_builder.h"

namespace memplan::formats {
namespace {

namespace ts = ::memplan::tflite_schema;
using ::testing::HasSubstr;
using testing::TestSubgraph;
using testing::TfliteBuilder;

// TFLM's AllocationInfoBuilder as TFLM runs it: every subgraph walked again
// at every IF, WHILE and CALL_ONCE that runs it. The reference the linear
// walk must agree with (on models small enough to re-walk).
class NaiveWalk {
 public:
  NaiveWalk(const TfliteModel& m, std::vector<TflmTensorUse>* uses)
      : m_(m), uses_(*uses) {}
  void Mark(int s) {
    const tfl::SubGraph& g = m_.subgraph(s);
    for (int k = 0; k < Size(g.inputs()); ++k) Use(s, g.inputs()->Get(k), 1);
    for (int i = 0; i < m_.op_count(s); ++i) {
      ++scope_;
      const tfl::Operator& op = m_.op(s, i);
      for (int k = 0; k < Size(op.outputs()); ++k) {
        Use(s, op.outputs()->Get(k), 0);
      }
      const int32_t code = m_.BuiltinCode(op);
      if (code == tfl::BuiltinOperator_IF ||
          code == tfl::BuiltinOperator_WHILE ||
          code == tfl::BuiltinOperator_CALL_ONCE) {
        for (const SubgraphCall& call : m_.CalledSubgraphs(op)) {
          ++scope_;
          Mark(call.subgraph);
        }
      }
      for (int k = 0; k < Size(op.inputs()); ++k) {
        Use(s, op.inputs()->Get(k), 2);
      }
      for (int k = 0; k < Size(op.outputs()); ++k) {
        Use(s, op.outputs()->Get(k), 2);
      }
    }
    for (int k = 0; k < Size(g.outputs()); ++k) Use(s, g.outputs()->Get(k), 1);
  }

 private:
  void Use(int s, int t, int mode) {
    if (t < 0) return;
    TflmTensorUse& u = uses_[m_.global_index(s, t)];
    if (mode != 2 && u.first < 0) u.first = scope_;
    if (mode != 0) u.last = scope_;
  }
  const TfliteModel& m_;
  std::vector<TflmTensorUse>& uses_;
  int scope_ = 0;
};

// A built model, parsed (its bytes kept: the model reads them).
struct Parsed {
  explicit Parsed(const TfliteBuilder& builder)
      : bytes(TfliteBuilder(builder).Build()),
        model(TfliteModel::Parse(bytes, "m.tflite")) {}
  std::string bytes;
  absl::StatusOr<TfliteModel> model;
};

std::vector<TflmTensorUse> Naive(const TfliteModel& m) {
  std::vector<TflmTensorUse> uses(m.tensor_count());
  NaiveWalk(m, &uses).Mark(0);
  return uses;
}

void ExpectSameLifetimes(const std::vector<TflmTensorUse>& got,
                         const std::vector<TflmTensorUse>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << what << " tensor " << i;
    EXPECT_EQ(got[i].last, want[i].last) << what << " tensor " << i;
  }
}

TEST(TflmBaselineTest, NestedIfsGetTheLifetimesOfTflmsRepeatedWalks) {
  const Parsed p(testing::DoublyNestedIfs(8));
  ASSERT_TRUE(p.model.ok()) << p.model.status();
  const absl::StatusOr<std::vector<TflmTensorUse>> uses =
      TflmTensorUses(*p.model);
  ASSERT_TRUE(uses.ok()) << uses.status();
  ExpectSameLifetimes(*uses, Naive(*p.model), "8 nested IFs");
}

// Random call graphs without cycles: IF, WHILE, CALL_ONCE and CALL (which
// TFLM does not follow), subgraphs run from several places or never.
TEST(TflmBaselineTest, RandomCallGraphsGetTheLifetimesOfTflmsRepeatedWalks) {
  std::mt19937 rng(31);
  const int32_t codes[] = {ts::BuiltinOperator_IF, ts::BuiltinOperator_WHILE,
                           ts::BuiltinOperator_CALL_ONCE,
                           ts::BuiltinOperator_CALL};
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    TfliteBuilder b;
    for (int s = 0; s < n; ++s) {
      TestSubgraph& g = b.Subgraph(absl::StrCat("g", s));
      const int tensors = 2 + static_cast<int>(rng() % 5);
      for (int t = 0; t < tensors; ++t) g.Tensor(absl::StrCat("t", t), {4});
      auto any = [&] { return static_cast<int>(rng() % tensors); };
      g.inputs = {any()};
      g.outputs = {any()};
      const int ops = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < ops; ++i) {
        if (s + 1 < n && rng() % 2 == 0) {
          const int32_t code = codes[rng() % 4];
          auto callee = [&] {
            return s + 1 + static_cast<int>(rng() % (n - s - 1));
          };
          std::vector<int> called = {callee()};
          if (code == ts::BuiltinOperator_IF ||
              code == ts::BuiltinOperator_WHILE) {
            called.push_back(callee());
          }
          g.Op(code, {any()}, {any()}, called);
        } else {
          g.Op(ts::BuiltinOperator_ADD, {any(), any()}, {any()});
        }
      }
    }
    const Parsed p(b);
    ASSERT_TRUE(p.model.ok()) << p.model.status();
    const absl::StatusOr<std::vector<TflmTensorUse>> uses =
        TflmTensorUses(*p.model);
    ASSERT_TRUE(uses.ok()) << uses.status();
    ExpectSameLifetimes(*uses, Naive(*p.model), absl::StrCat("trial ", trial));
  }
}

// Issue 31: 19 subgraphs, each IF running the next as both branches, took
// TFLM's walk 2^18 re-walks; now one walk per subgraph.
TEST(TflmBaselineTest, NineteenNestedIfsAreWalkedOncePerSubgraph) {
  const Parsed p(testing::DoublyNestedIfs(19));
  ASSERT_TRUE(p.model.ok()) << p.model.status();
  const absl::StatusOr<std::vector<TflmTensorUse>> uses =
      TflmTensorUses(*p.model);
  ASSERT_TRUE(uses.ok()) << uses.status();
  // Subgraph s opens 3 scopes for its ops plus 2 * (1 + span(s + 1)) for
  // its IF: span(18) = 2, span(s) = 5 + 2 span(s + 1).
  int64_t span = 2;
  for (int s = 17; s >= 0; --s) span = 5 + 2 * span;
  // Main's output y: created by its last RELU and kept to the end.
  const int y = 2;
  EXPECT_EQ((*uses)[y].last, span);
  EXPECT_EQ((*uses)[y].first, span);
  // The last subgraph's input: first created at its first walk, last read
  // in its last walk.
  const int last_x = static_cast<int>(p.model->global_index(18, 0));
  EXPECT_GT((*uses)[last_x].first, 0);
  EXPECT_LT((*uses)[last_x].first, (*uses)[last_x].last);
}

// Deeper still, the scopes TFLM's walk would open pass 10^8: refused with
// a clear error, before any walk.
TEST(TflmBaselineTest, ExponentialWalksOverTheCapAreRefused) {
  const Parsed p(testing::DoublyNestedIfs(40));
  ASSERT_TRUE(p.model.ok()) << p.model.status();
  const absl::StatusOr<std::vector<TflmTensorUse>> uses =
      TflmTensorUses(*p.model);
  EXPECT_EQ(uses.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(uses.status().message(),
              HasSubstr("opens more than 100000000 allocation scopes"));
}

TEST(TflmBaselineTest, ASubgraphThatRunsItselfIsRefused) {
  TfliteBuilder b;
  TestSubgraph& g0 = b.Subgraph("main");
  int x = g0.Tensor("x", {4}), y = g0.Tensor("y", {4});
  g0.Op(ts::BuiltinOperator_CALL_ONCE, {x}, {y}, {1});
  g0.inputs = {x};
  g0.outputs = {y};
  TestSubgraph& g1 = b.Subgraph("loop");
  x = g1.Tensor("x", {4});
  y = g1.Tensor("y", {4});
  g1.Op(ts::BuiltinOperator_CALL_ONCE, {x}, {y}, {1});
  g1.inputs = {x};
  g1.outputs = {y};
  const Parsed p(b);
  ASSERT_TRUE(p.model.ok()) << p.model.status();
  const absl::StatusOr<std::vector<TflmTensorUse>> uses =
      TflmTensorUses(*p.model);
  EXPECT_EQ(uses.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(uses.status().message(), HasSubstr("runs itself"));
}

}  // namespace
}  // namespace memplan::formats
