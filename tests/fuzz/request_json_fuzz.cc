// libFuzzer target: any text as a protobuf JSON request (formats/), planned
// by the engine when it parses, every plan checked independently.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/request_json.h"
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<memplan::v1::PlanRequest> request =
      memplan::formats::ParseRequestJson(text, "fuzz.json");
  if (request.ok()) memplan::fuzz::PlanAndCheck(*request);
  return 0;
}
