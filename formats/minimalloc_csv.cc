#include "formats/minimalloc_csv.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

// Where each value of a row is: cell indices of the header's columns, -1
// for an optional column the file lacks. Looked up once, not per row.
struct RowLayout {
  int id = -1;
  // lower, upper, size, alignment, offset (kValueNames' order).
  int values[5] = {-1, -1, -1, -1, -1};
};
constexpr const char* kValueNames[5] = {"lower", "upper", "size", "alignment",
                                        "offset"};

RowLayout LayoutOf(const Columns& columns) {
  RowLayout layout;
  layout.id = columns.at("id");
  for (int k = 0; k < 5; ++k) {
    auto it = columns.find(kValueNames[k]);
    if (it != columns.end()) layout.values[k] = it->second;
  }
  return layout;
}

// "NAME:LINE", for messages: built only when a row is refused.
std::string Where(absl::string_view name, int line_number) {
  return absl::StrCat(name, ":", line_number);
}

// One integer cell; the message names the row's buffer and the column.
absl::StatusOr<int64_t> ReadInt(absl::string_view cell, absl::string_view id,
                                absl::string_view column,
                                absl::string_view name, int line_number) {
  const absl::string_view text = absl::StripAsciiWhitespace(cell);
  int64_t v = 0;
  const bool parsed = absl::SimpleAtoi(text, &v);
  if (parsed && v >= -kMaxMagnitude && v <= kMaxMagnitude) return v;
  const bool digits = !text.empty() && text.find_first_not_of("-+0123456789") ==
                                           absl::string_view::npos;
  return absl::InvalidArgumentError(absl::StrCat(
      Where(name, line_number), ": buffer '", id.substr(0, 64), "': ", column,
      " '", text.substr(0, 32), "' ",
      parsed || digits ? "is out of range (at most 2^62 in magnitude)"
                       : "is not an integer"));
}

// One data row into a buffer (and its offset, when the file has them).
absl::Status ReadRow(const std::vector<absl::string_view>& cells,
                     const RowLayout& layout, absl::string_view name,
                     int line_number, MinimallocCsv* csv) {
  planner::Buffer b;
  b.name = std::string(absl::StripAsciiWhitespace(cells[layout.id]));
  // A text file is UTF-8, as JSON is: an id that is not could not travel
  // to a server either (protobuf refuses it in a request).
  if (!base::IsUtf8(b.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(name, line_number), ": id '",
        base::SafeText(b.name.substr(0, 64)), "' is not UTF-8 text"));
  }
  int64_t values[5] = {0, 0, 0, 1, 0};  // alignment 1: MiniMalloc's default
  for (int k = 0; k < 5; ++k) {
    if (layout.values[k] < 0) continue;
    absl::StatusOr<int64_t> v = ReadInt(cells[layout.values[k]], b.name,
                                        kValueNames[k], name, line_number);
    if (!v.ok()) return v.status();
    values[k] = *v;
  }
  b.start = values[0];
  b.end = values[1];
  b.size = values[2];
  b.alignment = values[3];
  csv->problem.buffers.push_back(std::move(b));
  if (csv->offsets.has_value()) csv->offsets->push_back(values[4]);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MinimallocCsv> ReadMinimallocCsv(absl::string_view text,
                                                absl::string_view name) {
  // A UTF-8 byte order mark (a spreadsheet's export) is not the first
  // column's name.
  if (absl::StartsWith(text, "\xef\xbb\xbf")) text.remove_prefix(3);
  MinimallocCsv csv;
  std::optional<RowLayout> layout;
  size_t columns = 0;
  // Room for a buffer per line, but never for more buffers than a file of
  // this size holds (a row is at least "a,0,1,1\n"): blank lines cost
  // nothing.
  constexpr size_t kShortestRow = 8;
  csv.problem.buffers.reserve(
      std::min(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')),
               text.size() / kShortestRow) +
      1);
  std::vector<absl::string_view> cells;  // reused row after row
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty()) continue;
    cells.clear();
    for (absl::string_view cell : absl::StrSplit(line, ',')) {
      cells.push_back(cell);
    }
    if (!layout.has_value()) {
      absl::StatusOr<Columns> header =
          ReadHeader(cells, Where(name, line_number));
      if (!header.ok()) return header.status();
      columns = header->size();
      layout = LayoutOf(*header);
      csv.has_alignment = layout->values[3] >= 0;
      if (layout->values[4] >= 0) csv.offsets.emplace();
      continue;
    }
    if (cells.size() != columns) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(name, line_number), ": expected ", columns,
                       " fields, found ", cells.size()));
    }
    if (auto s = ReadRow(cells, *layout, name, line_number, &csv); !s.ok()) {
      return s;
    }
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
