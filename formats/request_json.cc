#include "formats/request_json.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace memplan::formats {
namespace {

// What a linear scan of the JSON text tells before protobuf parses it.
struct Shape {
  int depth = 0;            // deepest nesting of objects and arrays
  bool bare_graph = false;  // a top-level "tensors" or "ops" key
};

// Scans `text` once: nesting depth (strings skipped, escapes honoured) and
// the keys of the top-level object.
Shape ScanJson(absl::string_view text) {
  Shape shape;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '[') shape.depth = std::max(shape.depth, ++depth);
    if (c == '}' || c == ']') --depth;
    if (c != '"') continue;
    const size_t start = i + 1;
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\') ++i;
    }
    if (depth != 1 || i >= text.size()) continue;
    const absl::string_view key = text.substr(start, i - start);
    const size_t next = text.find_first_not_of(" \t\r\n", i + 1);
    if (next != absl::string_view::npos && text[next] == ':' &&
        (key == "tensors" || key == "ops")) {
      shape.bare_graph = true;
    }
  }
  return shape;
}

// The line of protobuf's JSON parse error: its message quotes the text
// around the error and marks the column with a caret.
int ErrorLine(absl::string_view text, absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(message, '\n');
  if (lines.size() < 3) return 0;
  const size_t caret = lines.back().find('^');
  if (caret == absl::string_view::npos) return 0;
  std::string snippet;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    absl::StrAppend(&snippet, i > 1 ? "\n" : "", lines[i]);
  }
  const size_t at = text.find(snippet);
  if (at == absl::string_view::npos) return 0;
  const size_t offset = std::min(text.size(), at + caret);
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + offset, '\n'));
}

absl::Status JsonError(absl::string_view text, absl::string_view name,
                       absl::string_view message) {
  const int line = ErrorLine(text, message);
  const absl::string_view first = message.substr(0, message.find('\n'));
  return absl::InvalidArgumentError(
      absl::StrCat(name, line > 0 ? absl::StrCat(":", line) : "",
                   ": malformed JSON: ", first.substr(0, 300)));
}

}  // namespace

absl::StatusOr<v1::PlanRequest> ParseRequestJson(absl::string_view text,
                                                 absl::string_view name) {
  // A UTF-8 byte order mark (Windows editors write one) is not JSON.
  if (absl::StartsWith(text, "\xef\xbb\xbf")) text.remove_prefix(3);
  const Shape shape = ScanJson(text);
  if (shape.depth > kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": JSON nested ", shape.depth,
                     " levels deep; a request needs few, and more than ",
                     kMaxJsonDepth, " are refused"));
  }
  v1::PlanRequest request;
  google::protobuf::Message* target =
      shape.bare_graph
          ? static_cast<google::protobuf::Message*>(request.mutable_graph())
          : &request;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), target);
  if (status.ok()) return request;
  const std::string message = status.message().ToString();
  // Syntax errors quote the text around them on further lines.
  if (absl::StrContains(message, "\n")) return JsonError(text, name, message);
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": not a memplan PlanRequest or Graph: ", message.substr(0, 300)));
}

namespace {

// Repeated message fields longer than this at the top level are printed
// element by element (see ToJson).
constexpr int kPrintAlone = 64;

// `message` as protobuf's JSON printer writes it: serialized
// deterministically (map entries sorted), then the bytes printed with the
// proto field names, whitespace and every field; no final newline.
std::string PrintWhole(const google::protobuf::Message& message) {
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  // Shared by the threads ToJson prints on: a TypeResolver is thread-safe
  // (google/protobuf/util/type_resolver.h).
  static auto* resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com",
          google::protobuf::DescriptorPool::generated_pool());
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::BinaryToJsonString(
      resolver,
      absl::StrCat("type.googleapis.com/",
                   message.GetDescriptor()->full_name()),
      binary, &json, options);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

// Appends `json` (a printed message) with every line indented by `indent`.
void AppendIndented(absl::string_view json, absl::string_view indent,
                    std::string* out) {
  for (absl::string_view line : absl::StrSplit(json, '\n')) {
    absl::StrAppend(out, indent, line, "\n");
  }
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message,
                   const base::Parallelism& parallel) {
  // With every field shown, protobuf's printer first builds a tree of the
  // whole message (about 15 us and a kilobyte per element of a repeated
  // field: 1.2 s for a plan of 62,000 buffers). Long repeated message fields
  // of the top level are therefore printed one element at a time (4-5 us
  // each) and put where the printer wrote their empty array: the same bytes.
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> long_fields;
  for (int f = 0; f < type->field_count(); ++f) {
    const google::protobuf::FieldDescriptor* field = type->field(f);
    if (field->is_repeated() && !field->is_map() &&
        field->cpp_type() ==
            google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
        reflection->FieldSize(message, field) > kPrintAlone) {
      long_fields.push_back(field);
    }
  }
  if (long_fields.empty()) return PrintWhole(message) + "\n";
  std::unique_ptr<google::protobuf::Message> rest(message.New());
  rest->CopyFrom(message);
  for (const auto* field : long_fields) {
    rest->GetReflection()->ClearField(rest.get(), field);
  }
  const std::string outline = PrintWhole(*rest);
  std::string json;
  json.reserve(outline.size());
  size_t done = 0;  // of outline
  for (const auto* field : long_fields) {
    // A top-level key starts a line indented by one space; a string value
    // cannot hold a raw newline, so the match is the field's.
    const std::string empty = absl::StrCat("\n \"", field->name(), "\": []");
    const size_t at = outline.find(empty, done);
    if (at == std::string::npos) return PrintWhole(message) + "\n";
    json.append(outline, done, at - done);
    absl::StrAppend(&json, "\n \"", field->name(), "\": [\n");
    // Chunks of elements printed at once (a million assignments: 14 s on
    // one thread), then joined in order.
    const int size = reflection->FieldSize(message, field);
    constexpr int kChunk = 1024;
    std::vector<std::string> chunks(base::ChunkCount(size, kChunk));
    base::ParallelForRange(
        parallel, size, kChunk, [&](int c, size_t begin, size_t end) {
          for (size_t k = begin; k < end; ++k) {
            std::string element = PrintWhole(reflection->GetRepeatedMessage(
                message, field, static_cast<int>(k)));
            if (k + 1 < static_cast<size_t>(size)) element += ",";
            AppendIndented(element, "  ", &chunks[c]);
          }
        });
    size_t length = json.size() + 2;
    for (const std::string& chunk : chunks) length += chunk.size();
    json.reserve(length + outline.size() - done);
    for (std::string& chunk : chunks) {
      json += chunk;
      std::string().swap(chunk);  // freed as it is copied
    }
    json += " ]";
    done = at + empty.size();
  }
  json.append(outline, done, std::string::npos);
  return json + "\n";
}

}  // namespace memplan::formats
