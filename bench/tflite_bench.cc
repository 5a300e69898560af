// tflite_bench: real TFLite models planned by memplan and by TFLite Micro's
// own GreedyMemoryPlanner (planner/tflm_greedy.h, on TFLM's lifetimes),
// the figures of BENCHMARKS.md, "TFLite models against TFLite Micro's
// planner".
//   tflite_bench FILE.tflite...
// Dynamic dims: a dynamic first dim is the batch, set to 1; other dynamic
// dims take the model's own shapes (what TFLite Micro runs it at). For each
// model: tensors over all subgraphs (the offline plan's N), operators,
// memplan's lower bound and arena (default options: "auto", alignment 16),
// the arena TFLM's planner gives the same tensors, their ratio, and the
// time to import and plan through the engine (one thread, median of 5).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/plan.h"
#include "formats/file_io.h"
#include "tflite/schema_generated.h"

namespace memplan {
namespace {

namespace ts = ::memplan::tflite_schema;
constexpr int kRuns = 5;

// The request for a model, its dynamic dims set as the header says.
v1::PlanRequest Request(const std::string& path, const std::string& bytes) {
  v1::PlanRequest request;
  v1::ModelFile* model = request.mutable_model();
  model->set_format("tflite");
  model->set_name(path);
  model->set_data(bytes);
  const ts::Model* m = ts::GetModel(bytes.data());
  for (const ts::SubGraph* g : *m->subgraphs()) {
    for (const ts::Tensor* t : *g->tensors()) {
      const auto* sig = t->shape_signature();
      if (sig == nullptr || t->name() == nullptr) continue;
      bool batch = false, other = false;
      for (size_t k = 0; k < sig->size(); ++k) {
        (k == 0 ? batch : other) |= sig->Get(k) < 0;
      }
      if (batch) (*model->mutable_dims())["batch"] = 1;
      if (!other) continue;
      v1::Shape& shape = (*model->mutable_shapes())[t->name()->str()];
      shape.clear_dims();
      for (int d : *t->shape()) shape.add_dims(d);
    }
  }
  request.set_no_timings(true);
  return request;
}

// Tensors and operators over all subgraphs.
std::pair<int64_t, int64_t> Counts(const std::string& bytes) {
  int64_t tensors = 0, ops = 0;
  for (const ts::SubGraph* g : *ts::GetModel(bytes.data())->subgraphs()) {
    tensors += g->tensors() == nullptr ? 0 : g->tensors()->size();
    ops += g->operators() == nullptr ? 0 : g->operators()->size();
  }
  return {tensors, ops};
}

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tflite_bench FILE.tflite...\n");
    return 64;
  }
  std::printf(
      "| model | tensors | ops | lower bound | memplan arena | TFLM greedy "
      "arena | memplan / TFLM | import + plan (ms) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  double ratio_sum = 0;
  int models = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    absl::StatusOr<std::string> bytes =
        formats::ReadFile(path, formats::kDefaultMaxInputBytes);
    if (!bytes.ok()) {
      std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str());
      return 66;
    }
    const v1::PlanRequest request = Request(path, *bytes);
    std::vector<double> ms;
    absl::StatusOr<engine::PlanOutcome> outcome;
    for (int run = 0; run < kRuns; ++run) {
      const absl::Time start = absl::Now();
      outcome = engine::Plan(request, engine::Limits{}, nullptr, nullptr);
      ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      if (!outcome.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(),
                     outcome.status().ToString().c_str());
        return 65;
      }
    }
    std::sort(ms.begin(), ms.end());
    const planner::PlanResult& r = outcome->result;
    const int64_t tflm = outcome->tflm_arena_bytes.value_or(0);
    const double ratio =
        tflm > 0 ? static_cast<double>(r.solution.arena_size) / tflm : 0;
    ratio_sum += ratio;
    ++models;
    const auto [tensors, ops] = Counts(*bytes);
    std::printf("| %s | %lld | %lld | %lld | %lld | %lld | %.3f | %.2f |\n",
                path.substr(path.rfind('/') + 1).c_str(),
                static_cast<long long>(tensors), static_cast<long long>(ops),
                static_cast<long long>(r.lower_bound),
                static_cast<long long>(r.solution.arena_size),
                static_cast<long long>(tflm), ratio, ms[kRuns / 2]);
  }
  std::printf("\nmean memplan / TFLM over %d models: %.3f\n", models,
              ratio_sum / std::max(models, 1));
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Run(argc, argv); }
