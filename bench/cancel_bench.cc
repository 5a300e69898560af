// cancel_bench: how long a model's import goes on after its deadline, in
// process (issue 31: work stops within 50 ms of a deadline). The server's
// own figure, CPU after the call, is tests/cancel_e2e_test.cc's; this one
// isolates the import: the stop itself plus freeing what was built.
//   cancel_bench MODEL [FRACTION...] [--runs=N]
// MODEL is an .onnx or .tflite file, read as a request carries it. The
// import is timed in full (the median of N runs, default 3); then, for each
// FRACTION (default 0.1 0.2 ... 0.9), the import runs with a deadline at
// that fraction of the full time, N times, and the program prints the
// median milliseconds from the deadline to the import's return (freeing
// included) and how many of the runs stopped (the others ended first).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "bench/median.h"
#include "engine/model_import.h"
#include "formats/file_io.h"

namespace memplan {
namespace {

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: cancel_bench MODEL [FRACTION...] [--runs=N]\n");
    return 64;
  }
  const std::string path = argv[1];
  std::vector<double> fractions;
  int runs = 3;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    double f = 0;
    if (absl::StartsWith(arg, "--runs=") &&
        absl::SimpleAtoi(arg.substr(7), &runs) && runs > 0) {
      continue;
    }
    if (!absl::SimpleAtod(arg, &f) || f <= 0 || f >= 1) {
      std::fprintf(stderr, "cancel_bench: '%s' is no fraction in (0, 1)\n",
                   arg.c_str());
      return 64;
    }
    fractions.push_back(f);
  }
  if (fractions.empty()) {
    for (int k = 1; k <= 9; ++k) fractions.push_back(k / 10.0);
  }
  const formats::Format format = absl::EndsWith(path, ".tflite")
                                     ? formats::Format::kTflite
                                     : formats::Format::kOnnx;
  absl::StatusOr<formats::FileBytes> file =
      formats::FileBytes::Open(path, int64_t{1} << 31, int64_t{1} << 31);
  if (!file.ok()) {
    std::fprintf(stderr, "cancel_bench: %s\n",
                 std::string(file.status().message()).c_str());
    return 66;
  }
  absl::StatusOr<std::string> bytes = engine::RequestModelBytes(format, *file);
  if (!bytes.ok()) {
    std::fprintf(stderr, "cancel_bench: %s\n",
                 std::string(bytes.status().message()).c_str());
    return 65;
  }
  // Imports with `cancel`; the seconds from `from` to the return, the
  // result freed.
  auto import = [&](const base::CancelToken* cancel, absl::Time from,
                    bool* stopped) {
    formats::ModelOptions options;
    options.cancel = cancel;
    {
      absl::StatusOr<formats::ImportedModel> m =
          engine::ImportModel(format, *bytes, path, options);
      *stopped = m.status().code() == absl::StatusCode::kDeadlineExceeded;
      if (!m.ok() && !*stopped) {
        std::fprintf(stderr, "cancel_bench: %s\n",
                     std::string(m.status().message()).c_str());
        std::exit(65);
      }
    }
    return absl::ToDoubleSeconds(absl::Now() - from);
  };
  std::vector<double> full;
  for (int r = 0; r < runs; ++r) {
    bool stopped = false;
    full.push_back(import(nullptr, absl::Now(), &stopped));
  }
  const double full_s = bench::Median(full);
  std::printf("%s: full import %.1f ms (median of %d)\n", path.c_str(),
              full_s * 1e3, runs);
  std::printf(
      "| deadline at | ms after it (median) | stopped |\n|---|---|---|\n");
  for (double f : fractions) {
    std::vector<double> after;
    int stopped_runs = 0;
    for (int r = 0; r < runs; ++r) {
      const absl::Time deadline = absl::Now() + absl::Seconds(f * full_s);
      base::CancelToken token(deadline);
      bool stopped = false;
      const double s = import(&token, deadline, &stopped);
      if (stopped) {
        after.push_back(s);
        ++stopped_runs;
      }
    }
    if (after.empty()) {
      std::printf("| %.0f%% | - | 0 of %d |\n", f * 100, runs);
    } else {
      std::printf("| %.0f%% | %.1f | %d of %d |\n", f * 100,
                  bench::Median(after) * 1e3, stopped_runs, runs);
    }
  }
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Run(argc, argv); }
