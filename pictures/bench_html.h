// The Benchmark's comparison of allocators as one self-contained HTML page
// of charts (inline SVG and CSS, no script, nothing loaded from
// elsewhere): bytes reserved by every allocator over the replayed trace
// against the static plan's arena and the lower bound, one chart per
// allocator with bytes reserved and in use, peak bytes reserved against the
// plan, latency per operation (p50, p99), and the figures as a table.
// The series come from BenchmarkRequest.series_points (AllocatorFigures.
// series); rows without one get their peak figures only.
//
//   request.set_series_points(512);
//   ... response = engine::RunBenchmark(request, ...);
//   std::string html = formats::BenchHtml(*response, "resnet50.json");
#ifndef MEMPLAN_PICTURES_BENCH_HTML_H_
#define MEMPLAN_PICTURES_BENCH_HTML_H_

#include <string>

#include "absl/strings/string_view.h"
#include "memplan/v1/memplan.pb.h"

namespace memplan::formats {

// The page; `title` names the input (a file or a workload).
std::string BenchHtml(const v1::BenchmarkResponse& response,
                      absl::string_view title);

}  // namespace memplan::formats

#endif  // MEMPLAN_PICTURES_BENCH_HTML_H_
