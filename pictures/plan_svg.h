// The memory map of a plan as a picture: time across (schedule steps),
// addresses up, every planned tensor a rectangle from its first to its last
// step and from its offset to offset + size, coloured by shared object (or
// by memory pool when the plan has several memories). The lower bound, the
// arena top and the peak step are drawn and labelled; in-place hand-overs
// and fixed offsets are marked. PlanSvg writes it as a standalone SVG file;
// formats/plan_html.h draws the same MemoryMap interactively.
//
//   formats::PictureOptions picture;
//   picture.title = "resnet50";
//   std::string svg = formats::PlanSvg(result, options, picture);
//
// The drawing helpers at the end (human byte units, nice ticks, XML
// escaping, colours) are shared by the plan and benchmark pages.
#ifndef MEMPLAN_PICTURES_PLAN_SVG_H_
#define MEMPLAN_PICTURES_PLAN_SVG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/cancel.h"
#include "planner/planner.h"

namespace memplan::formats {

// How a picture is titled and sized.
struct PictureOptions {
  // The model or input name, shown first in the title. Default empty:
  // "memory plan".
  std::string title;
  int width = 1200;  // SVG width in pixels. Default 1200. REQUIRES >= 400
  int height = 720;  // SVG height in pixels. Default 720. REQUIRES >= 300
  // The call's token: once it fires, drawing stops and the picture is left
  // unfinished (callers check the token and drop it). Default null: never.
  const base::CancelToken* cancel = nullptr;
};

// One rectangle of the map: a planned tensor.
struct MapRect {
  int tensor = -1;          // index into PlanResult::tensors (or buffers)
  planner::Step start = 0;  // first live step
  planner::Step end = 0;    // one past the last live step
  planner::Offset y = 0;    // bottom: space base + offset within the space
  planner::Bytes size = 0;  // height in bytes
  int color = 0;            // index into MemoryMap::colors
  int object = 0;           // shared object holding it
  int space = -1;           // memory space, -1 without spaces
  bool in_place = false;    // written in place of an input (hand-over)
  bool fixed = false;       // its buffer had a fixed offset
};

// A horizontal line across the map: an arena top, a lower bound, a capacity.
struct MapLine {
  planner::Bytes y = 0;  // bytes from the bottom of the map
  std::string label;     // e.g. "arena 3.1 MiB"
  std::string style;     // "arena", "bound" or "capacity"
};

// Everything a memory map shows, computed once for SVG and HTML.
struct MemoryMap {
  std::string title;               // the model or input name
  std::string figures;             // strategy, arena, lower bound, efficiency
  std::vector<MapRect> rects;      // in tensor order
  std::vector<std::string> names;  // per rect: the tensor's name
  std::vector<std::string> kinds;  // per rect: "activation", "input"...
  std::vector<std::string> in_place_of;  // per rect: the input it reuses
  std::vector<std::string> colors;       // "#rrggbb" per colour index
  std::string color_by;                  // "shared object" or "memory pool"
  std::vector<std::string> color_names;  // per colour: "object 3", "sram"
  std::vector<MapLine> lines;            // arena tops, lower bounds...
  // With memory spaces: per space, the bytes of the spaces stacked below it
  // (a rectangle's offset within its space is y - space_bases[space]).
  std::vector<planner::Bytes> space_bases;
  planner::Step first = 0;        // first step drawn
  planner::Step end = 1;          // one past the last step drawn
  planner::Bytes top = 1;         // bytes at the top of the plot
  planner::Step peak_step = 0;    // where the most bytes are live
  planner::Bytes peak_bytes = 0;  // bytes live at the peak step
};

// The map of a plan: its rectangles, colours, lines and captions.
// With a `cancel` token that fires, the map stops being built (incomplete).
MemoryMap BuildMemoryMap(const planner::PlanResult& plan,
                         const planner::PlanOptions& options,
                         absl::string_view title,
                         const base::CancelToken* cancel = nullptr);

// Whether a picture's loop should stop at `item`: polls `cancel` (may be
// null) every 4096 items (a few milliseconds of drawing).
inline bool StopDrawing(const base::CancelToken* cancel, size_t item) {
  return cancel != nullptr && item % 4096 == 0 && cancel->Cancelled();
}

// The memory map as a standalone SVG document (UTF-8). Each rectangle has a
// <title> (name, size, offset, steps) that viewers show on hover.
std::string PlanSvg(const planner::PlanResult& plan,
                    const planner::PlanOptions& options,
                    const PictureOptions& picture);

// ---- Drawing helpers shared by the SVG and HTML pictures ----

// "1.5 KiB", "12 MiB", "512 B": two significant decimals at most.
std::string HumanBytes(int64_t bytes);

// Evenly spaced round values covering [0, top] for a byte axis (multiples
// of 1, 2 or 5 times a power of ten of B, KiB, MiB or GiB), at most
// `max_ticks` + 1 of them.
std::vector<int64_t> ByteTicks(int64_t top, int max_ticks);

// Round integer values in [first, last] (multiples of 1, 2 or 5 times a
// power of ten), at most `max_ticks` + 1 of them.
std::vector<int64_t> StepTicks(int64_t first, int64_t last, int max_ticks);

// `text` safe inside XML/HTML text and attribute values: markup escaped,
// characters XML 1.0 forbids and bytes that are not well-formed UTF-8
// (base/text.h) replaced by '?'. Names arrive clean (engine::Plan applies
// base::SafeName); this keeps any other text from breaking the file.
std::string EscapeXml(absl::string_view text);

// `text` as a JSON string literal with its quotes, safe inside an HTML
// <script> element ('<', '>' and '&' as \u escapes); characters XML 1.0
// forbids and bytes that are not well-formed UTF-8 replaced by '?'.
std::string JsonString(absl::string_view text);

// The i-th colour of a categorical palette: distinct neighbours, readable
// on white, the same in every picture.
std::string PaletteColor(int i);

// "1,234,567".
std::string GroupDigits(int64_t value);

}  // namespace memplan::formats

#endif  // MEMPLAN_PICTURES_PLAN_SVG_H_
