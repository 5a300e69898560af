#include "pictures/bench_html.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pictures/plan_svg.h"
#include "pictures/testing/text.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Two dynamic allocators with series, the static plan without one.
v1::BenchmarkResponse Response() {
  v1::BenchmarkResponse r;
  r.set_arena_size_bytes(4096);
  r.set_lower_bound_bytes(3072);
  r.set_trace_events(100);
  r.set_strategy("best_fit_size");
  r.set_arena_allocator("bfc");
  for (const char* name : {"bfc", "pool"}) {
    v1::AllocatorFigures* row = r.add_rows();
    row->set_allocator(name);
    row->set_peak_bytes_in_use(3072);
    row->set_peak_bytes_reserved(name[0] == 'b' ? 8192 : 6144);
    row->set_p50_ns(80);
    row->set_p99_ns(1500);
    row->set_allocations(50);
    for (int e = 0; e < 100; e += 25) {
      v1::SeriesPoint* p = row->add_series();
      p->set_event(e);
      p->set_bytes_in_use(e * 30);
      p->set_bytes_reserved(e * 60);
    }
  }
  v1::AllocatorFigures* row = r.add_rows();
  row->set_allocator("static_plan");
  row->set_peak_bytes_in_use(3072);
  row->set_peak_bytes_reserved(4096);
  return r;
}

TEST(BenchHtmlTest, ChartsEveryAllocatorAgainstThePlan) {
  const std::string html = BenchHtml(Response(), "models/mlp.json");
  EXPECT_THAT(html, HasSubstr("<h1 id=\"title\">memplan bench: mlp.json</h1>"));
  EXPECT_THAT(html, HasSubstr("100 trace events"));
  for (const char* name : {"bfc", "pool"}) {
    // On the shared chart and on its own: reserved, and in use.
    EXPECT_EQ(testing::Occurrences(
                  html, absl::StrCat("data-name=\"", name, " reserved\"")),
              2)
        << name;
    EXPECT_EQ(testing::Occurrences(
                  html, absl::StrCat("data-name=\"", name, " in use\"")),
              1)
        << name;
  }
  // Four points per series: event 0, 25, 50, 75.
  const size_t line = html.find("data-name=\"bfc reserved\" points=\"");
  ASSERT_NE(line, std::string::npos);
  const size_t open = html.find("points=\"", line) + 8;
  const std::string points = html.substr(open, html.find('"', open) - open);
  EXPECT_EQ(testing::Occurrences(points, ","), 4);
  EXPECT_THAT(html, HasSubstr(">static plan arena 4 KiB<"));
  EXPECT_THAT(html, HasSubstr(">lower bound 3 KiB<"));
  EXPECT_THAT(html, HasSubstr(">8 KiB (2.00x)<"));
  EXPECT_THAT(html, HasSubstr(">p50 80 ns<"));
  EXPECT_THAT(html, HasSubstr(">p99 1,500 ns<"));
  EXPECT_THAT(html, HasSubstr("<td>static_plan</td><td>3,072</td><td>4,096</td>"
                              "<td>1.00x</td>"));
}

TEST(BenchHtmlTest, RowsWithoutSeriesOrTimingsSaySo) {
  const std::string html = BenchHtml(Response(), "x");
  EXPECT_THAT(html, HasSubstr("static_plan (no series)"));
  EXPECT_THAT(html, HasSubstr(">not timed<"));
}

TEST(BenchHtmlTest, IsOneFileThatLoadsNothing) {
  const std::string html = BenchHtml(Response(), "<w>");
  for (const char* fetch :
       {" src=", " href=", "url(", "@import", "<script", "<link", "<img"}) {
    EXPECT_THAT(html, Not(HasSubstr(fetch))) << fetch;
  }
  EXPECT_EQ(testing::Occurrences(html, "http"),
            testing::Occurrences(html, "http://www.w3.org/2000/svg"));
  EXPECT_THAT(html, HasSubstr("memplan bench: &lt;w&gt;"));
}

}  // namespace
}  // namespace memplan::formats
