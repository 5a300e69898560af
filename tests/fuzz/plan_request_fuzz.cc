// libFuzzer target: any bytes as a binary memplan.v1.PlanRequest through
// the engine (graphs, buffer lists, model files, options, emit), every plan
// checked independently.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  memplan::v1::PlanRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  memplan::fuzz::PlanAndCheck(request);
  return 0;
}
