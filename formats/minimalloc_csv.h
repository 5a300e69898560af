// MiniMalloc's CSV format, read and written on the planner's own Problem:
// a header naming the columns (id, lower, upper, size, optional alignment
// and offset, in any order), then one buffer per row. `lower` and `upper`
// are the half-open lifetime [lower, upper), any integers; alignment is 1
// when the column is absent, as in MiniMalloc. Output adds an `offset`
// column (MiniMalloc's solution format).
//
//   absl::StatusOr<formats::MinimallocCsv> csv =
//       formats::ReadMinimallocCsv(text, "A.1048576.csv");
//   // csv->problem.buffers[i] ... ; csv->offsets when the file had them
//   std::string out = formats::WriteMinimallocCsv(csv->problem, solution,
//                                                 csv->has_alignment);
#ifndef MEMPLAN_FORMATS_MINIMALLOC_CSV_H_
#define MEMPLAN_FORMATS_MINIMALLOC_CSV_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planner/problem.h"

namespace memplan::formats {

// A CSV as read.
struct MinimallocCsv {
  planner::Problem problem;    // one buffer per row, in file order
  bool has_alignment = false;  // the file had an alignment column
  // The offset column, when the file had one (a solution file).
  std::optional<std::vector<planner::Offset>> offsets;
};

// Parses `text`. INVALID_ARGUMENT naming `name`, the line and, for a bad
// value, the buffer id and the column: an unknown or missing column, a row
// with the wrong number of fields, a value that is not an integer or is out
// of range (|value| > 2^62), an empty file. The buffers themselves are
// validated by the planner.
[[nodiscard]] absl::StatusOr<MinimallocCsv> ReadMinimallocCsv(
    absl::string_view text, absl::string_view name);

// `problem` as CSV (id,lower,upper,size[,alignment]) with an offset column
// when `solution` is given.
std::string WriteMinimallocCsv(const planner::Problem& problem,
                               const planner::Solution* solution,
                               bool with_alignment);

}  // namespace memplan::formats

#endif  // MEMPLAN_FORMATS_MINIMALLOC_CSV_H_
