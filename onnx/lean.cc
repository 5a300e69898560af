#include "onnx/lean.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/cancel.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "onnx/internal/model_reading.h"
#include "onnx/onnx_pb.h"

namespace memplan::formats {
namespace {

// Debian's libonnx is built with ONNX_NAMESPACE=onnx (and ONNX_ML); the alias
// keeps this file right for any namespace the library was built with.
namespace onnx = ::ONNX_NAMESPACE;

using ::google::protobuf::io::CodedInputStream;
using ::google::protobuf::io::CodedOutputStream;
using WireFormatLite = ::google::protobuf::internal::WireFormatLite;
using WireType = WireFormatLite::WireType;

// Messages nested deeper than this are copied as they are.
constexpr int kMaxLeanDepth = 64;
// Larger inputs are returned as they are: protobuf parses at most 2 GiB - 1
// bytes, and refuses sizes this close to it.
constexpr size_t kMaxLeanBytes = INT_MAX - 64;
// data_location = EXTERNAL, as protobuf writes it.
constexpr char kExternalField[] = {
    static_cast<char>(onnx::TensorProto::kDataLocationFieldNumber << 3 |
                      WireFormatLite::WIRETYPE_VARINT),
    static_cast<char>(onnx::TensorProto::EXTERNAL)};

// The messages the walk looks into.
enum class Kind { kModel, kGraph, kNode, kAttribute, kTensor };

// The kind of the message a length-delimited field `number` of a `parent`
// holds, when the walk follows it: the graphs and tensors SanitizeTensors
// visits (onnx/internal/model_reading.h), nothing else.
std::optional<Kind> ChildKind(Kind parent, uint32_t number) {
  switch (parent) {
    case Kind::kModel:
      if (number == onnx::ModelProto::kGraphFieldNumber) return Kind::kGraph;
      break;
    case Kind::kGraph:
      if (number == onnx::GraphProto::kNodeFieldNumber) return Kind::kNode;
      if (number == onnx::GraphProto::kInitializerFieldNumber) {
        return Kind::kTensor;
      }
      break;
    case Kind::kNode:
      if (number == onnx::NodeProto::kAttributeFieldNumber) {
        return Kind::kAttribute;
      }
      break;
    case Kind::kAttribute:
      if (number == onnx::AttributeProto::kTFieldNumber ||
          number == onnx::AttributeProto::kTensorsFieldNumber) {
        return Kind::kTensor;
      }
      if (number == onnx::AttributeProto::kGFieldNumber ||
          number == onnx::AttributeProto::kGraphsFieldNumber) {
        return Kind::kGraph;
      }
      break;
    case Kind::kTensor:
      break;
  }
  return std::nullopt;
}

// One field as it lies in its message.
struct Field {
  uint32_t number = 0;                              // field number
  WireType type = WireFormatLite::WIRETYPE_VARINT;  // wire type
  size_t begin = 0;         // offset of its tag in the message
  size_t tag_bytes = 0;     // bytes of its tag
  size_t end = 0;           // offset past its value
  uint64_t varint = 0;      // the value, for WIRETYPE_VARINT
  absl::string_view value;  // the content, for WIRETYPE_LENGTH_DELIMITED
};

// Whether a varint of `bytes` bytes is the shortest encoding of `value`.
bool Shortest(uint32_t value, int bytes) {
  return CodedOutputStream::VarintSize32(value) == static_cast<size_t>(bytes);
}

// Reads the fields of one message with protobuf's reader, at least as
// strictly as protobuf's parser: a tag or length this walk would rewrite or
// drop must mean for protobuf what it means here, so tags and lengths must
// be in their shortest form (as every serializer writes them).
class FieldReader {
 public:
  explicit FieldReader(absl::string_view msg)
      : msg_(msg),
        in_(reinterpret_cast<const uint8_t*>(msg.data()),
            static_cast<int>(msg.size())) {}

  // Reads the next field; false at the end or on malformed data (then
  // malformed() is true).
  bool Next(Field* f) {
    *f = Field();
    const int begin = in_.CurrentPosition();
    if (static_cast<size_t>(begin) >= msg_.size()) return false;
    const uint32_t tag = in_.ReadTagNoLastTag();
    const int tag_bytes = in_.CurrentPosition() - begin;
    if (tag == 0 || !Shortest(tag, tag_bytes) ||
        WireFormatLite::GetTagFieldNumber(tag) == 0) {
      return Fail();
    }
    f->number = static_cast<uint32_t>(WireFormatLite::GetTagFieldNumber(tag));
    f->type = WireFormatLite::GetTagWireType(tag);
    f->begin = static_cast<size_t>(begin);
    f->tag_bytes = static_cast<size_t>(tag_bytes);
    if (!ReadValue(tag, f)) return Fail();
    f->end = static_cast<size_t>(in_.CurrentPosition());
    return true;
  }

  bool malformed() const { return malformed_; }

 private:
  // Reads or skips the value of a field whose tag was just read.
  bool ReadValue(uint32_t tag, Field* f) {
    switch (f->type) {
      case WireFormatLite::WIRETYPE_VARINT:
        return in_.ReadVarint64(&f->varint);
      case WireFormatLite::WIRETYPE_FIXED64:
        return in_.Skip(8);
      case WireFormatLite::WIRETYPE_FIXED32:
        return in_.Skip(4);
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        const int at = in_.CurrentPosition();
        uint32_t length = 0;
        if (!in_.ReadVarint32(&length)) return false;
        const int start = in_.CurrentPosition();
        if (!Shortest(length, start - at) ||
            length > msg_.size() - static_cast<size_t>(start)) {
          return false;
        }
        f->value = msg_.substr(static_cast<size_t>(start), length);
        return in_.Skip(static_cast<int>(length));  // not read: skipped
      }
      case WireFormatLite::WIRETYPE_START_GROUP:
        return WireFormatLite::SkipField(&in_, tag);
      default:  // a stray end of group, or no wire type
        return false;
    }
  }

  bool Fail() {
    malformed_ = true;
    return false;
  }

  absl::string_view msg_;
  CodedInputStream in_;
  bool malformed_ = false;
};

// Calls add(value) for each varint packed in `packed`; false when one is
// malformed (protobuf's parser would refuse it too).
template <typename Add>
bool ForEachPackedVarint(absl::string_view packed, const Add& add) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(packed.data()),
                      static_cast<int>(packed.size()));
  while (static_cast<size_t>(in.CurrentPosition()) < packed.size()) {
    uint64_t v = 0;
    if (!in.ReadVarint64(&v)) return false;
    add(v);
  }
  return true;
}

// Adds to *held the elements one occurrence of a typed data field holds
// (`element`: the wire type of one element; packed, or one by one); false
// for any other wire type (protobuf keeps such a field as an unknown one)
// or a malformed packing.
bool CountData(const Field& f, WireType element, int64_t* held) {
  if (f.type == element) {
    ++*held;
    return true;
  }
  if (f.type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) return false;
  const auto size = static_cast<int64_t>(f.value.size());
  switch (element) {
    case WireFormatLite::WIRETYPE_FIXED32:
      *held += size / 4;
      return size % 4 == 0;
    case WireFormatLite::WIRETYPE_FIXED64:
      *held += size / 8;
      return size % 8 == 0;
    case WireFormatLite::WIRETYPE_VARINT:
      return ForEachPackedVarint(f.value, [&](uint64_t) { ++*held; });
    default:
      return false;
  }
}

// Reads one field of a tensor into what the sanitizer judges; notes the
// fields that go when the tensor's data is cleared in *data. False when
// the field is not as protobuf would read it into the tensor (the tensor is
// then kept as it is).
bool ReadTensorField(const Field& f, internal::TensorDataFacts* t,
                     std::vector<std::pair<size_t, size_t>>* data) {
  using T = onnx::TensorProto;
  constexpr WireType kVarint = WireFormatLite::WIRETYPE_VARINT;
  switch (f.number) {
    case T::kDimsFieldNumber:
      if (f.type == kVarint) {
        t->dims.push_back(static_cast<int64_t>(f.varint));
        return true;
      }
      return f.type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
             ForEachPackedVarint(f.value, [&](uint64_t v) {
               t->dims.push_back(static_cast<int64_t>(v));
             });
    case T::kDataTypeFieldNumber:  // int32: the low 32 bits, as protobuf
      t->data_type = static_cast<int32_t>(static_cast<uint32_t>(f.varint));
      return f.type == kVarint;
    case T::kDataLocationFieldNumber:  // other values: unknown fields
      data->emplace_back(f.begin, f.end);
      t->external = f.varint == T::EXTERNAL;
      return f.type == kVarint &&
             (f.varint == T::DEFAULT || f.varint == T::EXTERNAL);
    case T::kRawDataFieldNumber:  // the last one counts
      data->emplace_back(f.begin, f.end);
      t->has_raw = true;
      t->raw_bytes = static_cast<int64_t>(f.value.size());
      return f.type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    case T::kStringDataFieldNumber:
      data->emplace_back(f.begin, f.end);
      return CountData(f, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &t->held);
    case T::kFloatDataFieldNumber:
      data->emplace_back(f.begin, f.end);
      return CountData(f, WireFormatLite::WIRETYPE_FIXED32, &t->held);
    case T::kDoubleDataFieldNumber:
      data->emplace_back(f.begin, f.end);
      return CountData(f, WireFormatLite::WIRETYPE_FIXED64, &t->held);
    case T::kInt32DataFieldNumber:
    case T::kInt64DataFieldNumber:
    case T::kUint64DataFieldNumber:
      data->emplace_back(f.begin, f.end);
      return CountData(f, kVarint, &t->held);
    default:
      return true;
  }
}

// Writes a varint as protobuf does.
void AppendVarint32(uint32_t value, std::string* out) {
  uint8_t buffer[5];
  const uint8_t* end = CodedOutputStream::WriteVarint32ToArray(value, buffer);
  out->append(reinterpret_cast<const char*>(buffer),
              static_cast<size_t>(end - buffer));
}

// Builds the lean form of a model, message by message: a message that does
// not change is never copied here (its parent copies its bytes once).
class Leaner {
 public:
  Leaner(const std::function<void(absl::string_view)>& release,
         const base::CancelToken* cancel)
      : release_(release), meter_(cancel) {}

  // True when `msg`, a message of `kind` nested `depth` deep, changes: its
  // lean form is then in *out. False when it stays as it is, when the
  // input is malformed (malformed() tells) or the token fired (stopped()).
  bool Lean(Kind kind, absl::string_view msg, int depth, std::string* out) {
    if (depth > kMaxLeanDepth || malformed_) return false;
    // A unit per 4 bytes and 8 per message: a poll every few thousand
    // nodes, a few milliseconds of the walk.
    if (meter_.Stop(static_cast<int64_t>(msg.size() / 4) + 8)) {
      stopped_ = true;
      return Fail();
    }
    return kind == Kind::kTensor ? LeanTensor(msg, out)
                                 : LeanParent(kind, msg, depth, out);
  }

  bool malformed() const { return malformed_; }
  bool stopped() const { return stopped_; }

 private:
  // A field of a parent replaced by the lean form of its message.
  struct Edit {
    Field field;       // where it lies in the parent
    std::string lean;  // its message's lean form
  };

  // A model, graph, node or attribute: the children the walk follows are
  // made lean, everything else is copied.
  bool LeanParent(Kind kind, absl::string_view msg, int depth,
                  std::string* out) {
    std::vector<std::pair<Field, Kind>> children;
    int t_fields = 0;  // AttributeProto.t: singular, so repeats merge
    FieldReader reader(msg);
    Field f;
    while (reader.Next(&f)) {
      if (f.type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) continue;
      Release(f.value);  // read again only if it is a child or copied
      std::optional<Kind> child = ChildKind(kind, f.number);
      if (!child) continue;
      if (kind == Kind::kAttribute &&
          f.number == onnx::AttributeProto::kTFieldNumber) {
        ++t_fields;
      }
      children.emplace_back(f, *child);
    }
    if (reader.malformed()) return Fail();
    std::vector<Edit> edits;
    for (const auto& [field, child] : children) {
      // Two `t` merge into one tensor, judged whole: both stay as they are.
      if (t_fields > 1 && field.number == onnx::AttributeProto::kTFieldNumber)
        continue;
      std::string lean;
      if (Lean(child, field.value, depth + 1, &lean)) {
        edits.push_back({field, std::move(lean)});
      }
      if (malformed_) return false;
    }
    if (edits.empty()) return false;
    Splice(msg, edits, out);
    return true;
  }

  // A tensor: its data fields go when the sanitizer would clear them for
  // size, and it is marked external.
  bool LeanTensor(absl::string_view msg, std::string* out) {
    internal::TensorDataFacts facts;
    std::vector<std::pair<size_t, size_t>> data;  // [begin, end) of each
    bool as_protobuf_reads = true;
    FieldReader reader(msg);
    Field f;
    while (reader.Next(&f)) {
      as_protobuf_reads =
          ReadTensorField(f, &facts, &data) && as_protobuf_reads;
    }
    if (reader.malformed()) return Fail();
    // A large tensor without data gains nothing (the sanitizer marks it).
    if (!as_protobuf_reads || (!facts.has_raw && facts.held == 0) ||
        internal::JudgeTensorData(facts) !=
            internal::TensorDataVerdict::kClearLarge) {
      return false;
    }
    out->clear();
    size_t at = 0;
    for (const auto& [begin, end] : data) {
      absl::StrAppend(out, msg.substr(at, begin - at));
      at = end;
    }
    absl::StrAppend(out, msg.substr(at));
    out->append(kExternalField, sizeof(kExternalField));
    Release(msg);
    return true;
  }

  // Copies `msg` into *out with each edit's field rewritten: the same tag,
  // a new length, the lean content.
  static void Splice(absl::string_view msg, const std::vector<Edit>& edits,
                     std::string* out) {
    size_t bytes = msg.size();  // an upper bound: lean forms are smaller
    for (const Edit& e : edits) bytes -= e.field.value.size();
    for (const Edit& e : edits) bytes += e.lean.size();
    out->clear();
    out->reserve(bytes);
    size_t at = 0;
    for (const Edit& e : edits) {
      absl::StrAppend(out, msg.substr(at, e.field.begin - at));
      // The tag written anew (tags are read in their shortest form only, so
      // the bytes are the same) rather than copied: its page of a mapped
      // file was released and stays so.
      AppendVarint32(
          WireFormatLite::MakeTag(e.field.number,
                                  WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
          out);
      AppendVarint32(static_cast<uint32_t>(e.lean.size()), out);
      out->append(e.lean);
      at = e.field.end;
    }
    absl::StrAppend(out, msg.substr(at));
  }

  bool Fail() {
    malformed_ = true;
    return false;
  }

  // Tells the caller the walk is done with `part` for now.
  void Release(absl::string_view part) const {
    if (release_) release_(part);
  }

  const std::function<void(absl::string_view)>& release_;
  base::WorkMeter meter_;
  bool malformed_ = false;
  bool stopped_ = false;
};

}  // namespace

absl::StatusOr<std::string> LeanOnnxModel(
    absl::string_view bytes,
    const std::function<void(absl::string_view)>& release,
    const base::CancelToken* cancel) {
  if (bytes.size() > kMaxLeanBytes) return std::string(bytes);
  Leaner leaner(release, cancel);
  std::string lean;
  const bool changed = leaner.Lean(Kind::kModel, bytes, 0, &lean);
  if (leaner.stopped()) {
    return absl::DeadlineExceededError("reading the ONNX model cancelled");
  }
  if (!changed || leaner.malformed()) {
    return std::string(bytes);
  }
  return lean;
}

}  // namespace memplan::formats
