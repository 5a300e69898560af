// Symbolic dims: the arithmetic shape computations need, checked against
// plain integer arithmetic on many values of the symbols.
#include "onnx/dims.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memplan::formats {
namespace {

class OnnxDimsTest : public ::testing::Test {
 protected:
  // Atoms print in the order they were made: batch first.
  void SetUp() override {
    table_.Symbol("batch");
    table_.Symbol("seq");
  }
  SymDim Sym(const std::string& name) {
    return SymDim::Atom(table_.Symbol(name));
  }
  std::optional<int64_t> Eval(const SymDim& d, int64_t batch, int64_t seq) {
    return table_.Evaluate(d, {{"batch", batch}, {"seq", seq}});
  }
  DimTable table_;
};

TEST_F(OnnxDimsTest, ConstantsFoldAndPrint) {
  SymDim d = table_.Add(SymDim(3), table_.Mul(SymDim(4), SymDim(5)));
  EXPECT_TRUE(d.is_constant());
  EXPECT_EQ(d.constant(), 23);
  EXPECT_EQ(table_.ToString(d), "23");
  EXPECT_EQ(table_.ToString(SymDim()), "0");
  EXPECT_EQ(table_.FloorDiv(SymDim(-7), SymDim(2)).constant(), -4);
  EXPECT_EQ(table_.CeilDiv(SymDim(7), SymDim(2)).constant(), 4);
  EXPECT_EQ(table_.Mod(SymDim(-7), SymDim(3)).constant(), 2);
  EXPECT_EQ(table_.Mod(SymDim(7), SymDim(-3)).constant(), -2);
  EXPECT_EQ(table_.Min(SymDim(3), SymDim(-2)).constant(), -2);
  EXPECT_FALSE(table_.failed());
}

TEST_F(OnnxDimsTest, ReshapeMinusOneDividesSymbolically) {
  // [batch, seq, 768] reshaped to [-1, 12, 64]: -1 = batch * seq.
  SymDim total = table_.Mul(table_.Mul(Sym("batch"), Sym("seq")), SymDim(768));
  SymDim inferred = table_.FloorDiv(total, SymDim(12 * 64));
  EXPECT_EQ(inferred, table_.Mul(Sym("batch"), Sym("seq")));
  EXPECT_EQ(table_.ToString(inferred), "batch*seq");
  // Divided by a polynomial: (768*batch*seq + 768*batch) / (seq + 1).
  SymDim p = table_.Mul(
      table_.Mul(Sym("batch"), table_.Add(Sym("seq"), SymDim(1))), SymDim(768));
  EXPECT_EQ(table_.FloorDiv(p, table_.Add(Sym("seq"), SymDim(1))),
            table_.Mul(Sym("batch"), SymDim(768)));
}

TEST_F(OnnxDimsTest, OpaqueTermsEvaluateLater) {
  // A strided convolution: floor((seq + 2 - 3) / 2) + 1.
  SymDim out = table_.Add(
      table_.FloorDiv(table_.Sub(table_.Add(Sym("seq"), SymDim(2)), SymDim(3)),
                      SymDim(2)),
      SymDim(1));
  EXPECT_FALSE(out.is_constant());
  EXPECT_THAT(table_.ToString(out), ::testing::HasSubstr("floor("));
  for (int64_t seq = 1; seq < 40; ++seq) {
    EXPECT_EQ(Eval(out, 1, seq), (seq - 1) / 2 + 1) << seq;
  }
  EXPECT_EQ(table_.Evaluate(out, {}), std::nullopt);  // seq has no value
  // Equal expressions are the same atom.
  SymDim again = table_.Add(
      table_.FloorDiv(table_.Sub(table_.Add(Sym("seq"), SymDim(2)), SymDim(3)),
                      SymDim(2)),
      SymDim(1));
  EXPECT_EQ(out, again);
}

TEST_F(OnnxDimsTest, FloorDivSplitsTheDivisiblePart) {
  // floor((4*seq + 3) / 2) = 2*seq + 1.
  SymDim d = table_.FloorDiv(
      table_.Add(table_.Mul(SymDim(4), Sym("seq")), SymDim(3)), SymDim(2));
  EXPECT_EQ(d, table_.Add(table_.Mul(SymDim(2), Sym("seq")), SymDim(1)));
}

TEST_F(OnnxDimsTest, MinAndMaxUseTheRangesOfDims) {
  // Dims are at least 1: min(seq, 1) = 1, max(seq, 0) = seq.
  EXPECT_EQ(table_.Min(Sym("seq"), SymDim(1)), SymDim(1));
  EXPECT_EQ(table_.Max(Sym("seq"), SymDim(0)), Sym("seq"));
  // A slice end of INT64_MAX clamps to the dim.
  EXPECT_EQ(table_.Min(SymDim(INT64_MAX), Sym("seq")), Sym("seq"));
  // seq - 1 < seq always; seq vs batch depends.
  EXPECT_EQ(table_.Compare(table_.Sub(Sym("seq"), SymDim(1)), Sym("seq")), -1);
  EXPECT_EQ(table_.Compare(Sym("seq"), Sym("batch")), std::nullopt);
  SymDim m = table_.Min(Sym("seq"), Sym("batch"));
  EXPECT_EQ(Eval(m, 3, 8), 3);
  EXPECT_EQ(Eval(m, 9, 8), 8);
}

TEST_F(OnnxDimsTest, RandomExpressionsAgreeWithIntegers) {
  uint32_t seed = 7;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  for (int round = 0; round < 500; ++round) {
    SymDim d = Sym("seq");
    int64_t b = 1 + next() % 16, s = 1 + next() % 300;
    int64_t v = s;
    for (int step = 0; step < 6; ++step) {
      const int64_t k = 1 + next() % 7;
      switch (next() % 6) {
        case 0:
          d = table_.Add(d, SymDim(k));
          v += k;
          break;
        case 1:
          d = table_.Mul(d, SymDim(k));
          v *= k;
          break;
        case 2:
          d = table_.FloorDiv(d, SymDim(k));
          v = v / k;
          break;
        case 3:
          d = table_.Add(d, Sym("batch"));
          v += b;
          break;
        case 4:
          d = table_.CeilDiv(d, SymDim(k));
          v = (v + k - 1) / k;
          break;
        case 5:
          d = table_.Mod(d, SymDim(k));
          v = v % k;
          break;
      }
    }
    ASSERT_FALSE(table_.failed());
    EXPECT_EQ(Eval(d, b, s), v) << table_.ToString(d);
  }
}

TEST_F(OnnxDimsTest, OverflowAndDivisionByZeroAreRecorded) {
  table_.Mul(SymDim(INT64_MAX), SymDim(2));
  EXPECT_TRUE(table_.failed());
  EXPECT_THAT(table_.failure(), ::testing::HasSubstr("overflows"));
  table_.ClearFailure();
  table_.FloorDiv(Sym("seq"), SymDim(0));
  EXPECT_THAT(table_.failure(), ::testing::HasSubstr("division by zero"));
}

TEST_F(OnnxDimsTest, ExpressionsStayBounded) {
  // Squaring (seq + 1) again and again would double the terms each time.
  SymDim d = table_.Add(Sym("seq"), Sym("batch"));
  for (int i = 0; i < 40; ++i) d = table_.Mul(d, table_.Add(d, SymDim(1)));
  EXPECT_FALSE(table_.failed());
  EXPECT_LE(table_.ToString(d).size(), 1000u);
  std::set<AtomId> leaves = table_.Leaves(d);
  std::set<std::string> names;
  for (AtomId a : leaves) {
    if (table_.atom(a).kind == AtomKind::kSymbol)
      names.insert(table_.atom(a).name);
  }
  EXPECT_EQ(names, (std::set<std::string>{"batch", "seq"}));
}

TEST_F(OnnxDimsTest, UnknownAtomsRememberWhatTheyDependOn) {
  AtomId u = table_.Unknown("node 'nz' (NonZero, #3)", "data", true, {});
  AtomId v = table_.Unknown("node 'r' (Resize, #4)", "fraction", false,
                            {table_.Symbol("seq")});
  EXPECT_TRUE(table_.atom(u).data_dependent);
  EXPECT_EQ(table_.atom(u).origin, "node 'nz' (NonZero, #3)");
  std::set<AtomId> leaves = table_.Leaves(SymDim::Atom(v));
  EXPECT_TRUE(leaves.count(table_.Symbol("seq")));
  EXPECT_EQ(table_.Evaluate(SymDim::Atom(u), {{"seq", 3}}), std::nullopt);
}

}  // namespace
}  // namespace memplan::formats
