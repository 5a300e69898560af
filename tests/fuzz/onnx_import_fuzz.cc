// libFuzzer target: any bytes as an ONNX model (formats/onnx_import); what
// imports is planned, every plan checked independently.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  memplan::v1::PlanRequest request;
  memplan::v1::ModelFile* model = request.mutable_model();
  model->set_format("onnx");
  model->set_name("fuzz.onnx");
  model->set_data(std::string(reinterpret_cast<const char*>(data), size));
  memplan::fuzz::PlanAndCheck(request);
  return 0;
}
