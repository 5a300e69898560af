#include "client/input.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace memplan::client {
namespace {

// Files larger than this are refused before they are read.
constexpr std::streamoff kMaxInputBytes = std::streamoff{1} << 30;

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::streamoff size = file.tellg();
  if (size > kMaxInputBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than 1 GiB"));
  }
  file.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  file.read(text.data(), size);
  return text;
}

// The line of protobuf's JSON parse error: its message quotes the text
// around the error and marks the column with a caret.
int ErrorLine(const std::string& text, absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(message, '\n');
  if (lines.size() < 3) return 0;
  const size_t caret = lines.back().find('^');
  if (caret == absl::string_view::npos) return 0;
  std::string snippet;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    absl::StrAppend(&snippet, i > 1 ? "\n" : "", lines[i]);
  }
  const size_t at = text.find(snippet);
  if (at == std::string::npos) return 0;
  const size_t offset = std::min(text.size(), at + caret);
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + offset, '\n'));
}

absl::Status JsonError(const std::string& text, absl::string_view name,
                       const absl::Status& status) {
  absl::string_view message = status.message();
  const int line = ErrorLine(text, message);
  absl::string_view first = message.substr(0, message.find('\n'));
  return absl::InvalidArgumentError(
      absl::StrCat(name, line > 0 ? absl::StrCat(":", line) : "",
                   ": malformed JSON: ", first));
}

// A bare Graph has "tensors" or "ops" at the top level.
bool LooksLikeGraph(const google::protobuf::Struct& root) {
  return root.fields().contains("tensors") || root.fields().contains("ops");
}

absl::StatusOr<int64_t> ParseInt(absl::string_view field,
                                 absl::string_view value,
                                 absl::string_view name, int line) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ":", line, ": ", field, " '", value, "' is not an integer"));
  }
  return v;
}

}  // namespace

absl::StatusOr<v1::PlanRequest> ParseJsonRequest(const std::string& text,
                                                 absl::string_view name) {
  google::protobuf::Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &root);
  if (!parsed.ok()) {
    return JsonError(text, name, absl::InvalidArgumentError(parsed.ToString()));
  }
  v1::PlanRequest request;
  google::protobuf::Message* target = &request;
  if (LooksLikeGraph(root)) target = request.mutable_graph();
  auto status = google::protobuf::util::JsonStringToMessage(text, target);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": not a memplan PlanRequest or Graph: ", status.message().ToString()));
  }
  return request;
}

absl::StatusOr<Input> ParseCsv(const std::string& text,
                               absl::string_view name) {
  Input input;
  input.format = InputFormat::kCsv;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  absl::flat_hash_map<std::string, int> column;
  int line_number = 0;
  for (absl::string_view raw : lines) {
    ++line_number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty()) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (column.empty()) {  // the header
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        std::string key(absl::StripAsciiWhitespace(cells[i]));
        if (key != "id" && key != "lower" && key != "upper" && key != "size" &&
            key != "alignment" && key != "offset") {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ":", line_number, ": unknown column '", key,
                           "'; expected id,lower,upper,size[,alignment]"));
        }
        column[key] = i;
      }
      for (const char* required : {"id", "lower", "upper", "size"}) {
        if (!column.contains(required)) {
          return absl::InvalidArgumentError(absl::StrCat(
              name, ":", line_number, ": the header has no '", required,
              "' column (id,lower,upper,size[,alignment])"));
        }
      }
      input.csv_has_alignment = column.contains("alignment");
      continue;
    }
    if (cells.size() != column.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", line_number, ": expected ", column.size(),
                       " fields, found ", cells.size()));
    }
    v1::Buffer* b = input.request.add_buffers();
    b->set_id(std::string(absl::StripAsciiWhitespace(cells[column["id"]])));
    for (const char* field : {"lower", "upper", "size", "alignment"}) {
      auto it = column.find(field);
      if (it == column.end()) continue;
      absl::StatusOr<int64_t> v =
          ParseInt(field, cells[it->second], name, line_number);
      if (!v.ok()) return v.status();
      if (absl::string_view(field) == "lower") b->set_start(*v);
      if (absl::string_view(field) == "upper") b->set_end(*v);
      if (absl::string_view(field) == "size") b->set_size(*v);
      if (absl::string_view(field) == "alignment") b->set_alignment(*v);
    }
    if (!b->has_alignment()) b->set_alignment(1);  // MiniMalloc's default
  }
  if (column.empty() || input.request.buffers_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no buffers in the CSV"));
  }
  return input;
}

absl::StatusOr<Input> ReadInput(const std::string& path,
                                absl::string_view format) {
  absl::StatusOr<std::string> text = ReadAll(path);
  if (!text.ok()) return text.status();
  const std::string name = path == "-" ? "<stdin>" : path;
  bool csv = format == "csv";
  if (format.empty()) csv = absl::EndsWithIgnoreCase(path, ".csv");
  if (csv) return ParseCsv(*text, name);
  absl::StatusOr<v1::PlanRequest> request = ParseJsonRequest(*text, name);
  if (!request.ok()) return request.status();
  Input input;
  input.request = *std::move(request);
  return input;
}

std::string FormatCsv(const Input& input, const v1::PlanResponse& response) {
  std::string out = input.csv_has_alignment
                        ? "id,lower,upper,size,alignment,offset\n"
                        : "id,lower,upper,size,offset\n";
  for (int i = 0; i < input.request.buffers_size(); ++i) {
    const v1::Buffer& b = input.request.buffers(i);
    absl::StrAppend(&out, b.id(), ",", b.start(), ",", b.end(), ",", b.size(),
                    ",");
    if (input.csv_has_alignment) absl::StrAppend(&out, b.alignment(), ",");
    absl::StrAppend(&out, response.assignments(i).offset(), "\n");
  }
  return out;
}

}  // namespace memplan::client
