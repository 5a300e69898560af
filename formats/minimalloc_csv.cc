#include "formats/minimalloc_csv.h"

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/text.h"

namespace memplan::formats {
namespace {

// Values beyond this magnitude are refused: the planner's arithmetic on
// sizes, offsets and times stays within 64 bits.
constexpr int64_t kMaxMagnitude = int64_t{1} << 62;

constexpr const char* kColumns[] = {"id",   "lower",     "upper",
                                    "size", "alignment", "offset"};

// Column name -> index, from the header line.
using Columns = absl::flat_hash_map<std::string, int>;

absl::StatusOr<Columns> ReadHeader(const std::vector<absl::string_view>& cells,
                                   absl::string_view where) {
  Columns columns;
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    const std::string key(absl::StripAsciiWhitespace(cells[i]));
    bool known = false;
    for (const char* c : kColumns) known = known || key == c;
    if (!known || !columns.emplace(key, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", known ? "duplicate" : "unknown", " column '",
          key.substr(0, 64), "'; expected id,lower,upper,size[,alignment]"));
    }
  }
  for (const char* required : {"id", "lower", "upper", "size"}) {
    if (!columns.contains(required)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the header has no '", required,
                       "' column (id,lower,upper,size[,alignment])"));
    }
  }
  return columns;
}

// One integer cell; the message names the row's buffer and the column.
absl::StatusOr<int64_t> ReadInt(absl::string_view cell, absl::string_view id,
                                absl::string_view column,
                                absl::string_view where) {
  const absl::string_view text = absl::StripAsciiWhitespace(cell);
  int64_t v = 0;
  const bool parsed = absl::SimpleAtoi(text, &v);
  if (parsed && v >= -kMaxMagnitude && v <= kMaxMagnitude) return v;
  const bool digits = !text.empty() && text.find_first_not_of("-+0123456789") ==
                                           absl::string_view::npos;
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": buffer '", id.substr(0, 64), "': ", column, " '",
      text.substr(0, 32), "' ",
      parsed || digits ? "is out of range (at most 2^62 in magnitude)"
                       : "is not an integer"));
}

// One data row into a buffer (and its offset, when the file has them).
absl::Status ReadRow(const std::vector<absl::string_view>& cells,
                     const Columns& columns, absl::string_view where,
                     MinimallocCsv* csv) {
  planner::Buffer b;
  b.name = std::string(absl::StripAsciiWhitespace(cells[columns.at("id")]));
  // A text file is UTF-8, as JSON is: an id that is not could not travel
  // to a server either (protobuf refuses it in a request).
  if (!base::IsUtf8(b.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": id '", base::SafeText(b.name.substr(0, 64)),
                     "' is not UTF-8 text"));
  }
  b.alignment = 1;  // MiniMalloc's default
  int64_t offset = 0;
  for (const char* field : {"lower", "upper", "size", "alignment", "offset"}) {
    auto it = columns.find(field);
    if (it == columns.end()) continue;
    absl::StatusOr<int64_t> v =
        ReadInt(cells[it->second], b.name, field, where);
    if (!v.ok()) return v.status();
    const absl::string_view f = field;
    if (f == "lower") b.start = *v;
    if (f == "upper") b.end = *v;
    if (f == "size") b.size = *v;
    if (f == "alignment") b.alignment = *v;
    if (f == "offset") offset = *v;
  }
  csv->problem.buffers.push_back(std::move(b));
  if (csv->offsets.has_value()) csv->offsets->push_back(offset);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MinimallocCsv> ReadMinimallocCsv(absl::string_view text,
                                                absl::string_view name) {
  MinimallocCsv csv;
  std::optional<Columns> columns;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty()) continue;
    const std::string where = absl::StrCat(name, ":", line_number);
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (!columns.has_value()) {
      absl::StatusOr<Columns> header = ReadHeader(cells, where);
      if (!header.ok()) return header.status();
      columns = *std::move(header);
      csv.has_alignment = columns->contains("alignment");
      if (columns->contains("offset")) csv.offsets.emplace();
      continue;
    }
    if (cells.size() != columns->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected ", columns->size(), " fields, found ",
                       cells.size()));
    }
    if (auto s = ReadRow(cells, *columns, where, &csv); !s.ok()) return s;
  }
  if (csv.problem.buffers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no buffers in the CSV"));
  }
  return csv;
}

std::string WriteMinimallocCsv(const planner::Problem& problem,
                               const planner::Solution* solution,
                               bool with_alignment) {
  std::string out = "id,lower,upper,size";
  if (with_alignment) out += ",alignment";
  if (solution != nullptr) out += ",offset";
  out += "\n";
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const planner::Buffer& b = problem.buffers[i];
    absl::StrAppend(&out, b.name, ",", b.start, ",", b.end, ",", b.size);
    if (with_alignment) absl::StrAppend(&out, ",", b.alignment);
    if (solution != nullptr) absl::StrAppend(&out, ",", solution->offsets[i]);
    out += "\n";
  }
  return out;
}

}  // namespace memplan::formats
