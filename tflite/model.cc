#include "tflite/model.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/text.h"

namespace memplan::formats {
namespace {

// Flatbuffers verification bounds: tables visited (vectors may alias one
// table many times) and nesting.
constexpr flatbuffers::uoffset_t kMaxTables = 10'000'000;
constexpr flatbuffers::uoffset_t kMaxDepth = 64;
constexpr size_t kMaxNameBytes = 256;
constexpr int kLastTensorType = tfl::TensorType_MAX;

// Builtin codes of the operators that run subgraphs.
constexpr int32_t kCall = tfl::BuiltinOperator_CALL;
constexpr int32_t kIf = tfl::BuiltinOperator_IF;
constexpr int32_t kWhile = tfl::BuiltinOperator_WHILE;
constexpr int32_t kCallOnce = tfl::BuiltinOperator_CALL_ONCE;
constexpr int32_t kStablehloWhile = tfl::BuiltinOperator_STABLEHLO_WHILE;
constexpr int32_t kComposite = tfl::BuiltinOperator_STABLEHLO_COMPOSITE;

// A name from the file as text every output accepts, for messages: the
// text rule's SafeText (base/text.h), at most `max` bytes of it.
std::string SafeText(absl::string_view raw, size_t max) {
  return std::string(base::Utf8Prefix(base::SafeText(raw.substr(0, max)), max));
}

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view()
                      : absl::string_view(s->c_str(), s->size());
}

// Checks that every index in `v` is in [lowest, count).
absl::Status CheckIndices(const flatbuffers::Vector<int32_t>* v, int lowest,
                          int count, const std::string& what) {
  for (int i = 0; i < Size(v); ++i) {
    const int32_t x = v->Get(i);
    if (x < lowest || x >= count) {
      return Invalid(what, " #", i, " is tensor index ", x,
                     ", out of range (the subgraph has ", count, " tensors)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string TfliteTypeName(int type) {
  if (type < 0 || type > kLastTensorType) return absl::StrCat("type_", type);
  std::string name =
      tfl::EnumNameTensorType(static_cast<tfl::TensorType>(type));
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  return name;
}

absl::StatusOr<TfliteModel> TfliteModel::Parse(absl::string_view bytes,
                                               absl::string_view name) {
  TfliteModel m;
  m.name_ = SafeText(name, kMaxNameBytes);
  if (bytes.size() < 8) {
    return Invalid(m.name_, ": not a TFLite model (", bytes.size(),
                   " bytes; a TFLite flatbuffer has at least 8)");
  }
  if (!tfl::ModelBufferHasIdentifier(bytes.data())) {
    return Invalid(m.name_,
                   ": not a TFLite model (no 'TFL3' file identifier at byte "
                   "4)");
  }
  m.bytes_ = bytes;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    m.copy_.resize((bytes.size() + 7) / 8);
    std::memcpy(m.copy_.data(), bytes.data(), bytes.size());
    m.bytes_ = absl::string_view(reinterpret_cast<const char*>(m.copy_.data()),
                                 bytes.size());
  }
  const auto* data = reinterpret_cast<const uint8_t*>(m.bytes_.data());
  flatbuffers::Verifier verifier(
      data, std::min<size_t>(m.bytes_.size(), FLATBUFFERS_MAX_BUFFER_SIZE - 1),
      kMaxDepth, kMaxTables);
  if (!tfl::VerifyModelBuffer(verifier)) {
    return Invalid(m.name_,
                   ": not a valid TFLite model: the flatbuffers verifier "
                   "rejects it (truncated or corrupt file)");
  }
  m.model_ = tfl::GetModel(data);
  const int subgraphs = Size(m.model_->subgraphs());
  if (subgraphs == 0) return Invalid(m.name_, ": the model has no subgraphs");
  int64_t ops = 0, refs = 0;
  for (int s = 0; s < subgraphs; ++s) {
    m.base_.push_back(m.total_tensors_);
    m.total_tensors_ += m.tensor_count(s);
    ops += m.op_count(s);
  }
  if (m.total_tensors_ > kTfliteMaxTensors || ops > kTfliteMaxOps) {
    return absl::ResourceExhaustedError(
        absl::StrCat(m.name_, ": the model has ", m.total_tensors_,
                     " tensors and ", ops, " operators; memplan reads at most ",
                     kTfliteMaxTensors, " and ", kTfliteMaxOps));
  }
  for (int s = 0; s < subgraphs; ++s) {
    if (auto st = m.CheckTensors(s); !st.ok()) return st;
    if (auto st = m.CheckSubgraphIo(s, &refs); !st.ok()) return st;
    if (auto st = m.CheckOps(s, &refs); !st.ok()) return st;
  }
  if (auto st = m.CheckModelLists(); !st.ok()) return st;
  return m;
}

const tfl::SubGraph& TfliteModel::subgraph(int s) const {
  return *model_->subgraphs()->Get(s);
}

int TfliteModel::tensor_count(int s) const {
  return Size(subgraph(s).tensors());
}

const tfl::Tensor& TfliteModel::tensor(int s, int t) const {
  return *subgraph(s).tensors()->Get(t);
}

int TfliteModel::op_count(int s) const { return Size(subgraph(s).operators()); }

const tfl::Operator& TfliteModel::op(int s, int i) const {
  return *subgraph(s).operators()->Get(i);
}

int TfliteModel::buffer_count() const { return Size(model_->buffers()); }

int32_t TfliteModel::BuiltinCode(const tfl::Operator& op) const {
  const tfl::OperatorCode* code =
      model_->operator_codes()->Get(op.opcode_index());
  return std::max(static_cast<int32_t>(code->builtin_code()),
                  static_cast<int32_t>(code->deprecated_builtin_code()));
}

std::string TfliteModel::OpType(const tfl::Operator& op) const {
  const int32_t code = BuiltinCode(op);
  const tfl::OperatorCode* oc =
      model_->operator_codes()->Get(op.opcode_index());
  if (code == tfl::BuiltinOperator_CUSTOM && oc->custom_code() != nullptr &&
      oc->custom_code()->size() > 0) {
    return SafeText(View(oc->custom_code()), 64);
  }
  const char* name =
      tfl::EnumNameBuiltinOperator(static_cast<tfl::BuiltinOperator>(code));
  return name != nullptr && name[0] != '\0' ? name
                                            : absl::StrCat("BUILTIN_", code);
}

std::vector<SubgraphCall> TfliteModel::CalledSubgraphs(
    const tfl::Operator& op) const {
  std::vector<SubgraphCall> calls;
  switch (BuiltinCode(op)) {
    case kIf:
      if (const auto* o = op.builtin_options_as_IfOptions()) {
        calls = {{"then", o->then_subgraph_index()},
                 {"else", o->else_subgraph_index()}};
      }
      break;
    case kWhile:
      if (const auto* o = op.builtin_options_as_WhileOptions()) {
        calls = {{"cond", o->cond_subgraph_index()},
                 {"body", o->body_subgraph_index()}};
      }
      break;
    case kCallOnce:
      if (const auto* o = op.builtin_options_as_CallOnceOptions()) {
        calls = {{"init", o->init_subgraph_index()}};
      }
      break;
    case kCall:
      if (const auto* o = op.builtin_options_as_CallOptions()) {
        calls = {{"call", static_cast<int>(o->subgraph())}};
      }
      break;
    case kStablehloWhile:
      if (const auto* o = op.builtin_options_2_as_StablehloWhileOptions()) {
        calls = {{"cond", o->cond_subgraph_index()},
                 {"body", o->body_subgraph_index()}};
      }
      break;
    case kComposite:
      if (const auto* o = op.builtin_options_2_as_StableHLOCompositeOptions()) {
        calls = {{"decomposition", o->decomposition_subgraph_index()}};
      }
      break;
    default:
      break;
  }
  return calls;
}

int64_t TfliteModel::DataBytes(const tfl::Tensor& tensor) const {
  if (tensor.buffer() >= static_cast<uint32_t>(buffer_count())) return 0;
  const tfl::Buffer* b = model_->buffers()->Get(tensor.buffer());
  if (b->offset() > 1) return static_cast<int64_t>(b->size());
  return b->data() == nullptr ? 0 : b->data()->size();
}

absl::string_view TfliteModel::BufferData(int b) const {
  const tfl::Buffer* buffer = model_->buffers()->Get(b);
  if (buffer->data() == nullptr) return {};
  return absl::string_view(
      reinterpret_cast<const char*>(buffer->data()->data()),
      buffer->data()->size());
}

TfliteOfflinePlan TfliteModel::OfflinePlan() const {
  TfliteOfflinePlan plan;
  absl::string_view data;
  for (int i = 0; i < Size(model_->metadata()); ++i) {
    const tfl::Metadata* m = model_->metadata()->Get(i);
    if (View(m->name()) != kOfflinePlanMetadata) continue;
    ++plan.entries;
    data = BufferData(static_cast<int>(m->buffer()));  // the last one wins
  }
  auto word = [&](size_t k) {
    uint32_t w = 0;
    for (int b = 3; b >= 0; --b) {
      w = (w << 8) | static_cast<unsigned char>(data[4 * k + b]);
    }
    return static_cast<int32_t>(w);
  };
  const size_t words = data.size() / 4;
  if (words < 3) return plan;
  plan.present = true;
  plan.version = word(0);
  plan.subgraphs = word(1);
  plan.count = word(2);
  for (size_t k = 3; k < words; ++k) plan.offsets.push_back(word(k));
  plan.usable = plan.count >= 0 && plan.count == tensor_count() &&
                static_cast<int64_t>(plan.offsets.size()) >= plan.count;
  return plan;
}

std::string TfliteModel::SubgraphLabel(int s) const {
  const std::string name = SafeText(View(subgraph(s).name()), 64);
  return name.empty() ? absl::StrCat("subgraph ", s)
                      : absl::StrCat("subgraph ", s, " ('", name, "')");
}

std::string TfliteModel::TensorName(int s, int t) const {
  return SafeText(View(tensor(s, t).name()), kMaxNameBytes);
}

std::string TfliteModel::RawTensorName(int s, int t) const {
  return std::string(View(tensor(s, t).name()).substr(0, kMaxNameBytes));
}

std::string TfliteModel::TensorLabel(int s, int t) const {
  const std::string name = TensorName(s, t);
  return absl::StrCat("tensor ", t, name.empty() ? "" : " ('", name,
                      name.empty() ? "" : "')", " of subgraph ", s);
}

absl::Status TfliteModel::CheckTensors(int s) const {
  const int buffers = buffer_count();
  for (int t = 0; t < tensor_count(s); ++t) {
    const tfl::Tensor& tensor = this->tensor(s, t);
    const uint32_t b = tensor.buffer();
    if (b >= static_cast<uint32_t>(buffers) && !(b == 0 && buffers == 0)) {
      return Invalid(name_, ": ", TensorLabel(s, t), ": buffer index ", b,
                     " is out of range (the model has ", buffers, " buffers)");
    }
    const int type = tensor.type();
    if (type < 0 || type > kLastTensorType) {
      return Invalid(name_, ": ", TensorLabel(s, t), ": unknown element type ",
                     type, " (this reader knows TFLite types 0 to ",
                     kLastTensorType, ")");
    }
    if (Size(tensor.shape()) > kTfliteMaxRank ||
        Size(tensor.shape_signature()) > kTfliteMaxRank) {
      return Invalid(name_, ": ", TensorLabel(s, t), ": rank over ",
                     kTfliteMaxRank);
    }
  }
  return absl::OkStatus();
}

absl::Status TfliteModel::CheckSubgraphIo(int s, int64_t* refs) const {
  const tfl::SubGraph& g = subgraph(s);
  const int n = tensor_count(s);
  *refs += Size(g.inputs()) + Size(g.outputs());
  const std::string where = absl::StrCat(name_, ": ", SubgraphLabel(s));
  if (auto st = CheckIndices(g.inputs(), 0, n, where + " input"); !st.ok()) {
    return st;
  }
  return CheckIndices(g.outputs(), 0, n, where + " output");
}

absl::Status TfliteModel::CheckOps(int s, int64_t* refs) const {
  const int n = tensor_count(s);
  const int codes = Size(model_->operator_codes());
  for (int i = 0; i < op_count(s); ++i) {
    const tfl::Operator& op = this->op(s, i);
    const std::string where =
        absl::StrCat(name_, ": op ", i, " of ", SubgraphLabel(s));
    if (op.opcode_index() >= static_cast<uint32_t>(codes)) {
      return Invalid(where, ": operator code index ", op.opcode_index(),
                     " is out of range (the model has ", codes,
                     " operator codes)");
    }
    *refs += Size(op.inputs()) + Size(op.outputs()) + Size(op.intermediates());
    if (*refs > kTfliteMaxTensorRefs) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": the operators reference more than ",
                       kTfliteMaxTensorRefs, " tensors in all"));
    }
    for (const auto& [list, role] :
         {std::pair{op.inputs(), " input"}, std::pair{op.outputs(), " output"},
          std::pair{op.intermediates(), " intermediate"}}) {
      if (auto st = CheckIndices(list, -1, n, where + role); !st.ok()) {
        return st;
      }
    }
    const int32_t code = BuiltinCode(op);
    const std::vector<SubgraphCall> calls = CalledSubgraphs(op);
    const bool runs_subgraphs = code == kIf || code == kWhile ||
                                code == kCallOnce || code == kCall ||
                                code == kStablehloWhile || code == kComposite;
    if (runs_subgraphs && calls.empty()) {
      return Invalid(where, " (", OpType(op),
                     "): its options naming the subgraphs it runs are "
                     "missing");
    }
    for (const SubgraphCall& call : calls) {
      if (call.subgraph < 0 || call.subgraph >= subgraph_count()) {
        return Invalid(where, " (", OpType(op), "): ", call.role,
                       " subgraph index ", call.subgraph,
                       " is out of range (the model has ", subgraph_count(),
                       " subgraphs)");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TfliteModel::CheckModelLists() const {
  const int buffers = buffer_count();
  for (int b = 0; b < buffers; ++b) {
    const tfl::Buffer* buffer = model_->buffers()->Get(b);
    if (buffer->offset() > 1 &&
        (buffer->size() > bytes_.size() ||
         buffer->offset() > bytes_.size() - buffer->size())) {
      return Invalid(name_, ": buffer ", b, " keeps its data at byte ",
                     buffer->offset(), " (", buffer->size(),
                     " bytes), past the end of the file (", bytes_.size(),
                     " bytes)");
    }
  }
  for (int i = 0; i < Size(model_->metadata()); ++i) {
    const tfl::Metadata* m = model_->metadata()->Get(i);
    if (m->buffer() >= static_cast<uint32_t>(buffers)) {
      return Invalid(name_, ": metadata #", i, " ('",
                     SafeText(View(m->name()), 64), "'): buffer index ",
                     m->buffer(), " is out of range (the model has ", buffers,
                     " buffers)");
    }
  }
  for (int i = 0; i < Size(model_->metadata_buffer()); ++i) {
    const int32_t b = model_->metadata_buffer()->Get(i);
    if (b < 0 || b >= buffers) {
      return Invalid(name_, ": metadata_buffer #", i, " is buffer index ", b,
                     ", out of range (the model has ", buffers, " buffers)");
    }
  }
  for (int i = 0; i < Size(model_->signature_defs()); ++i) {
    const tfl::SignatureDef* sig = model_->signature_defs()->Get(i);
    const uint32_t s = sig->subgraph_index();
    if (s >= static_cast<uint32_t>(subgraph_count())) {
      return Invalid(name_, ": signature def #", i, ": subgraph index ", s,
                     " is out of range (the model has ", subgraph_count(),
                     " subgraphs)");
    }
    for (const auto* maps : {sig->inputs(), sig->outputs()}) {
      for (int k = 0; k < Size(maps); ++k) {
        const uint32_t t = maps->Get(k)->tensor_index();
        if (t >= static_cast<uint32_t>(tensor_count(static_cast<int>(s)))) {
          return Invalid(name_, ": signature def #", i, ": tensor index ", t,
                         " is out of range (", SubgraphLabel(s), " has ",
                         tensor_count(static_cast<int>(s)), " tensors)");
        }
      }
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> TfliteDeclaredDims(const tfl::Tensor& t) {
  const auto* sig = t.shape_signature();
  const auto* shape = t.shape();
  const auto* dims = sig != nullptr && Size(sig) == Size(shape) ? sig : shape;
  std::vector<int64_t> out;
  for (int k = 0; k < Size(dims); ++k) out.push_back(dims->Get(k));
  return out;
}

}  // namespace memplan::formats
