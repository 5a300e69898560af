// Status helpers every layer of memplan shares.
#ifndef MEMPLAN_BASE_STATUS_H_
#define MEMPLAN_BASE_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memplan {

// INVALID_ARGUMENT with the parts concatenated: the caller's input is wrong,
// and the message says what and where.
template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

}  // namespace memplan

#endif  // MEMPLAN_BASE_STATUS_H_
