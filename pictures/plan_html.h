// The memory map of a plan (formats/plan_svg.h: MemoryMap) as one
// self-contained, interactive HTML page: nothing is loaded from elsewhere
// (the CSS and JavaScript are inline, the plan is embedded as compact
// column arrays of JSON). Hovering a rectangle shows the tensor's name,
// size, offset, lifetime, kind and shared object; the wheel zooms (shift:
// steps only, alt: bytes only), dragging pans, a double click resets. Up
// to kSvgRectLimit rectangles are SVG elements; past it they are drawn on a
// canvas, which keeps 100k rectangles responsive.
//
// The page's address may carry a view: plan.html#tensor=NAME shows NAME's
// hover card, #view=X0,X1,Y0,Y1 zooms to steps [X0, X1) and bytes [Y0, Y1)
// (both may be given, joined by '&'; where a step passes 2^53, X0 and X1
// count from the first step).
//
//   std::string html = formats::PlanHtml(result, options, {.title = "bert"});
#ifndef MEMPLAN_PICTURES_PLAN_HTML_H_
#define MEMPLAN_PICTURES_PLAN_HTML_H_

#include <string>

#include "pictures/plan_svg.h"
#include "planner/planner.h"

namespace memplan::formats {

// Rectangles drawn as SVG elements; more go on a canvas.
inline constexpr int kSvgRectLimit = 3000;

// The page. picture.width and picture.height are ignored: the map fills
// the browser's window.
std::string PlanHtml(const planner::PlanResult& plan,
                     const planner::PlanOptions& options,
                     const PictureOptions& picture);

}  // namespace memplan::formats

#endif  // MEMPLAN_PICTURES_PLAN_HTML_H_
