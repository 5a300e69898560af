#include "formats/model.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"

namespace memplan::formats {
namespace {

// Splits "a=b,c=d" into (name, value) pairs at the last '=' of each item.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> SplitPairs(
    absl::string_view text, absl::string_view flag, absl::string_view form) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Invalid("--", flag, " '", item.substr(0, 64), "': expected ",
                     form);
    }
    pairs.emplace_back(std::string(item.substr(0, eq)),
                       std::string(item.substr(eq + 1)));
  }
  return pairs;
}

}  // namespace

absl::Status ParseDimList(absl::string_view text, ModelOptions* options) {
  auto pairs = SplitPairs(text, "dim", "NAME=VALUE (e.g. batch=1)");
  if (!pairs.ok()) return pairs.status();
  for (const auto& [name, value] : *pairs) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < 0) {
      return Invalid("--dim ", name.substr(0, 64), "=", value.substr(0, 32),
                     ": the value must be a non-negative integer");
    }
    options->dims[name] = v;
  }
  return absl::OkStatus();
}

absl::Status ParseShapeList(absl::string_view text, ModelOptions* options) {
  auto pairs = SplitPairs(text, "input", "NAME=SHAPE (e.g. x=1x3x224x224)");
  if (!pairs.ok()) return pairs.status();
  for (const auto& [name, shape] : *pairs) {
    std::vector<int64_t> dims;  // "x=" is a scalar; "1xx4" a typo
    for (absl::string_view d : absl::StrSplit(shape, 'x')) {
      if (shape.empty()) break;
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v) || v < 0) {
        return Invalid("--input ", name.substr(0, 64), "=", shape.substr(0, 64),
                       ": dim '", d.substr(0, 32),
                       "' is not a non-negative integer (write 1x3x224x224)");
      }
      dims.push_back(v);
    }
    options->shapes[name] = std::move(dims);
  }
  return absl::OkStatus();
}

}  // namespace memplan::formats
