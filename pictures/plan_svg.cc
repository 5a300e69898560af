#include "pictures/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/text.h"

namespace memplan::formats {
namespace {

using planner::Bytes;
using planner::PlanResult;
using planner::Step;

// Plot margins of the SVG: room for the title, axes, labels and the key.
constexpr double kLeft = 96, kRight = 210, kTop = 78, kBottom = 86;
// Above this many rectangles, white separators would hide the colours.
constexpr size_t kMaxOutlinedRects = 2000;

// Bytes of each memory space below it in the stacked map.
std::vector<Bytes> SpaceBases(const PlanResult& plan) {
  std::vector<Bytes> base;
  Bytes sum = 0;
  for (const planner::MemorySpacePlan& s : plan.memory_spaces) {
    base.push_back(sum);
    sum += s.arena_size;
  }
  return base;
}

// The rectangle of planned buffer `b` with a tensor's own size and steps.
MapRect RectOf(const PlanResult& plan, const std::vector<Bytes>& bases, int b,
               Bytes size, Step start, Step end) {
  const auto ub = static_cast<size_t>(b);
  MapRect r;
  r.start = start;
  r.end = end;
  r.size = size;
  r.y = plan.solution.offsets[ub];
  if (ub < plan.shared_objects.object_of.size()) {
    r.object = plan.shared_objects.object_of[ub];
  }
  if (!bases.empty() && ub < plan.memory_space_of.size()) {
    r.space = plan.memory_space_of[ub];
    r.y += bases[static_cast<size_t>(r.space)];
  }
  r.fixed = plan.problem.buffers[ub].fixed_offset.has_value();
  r.color = r.space >= 0 ? r.space : r.object;
  return r;
}

// One rectangle per planned tensor (per buffer for plans without tensors).
void AddRects(const PlanResult& plan, const base::CancelToken* cancel,
              MemoryMap* m) {
  const std::vector<Bytes>& bases = m->space_bases;
  const auto& buffers = plan.problem.buffers;
  if (plan.tensors.empty()) {
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (StopDrawing(cancel, b)) return;
      const planner::Buffer& buf = buffers[b];
      m->rects.push_back(RectOf(plan, bases, static_cast<int>(b), buf.size,
                                buf.start, buf.end));
      m->rects.back().tensor = static_cast<int>(b);
      m->names.push_back(buf.name);
      m->kinds.push_back(buf.persistent ? "persistent" : "activation");
      m->in_place_of.emplace_back();
    }
    return;
  }
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    if (StopDrawing(cancel, t)) return;
    const planner::TensorPlacement& p = plan.tensors[t];
    if (p.buffer < 0 || p.size <= 0 || p.end <= p.start) continue;
    m->rects.push_back(RectOf(plan, bases, p.buffer, p.size, p.start, p.end));
    m->rects.back().tensor = static_cast<int>(t);
    m->rects.back().in_place = !p.in_place_of.empty();
    m->names.push_back(p.name);
    m->kinds.emplace_back(planner::TensorKindName(p.kind));
    m->in_place_of.push_back(p.in_place_of);
  }
}

// A colour per shared object, or per memory space when there are several.
void AddColors(const PlanResult& plan, MemoryMap* m) {
  if (!plan.memory_spaces.empty()) {
    m->color_by = "memory pool";
    for (size_t k = 0; k < plan.memory_spaces.size(); ++k) {
      m->colors.push_back(PaletteColor(static_cast<int>(k)));
      m->color_names.push_back(plan.memory_spaces[k].name);
    }
    return;
  }
  m->color_by = "shared object";
  int objects = static_cast<int>(plan.shared_objects.size.size());
  for (const MapRect& r : m->rects) objects = std::max(objects, r.object + 1);
  for (int p = 0; p < objects; ++p) {
    m->colors.push_back(PaletteColor(p));
    m->color_names.push_back(absl::StrCat("object ", p));
  }
}

// The arena top, lower bound and capacity lines (one set per memory space).
void AddLines(const PlanResult& plan, const planner::PlanOptions& options,
              MemoryMap* m) {
  const Bytes arena = plan.solution.arena_size;
  if (plan.memory_spaces.empty()) {
    m->lines.push_back(
        {arena, absl::StrCat("arena ", HumanBytes(arena)), "arena"});
    m->lines.push_back(
        {plan.lower_bound,
         absl::StrCat("lower bound ", HumanBytes(plan.lower_bound)), "bound"});
    // A capacity far above the arena would squeeze the map; it is in the
    // figures line then.
    // (In doubles: an arena near 2^62 times 3 passes 2^63.)
    if (options.capacity.has_value() &&
        static_cast<double>(*options.capacity) <=
            1.5 * static_cast<double>(arena)) {
      m->lines.push_back(
          {*options.capacity,
           absl::StrCat("capacity ", HumanBytes(*options.capacity)),
           "capacity"});
    }
    return;
  }
  const std::vector<Bytes>& bases = m->space_bases;
  for (size_t k = 0; k < plan.memory_spaces.size(); ++k) {
    const planner::MemorySpacePlan& s = plan.memory_spaces[k];
    m->lines.push_back(
        {bases[k] + s.arena_size,
         absl::StrCat(s.name, " arena ", HumanBytes(s.arena_size),
                      s.capacity > 0
                          ? absl::StrCat(" of ", HumanBytes(s.capacity))
                          : ""),
         "arena"});
    if (s.lower_bound > 0 && s.lower_bound < s.arena_size) {
      m->lines.push_back(
          {bases[k] + s.lower_bound,
           absl::StrCat(s.name, " lower bound ", HumanBytes(s.lower_bound)),
           "bound"});
    }
  }
}

// The step where the most bytes are live, and how many (a sweep over the
// planned buffers; ends before starts at the same step, lifetimes being
// half-open). Ties go to the earliest step.
std::pair<Step, Bytes> PeakStep(const planner::Problem& problem) {
  std::vector<std::pair<Step, Bytes>> events;
  events.reserve(problem.buffers.size() * 2);
  for (const planner::Buffer& b : problem.buffers) {
    events.push_back({b.start, b.size});
    events.push_back({b.end, -b.size});
  }
  std::sort(events.begin(), events.end());
  std::pair<Step, Bytes> peak = {0, 0};
  Bytes live = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    live += events[i].second;
    const bool last_at_step =
        i + 1 == events.size() || events[i + 1].first != events[i].first;
    if (last_at_step && live > peak.second) peak = {events[i].first, live};
  }
  return peak;
}

// The figures line of the title: what a user compares first.
std::string Figures(const PlanResult& plan, const planner::PlanOptions& options,
                    const MemoryMap& m) {
  const Bytes arena = plan.solution.arena_size;
  const double efficiency =
      plan.lower_bound > 0 ? static_cast<double>(arena) / plan.lower_bound : 1;
  std::string out =
      absl::StrCat("strategy ", plan.strategy.empty() ? "?" : plan.strategy,
                   " \xC2\xB7 arena ", HumanBytes(arena),
                   " \xC2\xB7 lower bound ", HumanBytes(plan.lower_bound),
                   " \xC2\xB7 efficiency ", absl::StrFormat("%.3f", efficiency),
                   plan.proven_optimal ? " (optimal)" : "", " \xC2\xB7 ",
                   m.rects.size(), " tensors");
  if (m.color_by == "shared object") {
    absl::StrAppend(&out, " in ", m.colors.size(), " shared objects");
  } else {
    absl::StrAppend(&out, " in memory pools ",
                    absl::StrJoin(m.color_names, ", "));
  }
  if (options.capacity.has_value()) {
    absl::StrAppend(&out, " \xC2\xB7 capacity ", HumanBytes(*options.capacity));
  }
  return out;
}

// ---- SVG writing ----

// Pixel coordinates of the plot: steps across, bytes up.
struct Frame {
  double x0, x1, y0, y1;  // plot corners in pixels (y0 top, y1 bottom)
  Step first, end;        // steps across
  Bytes top;              // bytes at y0
  // The x of `step` plus `part` of a step. Steps count from the first in
  // unsigned integers (lifetimes from -2^62 to 2^62 span more than
  // int64_t, and past 2^53 a double cannot tell neighbours apart).
  double X(Step step, double part = 0) const {
    const double span = std::max(1.0, Since(end));
    return x0 + (Since(step) + part) / span * (x1 - x0);
  }
  double Since(Step step) const {
    return static_cast<double>(static_cast<uint64_t>(step) -
                               static_cast<uint64_t>(first));
  }
  double Y(double bytes) const {
    return y1 - bytes / static_cast<double>(top) * (y1 - y0);
  }
};

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

// One line of a rectangle's hover text per fact.
std::string RectTitle(const MemoryMap& m, size_t i) {
  const MapRect& r = m.rects[i];
  const Bytes offset =
      r.space >= 0 ? r.y - m.space_bases[static_cast<size_t>(r.space)] : r.y;
  std::string t = absl::StrCat(
      m.names[i], "\n", HumanBytes(r.size), " (", GroupDigits(r.size),
      " bytes) at offset ", GroupDigits(offset), "\nsteps ", r.start, " to ",
      r.end - 1, "\n", m.kinds[i], ", ",
      m.color_by == "shared object"
          ? absl::StrCat("shared object ", r.object)
          : absl::StrCat("memory pool ", m.color_names[r.color]));
  if (r.in_place) absl::StrAppend(&t, "\nin place of ", m.in_place_of[i]);
  if (r.fixed) absl::StrAppend(&t, "\nfixed offset");
  return EscapeXml(t);
}

// Title and figures above the plot.
void AppendHeader(const MemoryMap& m, std::string* out) {
  absl::StrAppend(out, "<text id=\"title\" x=\"", kLeft,
                  "\" y=\"30\" font-size=\"19\" font-weight=\"bold\">",
                  EscapeXml(m.title), "</text>\n<text id=\"figures\" x=\"",
                  kLeft, "\" y=\"52\" font-size=\"13\">", EscapeXml(m.figures),
                  "</text>\n");
}

// Grid lines, ticks and their labels on both axes, and the axis titles.
void AppendAxes(const MemoryMap& m, const Frame& f, std::string* out) {
  absl::StrAppend(out, "<g id=\"axes\" font-size=\"11\" fill=\"#333\">\n");
  for (int64_t b : ByteTicks(m.top, 8)) {
    const std::string y = Num(f.Y(static_cast<double>(b)));
    absl::StrAppend(out, "<line x1=\"", Num(f.x0), "\" x2=\"", Num(f.x1),
                    "\" y1=\"", y, "\" y2=\"", y,
                    "\" stroke=\"#e4e4e4\"/><text x=\"", Num(f.x0 - 6),
                    "\" y=\"", y, "\" dy=\"4\" text-anchor=\"end\">",
                    HumanBytes(b), "</text>\n");
  }
  for (int64_t s : StepTicks(m.first, m.end - 1, 12)) {
    const std::string x = Num(f.X(s, 0.5));
    absl::StrAppend(out, "<line x1=\"", x, "\" x2=\"", x, "\" y1=\"", Num(f.y1),
                    "\" y2=\"", Num(f.y1 + 5), "\" stroke=\"#555\"/><text x=\"",
                    x, "\" y=\"", Num(f.y1 + 18), "\" text-anchor=\"middle\">",
                    s, "</text>\n");
  }
  absl::StrAppend(out, "<text x=\"", Num((f.x0 + f.x1) / 2), "\" y=\"",
                  Num(f.y1 + 36),
                  "\" text-anchor=\"middle\" font-size=\"12\">schedule step "
                  "(time)</text>\n<text transform=\"translate(18 ",
                  Num((f.y0 + f.y1) / 2),
                  ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">"
                  "memory offset</text>\n</g>\n");
}

// The tensors, each with its hover text; in-place tensors dashed with their
// hand-over edge drawn dark, fixed offsets outlined in black.
void AppendRects(const MemoryMap& m, const Frame& f,
                 const base::CancelToken* cancel, std::string* out) {
  const bool outlined = m.rects.size() <= kMaxOutlinedRects;
  // Room for every rectangle at once (about 185 bytes and the name each):
  // growing a string of 100 MB copies it and touches as many new pages,
  // 0.1-0.2 s that no poll of the token interrupts.
  size_t room = out->size();
  for (const std::string& name : m.names) room += name.size() + 192;
  out->reserve(room);
  absl::StrAppend(out, "<g id=\"tensors\"",
                  outlined ? " stroke=\"#fff\" stroke-width=\"0.5\"" : "",
                  ">\n");
  std::string marks, frames;
  for (size_t i = 0; i < m.rects.size(); ++i) {
    if (StopDrawing(cancel, i)) break;
    const MapRect& r = m.rects[i];
    const double x = f.X(r.start);
    const double w = f.X(r.end) - x;
    const double top = f.Y(static_cast<double>(r.y + r.size));
    const double h = f.Y(static_cast<double>(r.y)) - top;
    std::string style;
    if (r.fixed) {
      // The frame goes on top of every rectangle, so no neighbour hides it.
      style = " class=\"fixed\"";
      absl::StrAppend(&frames, "<rect x=\"", Num(x), "\" y=\"", Num(top),
                      "\" width=\"", Num(w), "\" height=\"", Num(h), "\"/>\n");
    } else if (r.in_place) {
      style =
          " class=\"in-place\" stroke=\"#111\" stroke-width=\"1\" "
          "stroke-dasharray=\"4 2\"";
      absl::StrAppend(&marks, "<line x1=\"", Num(x), "\" x2=\"", Num(x),
                      "\" y1=\"", Num(top), "\" y2=\"", Num(top + h), "\"/>\n");
    }
    absl::StrAppend(out, "<rect x=\"", Num(x), "\" y=\"", Num(top),
                    "\" width=\"", Num(w), "\" height=\"", Num(h), "\" fill=\"",
                    m.colors[static_cast<size_t>(r.color)], "\"", style,
                    "><title>", RectTitle(m, i), "</title></rect>\n");
  }
  absl::StrAppend(out,
                  "</g>\n<g id=\"handovers\" stroke=\"#111\" "
                  "stroke-width=\"2.5\">\n",
                  marks,
                  "</g>\n<g id=\"fixed\" fill=\"none\" stroke=\"#000\" "
                  "stroke-width=\"2.5\">\n",
                  frames, "</g>\n");
}

// Label positions for lines at `ys` (pixels), pushed down where needed so
// that no two are closer than `gap`; same order as `ys`.
std::vector<double> SpreadLabels(std::vector<double> ys, double gap) {
  std::vector<size_t> order(ys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ys[a] < ys[b]; });
  for (size_t k = 1; k < order.size(); ++k) {
    ys[order[k]] = std::max(ys[order[k]], ys[order[k - 1]] + gap);
  }
  return ys;
}

// The arena, lower bound and capacity lines, labelled in the right margin,
// and the peak step.
void AppendLines(const MemoryMap& m, const Frame& f, std::string* out) {
  std::vector<double> ys;
  for (const MapLine& l : m.lines) ys.push_back(f.Y(static_cast<double>(l.y)));
  const std::vector<double> label_ys = SpreadLabels(ys, 15);
  absl::StrAppend(out, "<g id=\"lines\" font-size=\"12\">\n");
  for (size_t i = 0; i < m.lines.size(); ++i) {
    const MapLine& l = m.lines[i];
    const char* color = l.style == "arena"   ? "#111"
                        : l.style == "bound" ? "#1f6fd1"
                                             : "#b8860b";
    const char* dash = l.style == "arena" ? "" : " stroke-dasharray=\"6 4\"";
    absl::StrAppend(out, "<line class=\"", l.style, "\" x1=\"", Num(f.x0),
                    "\" x2=\"", Num(f.x1 + 8), "\" y1=\"", Num(ys[i]),
                    "\" y2=\"", Num(ys[i]), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"", dash, "/><text class=\"", l.style,
                    "\" x=\"", Num(f.x1 + 12), "\" y=\"", Num(label_ys[i]),
                    "\" dy=\"4\" fill=\"", color, "\">", EscapeXml(l.label),
                    "</text>\n");
  }
  const double px = f.X(m.peak_step, 0.5);
  absl::StrAppend(
      out, "<line id=\"peak\" x1=\"", Num(px), "\" x2=\"", Num(px), "\" y1=\"",
      Num(f.y0 - 4), "\" y2=\"", Num(f.y1),
      "\" stroke=\"#d62728\" "
      "stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/><text id=\"peak-label\" "
      "x=\"",
      Num(std::clamp(px, f.x0 + 80, f.x1 - 80)), "\" y=\"", Num(f.y0 - 8),
      "\" text-anchor=\"middle\" fill=\"#d62728\">peak: step ", m.peak_step,
      ", ", HumanBytes(m.peak_bytes), " live</text>\n</g>\n");
}

// The key under the axis: what colours, dashes and outlines mean.
void AppendKey(const MemoryMap& m, const Frame& f, std::string* out) {
  const double y = f.y1 + 60;
  absl::StrAppend(
      out, "<g id=\"key\" font-size=\"11\" fill=\"#333\">\n<text x=\"",
      Num(f.x0), "\" y=\"", Num(y), "\">colour: ", m.color_by, " (",
      m.colors.size(), m.color_by == "memory pool" ? ": " : "",
      m.color_by == "memory pool"
          ? EscapeXml(absl::StrJoin(m.color_names, ", "))
          : "",
      ") \xC2\xB7 dashed outline, dark left edge: written in place of its "
      "input "
      "(hand-over) \xC2\xB7 black outline: fixed offset \xC2\xB7 red dashes: "
      "peak step</text>\n</g>\n");
}

}  // namespace

MemoryMap BuildMemoryMap(const PlanResult& plan,
                         const planner::PlanOptions& options,
                         absl::string_view title,
                         const base::CancelToken* cancel) {
  MemoryMap m;
  m.title = title.empty() ? "memory plan" : std::string(title);
  m.space_bases = SpaceBases(plan);
  AddRects(plan, cancel, &m);
  if (cancel != nullptr && cancel->Cancelled()) return m;
  AddColors(plan, &m);
  AddLines(plan, options, &m);
  if (!m.rects.empty()) {
    m.first = m.rects[0].start;
    m.end = m.rects[0].end;
    for (const MapRect& r : m.rects) {
      m.first = std::min(m.first, r.start);
      m.end = std::max(m.end, r.end);
    }
  }
  Bytes top = 1;
  for (const MapLine& l : m.lines) top = std::max(top, l.y);
  for (const MapRect& r : m.rects) top = std::max(top, r.y + r.size);
  // Headroom above the arena line, short of 2^63 (an arena may be near it).
  m.top = top + std::min(top / 20, std::numeric_limits<Bytes>::max() - top);
  std::tie(m.peak_step, m.peak_bytes) = PeakStep(plan.problem);
  m.figures = Figures(plan, options, m);
  return m;
}

std::string PlanSvg(const PlanResult& plan, const planner::PlanOptions& options,
                    const PictureOptions& picture) {
  const MemoryMap m =
      BuildMemoryMap(plan, options, picture.title, picture.cancel);
  if (picture.cancel != nullptr && picture.cancel->Cancelled()) return "";
  const int w = std::max(400, picture.width);
  const int h = std::max(300, picture.height);
  const Frame f{kLeft, w - kRight, kTop, h - kBottom, m.first, m.end, m.top};
  std::string out = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
      w, "\" height=\"", h, "\" viewBox=\"0 0 ", w, " ", h,
      "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>",
      EscapeXml(absl::StrCat("memplan: ", m.title)), "</title>\n<rect width=\"",
      w, "\" height=\"", h, "\" fill=\"#fff\"/>\n");
  AppendHeader(m, &out);
  AppendAxes(m, f, &out);
  absl::StrAppend(&out, "<rect id=\"plot\" x=\"", Num(f.x0), "\" y=\"",
                  Num(f.y0), "\" width=\"", Num(f.x1 - f.x0), "\" height=\"",
                  Num(f.y1 - f.y0),
                  "\" fill=\"none\" stroke=\"#999\" "
                  "data-first-step=\"",
                  m.first, "\" data-end-step=\"", m.end, "\" data-top-bytes=\"",
                  m.top, "\"/>\n");
  AppendRects(m, f, picture.cancel, &out);
  if (picture.cancel != nullptr && picture.cancel->Cancelled()) return "";
  AppendLines(m, f, &out);
  AppendKey(m, f, &out);
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

// ---- Drawing helpers ----

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(bytes, " B");
  std::string s = absl::StrFormat("%.2f", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return absl::StrCat(s, " ", kUnits[u]);
}

namespace {

// The smallest of 1, 2, 5 x 10^k (k >= 0 when `integral`) at least `raw`.
double NiceStep(double raw, bool integral) {
  if (raw <= 0) return 1;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  if (integral && p < 1) p = 1;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::vector<int64_t> ByteTicks(int64_t top, int max_ticks) {
  std::vector<int64_t> ticks;
  if (top <= 0 || max_ticks <= 0) return {0};
  double unit = 1;
  while (unit * 1024 <= static_cast<double>(top) &&
         unit < 1024.0 * 1024 * 1024 * 1024) {
    unit *= 1024;
  }
  double step =
      NiceStep(static_cast<double>(top) / unit / max_ticks, unit == 1) * unit;
  step = std::max(1.0, std::round(step));
  for (double v = 0; v <= static_cast<double>(top) + 0.5; v += step) {
    ticks.push_back(static_cast<int64_t>(std::llround(v)));
  }
  return ticks;
}

std::vector<int64_t> StepTicks(int64_t first, int64_t last, int max_ticks) {
  if (last < first) return {};
  const double span = static_cast<double>(last - first);
  const auto step = static_cast<int64_t>(
      NiceStep(span / std::max(1, max_ticks), /*integral=*/true));
  std::vector<int64_t> ticks;
  int64_t v =
      first >= 0 ? (first + step - 1) / step * step : -((-first) / step) * step;
  for (; v <= last; v += step) ticks.push_back(v);
  return ticks;
}

namespace {

// Calls ascii(c) for each ASCII byte, appends other characters XML 1.0
// allows as they are (base/text.h) and '?' for any other byte.
template <typename Ascii>
std::string MapUtf8(absl::string_view text, Ascii ascii) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const size_t len = base::Utf8Sequence(text, i, &c);
    if (len == 1) {
      ascii(text[i], &out);
    } else if (len > 0 && base::IsXmlChar(c)) {
      out.append(text.data() + i, len);
    } else {
      out += '?';
    }
    i += std::max<size_t>(len, 1);
  }
  return out;
}

}  // namespace

std::string EscapeXml(absl::string_view text) {
  return MapUtf8(text, [](char c, std::string* out) {
    switch (c) {
      case '&':
        *out += "&amp;";
        break;
      case '<':
        *out += "&lt;";
        break;
      case '>':
        *out += "&gt;";
        break;
      case '"':
        *out += "&quot;";
        break;
      case '\'':
        *out += "&#39;";
        break;
      default:
        *out += (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : c;
    }
  });
}

std::string JsonString(absl::string_view text) {
  return absl::StrCat("\"",
                      MapUtf8(text,
                              [](char c, std::string* out) {
                                switch (c) {
                                  case '"':
                                    *out += "\\\"";
                                    break;
                                  case '\\':
                                    *out += "\\\\";
                                    break;
                                  case '\n':
                                    *out += "\\n";
                                    break;
                                  case '<':
                                    *out += "\\u003c";
                                    break;
                                  case '>':
                                    *out += "\\u003e";
                                    break;
                                  case '&':
                                    *out += "\\u0026";
                                    break;
                                  default:
                                    if (c < 0x20 || c == 0x7f) {
                                      absl::StrAppendFormat(
                                          out, "\\u%04x", static_cast<int>(c));
                                    } else {
                                      *out += c;
                                    }
                                }
                              }),
                      "\"");
}

std::string PaletteColor(int i) {
  // Ten hand-picked distinct hues first, then golden-angle hues.
  static constexpr const char* kFirst[] = {
      "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
      "#edc948", "#ff9da7", "#9c755f", "#8cd17d", "#a0cbe8"};
  if (i >= 0 && i < 10) return kFirst[i];
  const double hue = std::fmod(i * 137.508, 360.0) / 60.0;
  const double s = (i % 2 == 0) ? 0.55 : 0.7;
  const double l = 0.45 + 0.12 * (i % 3);
  const double c = (1 - std::fabs(2 * l - 1)) * s;
  const double x = c * (1 - std::fabs(std::fmod(hue, 2.0) - 1));
  const int sector = static_cast<int>(hue);
  double rgb[3] = {0, 0, 0};
  // Per sector of the hue circle: which channel gets c, which x.
  const int order[6][3] = {{0, 1, 2}, {1, 0, 2}, {1, 2, 0},
                           {2, 1, 0}, {2, 0, 1}, {0, 2, 1}};
  rgb[order[sector % 6][0]] = c;
  rgb[order[sector % 6][1]] = x;
  const double base = l - c / 2;
  return absl::StrFormat("#%02x%02x%02x",
                         static_cast<int>(std::lround((rgb[0] + base) * 255)),
                         static_cast<int>(std::lround((rgb[1] + base) * 255)),
                         static_cast<int>(std::lround((rgb[2] + base) * 255)));
}

std::string GroupDigits(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace memplan::formats
