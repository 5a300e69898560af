#include "pictures/plan_svg.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pictures/testing/text.h"
#include "planner/planner.h"
#include "planner/testing/random_problems.h"

namespace memplan::formats {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

planner::PlanResult PlanGraph(const planner::Graph& graph,
                              const planner::PlanOptions& options = {}) {
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanGraph(graph, options, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

planner::PlanResult PlanBuffers(planner::Problem problem,
                                const planner::PlanOptions& options = {}) {
  absl::StatusOr<planner::PlanResult> r =
      planner::PlanBuffers(std::move(problem), options, nullptr, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

// x -> fc -> h -> relu (in place) -> h2 -> out -> y, plus a side branch.
planner::Graph InPlaceGraph() {
  planner::Graph g;
  g.name = "mlp";
  g.tensors = {{"x", 256}, {"h", 512}, {"h2", 512}, {"s", 1024}, {"y", 256}};
  g.ops = {{"fc", {"x"}, {"h"}},
           {"side", {"x"}, {"s"}},
           {"relu", {"h"}, {"h2"}, true},
           {"out", {"h2", "s"}, {"y"}}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  return g;
}

// The attributes of the <rect> whose hover text starts with `name`.
std::map<std::string, std::string> RectOf(const std::string& svg,
                                          const std::string& name) {
  const size_t title = svg.find(absl::StrCat("<title>", name, "\n"));
  EXPECT_NE(title, std::string::npos) << name;
  if (title == std::string::npos) return {};
  const size_t start = svg.rfind("<rect ", title);
  const std::string tag = svg.substr(start, title - start);
  std::map<std::string, std::string> attrs;
  static const std::regex kAttr(R"re(([a-z-]+)="([^"]*)")re");
  for (std::sregex_iterator it(tag.begin(), tag.end(), kAttr), end; it != end;
       ++it) {
    attrs[(*it)[1]] = (*it)[2];
  }
  return attrs;
}

double Attr(const std::map<std::string, std::string>& attrs,
            const std::string& name) {
  auto it = attrs.find(name);
  EXPECT_NE(it, attrs.end()) << name;
  return it == attrs.end() ? 0 : std::atof(it->second.c_str());
}

// The plot frame: its corner and size in pixels, and the steps and bytes it
// spans (its data-* attributes).
struct PlotFrame {
  double x, y, width, height;
  double first, end, top;
};

// The frame of `svg`; nullopt when there is none or its figures do not
// read as such (a negative span or height included).
std::optional<PlotFrame> FrameOf(const std::string& svg) {
  const size_t frame = svg.find("<rect id=\"plot\"");
  if (frame == std::string::npos) return std::nullopt;
  const std::string tag = svg.substr(frame, svg.find("/>", frame) - frame);
  static const std::regex kFrame(
      R"re(x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)".*data-first-step="(-?\d+)" data-end-step="(\d+)" data-top-bytes="(\d+)")re");
  std::smatch m;
  if (!std::regex_search(tag, m, kFrame)) return std::nullopt;
  const auto at = [&m](int k) { return std::atof(m[k].str().c_str()); };
  return PlotFrame{at(1), at(2), at(3), at(4), at(5), at(6), at(7)};
}

TEST(PlanSvgTest, EveryPlannedTensorIsARectangleAtItsStepsAndOffset) {
  const planner::PlanResult plan = PlanGraph(InPlaceGraph());
  const std::string svg = PlanSvg(plan, {}, {.title = "mlp"});
  // The plot frame says which steps and bytes it spans.
  const std::optional<PlotFrame> f = FrameOf(svg);
  ASSERT_TRUE(f.has_value());
  const double x0 = f->x, y0 = f->y, w = f->width, h = f->height;
  const double first = f->first, end = f->end, top = f->top;
  int drawn = 0;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const planner::TensorPlacement& p = plan.tensors[t];
    if (p.buffer < 0) continue;
    ++drawn;
    const auto r = RectOf(svg, p.name);
    const double offset = static_cast<double>(plan.OffsetOf(t));
    EXPECT_NEAR(Attr(r, "x"), x0 + (p.start - first) / (end - first) * w, 0.01)
        << p.name;
    EXPECT_NEAR(Attr(r, "width"), (p.end - p.start) / (end - first) * w, 0.02)
        << p.name;
    EXPECT_NEAR(Attr(r, "y"), y0 + h - (offset + p.size) / top * h, 0.01)
        << p.name;
    EXPECT_NEAR(Attr(r, "height"), p.size / top * h, 0.02) << p.name;
  }
  EXPECT_EQ(drawn, 5);
  EXPECT_EQ(
      testing::Occurrences(svg.substr(svg.find("<g id=\"tensors\"")), "<rect "),
      drawn);
}

// Lifetimes from -2^62 to 2^62 span more steps than an int64_t counts, and
// an arena near 2^62 times 3/2 passes it: both drawn in doubles, the first
// step at the plot's left edge and the last at its right.
TEST(PlanSvgTest, LifetimesAndArenasNearTwoToTheSixtyTwoDrawInTheFrame) {
  const int64_t far = int64_t{1} << 62;
  planner::Problem problem = planner::testing::ProblemOf(
      {{-far, -far + 1, 64}, {far - 1, far, 64}, {0, 1, far - 128}});
  planner::PlanOptions options;
  options.capacity = far;
  const std::string svg = PlanSvg(PlanBuffers(problem, options), options, {});
  const std::optional<PlotFrame> f = FrameOf(svg);
  ASSERT_TRUE(f.has_value());
  const double x0 = f->x, w = f->width;
  EXPECT_THAT(svg, HasSubstr("<line class=\"capacity\""));  // 2^62 <= 1.5 x
  EXPECT_NEAR(Attr(RectOf(svg, "b0"), "x"), x0, 0.01);
  const auto last = RectOf(svg, "b1");
  EXPECT_NEAR(Attr(last, "x") + Attr(last, "width"), x0 + w, 0.01);
}

// Steps past 2^53 (timestamps in nanoseconds), where a double cannot tell
// neighbouring steps apart: each lifetime keeps its width (100 and 150
// steps), the ticks their places and exact labels; one step just under
// 2^62 fills the plot (its first and end step were one double: NaN).
TEST(PlanSvgTest, StepsPastTwoToTheFiftyThreeKeepTheirWidths) {
  const int64_t t = int64_t{1700000000000000000};
  const std::string svg =
      PlanSvg(PlanBuffers(planner::testing::ProblemOf(
                  {{t, t + 100, 64}, {t + 50, t + 200, 32}})),
              {}, {});
  const std::optional<PlotFrame> f = FrameOf(svg);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(Attr(RectOf(svg, "b0"), "x"), f->x, 0.01);
  EXPECT_NEAR(Attr(RectOf(svg, "b0"), "width"), f->width / 2, 0.01);
  EXPECT_NEAR(Attr(RectOf(svg, "b1"), "x"), f->x + f->width / 4, 0.01);
  EXPECT_NEAR(Attr(RectOf(svg, "b1"), "width"), f->width * 3 / 4, 0.01);
  EXPECT_THAT(svg, HasSubstr(">1700000000000000100</text>"));
  EXPECT_EQ(testing::Occurrences(svg, ">1700000000000000100</text>"), 1);

  const int64_t far = (int64_t{1} << 62) - 1;
  const std::string one = PlanSvg(
      PlanBuffers(planner::testing::ProblemOf({{far, far + 1, 16}})), {}, {});
  ASSERT_TRUE(FrameOf(one).has_value());
  EXPECT_THAT(one, Not(HasSubstr("nan")));
  EXPECT_NEAR(Attr(RectOf(one, "b0"), "width"), FrameOf(one)->width, 0.01);
}

// An arena a few hundred bytes short of 2^63 (a buffer pinned just under
// 2^62, another above it): the plot's headroom stops short of 2^63 instead
// of wrapping to a negative height.
TEST(PlanSvgTest, AnArenaNearTwoToTheSixtyThreeKeepsAPositiveHeight) {
  const planner::Bytes g = int64_t{1} << 32;
  planner::Problem problem = planner::testing::ProblemOf(
      {{0, 3, 1}, {0, 2, int64_t{4611686018427387000}}, {1, 3, 100}});
  problem.buffers[0].fixed_offset = int64_t{4611686014132420608};
  for (planner::Buffer& b : problem.buffers) b.alignment = g;
  const planner::PlanResult plan = PlanBuffers(problem);
  ASSERT_GT(plan.solution.arena_size, int64_t{1} << 62);
  const std::string svg = PlanSvg(plan, {}, {});
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(svg, m, std::regex(R"re(data-top-bytes="(\d+)")re")))
      << "no positive top";
  EXPECT_GE(std::stod(m[1].str()),
            static_cast<double>(plan.solution.arena_size));
}

TEST(PlanSvgTest, HoverTextGivesNameSizeOffsetAndLifetime) {
  const planner::PlanResult plan = PlanGraph(InPlaceGraph());
  const std::string svg = PlanSvg(plan, {}, {});
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const planner::TensorPlacement& p = plan.tensors[t];
    EXPECT_THAT(svg, HasSubstr(absl::StrCat(
                         "<title>", p.name, "\n", HumanBytes(p.size), " (",
                         GroupDigits(p.size), " bytes) at offset ",
                         GroupDigits(plan.OffsetOf(t)), "\nsteps ", p.start,
                         " to ", p.end - 1, "\n")));
  }
}

TEST(PlanSvgTest, GraphInputsAndOutputsAreLabelledByTheirKind) {
  // Under the default io policy the input lives from the start to its last
  // use and the output from its producer to the end: they are labelled
  // input and output, not persistent.
  const planner::PlanResult plan = PlanGraph(InPlaceGraph());
  const std::string svg = PlanSvg(plan, {}, {});
  EXPECT_THAT(svg, HasSubstr("\ninput, shared object"));
  EXPECT_THAT(svg, HasSubstr("\noutput, shared object"));
  EXPECT_THAT(svg, HasSubstr("\nactivation, shared object"));
  EXPECT_THAT(svg, Not(HasSubstr("persistent")));
}

TEST(PlanSvgTest, ColoursFollowSharedObjects) {
  planner::Problem problem;
  // Two chains that reuse memory, so that objects have several members.
  for (int i = 0; i < 12; ++i) {
    problem.buffers.push_back({.name = absl::StrCat("b", i),
                               .start = i,
                               .end = i + 2,
                               .size = 64 * (1 + i % 3)});
  }
  const planner::PlanResult plan = PlanBuffers(problem);
  const std::string svg = PlanSvg(plan, {}, {});
  std::map<int, std::string> fill_of_object;
  for (size_t b = 0; b < problem.buffers.size(); ++b) {
    const std::string fill = RectOf(svg, problem.buffers[b].name)["fill"];
    const int object = plan.shared_objects.object_of[b];
    auto [it, fresh] = fill_of_object.emplace(object, fill);
    EXPECT_EQ(it->second, fill) << "object " << object;
  }
  std::vector<std::string> fills;
  for (const auto& [object, fill] : fill_of_object) fills.push_back(fill);
  std::sort(fills.begin(), fills.end());
  EXPECT_EQ(std::unique(fills.begin(), fills.end()), fills.end())
      << "two shared objects share a colour";
  EXPECT_GT(fill_of_object.size(), 1u);
}

// The step of the most live bytes, found by looking at every step.
std::pair<int64_t, int64_t> BruteForcePeak(const planner::Problem& p) {
  std::pair<int64_t, int64_t> best = {0, 0};
  const auto [first, end] = planner::ScheduleSpan(p);
  for (int64_t s = first; s < end; ++s) {
    int64_t live = 0;
    for (const planner::Buffer& b : p.buffers) {
      if (b.start <= s && s < b.end) live += b.size;
    }
    if (live > best.second) best = {s, live};
  }
  return best;
}

TEST(PlanSvgTest, TitleLinesAndPeakAreLabelled) {
  const planner::PlanResult plan = PlanGraph(InPlaceGraph());
  const std::string svg = PlanSvg(plan, {}, {.title = "mlp <v2>"});
  EXPECT_THAT(svg, HasSubstr(">mlp &lt;v2&gt;</text>"));
  const double efficiency =
      static_cast<double>(plan.solution.arena_size) / plan.lower_bound;
  EXPECT_THAT(
      svg, HasSubstr(absl::StrCat(
               "strategy ", plan.strategy, " \xC2\xB7 arena ",
               HumanBytes(plan.solution.arena_size), " \xC2\xB7 lower bound ",
               HumanBytes(plan.lower_bound), " \xC2\xB7 efficiency ",
               absl::StrFormat("%.3f", efficiency))));
  EXPECT_THAT(svg, HasSubstr(absl::StrCat(
                       ">arena ", HumanBytes(plan.solution.arena_size), "<")));
  EXPECT_THAT(svg, HasSubstr(absl::StrCat(">lower bound ",
                                          HumanBytes(plan.lower_bound), "<")));
  const auto [step, bytes] = BruteForcePeak(plan.problem);
  EXPECT_THAT(svg, HasSubstr(absl::StrCat(">peak: step ", step, ", ",
                                          HumanBytes(bytes), " live<")));
  EXPECT_THAT(svg, HasSubstr(">schedule step (time)<"));
  EXPECT_THAT(svg, HasSubstr(">memory offset<"));
  EXPECT_THAT(svg, HasSubstr(">1 KiB<"));  // a byte tick in human units
}

TEST(PlanSvgTest, InPlaceHandOversAndFixedOffsetsAreMarked) {
  const planner::PlanResult graph_plan = PlanGraph(InPlaceGraph());
  const std::string svg = PlanSvg(graph_plan, {}, {});
  EXPECT_EQ(RectOf(svg, "h2")["class"], "in-place");
  EXPECT_EQ(RectOf(svg, "h")["class"], "");
  const std::string handovers = svg.substr(svg.find("<g id=\"handovers\""));
  EXPECT_EQ(testing::Occurrences(handovers.substr(0, handovers.find("</g>")),
                                 "<line "),
            1);
  EXPECT_THAT(svg, HasSubstr("\nin place of h</title>"));

  planner::Problem problem;
  problem.buffers.push_back({.name = "pinned",
                             .start = 0,
                             .end = 2,
                             .size = 64,
                             .fixed_offset = 128});
  problem.buffers.push_back({.name = "free", .start = 1, .end = 3, .size = 64});
  const std::string fixed = PlanSvg(PlanBuffers(problem), {}, {});
  EXPECT_EQ(RectOf(fixed, "pinned")["class"], "fixed");
  EXPECT_EQ(RectOf(fixed, "free")["class"], "");
  EXPECT_THAT(fixed, HasSubstr("\nfixed offset</title>"));
  const std::string frames = fixed.substr(fixed.find("<g id=\"fixed\""));
  EXPECT_EQ(
      testing::Occurrences(frames.substr(0, frames.find("</g>")), "<rect "), 1);
}

TEST(PlanSvgTest, MemoryPoolsAreStackedAndColouredByPool) {
  planner::Problem problem;
  problem.buffers.push_back({.name = "a", .start = 0, .end = 2, .size = 64});
  problem.buffers.push_back({.name = "b", .start = 1, .end = 3, .size = 64});
  problem.buffers.push_back({.name = "c", .start = 0, .end = 3, .size = 1024});
  planner::PlanOptions options;
  options.memory_spaces = {{"sram", 128}, {"dram", 0}};
  const planner::PlanResult plan = PlanBuffers(problem, options);
  ASSERT_EQ(plan.memory_spaces.size(), 2u);
  const MemoryMap map = BuildMemoryMap(plan, options, "pools");
  EXPECT_EQ(map.color_by, "memory pool");
  EXPECT_THAT(map.color_names, ::testing::ElementsAre("sram", "dram"));
  // dram sits on top of sram's arena.
  EXPECT_EQ(map.space_bases, (std::vector<planner::Bytes>{0, 128}));
  EXPECT_EQ(map.rects[2].y, 128 + plan.solution.offsets[2]);
  const std::string svg = PlanSvg(plan, options, {});
  EXPECT_EQ(RectOf(svg, "a")["fill"], RectOf(svg, "b")["fill"]);
  EXPECT_NE(RectOf(svg, "a")["fill"], RectOf(svg, "c")["fill"]);
  EXPECT_THAT(svg, HasSubstr(">sram arena 128 B of 128 B<"));
  EXPECT_THAT(svg, HasSubstr(">dram arena 1 KiB<"));
  EXPECT_THAT(svg, HasSubstr("memory pool dram</title>"));
}

TEST(PlanSvgTest, NamesAreEscapedAndBadBytesReplaced) {
  planner::Problem problem;
  problem.buffers.push_back(
      {.name = "a<b&\"c'\x01\xff", .start = 0, .end = 1, .size = 8});
  const std::string svg = PlanSvg(PlanBuffers(problem), {}, {.title = "t&t"});
  EXPECT_THAT(svg, HasSubstr("<title>a&lt;b&amp;&quot;c&#39;??\n"));
  EXPECT_THAT(svg, HasSubstr(">t&amp;t<"));
  EXPECT_THAT(svg, Not(HasSubstr("\xff")));
}

TEST(PlanSvgTest, EmptyPlanStillDraws) {
  const std::string svg = PlanSvg(planner::PlanResult{}, {}, {});
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr(">memory plan<"));
}

TEST(DrawingHelpersTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1 KiB");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(10239936), "9.77 MiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 30), "3 GiB");
}

TEST(DrawingHelpersTest, ByteTicksAreRoundAndCoverTheRange) {
  for (int64_t top : {int64_t{1}, int64_t{100}, int64_t{1000}, int64_t{4096},
                      int64_t{10239936}, int64_t{7} << 30}) {
    const std::vector<int64_t> ticks = ByteTicks(top, 8);
    ASSERT_GE(ticks.size(), 2u) << top;
    EXPECT_EQ(ticks[0], 0);
    EXPECT_LE(ticks.back(), top);
    EXPECT_LE(ticks.size(), 9u) << top;
    const int64_t step = ticks[1];
    EXPECT_GT(ticks.back() + step, top) << "ticks stop short of " << top;
    // Round in its unit (the largest of B, KiB, MiB, GiB within top): 1, 2
    // or 5 times a power of ten of it.
    double unit = 1;
    while (unit * 1024 <= top) unit *= 1024;
    double ratio = step / unit;
    while (ratio >= 10) ratio /= 10;
    while (ratio < 1) ratio *= 10;
    EXPECT_THAT(ratio, ::testing::AnyOf(::testing::DoubleNear(1, 1e-9),
                                        ::testing::DoubleNear(2, 1e-9),
                                        ::testing::DoubleNear(5, 1e-9)))
        << top << ": step " << step;
  }
  EXPECT_EQ(
      ByteTicks(10 << 20, 5),
      (std::vector<int64_t>{0, 2 << 20, 4 << 20, 6 << 20, 8 << 20, 10 << 20}));
}

TEST(DrawingHelpersTest, StepTicks) {
  EXPECT_EQ(StepTicks(0, 120, 12),
            (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100,
                                  110, 120}));
  EXPECT_EQ(StepTicks(3, 5, 12), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(StepTicks(-7, 7, 3), (std::vector<int64_t>{-5, 0, 5}));
  EXPECT_TRUE(StepTicks(5, 4, 3).empty());
}

TEST(DrawingHelpersTest, JsonStringCannotCloseAScript) {
  EXPECT_EQ(JsonString("a\"b\\c\n</script>&"),
            "\"a\\\"b\\\\c\\n\\u003c/script\\u003e\\u0026\"");
  EXPECT_EQ(JsonString("\x01\xc3\xa9\xff"), "\"\\u0001\xc3\xa9?\"");
}

// What XML 1.0 forbids never reaches a picture, however a caller's text
// came: surrogates, overlong forms, code points past U+10FFFF, U+FFFE,
// controls (the issue 31 SVG that xmllint refused).
TEST(DrawingHelpersTest, EscapeXmlKeepsOnlyXmlCharacters) {
  EXPECT_EQ(EscapeXml("a\xed\xa0\x80"
                      "b"),
            "a???b");  // one per byte
  EXPECT_EQ(EscapeXml("\xe0\x80\x80|\xc0\x80|\xf4\x90\x80\x80"), "???|??|????");
  EXPECT_EQ(EscapeXml("u\xef\xbf\xbe\xef\xbf\xbf\x01<&"), "u???&lt;&amp;");
  EXPECT_EQ(EscapeXml("caf\xc3\xa9\tx\ny \xf0\x9f\x98\x80"),
            "caf\xc3\xa9\tx\ny \xf0\x9f\x98\x80");
  EXPECT_EQ(JsonString("\xed\xa0\x80\xef\xbf\xbe"), "\"????\"");
}

TEST(DrawingHelpersTest, PaletteNeighboursDiffer) {
  for (int i = 0; i < 200; ++i) {
    EXPECT_THAT(PaletteColor(i), ::testing::MatchesRegex("#[0-9a-f]{6}"));
    EXPECT_NE(PaletteColor(i), PaletteColor(i + 1)) << i;
  }
  EXPECT_EQ(GroupDigits(1234567), "1,234,567");
  EXPECT_EQ(GroupDigits(-1000), "-1,000");
  EXPECT_EQ(GroupDigits(999), "999");
}

}  // namespace
}  // namespace memplan::formats
