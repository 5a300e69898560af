// libFuzzer target: any bytes as a TFLite model (formats/tflite_reader);
// what imports is planned and both files a TFLite user asks for are
// written (the planned .tflite and the C header), every plan checked
// independently.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  memplan::v1::PlanRequest request;
  memplan::v1::ModelFile* model = request.mutable_model();
  model->set_format("tflite");
  model->set_name("fuzz.tflite");
  model->set_data(std::string(reinterpret_cast<const char*>(data), size));
  request.add_emit("tflite");
  request.add_emit("c_header");
  memplan::fuzz::PlanAndCheck(request);
  return 0;
}
