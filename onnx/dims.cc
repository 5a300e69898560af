#include "onnx/dims.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace memplan::formats {
namespace {

// Past these a result becomes an unknown atom (see the header).
constexpr size_t kMaxTerms = 48;
constexpr size_t kMaxDegree = 12;
constexpr size_t kMaxKeyLength = 400;
constexpr int kMaxDivisionSteps = 64;
// The assumed range of atoms when comparing.
constexpr int64_t kMaxDimValue = (int64_t{1} << 31) - 1;
// Interval arithmetic saturates here (far beyond any int64).
constexpr __int128 kSaturated = static_cast<__int128>(1) << 100;

__int128 Clamp128(__int128 v) {
  return std::max(-kSaturated, std::min(kSaturated, v));
}

__int128 SatMul(__int128 a, __int128 b) {
  if (a == 0 || b == 0) return 0;
  const __int128 limit = kSaturated;
  const bool negative = (a < 0) != (b < 0);
  const __int128 ua = a < 0 ? -a : a, ub = b < 0 ? -b : b;
  if (ua > limit / ub) return negative ? -limit : limit;
  return Clamp128(negative ? -(ua * ub) : ua * ub);
}

// Merges two sorted atom lists (the product of two monomials).
std::vector<AtomId> MergeAtoms(const std::vector<AtomId>& a,
                               const std::vector<AtomId>& b) {
  std::vector<AtomId> out(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), out.begin());
  return out;
}

// Whether monomial `b` divides `a`; sets `quotient` to a / b.
bool DividesMonomial(const std::vector<AtomId>& a, const std::vector<AtomId>& b,
                     std::vector<AtomId>* quotient) {
  quotient->clear();
  size_t j = 0;
  for (AtomId x : a) {
    if (j < b.size() && b[j] == x) {
      ++j;
    } else {
      quotient->push_back(x);
    }
  }
  return j == b.size();
}

// Graded order: higher degree first, then lexicographic.
bool GradedLess(const std::vector<AtomId>& a, const std::vector<AtomId>& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

SymDim::SymDim(int64_t value) {
  if (value != 0) terms_.push_back({{}, value});
}

SymDim SymDim::Atom(AtomId atom) {
  SymDim d;
  d.terms_.push_back({{atom}, 1});
  return d;
}

bool SymDim::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_[0].atoms.empty());
}

int64_t SymDim::constant() const {
  return terms_.empty() ? 0 : terms_[0].coefficient;
}

std::optional<int64_t> SymDim::value() const {
  if (!is_constant()) return std::nullopt;
  return constant();
}

AtomId SymDim::single_atom() const {
  if (terms_.size() != 1 || terms_[0].atoms.size() != 1 ||
      terms_[0].coefficient != 1) {
    return -1;
  }
  return terms_[0].atoms[0];
}

bool operator==(const SymDim& a, const SymDim& b) {
  if (a.terms_.size() != b.terms_.size()) return false;
  for (size_t i = 0; i < a.terms_.size(); ++i) {
    if (a.terms_[i].coefficient != b.terms_[i].coefficient ||
        a.terms_[i].atoms != b.terms_[i].atoms) {
      return false;
    }
  }
  return true;
}

// --- Atoms -------------------------------------------------------------------

AtomId DimTable::Intern(DimAtom atom) {
  const std::string key =
      atom.kind == AtomKind::kSymbol ? "s:" + atom.name : "f:" + atom.name;
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  const AtomId id = static_cast<AtomId>(atoms_.size());
  if (atom.kind == AtomKind::kSymbol) atom.leaves = {id};
  atoms_.push_back(std::move(atom));
  by_key_.emplace(key, id);
  return id;
}

AtomId DimTable::Symbol(absl::string_view name) {
  DimAtom atom;
  atom.kind = AtomKind::kSymbol;
  atom.name = std::string(name);
  return Intern(std::move(atom));
}

AtomId DimTable::Unknown(absl::string_view origin, absl::string_view reason,
                         bool data_dependent,
                         const std::set<AtomId>& depends_on) {
  const AtomId id = static_cast<AtomId>(atoms_.size());
  DimAtom atom;
  atom.kind = AtomKind::kUnknown;
  atom.name = absl::StrCat("?", id);
  atom.origin = std::string(origin);
  atom.reason = std::string(reason);
  atom.data_dependent = data_dependent;
  for (AtomId a : depends_on) {
    atom.leaves.insert(atoms_[a].leaves.begin(), atoms_[a].leaves.end());
  }
  atom.leaves.insert(id);
  atoms_.push_back(std::move(atom));
  return id;
}

void DimTable::Fail(absl::string_view what) {
  if (failure_.empty()) failure_ = std::string(what);
}

// --- Polynomial arithmetic ---------------------------------------------------

SymDim DimTable::Add(const SymDim& a, const SymDim& b) {
  SymDim out;
  size_t i = 0, j = 0;
  while (i < a.terms_.size() || j < b.terms_.size()) {
    if (j == b.terms_.size() ||
        (i < a.terms_.size() && a.terms_[i].atoms < b.terms_[j].atoms)) {
      out.terms_.push_back(a.terms_[i++]);
    } else if (i == a.terms_.size() || b.terms_[j].atoms < a.terms_[i].atoms) {
      out.terms_.push_back(b.terms_[j++]);
    } else {
      int64_t c = 0;
      if (__builtin_add_overflow(a.terms_[i].coefficient,
                                 b.terms_[j].coefficient, &c)) {
        Fail("a dim overflows 64 bits");
        return SymDim();
      }
      if (c != 0) out.terms_.push_back({a.terms_[i].atoms, c});
      ++i;
      ++j;
    }
  }
  if (Oversized(out)) return TooComplex(a, b);
  return out;
}

SymDim DimTable::Neg(const SymDim& a) {
  SymDim out = a;
  for (DimTerm& t : out.terms_) {
    if (t.coefficient == INT64_MIN) {
      Fail("a dim overflows 64 bits");
      return SymDim();
    }
    t.coefficient = -t.coefficient;
  }
  return out;
}

SymDim DimTable::Sub(const SymDim& a, const SymDim& b) {
  return Add(a, Neg(b));
}

SymDim DimTable::Mul(const SymDim& a, const SymDim& b) {
  if (a.terms_.empty() || b.terms_.empty()) return SymDim();
  if (a.terms_.size() * b.terms_.size() > kMaxTerms * 4) {
    return TooComplex(a, b);
  }
  SymDim out;
  for (const DimTerm& x : a.terms_) {
    for (const DimTerm& y : b.terms_) {
      SymDim term;
      int64_t c = 0;
      if (__builtin_mul_overflow(x.coefficient, y.coefficient, &c)) {
        Fail("a dim overflows 64 bits");
        return SymDim();
      }
      term.terms_.push_back({MergeAtoms(x.atoms, y.atoms), c});
      out = Add(out, term);
      if (failed()) return SymDim();
    }
  }
  if (Oversized(out)) return TooComplex(a, b);
  return out;
}

bool DimTable::Oversized(const SymDim& d) const {
  if (d.terms_.size() > kMaxTerms) return true;
  for (const DimTerm& t : d.terms_) {
    if (t.atoms.size() > kMaxDegree) return true;
  }
  return false;
}

SymDim DimTable::TooComplex(const SymDim& a, const SymDim& b) {
  std::set<AtomId> leaves = Leaves(a);
  std::set<AtomId> more = Leaves(b);
  leaves.insert(more.begin(), more.end());
  return SymDim::Atom(
      Unknown("", "its expression grows too large", false, leaves));
}

// a / b when b divides a exactly (polynomial long division).
std::optional<SymDim> DimTable::ExactDiv(const SymDim& a, const SymDim& b) {
  if (b.terms_.empty()) return std::nullopt;
  auto leading = [](const SymDim& d) {
    return *std::max_element(d.terms_.begin(), d.terms_.end(),
                             [](const DimTerm& x, const DimTerm& y) {
                               return GradedLess(x.atoms, y.atoms);
                             });
  };
  const DimTerm lb = leading(b);
  SymDim quotient, rest = a;
  for (int step = 0; step < kMaxDivisionSteps; ++step) {
    if (rest.terms_.empty()) return quotient;
    const DimTerm lr = leading(rest);
    SymDim t;
    std::vector<AtomId> atoms;
    if (!DividesMonomial(lr.atoms, lb.atoms, &atoms) ||
        lr.coefficient % lb.coefficient != 0) {
      return std::nullopt;
    }
    t.terms_.push_back({atoms, lr.coefficient / lb.coefficient});
    quotient = Add(quotient, t);
    rest = Sub(rest, Mul(t, b));
    if (failed()) return std::nullopt;
  }
  return std::nullopt;
}

SymDim DimTable::FloorDiv(const SymDim& a, const SymDim& b) {
  if (b.terms_.empty()) {
    Fail("a division by zero");
    return SymDim();
  }
  if (b.is_constant()) {
    const int64_t c = b.constant();
    if (c < 0) {
      if (c == INT64_MIN) return Function(DimFunction::kFloorDiv, a, b);
      return FloorDiv(Neg(a), SymDim(-c));
    }
    if (a.is_constant()) return SymDim(FloorDivInt(a.constant(), c));
    // a = c*q + r with every coefficient of r in [0, c).
    SymDim q, r;
    for (const DimTerm& t : a.terms_) {
      const int64_t tq = FloorDivInt(t.coefficient, c);
      const int64_t tr = t.coefficient - tq * c;
      if (tq != 0) q.terms_.push_back({t.atoms, tq});
      if (tr != 0) r.terms_.push_back({t.atoms, tr});
    }
    if (r.is_constant()) return q;  // 0 <= r < c
    return Add(q, Function(DimFunction::kFloorDiv, r, b));
  }
  if (a.terms_.empty()) return SymDim();
  if (std::optional<SymDim> q = ExactDiv(a, b)) return *q;
  return Function(DimFunction::kFloorDiv, a, b);
}

SymDim DimTable::CeilDiv(const SymDim& a, const SymDim& b) {
  return Neg(FloorDiv(Neg(a), b));
}

SymDim DimTable::Mod(const SymDim& a, const SymDim& b) {
  if (b.terms_.empty()) {
    Fail("a modulo by zero");
    return SymDim();
  }
  if (b.is_constant() && b.constant() != INT64_MIN) {
    const int64_t c = b.constant();
    if (c < 0) return Neg(Mod(Neg(a), SymDim(-c)));
    SymDim r;
    for (const DimTerm& t : a.terms_) {
      const int64_t tr = t.coefficient - FloorDivInt(t.coefficient, c) * c;
      if (tr != 0) r.terms_.push_back({t.atoms, tr});
    }
    if (r.is_constant()) return r;
    return Function(DimFunction::kMod, r, b);
  }
  if (a.terms_.empty()) return SymDim();
  if (ExactDiv(a, b)) return SymDim();
  return Function(DimFunction::kMod, a, b);
}

SymDim DimTable::Min(const SymDim& a, const SymDim& b) {
  if (SurelyLessEqual(a, b)) return a;
  if (SurelyLessEqual(b, a)) return b;
  return Function(DimFunction::kMin, a, b);
}

SymDim DimTable::Max(const SymDim& a, const SymDim& b) {
  if (SurelyLessEqual(a, b)) return b;
  if (SurelyLessEqual(b, a)) return a;
  return Function(DimFunction::kMax, a, b);
}

SymDim DimTable::Function(DimFunction f, const SymDim& a, const SymDim& b) {
  if (a.is_constant() && b.is_constant()) {
    // Only reached for the cases the callers cannot fold (INT64_MIN).
    Fail("a dim overflows 64 bits");
    return SymDim();
  }
  static const char* const kNames[] = {"floor", "mod", "min", "max"};
  const std::string sa = ToString(a), sb = ToString(b);
  std::string name =
      f == DimFunction::kFloorDiv
          ? absl::StrCat("floor((", sa, ")/(", sb, "))")
          : absl::StrCat(kNames[static_cast<int>(f)], "(", sa, ", ", sb, ")");
  if (name.size() > kMaxKeyLength) return TooComplex(a, b);
  DimAtom atom;
  atom.kind = AtomKind::kFunction;
  atom.name = std::move(name);
  atom.function = f;
  atom.args = {a, b};
  atom.leaves = Leaves(a);
  std::set<AtomId> more = Leaves(b);
  atom.leaves.insert(more.begin(), more.end());
  return SymDim::Atom(Intern(std::move(atom)));
}

// --- Comparison --------------------------------------------------------------

void DimTable::AtomBounds(AtomId id, __int128* lo, __int128* hi) const {
  const DimAtom& a = atoms_[id];
  *lo = a.kind == AtomKind::kSymbol ? 1 : 0;
  *hi = kMaxDimValue;
  if (a.kind != AtomKind::kFunction) return;
  __int128 l0, h0, l1, h1;
  DiffBounds(a.args[0], SymDim(), &l0, &h0);
  DiffBounds(a.args[1], SymDim(), &l1, &h1);
  if (a.function == DimFunction::kMin) {
    *lo = std::min(l0, l1);
    *hi = std::min(h0, h1);
  } else if (a.function == DimFunction::kMax) {
    *lo = std::max(l0, l1);
    *hi = std::max(h0, h1);
  } else if (a.function == DimFunction::kMod && l1 > 0 && l1 == h1) {
    *lo = 0;
    *hi = l1 - 1;
  } else if (a.function == DimFunction::kFloorDiv && l1 > 0 && l1 == h1 &&
             l0 >= 0) {
    *lo = l0 / l1;
    *hi = h0 / l1;
  }
}

void DimTable::DiffBounds(const SymDim& a, const SymDim& b, __int128* lo,
                          __int128* hi) const {
  // The terms of a - b, with 128-bit coefficients so nothing overflows.
  std::vector<std::pair<const std::vector<AtomId>*, __int128>> terms;
  size_t i = 0, j = 0;
  while (i < a.terms_.size() || j < b.terms_.size()) {
    if (j == b.terms_.size() ||
        (i < a.terms_.size() && a.terms_[i].atoms < b.terms_[j].atoms)) {
      terms.emplace_back(&a.terms_[i].atoms, a.terms_[i].coefficient);
      ++i;
    } else if (i == a.terms_.size() || b.terms_[j].atoms < a.terms_[i].atoms) {
      terms.emplace_back(&b.terms_[j].atoms,
                         -static_cast<__int128>(b.terms_[j].coefficient));
      ++j;
    } else {
      terms.emplace_back(&a.terms_[i].atoms,
                         static_cast<__int128>(a.terms_[i].coefficient) -
                             b.terms_[j].coefficient);
      ++i;
      ++j;
    }
  }
  *lo = *hi = 0;
  for (const auto& [atoms, k] : terms) {
    __int128 mlo = 1, mhi = 1;  // the monomial's interval
    for (AtomId id : *atoms) {
      __int128 alo, ahi;
      AtomBounds(id, &alo, &ahi);
      const __int128 c[] = {SatMul(mlo, alo), SatMul(mlo, ahi),
                            SatMul(mhi, alo), SatMul(mhi, ahi)};
      mlo = *std::min_element(c, c + 4);
      mhi = *std::max_element(c, c + 4);
    }
    const __int128 c0 = SatMul(k, mlo), c1 = SatMul(k, mhi);
    *lo = Clamp128(*lo + std::min(c0, c1));
    *hi = Clamp128(*hi + std::max(c0, c1));
  }
}

std::optional<int> DimTable::Compare(const SymDim& a, const SymDim& b) const {
  if (a == b) return 0;
  __int128 lo, hi;
  DiffBounds(a, b, &lo, &hi);
  if (lo > 0) return 1;
  if (hi < 0) return -1;
  if (lo == 0 && hi == 0) return 0;
  return std::nullopt;
}

bool DimTable::SurelyLessEqual(const SymDim& a, const SymDim& b) const {
  __int128 lo, hi;
  DiffBounds(a, b, &lo, &hi);
  return hi <= 0;
}

// --- Reading
// ------------------------------------------------------------------

std::string DimTable::AtomString(AtomId id) const { return atoms_[id].name; }

std::string DimTable::ToString(const SymDim& d) const {
  if (d.terms_.empty()) return "0";
  std::string out;
  auto append_term = [&](const DimTerm& t, bool first) {
    int64_t c = t.coefficient;
    if (!first) {
      out += c < 0 ? " - " : " + ";
      if (c < 0 && c != INT64_MIN) c = -c;
    }
    if (t.atoms.empty()) {
      absl::StrAppend(&out, c);
      return;
    }
    if (c == -1 && first) {
      out += "-";
    } else if (c != 1) {
      absl::StrAppend(&out, c, "*");
    }
    for (size_t k = 0; k < t.atoms.size(); ++k) {
      if (k > 0) out += "*";
      out += AtomString(t.atoms[k]);
    }
  };
  bool first = true;
  for (const DimTerm& t : d.terms_) {
    if (t.atoms.empty()) continue;
    append_term(t, first);
    first = false;
  }
  if (!d.terms_[0].atoms.empty()) return out;
  append_term(d.terms_[0], first);
  return out;
}

std::optional<int64_t> DimTable::Evaluate(
    const SymDim& d, const std::map<std::string, int64_t>& values) const {
  int64_t sum = 0;
  for (const DimTerm& t : d.terms_) {
    int64_t product = t.coefficient;
    for (AtomId id : t.atoms) {
      const DimAtom& a = atoms_[id];
      std::optional<int64_t> v;
      if (a.kind == AtomKind::kSymbol) {
        auto it = values.find(a.name);
        if (it != values.end()) v = it->second;
      } else if (a.kind == AtomKind::kFunction) {
        std::optional<int64_t> x = Evaluate(a.args[0], values);
        std::optional<int64_t> y = Evaluate(a.args[1], values);
        if (!x || !y) return std::nullopt;
        switch (a.function) {
          case DimFunction::kFloorDiv:
            if (*y == 0 || (*x == INT64_MIN && *y == -1)) return std::nullopt;
            v = FloorDivInt(*x, *y);
            break;
          case DimFunction::kMod:
            if (*y == 0 || (*x == INT64_MIN && *y == -1)) return std::nullopt;
            v = *x - FloorDivInt(*x, *y) * *y;
            break;
          case DimFunction::kMin:
            v = std::min(*x, *y);
            break;
          case DimFunction::kMax:
            v = std::max(*x, *y);
            break;
        }
      }
      if (!v || __builtin_mul_overflow(product, *v, &product)) {
        return std::nullopt;
      }
    }
    if (__builtin_add_overflow(sum, product, &sum)) return std::nullopt;
  }
  return sum;
}

std::set<AtomId> DimTable::Leaves(const SymDim& d) const {
  std::set<AtomId> out;
  for (const DimTerm& t : d.terms_) {
    for (AtomId id : t.atoms) {
      out.insert(atoms_[id].leaves.begin(), atoms_[id].leaves.end());
    }
  }
  return out;
}

}  // namespace memplan::formats
