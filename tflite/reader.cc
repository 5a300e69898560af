#include "tflite/reader.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/edit_distance.h"
#include "base/status.h"
#include "base/text.h"
#include "proto/convert.h"
#include "tflite/model.h"
#include "tflite/tflm_baseline.h"

namespace memplan::formats {
namespace {

constexpr int kMaxNesting = 256;  // subgraphs running subgraphs
constexpr int64_t kMaxBytes = int64_t{1} << 62;
constexpr int kMaxListed = 4;  // names listed in one message
// Byte alignment of the block holding an offline plan's tensors: the NPU's
// base addresses (the scratch tensor's start) are 16-byte aligned.
constexpr int64_t kKeptBlockAlignment = 16;

std::string FewNames(const std::vector<std::string>& names) {
  return base::ListFew(names, kMaxListed);
}

// Bits per element of each TFLite type; 0 for types without a fixed size.
int ElementBits(int type) {
  switch (type) {
    case tfl::TensorType_STRING:
    case tfl::TensorType_VARIANT:
      return 0;
    case tfl::TensorType_INT2:
      return 2;
    case tfl::TensorType_INT4:
    case tfl::TensorType_UINT4:
      return 4;
    case tfl::TensorType_UINT8:
    case tfl::TensorType_BOOL:
    case tfl::TensorType_INT8:
    case tfl::TensorType_FLOAT8_E4M3FN:
    case tfl::TensorType_FLOAT8_E5M2:
      return 8;
    case tfl::TensorType_FLOAT16:
    case tfl::TensorType_INT16:
    case tfl::TensorType_UINT16:
    case tfl::TensorType_BFLOAT16:
      return 16;
    case tfl::TensorType_FLOAT32:
    case tfl::TensorType_INT32:
    case tfl::TensorType_UINT32:
    case tfl::TensorType_RESOURCE:  // TFLM keeps a resource id (int32)
      return 32;
    case tfl::TensorType_INT64:
    case tfl::TensorType_UINT64:
    case tfl::TensorType_FLOAT64:
    case tfl::TensorType_COMPLEX64:
      return 64;
    case tfl::TensorType_COMPLEX128:
      return 128;
    default:
      return -1;
  }
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return dims.empty() ? "a scalar" : absl::StrJoin(dims, "x");
}

// The model's own shape (what TFLM uses), for messages.
std::vector<int64_t> StaticShape(const tfl::Tensor& t) {
  std::vector<int64_t> out;
  for (int k = 0; k < Size(t.shape()); ++k) out.push_back(t.shape()->Get(k));
  return out;
}

// What the importer knows of one TFLite tensor.
struct TensorInfo {
  int64_t bytes = 0;      // 0: holds nothing, left out of the graph
  bool constant = false;  // data in the file
  bool variable = false;  // is_variable
  // No data and no producer, read by operators: their scratch memory,
  // written by an op "<reader>/scratch" just before its first reader.
  bool scratch = false;
  // Keeps the model's offline offset: inside the block (not in the graph),
  // or the block itself (in the graph, live while any of them is).
  bool kept = false;
  bool block = false;
  int graph_index = -1;  // index in the graph, -1 when left out
  std::string name;      // unique graph name
};

// A tensor whose size the options do not settle.
struct MissingSize {
  std::string label;             // "'x' (subgraph 0 tensor 3)"
  std::vector<int64_t> dims;     // as declared, -1 for unknown
  std::vector<int64_t> static_;  // the model's own shape
};

// Builds the graph of a verified model (see the header for the rules).
class Importer {
 public:
  Importer(const TfliteModel& m, const ModelOptions& options)
      : m_(m), options_(options), info_(m.tensor_count()) {}

  absl::StatusOr<ImportedModel> Run() {
    if (auto s = CheckOptionNames(); !s.ok()) return s;
    if (auto s = SizeTensors(); !s.ok()) return s;
    if (auto s = CheckCancel(); !s.ok()) return s;
    FindScratch();
    KeepOfflinePlan();
    NameTensors();
    AddTensors();
    if (auto s = CheckCancel(); !s.ok()) return s;
    const int n = m_.subgraph_count();
    calls_total_.assign(n, 0);
    for (bool emit : {false, true}) {
      emit_ = emit;
      walked_.assign(n, 0);
      on_stack_.assign(n, 0);
      calls_seen_.assign(n, 0);
      if (auto s = WalkAll(); !s.ok()) return s;
      if (auto s = CheckCancel(); !s.ok()) return s;
    }
    Finish();
    return std::move(out_);
  }

 private:
  // DEADLINE_EXCEEDED once the call's token (options_.cancel) has fired:
  // polled between the import's passes and every 256 operators walked.
  absl::Status CheckCancel() const {
    if (options_.cancel == nullptr || !options_.cancel->Cancelled()) {
      return absl::OkStatus();
    }
    return absl::DeadlineExceededError(
        absl::StrCat(m_.name(), ": import cancelled"));
  }

  absl::Status CheckOptionNames();
  absl::Status CheckDimName(const std::string& dim, bool batch);
  absl::Status CheckInputName(const std::string& name,
                              const std::set<std::string>& names) const;
  absl::Status SizeTensors();
  absl::Status SizeTensor(int s, int t, std::vector<MissingSize>* missing);
  absl::StatusOr<std::vector<int64_t>> ResolveDims(int s, int t, bool* known);
  absl::Status MissingError(const std::vector<MissingSize>& missing) const;
  absl::Status CheckResizedInputs() const;
  void WarnDefaultedDims();
  void FindScratch();
  void KeepOfflinePlan();
  std::vector<int64_t> FreshScratch(int s, const tfl::Operator& op);
  void NameTensors();
  void AddTensors();
  absl::Status WalkAll();
  absl::Status Walk(int s, int depth);
  absl::Status RunSubgraphs(int s, int i, const std::vector<SubgraphCall>&,
                            int depth);
  void Finish();

  // Graph tensors named by `list` (TFLite indices of subgraph s), without
  // omitted (-1) or empty tensors, each once; constants too unless
  // `skip_constants`.
  std::vector<int64_t> Operands(int s, const flatbuffers::Vector<int32_t>* v,
                                bool skip_constants = false);
  // Every non-constant graph tensor of `s` and the subgraphs it runs.
  std::vector<int64_t> Closure(int s);
  void EmitOp(const std::string& name, std::vector<int64_t> in,
              std::vector<int64_t> out);
  std::string OpName(int s, int i) const;
  const std::string& Prefix(int s) const { return prefixes_[s]; }

  const TfliteModel& m_;
  const ModelOptions& options_;
  std::vector<TensorInfo> info_;       // per global tensor
  std::vector<std::string> prefixes_;  // per subgraph: "" for the main one
  ImportedModel out_;
  int64_t int4_activations_ = 0;
  // Tensors whose -1 dims took the model's own shape; of those, per kind of
  // dim (0: first dims, which --dim batch would set; 1: the others), how
  // many had one defaulted, and the first such tensor with its dims.
  int64_t defaulted_tensors_ = 0;
  int64_t defaulted_of_kind_[2] = {0, 0};
  std::string first_defaulted_[2];
  // --input shapes that set a -1 dim to another value than the model's
  // own: each flag as given with the stored shape; whether a first dim, or
  // another, was among those set so; the first first dim set so.
  std::vector<std::string> resized_;
  bool resized_kind_[2] = {false, false};
  int64_t resized_batch_ = -1;
  int64_t ops_walked_ = 0;             // for polling options_.cancel
  int64_t block_ = -1;                 // global index of the kept block
  bool block_written_ = false;         // an op of this walk used the block
  std::vector<char> scratch_written_;  // per global tensor, in this walk
  // The walk over subgraph calls, made twice: to count each subgraph's
  // calls, then to emit ops knowing which call is a subgraph's last.
  bool emit_ = false;
  std::vector<char> walked_, on_stack_;
  std::vector<int> calls_total_, calls_seen_;
  int64_t refs_ = 0;            // operands emitted, bounded
  std::vector<int64_t> stamp_;  // per global tensor: last op using it
  int64_t op_serial_ = 0;
  absl::flat_hash_set<std::string> op_names_;
};

absl::Status Importer::CheckOptionNames() {
  std::set<std::string> names;
  bool batch = false;
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    for (int t = 0; t < m_.tensor_count(s); ++t) {
      names.insert(m_.TensorName(s, t));
      batch = batch ||
              (TfliteHasDynamicBatch(TfliteDeclaredDims(m_.tensor(s, t))) &&
               m_.DataBytes(m_.tensor(s, t)) == 0);
    }
  }
  for (const auto& [dim, value] : options_.dims) {
    if (auto s = CheckDimName(dim, batch); !s.ok()) return s;
  }
  for (const auto& [name, shape] : options_.shapes) {
    if (auto s = CheckInputName(name, names); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A --dim the model has no use for: an error suggesting the dim it has
// when the name looks like a misspelling of it, else a warning (one set of
// flags may serve every model of a pipeline) and the dim is ignored.
absl::Status Importer::CheckDimName(const std::string& dim, bool batch) {
  if (batch && dim == kTfliteBatchDim) {
    // TFLite Micro runs a batch of at least one: 0 would leave every
    // tensor with it empty, a plan of nothing.
    if (options_.dims.at(dim) == 0) {
      return Invalid(m_.name(), ": --dim ", kTfliteBatchDim,
                     "=0 would leave every tensor with a -1 first dim empty "
                     "(nothing to plan); give a batch of 1 or more");
    }
    return absl::OkStatus();
  }
  if (batch && base::LooksLikeMisspelling(dim, kTfliteBatchDim)) {
    return Invalid(m_.name(), ": --dim ", api::Clip(dim),
                   ": did you mean --dim ", kTfliteBatchDim,
                   "? (the model's only named dim is '", kTfliteBatchDim,
                   "', a -1 first dim; other dims are set with --input)");
  }
  out_.warnings.push_back(absl::StrCat(
      "--dim ", api::Clip(dim), " ignored: ",
      batch ? "the model's only named dim is 'batch' (a -1 first dim)"
            : "the model has no dynamic (-1) first dim"));
  return absl::OkStatus();
}

// An --input naming no tensor: an error (the shape is the model's own),
// suggesting the nearest name, else naming a few inputs.
absl::Status Importer::CheckInputName(
    const std::string& name, const std::set<std::string>& names) const {
  if (names.count(name) > 0) return absl::OkStatus();
  // The nearest name, among a bounded number (each costs a small table).
  constexpr size_t kMaxCandidates = 20'000;
  std::vector<std::string> candidates;
  for (const std::string& n : names) {
    if (candidates.size() == kMaxCandidates) break;
    candidates.push_back(n);
  }
  const std::string closest = base::ClosestName(name, candidates);
  if (!closest.empty()) {
    return Invalid(m_.name(), ": --input ", api::Clip(name),
                   ": did you mean --input ", api::Clip(closest),
                   "? (the model has no tensor of that name)");
  }
  std::vector<std::string> inputs;
  const auto* in = m_.subgraph(0).inputs();
  for (int k = 0; k < Size(in); ++k) {
    inputs.push_back(absl::StrCat("'", m_.TensorName(0, in->Get(k)), "'"));
  }
  return Invalid(m_.name(), ": --input ", api::Clip(name),
                 ": give a tensor of the model (the model has no tensor of "
                 "that name; its inputs: ",
                 inputs.empty() ? "none" : FewNames(inputs), ")");
}

absl::StatusOr<std::vector<int64_t>> Importer::ResolveDims(int s, int t,
                                                           bool* known) {
  const tfl::Tensor& tensor = m_.tensor(s, t);
  std::vector<int64_t> dims = TfliteDeclaredDims(tensor);
  *known = true;
  if (auto it = options_.shapes.find(m_.TensorName(s, t));
      it != options_.shapes.end()) {
    const std::vector<int64_t>& given = it->second;
    if (given.size() != dims.size()) {
      return Invalid(m_.name(), ": --input ", api::Clip(it->first), "=",
                     DimsText(given), ": ", m_.TensorLabel(s, t), " has ",
                     dims.size(), " dims (", DimsText(dims), ")");
    }
    const std::vector<int64_t> stored = StaticShape(tensor);
    const auto batch_it = options_.dims.find(kTfliteBatchDim);
    bool resized = false;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] >= 0 && dims[k] != given[k]) {
        return Invalid(m_.name(), ": --input ", api::Clip(it->first), "=",
                       DimsText(given), ": dim ", k, " of ",
                       m_.TensorLabel(s, t), " is ", dims[k],
                       " in the model; only -1 dims can be set");
      }
      // --dim batch sets every other -1 first dim: one set otherwise here
      // would leave the model's tensors at two batches.
      if (k == 0 && dims[k] < 0 && batch_it != options_.dims.end() &&
          given[k] != batch_it->second) {
        return Invalid(m_.name(), ": --input ", api::Clip(it->first), "=",
                       DimsText(given), " sets the first dim of ",
                       m_.TensorLabel(s, t), " to ", given[k], ", but --dim ",
                       kTfliteBatchDim, "=", batch_it->second,
                       " sets every other -1 first dim: give both the same "
                       "batch");
      }
      if (dims[k] < 0 && given[k] == 0) {
        return Invalid(m_.name(), ": --input ", api::Clip(it->first), "=",
                       DimsText(given), ": dim ", k, " of 0 would leave ",
                       m_.TensorLabel(s, t),
                       " empty (nothing to plan); give 1 or more");
      }
      if (dims[k] < 0 && stored.size() == dims.size() && stored[k] >= 0 &&
          stored[k] != given[k]) {
        resized = true;
        resized_kind_[k == 0 ? 0 : 1] = true;
        if (k == 0 && resized_batch_ < 0) resized_batch_ = given[0];
      }
    }
    if (resized) {
      resized_.push_back(absl::StrCat("--input ", api::Clip(it->first), "=",
                                      DimsText(given), " (stored shape ",
                                      DimsText(stored), ")"));
    }
    return given;
  }
  // -1 dims: the batch when given, else the model's own shape (what TFLite
  // Micro runs).
  const auto* shape = tensor.shape();
  bool defaulted_kind[2] = {false, false};  // a first dim; another
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] >= 0) continue;
    auto batch = options_.dims.find(kTfliteBatchDim);
    if (k == 0 && batch != options_.dims.end()) {
      dims[k] = batch->second;
    } else if (Size(shape) == static_cast<int>(dims.size()) &&
               shape->Get(static_cast<int>(k)) >= 0) {
      dims[k] = shape->Get(static_cast<int>(k));
      defaulted_kind[k == 0 ? 0 : 1] = true;
    } else {
      *known = false;
    }
  }
  if ((defaulted_kind[0] || defaulted_kind[1]) && *known) {
    ++defaulted_tensors_;
    for (int kind : {0, 1}) {
      if (!defaulted_kind[kind]) continue;
      if (defaulted_of_kind_[kind]++ > 0) continue;
      first_defaulted_[kind] = absl::StrCat(
          m_.TensorLabel(s, t), ": ", DimsText(TfliteDeclaredDims(tensor)),
          ", stored shape ", DimsText(StaticShape(tensor)));
    }
  }
  return dims;
}

absl::Status Importer::SizeTensor(int s, int t,
                                  std::vector<MissingSize>* missing) {
  const tfl::Tensor& tensor = m_.tensor(s, t);
  TensorInfo& info = info_[m_.global_index(s, t)];
  info.variable = tensor.is_variable();
  const int64_t data = m_.DataBytes(tensor);
  if (data > 0 && !info.variable) {
    info.constant = true;
    info.bytes = data;
    return absl::OkStatus();
  }
  bool known = true;
  absl::StatusOr<std::vector<int64_t>> dims = ResolveDims(s, t, &known);
  if (!dims.ok()) return dims.status();
  if (!known) {
    missing->push_back({m_.TensorLabel(s, t), TfliteDeclaredDims(tensor),
                        StaticShape(tensor)});
    return absl::OkStatus();
  }
  int type = tensor.type();
  if (type == tfl::TensorType_INT4) {
    type = tfl::TensorType_INT8;  // TFLM's arena holds int4 unpacked
    ++int4_activations_;
  }
  absl::StatusOr<int64_t> bytes = TfliteTensorBytes(
      type, *dims, absl::StrCat(m_.name(), ": ", m_.TensorLabel(s, t)));
  if (!bytes.ok()) return bytes.status();
  info.bytes = *bytes;
  return absl::OkStatus();
}

absl::Status Importer::SizeTensors() {
  std::vector<MissingSize> missing;
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    for (int t = 0; t < m_.tensor_count(s); ++t) {
      if (auto st = SizeTensor(s, t, &missing); !st.ok()) return st;
    }
  }
  if (!missing.empty()) return MissingError(missing);
  if (auto s = CheckResizedInputs(); !s.ok()) return s;
  WarnDefaultedDims();
  if (int4_activations_ > 0) {
    out_.warnings.push_back(absl::StrCat(
        int4_activations_,
        " int4 tensor(s) without data are planned at one byte per element, "
        "as TFLite Micro allocates int4 tensors"));
  }
  return absl::OkStatus();
}

// Sizes no flag settles and the model's own shape cannot give (its shape
// has another rank or a negative dim): the fix first, then a few names.
absl::Status Importer::MissingError(
    const std::vector<MissingSize>& missing) const {
  std::vector<std::string> listed;
  bool batch = false;
  for (const MissingSize& m : missing) {
    batch = batch || TfliteHasDynamicBatch(m.dims);
    listed.push_back(absl::StrCat(m.label, ": ", DimsText(m.dims),
                                  ", stored shape ", DimsText(m.static_)));
  }
  return Invalid(m_.name(), ": give the shape of ", missing.size(),
                 " tensor(s) with --input NAME=1x2x3",
                 batch ? " (or the first dim with --dim batch=N)" : "",
                 ": their shape_signature has -1 dims and their stored "
                 "shape cannot stand in for it: ",
                 FewNames(listed));
}

// An --input that sets a -1 dim to another value than the model stores,
// while -1 dims of the same kind (first dims, the batch; or the others)
// elsewhere keep their stored values: those tensors would not follow
// (memplan sizes each TFLite tensor from its own declared shape; it does
// not carry an input's shape through the operators, as TFLite Micro never
// resizes), so the plan would be too small for the shape given.
absl::Status Importer::CheckResizedInputs() const {
  for (int kind : {0, 1}) {
    if (!resized_kind_[kind] || defaulted_of_kind_[kind] == 0) continue;
    return Invalid(
        m_.name(), ": ", resized_.front(),
        resized_.size() > 1
            ? absl::StrCat(" (and ", resized_.size() - 1, " more --input)")
            : "",
        " sets a tensor's ", kind == 0 ? "first dim" : "-1 dims",
        " to another value than the model stores, but ",
        defaulted_of_kind_[kind], " other tensor(s) would keep their stored ",
        kind == 0 ? "first dim" : "dims", " (such as ", first_defaulted_[kind],
        "): memplan does not carry a TFLite tensor's shape through the "
        "operators, so the plan would be too small; ",
        kind == 0 ? absl::StrCat("set every first dim with --dim batch=",
                                 resized_batch_, " instead")
                  : "give each of them its shape with --input too");
  }
  return absl::OkStatus();
}

// One line for every tensor whose -1 dims took the model's own shape.
void Importer::WarnDefaultedDims() {
  if (defaulted_tensors_ == 0) return;
  out_.warnings.push_back(absl::StrCat(
      defaulted_tensors_,
      " tensor(s) have dynamic (-1) dims: planned at the model's own shapes, "
      "as TFLite Micro runs it (set them with ",
      defaulted_of_kind_[0] > 0 ? "--dim batch=N or " : "",
      "--input NAME=SHAPE)"));
}

// Tensors an operator reads that hold no data, are no variable, and that
// no operator of their subgraph writes and no caller fills (not a subgraph
// input): memory the reading operators use as they run, as Vela's scratch
// and fast scratch tensors are for the ethos-u operator. TFLite Micro
// plans them (they need allocating); they are not weights.
void Importer::FindScratch() {
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    std::vector<char> written(m_.tensor_count(s), 0), read(written);
    const auto* inputs = m_.subgraph(s).inputs();
    for (int k = 0; k < Size(inputs); ++k) written[inputs->Get(k)] = 1;
    for (int i = 0; i < m_.op_count(s); ++i) {
      const tfl::Operator& op = m_.op(s, i);
      for (const auto* list : {op.outputs(), op.intermediates()}) {
        for (int k = 0; k < Size(list); ++k) {
          if (list->Get(k) >= 0) written[list->Get(k)] = 1;
        }
      }
      if (!m_.CalledSubgraphs(op).empty()) continue;  // read by enter ops
      for (int k = 0; k < Size(op.inputs()); ++k) {
        if (op.inputs()->Get(k) >= 0) read[op.inputs()->Get(k)] = 1;
      }
    }
    for (int t = 0; t < m_.tensor_count(s); ++t) {
      TensorInfo& info = info_[m_.global_index(s, t)];
      info.scratch = info.bytes > 0 && !info.constant && !info.variable &&
                     read[t] && !written[t];
    }
  }
}

// An Ethos-U model keeps the offline plan it carries (Vela's): its command
// streams address the feature maps from the scratch tensor's start, as
// Vela placed them, so their layout may not change. The tensors the plan
// places become one block, the graph tensor that starts lowest (a scratch
// tensor first, then the largest), grown to span them all and live from
// the first operator using one of them to the last; the others lie inside
// it at their offsets from its start (ImportedModel::tflite_kept). Models
// without an ethos-u operator are planned afresh.
void Importer::KeepOfflinePlan() {
  bool ethos_u = false;
  for (int s = 0; s < m_.subgraph_count() && !ethos_u; ++s) {
    for (int i = 0; i < m_.op_count(s) && !ethos_u; ++i) {
      ethos_u = m_.OpType(m_.op(s, i)) == kEthosUOp;
    }
  }
  if (!ethos_u) return;
  const TfliteOfflinePlan plan = m_.OfflinePlan();
  if (!plan.usable) {
    out_.warnings.push_back(absl::StrCat(
        "the model has ", kEthosUOp,
        " operators but no usable offline plan: their command streams "
        "address feature maps from the scratch tensor's start as Vela "
        "placed them, so plan the model as Vela wrote it (with its ",
        kOfflinePlanMetadata, ")"));
    return;
  }
  std::vector<int64_t> kept;
  int64_t lowest = 0, top = 0;
  for (size_t g = 0; g < info_.size(); ++g) {
    const TensorInfo& info = info_[g];
    const int64_t offset = plan.offsets[g];
    if (offset < 0 || info.bytes == 0 || info.constant || info.variable) {
      continue;
    }
    if (kept.empty() || offset < lowest) lowest = offset;
    top = std::max(top, offset + info.bytes);
    kept.push_back(static_cast<int64_t>(g));
  }
  if (kept.empty()) return;
  for (int64_t g : kept) {
    if (plan.offsets[g] != lowest) continue;
    const TensorInfo& b = info_[g];
    if (block_ < 0 || (b.scratch && !info_[block_].scratch) ||
        (b.scratch == info_[block_].scratch && b.bytes > info_[block_].bytes)) {
      block_ = g;
    }
  }
  for (int64_t g : kept) {
    TensorInfo& info = info_[g];
    info.kept = true;
    info.scratch = false;  // the block's first user writes it
    if (g != block_) {
      out_.tflite_kept.push_back({g, -1, plan.offsets[g] - lowest});
    }
  }
  TensorInfo& block = info_[block_];
  block.block = true;
  const int64_t own = block.bytes;
  block.bytes = top - lowest;
  int s = m_.subgraph_count() - 1;
  while (m_.global_index(s, 0) > block_) --s;
  const int t = static_cast<int>(block_ - m_.global_index(s, 0));
  out_.warnings.push_back(absl::StrCat(
      "the offline plan this ", kEthosUOp, " model carries (Vela's) is kept: ",
      kept.size(), " tensor(s) stay at its offsets, inside one block of ",
      block.bytes, " bytes (", m_.TensorLabel(s, t),
      own == block.bytes ? "" : absl::StrCat(", grown from ", own, " bytes"),
      "); the other tensors are planned around it"));
}

// Scratch tensors `op` reads that no earlier op of this walk wrote.
std::vector<int64_t> Importer::FreshScratch(int s, const tfl::Operator& op) {
  std::vector<int64_t> fresh;
  for (int k = 0; k < Size(op.inputs()); ++k) {
    if (op.inputs()->Get(k) < 0) continue;
    const int64_t g = m_.global_index(s, op.inputs()->Get(k));
    if (info_[g].scratch && info_[g].graph_index >= 0 && !scratch_written_[g]) {
      scratch_written_[g] = 1;
      fresh.push_back(g);
    }
  }
  return fresh;
}

void Importer::NameTensors() {
  absl::flat_hash_map<std::string, int> subgraph_names;
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    ++subgraph_names[m_.SubgraphLabel(s)];
  }
  absl::flat_hash_set<std::string> used;
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    const auto* name = m_.subgraph(s).name();
    std::string prefix = name == nullptr ? "" : m_.SubgraphLabel(s);
    // SubgraphLabel is "subgraph N ('name')": keep the name alone.
    const size_t quote = prefix.find("('");
    prefix = quote == std::string::npos
                 ? ""
                 : prefix.substr(quote + 2, prefix.size() - quote - 4);
    if (prefix.empty() || subgraph_names[m_.SubgraphLabel(s)] > 1) {
      prefix = absl::StrCat("subgraph", s);
    }
    prefixes_.push_back(s == 0 ? "" : prefix + "/");
    for (int t = 0; t < m_.tensor_count(s); ++t) {
      TensorInfo& info = info_[m_.global_index(s, t)];
      if (info.bytes == 0 || (info.kept && !info.block)) continue;
      std::string raw = m_.RawTensorName(s, t);
      if (raw.empty()) raw = absl::StrCat("tensor#", t);
      std::string unique = prefixes_[s] + raw;
      for (int k = 0; !used.insert(unique).second; ++k) {
        unique = absl::StrCat(prefixes_[s], raw, "#", s, ":", t,
                              k == 0 ? "" : absl::StrCat("-", k));
      }
      info.name = std::move(unique);
    }
  }
}

void Importer::AddTensors() {
  for (int s = 0; s < m_.subgraph_count(); ++s) {
    for (int t = 0; t < m_.tensor_count(s); ++t) {
      TensorInfo& info = info_[m_.global_index(s, t)];
      if (info.bytes == 0) {
        ++out_.stats.empty_values;
        continue;
      }
      if (info.kept && !info.block) continue;  // inside the block
      info.graph_index = out_.graph->tensors_size();
      v1::Tensor* tensor = out_.graph->add_tensors();
      tensor->set_name(info.name);
      tensor->set_size_bytes(info.bytes);
      tensor->set_constant(info.constant);
      tensor->set_variable(info.variable);
      if (info.block) tensor->set_alignment(kKeptBlockAlignment);
      if (info.scratch || info.block) {
        out_.scratch.push_back(info.graph_index);
      }
      out_.tflite_tensors.push_back({s, t});
      out_.stats.weights += info.constant;
      out_.stats.subgraph_values += s > 0;
    }
  }
  for (ImportedModel::KeptTensor& k : out_.tflite_kept) {
    k.block = info_[block_].graph_index;
  }
  stamp_.assign(info_.size(), -1);
}

std::string Importer::OpName(int s, int i) const {
  return absl::StrCat(Prefix(s), m_.OpType(m_.op(s, i)), "#", i);
}

std::vector<int64_t> Importer::Operands(int s,
                                        const flatbuffers::Vector<int32_t>* v,
                                        bool skip_constants) {
  std::vector<int64_t> out;
  for (int k = 0; k < Size(v); ++k) {
    if (v->Get(k) < 0) continue;
    int64_t g = m_.global_index(s, v->Get(k));
    if (info_[g].kept) g = block_;  // a tensor inside the block uses it
    if (info_[g].graph_index < 0 || stamp_[g] == op_serial_) continue;
    if (skip_constants && info_[g].constant) continue;
    stamp_[g] = op_serial_;
    out.push_back(g);
  }
  return out;
}

std::vector<int64_t> Importer::Closure(int s) {
  std::vector<int> stack = {s};
  std::vector<char> seen(m_.subgraph_count(), 0);
  seen[s] = 1;
  std::vector<int64_t> out;
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    for (int t = 0; t < m_.tensor_count(c); ++t) {
      const int64_t g = m_.global_index(c, t);
      if (info_[g].graph_index >= 0 && !info_[g].constant &&
          stamp_[g] != op_serial_) {
        stamp_[g] = op_serial_;
        out.push_back(g);
      }
    }
    for (int i = 0; i < m_.op_count(c); ++i) {
      for (const SubgraphCall& call : m_.CalledSubgraphs(m_.op(c, i))) {
        if (!seen[call.subgraph]) {
          seen[call.subgraph] = 1;
          stack.push_back(call.subgraph);
        }
      }
    }
  }
  return out;
}

void Importer::EmitOp(const std::string& name, std::vector<int64_t> in,
                      std::vector<int64_t> out) {
  ++op_serial_;  // operand lists of the next op start afresh
  if (block_ >= 0) {
    // The block lives from the first op using a tensor inside it (which
    // writes it) to the last (which reads it).
    const auto uses = [&](std::vector<int64_t>* v) {
      const auto it = std::remove(v->begin(), v->end(), block_);
      const bool found = it != v->end();
      v->erase(it, v->end());
      return found;
    };
    const bool in_uses = uses(&in), out_uses = uses(&out);
    if (in_uses || out_uses) {
      (block_written_ ? in : out).push_back(block_);
      block_written_ = true;
    }
  }
  if (!emit_) return;
  v1::Op* op = out_.graph->add_ops();
  std::string unique = name;
  for (int k = 1; !op_names_.insert(unique).second; ++k) {
    unique = absl::StrCat(name, "-", k);
  }
  op->set_name(std::move(unique));
  for (int64_t g : in) op->add_inputs(info_[g].name);
  for (int64_t g : out) op->add_outputs(info_[g].name);
}

absl::Status Importer::Walk(int s, int depth) {
  if (depth > kMaxNesting) {
    return Invalid(m_.name(), ": subgraphs run subgraphs more than ",
                   kMaxNesting, " deep (at ", m_.SubgraphLabel(s), ")");
  }
  walked_[s] = 1;
  on_stack_[s] = 1;
  for (int i = 0; i < m_.op_count(s); ++i) {
    if (++ops_walked_ % 256 == 0) {
      if (auto st = CheckCancel(); !st.ok()) return st;
    }
    const tfl::Operator& op = m_.op(s, i);
    const std::vector<SubgraphCall> calls = m_.CalledSubgraphs(op);
    if (!calls.empty()) {
      if (auto st = RunSubgraphs(s, i, calls, depth); !st.ok()) return st;
      continue;
    }
    std::vector<int64_t> in = Operands(s, op.inputs());
    ++op_serial_;
    std::vector<int64_t> out = Operands(s, op.outputs());
    for (int64_t g : Operands(s, op.intermediates())) out.push_back(g);
    const std::vector<int64_t> scratch = FreshScratch(s, op);
    refs_ += static_cast<int64_t>(in.size() + out.size() + scratch.size());
    if (!scratch.empty()) EmitOp(OpName(s, i) + "/scratch", {}, scratch);
    EmitOp(OpName(s, i), in, out);
  }
  on_stack_[s] = 0;
  return absl::OkStatus();
}

absl::Status Importer::RunSubgraphs(int s, int i,
                                    const std::vector<SubgraphCall>& calls,
                                    int depth) {
  const tfl::Operator& op = m_.op(s, i);
  const std::string node = OpName(s, i);
  const std::vector<int64_t> node_in = Operands(s, op.inputs());
  ++op_serial_;
  const std::vector<int64_t> node_out = Operands(s, op.outputs());
  out_.stats.control_flow_nodes += emit_;
  for (size_t k = 0; k < calls.size(); ++k) {
    const int c = calls[k].subgraph;
    const std::string base = absl::StrCat(node, "/", calls[k].role);
    if (on_stack_[c]) {
      return Invalid(m_.name(), ": op ", i, " (", m_.OpType(op), ") of ",
                     m_.SubgraphLabel(s), " runs ", m_.SubgraphLabel(c),
                     ", which is already running (a subgraph cannot run "
                     "itself)");
    }
    const bool first = k == 0, last = k + 1 == calls.size();
    if (!emit_) ++calls_total_[c];
    const bool final_call = emit_ && ++calls_seen_[c] == calls_total_[c];
    std::vector<int64_t> writes = first ? node_out : std::vector<int64_t>{};
    std::vector<int64_t> reads_after;  // the last exit keeps the node alive
    if (last) {
      reads_after = node_in;
      reads_after.insert(reads_after.end(), node_out.begin(), node_out.end());
    }
    if (walked_[c]) {
      // Run again: its tensors already exist; keep them alive until its
      // last call, and do not write its inputs a second time.
      std::vector<int64_t> in = node_in;
      if (final_call) {
        ++op_serial_;
        for (int64_t g : Closure(c)) in.push_back(g);
      }
      if (last && !first) {
        in.insert(in.end(), node_out.begin(), node_out.end());
      }
      refs_ += static_cast<int64_t>(in.size() + writes.size());
      EmitOp(base + "/call", in, writes);
    } else {
      ++op_serial_;
      for (int64_t g : Operands(c, m_.subgraph(c).inputs(), true)) {
        writes.push_back(g);
      }
      refs_ += static_cast<int64_t>(node_in.size() + writes.size());
      EmitOp(base + "/enter", node_in, writes);
      if (auto st = Walk(c, depth + 1); !st.ok()) return st;
      ++op_serial_;
      std::vector<int64_t> reads = Operands(c, m_.subgraph(c).outputs());
      reads.insert(reads.end(), reads_after.begin(), reads_after.end());
      refs_ += static_cast<int64_t>(reads.size());
      EmitOp(base + "/exit", reads, {});
    }
    if (refs_ > kTfliteMaxTensorRefs) {
      return absl::ResourceExhaustedError(
          absl::StrCat(m_.name(), ": the subgraph calls expand to more than ",
                       kTfliteMaxTensorRefs, " tensor references"));
    }
  }
  return absl::OkStatus();
}

absl::Status Importer::WalkAll() {
  refs_ = 0;
  scratch_written_.assign(info_.size(), 0);
  block_written_ = false;
  // As in TFLM, the main inputs are created before the first operator and
  // live until their last use, the outputs from their producer to the end.
  const tfl::SubGraph& main = m_.subgraph(0);
  ++op_serial_;
  const std::vector<int64_t> inputs = Operands(0, main.inputs(), true);
  EmitOp("model/inputs", {}, inputs);
  if (auto st = Walk(0, 0); !st.ok()) return st;
  ++op_serial_;
  const std::vector<int64_t> outputs = Operands(0, main.outputs(), true);
  EmitOp("model/outputs", outputs, {});
  if (emit_) {
    // An input or output inside a kept block is reported with the block.
    for (int64_t g : inputs) {
      if (g != block_) out_.main_inputs.push_back(info_[g].graph_index);
    }
    for (int64_t g : outputs) {
      if (g != block_) out_.main_outputs.push_back(info_[g].graph_index);
    }
  }
  for (int s = 1; s < m_.subgraph_count(); ++s) {
    if (walked_[s]) continue;
    // Run by no operator (another signature's graph): after the others.
    const std::string base = Prefix(s).substr(0, Prefix(s).size() - 1);
    ++op_serial_;
    EmitOp(base + "/enter", {}, Operands(s, m_.subgraph(s).inputs(), true));
    if (auto st = Walk(s, 1); !st.ok()) return st;
    ++op_serial_;
    EmitOp(base + "/exit", Operands(s, m_.subgraph(s).outputs()), {});
    if (emit_) {
      out_.warnings.push_back(absl::StrCat(
          m_.SubgraphLabel(s),
          " is run by no operator of the main graph; it is planned after "
          "it"));
    }
  }
  return absl::OkStatus();
}

void Importer::Finish() {
  out_.format = Format::kTflite;
  out_.graph->set_name(m_.name());
  out_.stats.tensors = out_.graph->tensors_size();
  out_.stats.ops = out_.graph->ops_size();
  out_.stats.subgraphs = m_.subgraph_count();
  out_.tflite_tensor_count = m_.tensor_count();
}

}  // namespace

absl::StatusOr<int64_t> TfliteTensorBytes(int type,
                                          const std::vector<int64_t>& dims,
                                          absl::string_view what) {
  const int bits = ElementBits(type);
  if (bits < 0) return Invalid(what, ": unknown element type ", type);
  if (bits == 0) {
    return Invalid(what, ": ", TfliteTypeName(type),
                   " tensors have no size known before run time");
  }
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return Invalid(what, ": negative dim ", d);
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxBytes / 16) {
      return Invalid(what, ": ", DimsText(dims),
                     " holds more than 2^58 "
                     "elements");
    }
  }
  // count <= 2^58 and an element is at most 16 bytes: at most 2^62 bytes,
  // computed in bytes (in bits it would pass 2^63).
  if (bits < 8) return (count * bits + 7) / 8;
  return count * (bits / 8);
}

absl::StatusOr<ImportedModel> ImportTflite(absl::string_view bytes,
                                           absl::string_view name,
                                           const ModelOptions& options) {
  absl::StatusOr<TfliteModel> parsed = TfliteModel::Parse(bytes, name);
  if (!parsed.ok()) return parsed.status();
  auto m = std::make_shared<const TfliteModel>(*std::move(parsed));
  absl::StatusOr<ImportedModel> model = Importer(*m, options).Run();
  if (!model.ok()) return model.status();
  if (options.cancel != nullptr && options.cancel->Cancelled()) {
    return absl::DeadlineExceededError(
        absl::StrCat(name, ": import cancelled"));
  }
  absl::StatusOr<std::vector<TflmTensorUse>> uses = TflmTensorUses(*m);
  if (uses.ok()) {
    model->tflm_uses = *std::move(uses);
  } else {
    model->tflm_uses_status = uses.status();  // no baseline; the plan goes on
  }
  for (int s = 0; s < m->subgraph_count(); ++s) {
    model->tflite_tensor_base.push_back(m->global_index(s, 0));
  }
  model->tflite = std::move(m);
  return model;
}

}  // namespace memplan::formats
