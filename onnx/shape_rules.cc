#include "onnx/shape_rules.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "onnx/internal/rule_helpers.h"

// The rules themselves live by op family in rules_*.cc; this file holds
// their table, OnnxNodeContext and the reading of tensors.

namespace memplan::formats {
namespace {

namespace onnx = ::ONNX_NAMESPACE;

using internal::AsReals;
using internal::IsRealType;

// Every rule memplan has, by domain, from the op families' files.
const internal::RuleTable& Rules() {
  static const auto* rules = [] {
    auto* table = new internal::RuleTable;
    internal::AddElementwiseRules(table);
    internal::AddSameShapeRules(table);
    internal::AddTensorRules(table);
    internal::AddReshapeRules(table);
    internal::AddSliceRules(table);
    internal::AddGatherRules(table);
    internal::AddReduceRules(table);
    internal::AddConvRules(table);
    internal::AddPadResizeRules(table);
    return table;
  }();
  return *rules;
}

}  // namespace

// --- OnnxNodeContext ---------------------------------------------------------

const onnx::AttributeProto* OnnxNodeContext::Attr(
    absl::string_view name) const {
  for (const onnx::AttributeProto& a : node->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t OnnxNodeContext::Int(absl::string_view name, int64_t fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? fallback : a->i();
}

std::vector<int64_t> OnnxNodeContext::Ints(absl::string_view name) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return {};
  return {a->ints().begin(), a->ints().end()};
}

float OnnxNodeContext::Float(absl::string_view name, float fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? fallback : a->f();
}

std::string OnnxNodeContext::Str(absl::string_view name,
                                 absl::string_view fallback) const {
  const onnx::AttributeProto* a = Attr(name);
  return a == nullptr ? std::string(fallback) : a->s();
}

SymDim OnnxNodeContext::UnknownDim(absl::string_view reason,
                                   bool data_dependent,
                                   const std::set<AtomId>& depends_on) {
  return SymDim::Atom(
      table->Unknown(label, reason, data_dependent, depends_on));
}

std::set<AtomId> OnnxNodeContext::InputLeaves(size_t i) const {
  std::set<AtomId> out;
  const OnnxValue* v = In(i);
  if (v == nullptr) return out;
  out = v->taint;
  for (const SymDim& d : v->dims) {
    std::set<AtomId> l = table->Leaves(d);
    out.insert(l.begin(), l.end());
  }
  if (v->content && !v->content->real) {
    for (const SymDim& d : v->content->ints) {
      std::set<AtomId> l = table->Leaves(d);
      out.insert(l.begin(), l.end());
    }
  }
  return out;
}

SymDim OnnxNodeContext::FromUnknownElements(size_t i) {
  const OnnxValue* v = In(i);
  const std::string name = v == nullptr ? "?" : v->name;
  if (v != nullptr && v->from_data) {
    return UnknownDim(absl::StrCat("it depends on the values of '", name,
                                   "', which are computed from data"),
                      true, {});
  }
  std::set<AtomId> leaves = InputLeaves(i);
  return UnknownDim(absl::StrCat("it depends on the values of '", name,
                                 "', which memplan does not compute"),
                    leaves.empty(), leaves);
}

const std::vector<SymDim>* OnnxNodeContext::Ints(size_t i) const {
  const OnnxValue* v = In(i);
  if (v == nullptr || !v->content || v->content->real) return nullptr;
  return &v->content->ints;
}

std::optional<std::vector<double>> OnnxNodeContext::Reals(size_t i) const {
  return AsReals(In(i));
}

absl::Status FallBackToOnnx() {
  return absl::UnimplementedError("memplan: fall back to ONNX's inference");
}

bool IsFallBack(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnimplemented &&
         s.message() == "memplan: fall back to ONNX's inference";
}

OnnxShapeRule FindOnnxShapeRule(absl::string_view domain,
                                absl::string_view op_type) {
  const internal::OpRules* rules = nullptr;
  if (domain.empty() || domain == "ai.onnx") rules = &Rules().default_domain;
  if (domain == "com.microsoft") rules = &Rules().microsoft;
  if (rules == nullptr) return nullptr;
  auto it = rules->find(std::string(op_type));
  return it == rules->end() ? nullptr : it->second;
}

bool OnnxOpIsDataDependent(absl::string_view op_type) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "NonZero",     "Unique",           "NonMaxSuppression", "Compress",
      "StringSplit", "StringNormalizer", "TfIdfVectorizer",   "RegexFullMatch"};
  return ops->contains(std::string(op_type));
}

std::optional<int64_t> OnnxElementCount(const std::vector<SymDim>& dims) {
  int64_t n = 1;
  for (const SymDim& d : dims) {
    if (!d.is_constant() || d.constant() < 0 ||
        __builtin_mul_overflow(n, d.constant(), &n)) {
      return std::nullopt;
    }
  }
  return n;
}

// --- Reading tensors ---------------------------------------------------------

namespace {

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f,
            mantissa = h & 0x3ff;
  double v = 0;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN()
                 : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -v : v;
}

double Bfloat16ToDouble(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Reads `count` little-endian elements of `type` from raw bytes.
std::optional<OnnxContent> FromRaw(int32_t type, const std::string& raw,
                                   int64_t count) {
  const int bits = OnnxElementBits(type);
  if (bits < 8 || static_cast<int64_t>(raw.size()) != count * (bits / 8)) {
    return std::nullopt;
  }
  OnnxContent out;
  out.real = IsRealType(type);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(raw.data());
  const int width = bits / 8;
  for (int64_t i = 0; i < count; ++i, p += width) {
    uint64_t u = 0;
    for (int b = width - 1; b >= 0; --b) u = (u << 8) | p[b];
    if (out.real) {
      if (type == 1) {
        uint32_t w = static_cast<uint32_t>(u);
        float f;
        std::memcpy(&f, &w, sizeof f);
        out.reals.push_back(f);
      } else if (type == 11) {
        double d;
        std::memcpy(&d, &u, sizeof d);
        out.reals.push_back(d);
      } else if (type == 10) {
        out.reals.push_back(HalfToDouble(static_cast<uint16_t>(u)));
      } else if (type == 16) {
        out.reals.push_back(Bfloat16ToDouble(static_cast<uint16_t>(u)));
      } else {
        return std::nullopt;  // float8 and others: not needed for shapes
      }
      continue;
    }
    int64_t v = 0;
    switch (type) {
      case 3:
        v = static_cast<int8_t>(u);
        break;  // INT8
      case 5:
        v = static_cast<int16_t>(u);
        break;  // INT16
      case 6:
        v = static_cast<int32_t>(u);
        break;  // INT32
      case 7:
        v = static_cast<int64_t>(u);
        break;  // INT64
      case 13:  // UINT64
        if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
        v = static_cast<int64_t>(u);
        break;
      default:
        v = static_cast<int64_t>(u);
        break;  // unsigned, bool
    }
    out.ints.push_back(SymDim(v));
  }
  return out;
}

// Reads the typed repeated fields of a TensorProto.
std::optional<OnnxContent> FromFields(const ::ONNX_NAMESPACE::TensorProto& t,
                                      int64_t count) {
  const int32_t type = t.data_type();
  OnnxContent out;
  out.real = IsRealType(type);
  if (type == 1 && t.float_data_size() == count) {
    out.reals.assign(t.float_data().begin(), t.float_data().end());
  } else if (type == 11 && t.double_data_size() == count) {
    out.reals.assign(t.double_data().begin(), t.double_data().end());
  } else if ((type == 10 || type == 16) && t.int32_data_size() == count) {
    for (int32_t bits : t.int32_data()) {
      out.reals.push_back(type == 10 ? HalfToDouble(bits)
                                     : Bfloat16ToDouble(bits));
    }
  } else if (type == 7 && t.int64_data_size() == count) {
    for (int64_t v : t.int64_data()) out.ints.push_back(SymDim(v));
  } else if ((type == 2 || type == 3 || type == 4 || type == 5 || type == 6 ||
              type == 9) &&
             t.int32_data_size() == count) {
    for (int32_t v : t.int32_data()) out.ints.push_back(SymDim(v));
  } else if ((type == 12 || type == 13) && t.uint64_data_size() == count) {
    for (uint64_t v : t.uint64_data()) {
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      out.ints.push_back(SymDim(static_cast<int64_t>(v)));
    }
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace

absl::Status LoadOnnxTensor(const onnx::TensorProto& t, OnnxValue* v,
                            absl::string_view label) {
  std::vector<SymDim> dims;
  for (int64_t d : t.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": tensor '", t.name(), "' has negative dim ", d));
    }
    dims.push_back(SymDim(d));
  }
  SetOnnxShape(v, t.data_type(), std::move(dims));
  v->constant = true;
  std::optional<int64_t> count = OnnxElementCount(v->dims);
  if (!count || *count > kMaxOnnxContent ||
      t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::OkStatus();
  }
  v->content = t.has_raw_data() ? FromRaw(t.data_type(), t.raw_data(), *count)
                                : FromFields(t, *count);
  return absl::OkStatus();
}

void SetOnnxShape(OnnxValue* v, int32_t elem_type, std::vector<SymDim> dims) {
  v->elem_type = elem_type;
  v->tensor = true;
  v->has_shape = true;
  v->dims = std::move(dims);
  v->content.reset();
}

}  // namespace memplan::formats