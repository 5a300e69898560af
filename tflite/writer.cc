#include "tflite/writer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/convert.h"
#include "tflite/model.h"
#include "tflite/reader.h"

namespace memplan::formats {
namespace {

// The original bytes move by a multiple of this when a new root goes in
// front, so data aligned to it (or less) stays aligned.
constexpr size_t kShiftAlignment = 64;
constexpr int64_t kMaxFlatbuffer = FLATBUFFERS_MAX_BUFFER_SIZE - 1;
constexpr int kModelFields = 8;  // fields of Model in the public schema

// Model field ids (tflite_schema.fbs order).
enum ModelField {
  kVersion = 0,
  kOperatorCodes = 1,
  kSubgraphs = 2,
  kDescription = 3,
  kBuffers = 4,
  kMetadataBuffer = 5,
  kMetadata = 6,
  kSignatureDefs = 7,
};

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void SetU32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>(v >> (8 * i));
}

void SetU64(std::string* out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*out)[at + i] = static_cast<char>(v >> (8 * i));
}

// The plan's words, little-endian.
std::string PlanWords(int subgraphs, const std::vector<int32_t>& offsets) {
  std::string words;
  PutU32(&words, kOfflinePlanVersion);
  PutU32(&words, static_cast<uint32_t>(subgraphs));
  PutU32(&words, static_cast<uint32_t>(offsets.size()));
  for (int32_t o : offsets) PutU32(&words, static_cast<uint32_t>(o));
  return words;
}

bool IsPlanEntry(const tfl::Metadata* m) {
  return m->name() != nullptr &&
         absl::string_view(m->name()->c_str(), m->name()->size()) ==
             kOfflinePlanMetadata;
}

// Where `p` (inside the model's bytes) sits in the file.
size_t PosOf(const TfliteModel& m, const void* p) {
  return static_cast<size_t>(static_cast<const char*>(p) - m.bytes().data());
}

// Buffers that something other than an offline plan entry uses: tensors,
// other metadata, the deprecated metadata_buffer list, the sentinel.
std::vector<char> BuffersInUse(const TfliteModel& m) {
  std::vector<char> used(m.buffer_count() + 1, 0);
  used[0] = 1;
  for (int s = 0; s < m.subgraph_count(); ++s) {
    for (int t = 0; t < m.tensor_count(s); ++t) {
      const uint32_t b = m.tensor(s, t).buffer();
      if (b < used.size()) used[b] = 1;
    }
  }
  const tfl::Model& model = m.model();
  for (int i = 0; i < Size(model.metadata()); ++i) {
    if (!IsPlanEntry(model.metadata()->Get(i))) {
      used[model.metadata()->Get(i)->buffer()] = 1;
    }
  }
  for (int i = 0; i < Size(model.metadata_buffer()); ++i) {
    used[model.metadata_buffer()->Get(i)] = 1;
  }
  return used;
}

// Writes `words` over the data of every existing plan entry when each owns
// a buffer of exactly that length; nullopt when one does not (or none is
// there).
std::optional<std::string> OverwriteInPlace(const TfliteModel& m,
                                            const std::string& words) {
  const tfl::Model& model = m.model();
  const std::vector<char> used = BuffersInUse(m);
  std::vector<size_t> places;
  for (int i = 0; i < Size(model.metadata()); ++i) {
    const tfl::Metadata* entry = model.metadata()->Get(i);
    if (!IsPlanEntry(entry)) continue;
    const uint32_t b = entry->buffer();
    if (used[b]) return std::nullopt;
    const tfl::Buffer* buffer = model.buffers()->Get(b);
    if (buffer->offset() > 1 || buffer->data() == nullptr ||
        buffer->data()->size() != words.size()) {
      return std::nullopt;
    }
    places.push_back(PosOf(m, buffer->data()->data()));
  }
  if (places.empty()) return std::nullopt;
  std::string out(m.bytes());
  for (size_t at : places) out.replace(at, words.size(), words);
  return out;
}

// The model's root table holds no field this build's schema lacks.
absl::Status CheckModelFields(const TfliteModel& m) {
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(&m.model());
  const uint8_t* vtable = table->GetVTable();
  const int slots = (flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable) -
                     2 * static_cast<int>(sizeof(flatbuffers::voffset_t))) /
                    static_cast<int>(sizeof(flatbuffers::voffset_t));
  for (int id = kModelFields; id < slots; ++id) {
    if (flatbuffers::ReadScalar<flatbuffers::voffset_t>(
            vtable + sizeof(flatbuffers::voffset_t) * (2 + id)) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          m.name(), ": the model's root table has field ", id,
          ", newer than memplan's TFLite schema; it cannot be copied "
          "faithfully"));
    }
  }
  return absl::OkStatus();
}

// The bytes put in front of the original file: written front to back, every
// reference pointing forward (to a later object of the prefix or into the
// original bytes, which follow it), resolved once the prefix's length is
// known.
class Prefix {
 public:
  // A place a reference points to: an object of the prefix (by the id
  // Mark gave it) or a position in the original bytes.
  struct Target {
    bool in_prefix = false;
    int id = 0;          // with in_prefix
    size_t old_pos = 0;  // without
  };
  static Target Old(size_t pos) { return {false, 0, pos}; }
  static Target New(int id) { return {true, id, 0}; }

  // A table field: a uint32 scalar, or a reference.
  struct Field {
    int id = 0;                      // field id in the schema
    std::optional<uint32_t> scalar;  // a uint32 value, or
    std::optional<Target> ref;       // a reference
  };

  Prefix() {
    PutU32(&buf_, 0);  // the root, set by Finish
    buf_ += "TFL3";
  }

  // Names the next object written, for references to it.
  void Mark(int id) {
    if (static_cast<size_t>(id) >= marks_.size()) marks_.resize(id + 1, 0);
    marks_[id] = buf_.size();
  }

  // A table with `fields` (ids in increasing order); returns its position.
  size_t Table(const std::vector<Field>& fields, int id) {
    const int slots = fields.empty() ? 0 : fields.back().id + 1;
    const size_t vtable_bytes = 4 + 2 * static_cast<size_t>(slots);
    while ((buf_.size() + vtable_bytes) % 4 != 0) buf_.push_back(0);
    const size_t vtable = buf_.size();
    std::vector<uint16_t> entries(2 + slots, 0);
    entries[0] = static_cast<uint16_t>(vtable_bytes);
    entries[1] = static_cast<uint16_t>(4 + 4 * fields.size());
    for (size_t k = 0; k < fields.size(); ++k) {
      entries[2 + fields[k].id] = static_cast<uint16_t>(4 + 4 * k);
    }
    for (uint16_t e : entries) {
      buf_.push_back(static_cast<char>(e & 0xFF));
      buf_.push_back(static_cast<char>(e >> 8));
    }
    Mark(id);
    const size_t table = buf_.size();
    PutU32(&buf_, static_cast<uint32_t>(table - vtable));  // soffset
    for (const Field& f : fields) {
      if (f.ref.has_value()) Ref(*f.ref);
      if (!f.ref.has_value()) PutU32(&buf_, f.scalar.value_or(0));
    }
    return table;
  }

  // A vector of references.
  void Vector(const std::vector<Target>& elements, int id) {
    while (buf_.size() % 4 != 0) buf_.push_back(0);
    Mark(id);
    PutU32(&buf_, static_cast<uint32_t>(elements.size()));
    for (const Target& t : elements) Ref(t);
  }

  // A string, or a byte vector whose bytes start 16-aligned.
  void Bytes(absl::string_view bytes, bool is_string, int id) {
    while ((buf_.size() + 4) % (is_string ? 4 : 16) != 0) buf_.push_back(0);
    Mark(id);
    PutU32(&buf_, static_cast<uint32_t>(bytes.size()));
    buf_.append(bytes.data(), bytes.size());
    if (is_string) buf_.push_back(0);
  }

  // The prefix padded to a multiple of kShiftAlignment, references
  // resolved, then `old` (the original bytes).
  std::string Finish(int root, absl::string_view old) {
    while (buf_.size() % kShiftAlignment != 0) buf_.push_back(0);
    const size_t shift = buf_.size();
    SetU32(&buf_, 0, static_cast<uint32_t>(marks_[root]));
    for (const auto& [at, target] : refs_) {
      const size_t to =
          target.in_prefix ? marks_[target.id] : shift + target.old_pos;
      SetU32(&buf_, at, static_cast<uint32_t>(to - at));
    }
    buf_.append(old.data(), old.size());
    return std::move(buf_);
  }

  size_t size() const { return buf_.size(); }

 private:
  void Ref(const Target& t) {
    refs_.emplace_back(buf_.size(), t);
    PutU32(&buf_, 0);
  }

  std::string buf_;
  std::vector<size_t> marks_;                    // per object id: position
  std::vector<std::pair<size_t, Target>> refs_;  // to resolve
};

// Object ids in the prefix.
enum PrefixObject {
  kModelTable,
  kBuffersVector,
  kMetadataVector,
  kPlanMetadata,
  kPlanName,
  kSentinelBuffer,
  kPlanBuffer,
  kPlanData,
};

// The buffer the plan goes to: an old buffer only an old plan entry used
// (replaced in the buffers list), else a new one at the end.
int PlanBufferIndex(const TfliteModel& m) {
  const std::vector<char> used = BuffersInUse(m);
  const tfl::Model& model = m.model();
  for (int i = 0; i < Size(model.metadata()); ++i) {
    const tfl::Metadata* entry = model.metadata()->Get(i);
    if (IsPlanEntry(entry) && !used[entry->buffer()]) return entry->buffer();
  }
  return std::max(m.buffer_count(), 1);  // keep buffer 0 the empty sentinel
}

// The new buffers list: the old buffers, the plan's at `plan`.
void WriteBuffers(const TfliteModel& m, int plan, Prefix* p) {
  std::vector<Prefix::Target> list;
  for (int b = 0; b < m.buffer_count(); ++b) {
    list.push_back(b == plan
                       ? Prefix::New(kPlanBuffer)
                       : Prefix::Old(PosOf(m, m.model().buffers()->Get(b))));
  }
  if (m.buffer_count() == 0) list.push_back(Prefix::New(kSentinelBuffer));
  if (plan >= m.buffer_count()) list.push_back(Prefix::New(kPlanBuffer));
  p->Vector(list, kBuffersVector);
}

// The new metadata list: the old entries, the plan's entry in place of the
// first old one of that name (others of that name dropped) or at the end.
void WriteMetadata(const TfliteModel& m, Prefix* p) {
  std::vector<Prefix::Target> list;
  bool placed = false;
  for (int i = 0; i < Size(m.model().metadata()); ++i) {
    const tfl::Metadata* entry = m.model().metadata()->Get(i);
    if (!IsPlanEntry(entry)) {
      list.push_back(Prefix::Old(PosOf(m, entry)));
    } else if (!placed) {
      list.push_back(Prefix::New(kPlanMetadata));
      placed = true;
    }
  }
  if (!placed) list.push_back(Prefix::New(kPlanMetadata));
  p->Vector(list, kMetadataVector);
}

// The new root: the old one's fields, with the new lists.
void WriteModelTable(const TfliteModel& m, Prefix* p) {
  const tfl::Model& model = m.model();
  std::vector<Prefix::Field> fields;
  if (model.version() != 0) fields.push_back({kVersion, model.version(), {}});
  auto old = [&](int id, const void* object) {
    if (object != nullptr)
      fields.push_back({id, {}, Prefix::Old(PosOf(m, object))});
  };
  old(kOperatorCodes, model.operator_codes());
  old(kSubgraphs, model.subgraphs());
  old(kDescription, model.description());
  fields.push_back({kBuffers, {}, Prefix::New(kBuffersVector)});
  old(kMetadataBuffer, model.metadata_buffer());
  fields.push_back({kMetadata, {}, Prefix::New(kMetadataVector)});
  old(kSignatureDefs, model.signature_defs());
  p->Table(fields, kModelTable);
}

// Positions (in the original bytes) of fields that hold file positions:
// data kept past the flatbuffer (Buffer.offset, and an operator's large
// custom options), to be moved with the bytes.
std::set<size_t> FilePositionFields(const TfliteModel& m) {
  std::set<size_t> at;
  auto field = [&](const void* table, flatbuffers::voffset_t vt) {
    const auto* t = static_cast<const flatbuffers::Table*>(table);
    if (const flatbuffers::voffset_t o = t->GetOptionalFieldOffset(vt)) {
      at.insert(PosOf(m, table) + o);
    }
  };
  for (int b = 0; b < m.buffer_count(); ++b) {
    const tfl::Buffer* buffer = m.model().buffers()->Get(b);
    if (buffer->offset() > 1) field(buffer, tfl::Buffer::VT_OFFSET);
  }
  for (int s = 0; s < m.subgraph_count(); ++s) {
    for (int i = 0; i < m.op_count(s); ++i) {
      const tfl::Operator& op = m.op(s, i);
      if (op.large_custom_options_offset() > 1) {
        field(&op, tfl::Operator::VT_LARGE_CUSTOM_OPTIONS_OFFSET);
      }
    }
  }
  return at;
}

// A new root in front of the original bytes (see the header).
absl::StatusOr<std::string> Rebuild(const TfliteModel& m,
                                    const std::string& words) {
  if (auto s = CheckModelFields(m); !s.ok()) return s;
  const int plan = PlanBufferIndex(m);
  Prefix p;
  WriteModelTable(m, &p);
  WriteBuffers(m, plan, &p);
  WriteMetadata(m, &p);
  p.Table({{0, {}, Prefix::New(kPlanName)}, {1, plan, {}}}, kPlanMetadata);
  p.Bytes(kOfflinePlanMetadata, /*is_string=*/true, kPlanName);
  if (m.buffer_count() == 0) p.Table({}, kSentinelBuffer);
  p.Table({{0, {}, Prefix::New(kPlanData)}}, kPlanBuffer);
  p.Bytes(words, /*is_string=*/false, kPlanData);
  const size_t shift =
      (p.size() + kShiftAlignment - 1) / kShiftAlignment * kShiftAlignment;
  if (static_cast<int64_t>(shift + m.bytes().size()) > kMaxFlatbuffer) {
    return absl::FailedPreconditionError(
        absl::StrCat(m.name(),
                     ": the planned model would pass the 2 GiB flatbuffer "
                     "limit"));
  }
  std::string out = p.Finish(kModelTable, m.bytes());
  for (size_t at : FilePositionFields(m)) {
    uint64_t v = 0;
    std::memcpy(&v, m.bytes().data() + at, sizeof(v));  // little-endian host
    SetU64(&out, shift + at, v + shift);
  }
  return out;
}

// A planned model given up because the call ended.
absl::Status Stopped() {
  return absl::DeadlineExceededError("emit tflite cancelled");
}

// What TFLM would read back from `bytes`: the words of the last entry named
// kOfflinePlanMetadata (TFLM keeps the last one it meets).
std::string ReadPlanWords(const TfliteModel& m) {
  std::string words;
  for (int i = 0; i < Size(m.model().metadata()); ++i) {
    const tfl::Metadata* entry = m.model().metadata()->Get(i);
    if (IsPlanEntry(entry)) words = std::string(m.BufferData(entry->buffer()));
  }
  return words;
}

// TFLite Micro's arena buffer alignment (MicroArenaBufferAlignment).
constexpr int64_t kTflmBufferAlignment = 16;

// TFLite Micro never resizes a tensor: it allocates every one from the
// shape stored in the file. A plan made for other shapes (--dim batch=N,
// --input) would put tensors where TFLM's larger ones overlap their
// neighbours, or waste what smaller ones leave: refused for this file.
absl::Status CheckStoredShape(const TfliteModel& m, const TfliteTensorRef& ref,
                              const planner::TensorPlacement& planned) {
  const tfl::Tensor& tensor = m.tensor(ref.subgraph, ref.tensor);
  if (tensor.shape() == nullptr) return absl::OkStatus();
  std::vector<int64_t> dims;
  for (int32_t d : *tensor.shape()) {
    if (d < 0) return absl::OkStatus();  // no size TFLM could allocate
    dims.push_back(d);
  }
  int type = tensor.type();
  if (type == tfl::TensorType_INT4) type = tfl::TensorType_INT8;  // unpacked
  absl::StatusOr<int64_t> stored = TfliteTensorBytes(type, dims, "");
  if (!stored.ok() || *stored == planned.size) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "emit tflite: tensor '", api::Clip(planned.name), "' is planned at ",
      planned.size, " bytes, but TFLite Micro allocates ", *stored,
      " from the shape stored in the file (it never resizes): plan the "
      "model at its stored shapes (without --dim or --input) to emit it"));
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> OfflinePlanOffsets(
    const ImportedModel& model, const planner::PlanResult& result) {
  if (!result.memory_spaces.empty()) {
    return absl::FailedPreconditionError(
        "emit tflite: TFLite Micro's offline plan describes one arena; plan "
        "without memory pools");
  }
  const TfliteModel* m = model.tflite.get();
  if (model.format != Format::kTflite || m == nullptr ||
      model.tflite_tensor_count != m->tensor_count() ||
      result.tensors.size() != model.tflite_tensors.size() ||
      static_cast<int>(result.tensors.size()) != model.graph->tensors_size()) {
    return absl::InternalError("emit tflite: the plan is not of this model");
  }
  std::vector<int32_t> offsets(m->tensor_count(), -1);
  for (size_t i = 0; i < result.tensors.size(); ++i) {
    if (model.graph->tensors(static_cast<int>(i)).constant()) continue;
    // (A kept Vela block may have grown past its tensor's shape to hold
    // the kept tensors: TFLM allocates the tensor, and each kept tensor
    // sits where Vela put it; the block's own size is memplan's.)
    const bool block = std::find(model.scratch.begin(), model.scratch.end(),
                                 static_cast<int>(i)) != model.scratch.end();
    if (absl::Status s =
            CheckStoredShape(*m, model.tflite_tensors[i], result.tensors[i]);
        !block && !s.ok()) {
      return s;
    }
    const planner::Offset o = result.OffsetOf(i);
    if (o > std::numeric_limits<int32_t>::max()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "emit tflite: tensor '", api::Clip(result.tensors[i].name),
          "' is at offset ", o,
          "; TFLite Micro's offline plan holds offsets below 2^31"));
    }
    // TFLM takes offline offsets as they are, and its kernels expect every
    // buffer aligned as its own allocator aligns them.
    if (o >= 0 && o % kTflmBufferAlignment != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "emit tflite: tensor '", api::Clip(result.tensors[i].name),
          "' is at offset ", o, ", not a multiple of ", kTflmBufferAlignment,
          " (TFLite Micro's buffer alignment): plan with --alignment ",
          kTflmBufferAlignment, " or more to emit it"));
    }
    const TfliteTensorRef& ref = model.tflite_tensors[i];
    offsets[m->global_index(ref.subgraph, ref.tensor)] =
        static_cast<int32_t>(o);
  }
  for (const ImportedModel::KeptTensor& k : model.tflite_kept) {
    if (k.block < 0 || k.block >= model.graph->tensors_size() || k.tensor < 0 ||
        k.tensor >= m->tensor_count()) {
      return absl::InternalError("emit tflite: the plan is not of this model");
    }
    const planner::Offset o = result.OffsetOf(k.block) + k.offset;
    if (result.OffsetOf(k.block) < 0 ||
        o > std::numeric_limits<int32_t>::max()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "emit tflite: tensor ", k.tensor,
          " (kept from the model's own offline plan) would be at offset ", o,
          "; TFLite Micro's offline plan holds offsets below 2^31"));
    }
    offsets[k.tensor] = static_cast<int32_t>(o);
  }
  return offsets;
}

absl::StatusOr<std::string> WriteOfflinePlan(
    absl::string_view bytes, absl::string_view name,
    const std::vector<int32_t>& offsets) {
  absl::StatusOr<TfliteModel> m = TfliteModel::Parse(bytes, name);
  if (!m.ok()) return m.status();
  return WriteOfflinePlan(*m, offsets);
}

absl::StatusOr<std::string> WriteOfflinePlan(
    const TfliteModel& model, const std::vector<int32_t>& offsets,
    const base::CancelToken* cancel) {
  auto cancelled = [&] { return cancel != nullptr && cancel->Cancelled(); };
  const TfliteModel* m = &model;
  const std::string& name = model.name();
  if (static_cast<int64_t>(offsets.size()) != m->tensor_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        m->name(), ": the plan has ", offsets.size(),
        " offsets; the model has ", m->tensor_count(), " tensors"));
  }
  const std::string words = PlanWords(m->subgraph_count(), offsets);
  if (cancelled()) return Stopped();
  std::optional<std::string> out = OverwriteInPlace(*m, words);
  if (!out.has_value()) {
    absl::StatusOr<std::string> rebuilt = Rebuild(*m, words);
    if (!rebuilt.ok()) return rebuilt.status();
    out = *std::move(rebuilt);
  }
  if (cancelled()) return Stopped();
  absl::StatusOr<TfliteModel> check = TfliteModel::Parse(*out, name);
  if (!check.ok() || ReadPlanWords(*check) != words) {
    return absl::InternalError(absl::StrCat(
        m->name(), ": the planned model does not read back (",
        check.ok() ? "other plan words" : check.status().message(), ")"));
  }
  return *std::move(out);
}

absl::StatusOr<std::string> EmitPlannedTflite(const ImportedModel& model,
                                              const planner::PlanResult& result,
                                              const base::CancelToken* cancel) {
  absl::StatusOr<std::vector<int32_t>> offsets =
      OfflinePlanOffsets(model, result);
  if (!offsets.ok()) return offsets.status();
  return WriteOfflinePlan(*model.tflite, *offsets, cancel);
}

}  // namespace memplan::formats
