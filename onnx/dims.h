// Symbolic dims for evaluating ONNX shapes (onnx/shapes.h): a dim is an
// integer polynomial over atoms, where an atom is a named dim of the model
// ("batch"), an opaque term the polynomial cannot hold (floor((seq - 1)/2),
// min(seq, 3)), or an unknown dim made by a node (NonZero's count). Dims
// with values (--dim) are plain numbers from the start; the others travel as
// expressions, so that "batch x seq x 768 reshaped to [-1, 768]" gives
// batch*seq, and a missing dim can be named wherever it ends up.
//
//   DimTable table;
//   SymDim seq = SymDim::Atom(table.Symbol("seq"));
//   SymDim half = table.FloorDiv(table.Add(seq, SymDim(1)), SymDim(2));
//   table.ToString(half);                  // "floor((seq + 1)/2)"
//   table.Evaluate(half, {{"seq", 511}});  // 256
//
// Named dims are assumed to lie in [1, 2^31 - 1] and other atoms in
// [0, 2^31 - 1] when comparing (Min, Max, Compare), as ONNX Runtime's
// symbolic shape inference assumes positive dims. Expressions are capped in
// size: past the cap a result becomes an unknown atom that remembers the
// named dims it came from, so no model can make them grow without bound.
#ifndef MEMPLAN_ONNX_DIMS_H_
#define MEMPLAN_ONNX_DIMS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"

namespace memplan::formats {

using AtomId = int32_t;  // index into a DimTable's atoms

// coefficient x the product of `atoms`.
struct DimTerm {
  std::vector<AtomId> atoms;  // sorted, repeated for powers; empty: constant
  int64_t coefficient = 0;    // never 0 inside a SymDim
};

// An integer polynomial over atoms; value semantics. Arithmetic that may
// need new atoms or can overflow lives in DimTable.
class SymDim {
 public:
  SymDim() = default;  // the constant 0
  explicit SymDim(int64_t value);
  static SymDim Atom(AtomId atom);

  bool is_constant() const;
  // The constant's value. REQUIRES is_constant().
  int64_t constant() const;
  // The value when constant.
  std::optional<int64_t> value() const;
  // The single atom this dim is (coefficient 1, degree 1), or -1.
  AtomId single_atom() const;
  // Most dims are one constant: one term kept in place, no allocation.
  using Terms = absl::InlinedVector<DimTerm, 1>;
  const Terms& terms() const { return terms_; }

  friend bool operator==(const SymDim& a, const SymDim& b);
  friend bool operator!=(const SymDim& a, const SymDim& b) { return !(a == b); }

 private:
  friend class DimTable;
  Terms terms_;  // sorted by atoms; no zero coefficients
};

// What an atom stands for.
enum class AtomKind {
  kSymbol,    // a named dim of the model ("batch")
  kFunction,  // floor division, modulo, min or max of dims
  kUnknown,   // a dim no rule could compute, made by a node
};

// The function of a kFunction atom.
enum class DimFunction { kFloorDiv, kMod, kMin, kMax };

// One atom.
struct DimAtom {
  AtomKind kind = AtomKind::kSymbol;
  std::string name;  // kSymbol: the dim's name; else the display
  DimFunction function = DimFunction::kFloorDiv;  // kFunction only
  std::vector<SymDim> args;     // kFunction: its two arguments
  std::string origin;           // kUnknown: the node that made it
  std::string reason;           // kUnknown: why it is unknown
  bool data_dependent = false;  // kUnknown: it depends on tensor data
  std::set<AtomId> leaves;      // symbols and unknowns it depends on (self
                                // for those two kinds)
};

// Owns the atoms, and does the arithmetic that may create them.
// Thread-compatible. Arithmetic that overflows 64 bits or divides by zero
// returns 0 and records the failure (failed(), failure()).
class DimTable {
 public:
  // The atom of named dim `name` (the same id for the same name).
  AtomId Symbol(absl::string_view name);
  // A new unknown dim made by node `origin` because of `reason`;
  // `depends_on` are the atoms that would decide it (their leaves are kept).
  AtomId Unknown(absl::string_view origin, absl::string_view reason,
                 bool data_dependent, const std::set<AtomId>& depends_on);
  const DimAtom& atom(AtomId id) const { return atoms_[id]; }
  int atom_count() const { return static_cast<int>(atoms_.size()); }

  SymDim Add(const SymDim& a, const SymDim& b);
  SymDim Sub(const SymDim& a, const SymDim& b);
  SymDim Mul(const SymDim& a, const SymDim& b);
  SymDim Neg(const SymDim& a);
  // floor(a / b), exact when b divides a (also symbolically).
  SymDim FloorDiv(const SymDim& a, const SymDim& b);
  // ceil(a / b).
  SymDim CeilDiv(const SymDim& a, const SymDim& b);
  // a - b * floor(a / b): the sign of b, as ONNX Mod with fmod = 0.
  SymDim Mod(const SymDim& a, const SymDim& b);
  SymDim Min(const SymDim& a, const SymDim& b);
  SymDim Max(const SymDim& a, const SymDim& b);
  // -1, 0 or 1 when a < b, a == b or a > b holds for every value of the
  // atoms in their ranges; nullopt when that depends on them.
  std::optional<int> Compare(const SymDim& a, const SymDim& b) const;
  // a <= b for every value of the atoms; false when it depends on them.
  bool SurelyLessEqual(const SymDim& a, const SymDim& b) const;

  // Whether some arithmetic overflowed or divided by zero, and which.
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  void ClearFailure() { failure_.clear(); }

  // A readable, canonical form: equal dims print the same.
  std::string ToString(const SymDim& d) const;
  // The value with named dims from `values`; nullopt if one is missing, an
  // unknown atom is involved, or the arithmetic overflows.
  std::optional<int64_t> Evaluate(
      const SymDim& d, const std::map<std::string, int64_t>& values) const;
  // The symbols and unknown atoms `d` depends on.
  std::set<AtomId> Leaves(const SymDim& d) const;

 private:
  AtomId Intern(DimAtom atom);
  SymDim Function(DimFunction f, const SymDim& a, const SymDim& b);
  SymDim TooComplex(const SymDim& a, const SymDim& b);
  bool Oversized(const SymDim& d) const;
  void Fail(absl::string_view what);
  // Interval of a - b with every atom in its assumed range.
  void DiffBounds(const SymDim& a, const SymDim& b, __int128* lo,
                  __int128* hi) const;
  void AtomBounds(AtomId id, __int128* lo, __int128* hi) const;
  std::optional<SymDim> ExactDiv(const SymDim& a, const SymDim& b);
  std::string AtomString(AtomId id) const;

  std::vector<DimAtom> atoms_;
  absl::flat_hash_map<std::string, AtomId> by_key_;  // symbols and functions
  std::string failure_;  // empty unless some arithmetic failed
};

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_DIMS_H_
