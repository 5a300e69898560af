#include "pictures/plan_html.h"

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memplan::formats {
namespace {

// The page's style: the map fills the window below the title.
constexpr char kCss[] = R"css(
*{box-sizing:border-box}
body{margin:0;padding:10px 16px;font:13px/1.35 "DejaVu Sans",Helvetica,Arial,sans-serif;color:#222;background:#fff}
h1{font-size:19px;margin:0 0 2px}
#figures{margin:0 0 6px}
#bar{margin:0 0 4px;color:#555;font-size:12px}
#bar button{font:inherit;margin-right:4px;padding:1px 8px}
#map{position:relative;width:100%;height:max(420px,calc(100vh - 150px));user-select:none;cursor:crosshair;overflow:hidden}
#map.dragging{cursor:grabbing}
#map svg,#map canvas{position:absolute;left:0;top:0}
#tip{position:absolute;display:none;pointer-events:none;background:#fff;border:1px solid #888;box-shadow:0 2px 6px rgba(0,0,0,.25);padding:5px 8px;font-size:12px;max-width:420px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#tip .name{font-weight:bold}
#key{margin-top:4px;font-size:12px;color:#333}
#key .sw{display:inline-block;width:11px;height:11px;margin:0 3px 0 9px;vertical-align:-1px;border:1px solid #0003}
)css";

// The map's drawing and interaction. Reads the JSON in #plan-data.
constexpr char kJs[] = R"js(
(function () {
"use strict";
var D = JSON.parse(document.getElementById("plan-data").textContent);
var n = D.names.length, S = D.s, L = D.l, O = D.o, Z = D.z, C = D.c, K = D.k;
var M = {l: 96, r: 210, t: 24, b: 44};
var NS = "http://www.w3.org/2000/svg";
var box = document.getElementById("map"), under = document.getElementById("under");
var canvas = document.getElementById("canvas"), over = document.getElementById("over");
var tip = document.getElementById("tip");
var useCanvas = n > D.svg_limit;
box.setAttribute("data-renderer", useCanvas ? "canvas" : "svg");
var full = {x0: D.first, x1: D.end, y0: 0, y1: D.top};
var view = {x0: full.x0, x1: full.x1, y0: full.y0, y1: full.y1};
var W = 0, H = 0, hovered = -1, pending = false, drag = null, elems = null;
var inPlaceOf = {};
D.ip.forEach(function (p) { inPlaceOf[p[0]] = p[1]; });

function X(s) { return M.l + (s - view.x0) / (view.x1 - view.x0) * (W - M.l - M.r); }
function Y(b) { return H - M.b - (b - view.y0) / (view.y1 - view.y0) * (H - M.t - M.b); }
function human(b) {
  var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, v = b;
  while (Math.abs(v) >= 1024 && i < 4) { v /= 1024; i++; }
  if (i === 0) return Math.round(b) + " B";
  return (+v.toFixed(2)) + " " + u[i];
}
function group(v) { return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
function nice(raw, integral) {
  if (!(raw > 0)) return 1;
  var p = Math.pow(10, Math.floor(Math.log10(raw)));
  if (integral && p < 1) p = 1;
  var m = [1, 2, 5, 10];
  for (var i = 0; i < m.length; i++) if (m[i] * p >= raw) return m[i] * p;
  return 10 * p;
}
function byteTicks(lo, hi, max) {
  var unit = 1;
  while (unit * 1024 <= hi - lo && unit < Math.pow(1024, 4)) unit *= 1024;
  var step = Math.max(1, Math.round(nice((hi - lo) / unit / max, unit === 1) * unit));
  var out = [];
  for (var v = Math.ceil(lo / step) * step; v <= hi && out.length < 100; v += step) out.push(v);
  return out;
}
function stepTicks(lo, hi, max) {
  var step = nice((hi - lo) / max, true), out = [];
  for (var v = Math.ceil(lo / step) * step; v <= hi && out.length < 100; v += step) out.push(v);
  return out;
}
// A step as text: past 2^53 steps come relative to D.base (exact text).
var base = D.base === undefined ? null : BigInt(D.base);
function stepText(s) { return base === null ? String(s) : (base + BigInt(s)).toString(); }
function el(parent, tag, attrs, text) {
  var e = document.createElementNS(NS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
function flags(i) { return K[i] & 3; }  // 1: in place, 2: fixed offset

// The grid and, below the SVG limit, the rectangles as elements.
function drawUnder() {
  var keep = elems ? elems.g : null;
  clear(under);
  var g = el(under, "g", {stroke: "#e4e4e4"});
  byteTicks(view.y0, view.y1, 8).forEach(function (b) {
    el(g, "line", {x1: M.l, x2: W - M.r, y1: Y(b), y2: Y(b)});
  });
  if (useCanvas) return;
  var defs = el(under, "defs", {});
  var cp = el(defs, "clipPath", {id: "clip"});
  el(cp, "rect", {x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b});
  if (!keep) {
    keep = document.createElementNS(NS, "g");
    keep.setAttribute("id", "tensors");
    if (n <= 2000) { keep.setAttribute("stroke", "#fff"); keep.setAttribute("stroke-width", "0.5"); }
    elems = {g: keep, r: [], m: []};
    for (var i = 0; i < n; i++) {
      var r = document.createElementNS(NS, "rect");
      r.setAttribute("fill", D.colors[C[i]]);
      r.setAttribute("data-name", D.names[i]);
      if (flags(i) & 2) r.setAttribute("class", "fixed");
      else if (flags(i) & 1) { r.setAttribute("class", "in-place"); r.setAttribute("stroke", "#111"); r.setAttribute("stroke-dasharray", "4 2"); }
      keep.appendChild(r);
      elems.r.push(r);
    }
  }
  keep.setAttribute("clip-path", "url(#clip)");
  under.appendChild(keep);
  var hand = el(under, "g", {stroke: "#111", "stroke-width": 2.5, "clip-path": "url(#clip)"});
  for (var j = 0; j < n; j++) {
    var x = X(S[j]), w = X(S[j] + L[j]) - x, top = Y(O[j] + Z[j]), h = Y(O[j]) - top;
    var e = elems.r[j];
    e.setAttribute("x", x); e.setAttribute("y", top);
    e.setAttribute("width", Math.max(0, w)); e.setAttribute("height", Math.max(0, h));
    if ((flags(j) & 3) === 1) el(hand, "line", {x1: x, x2: x, y1: top, y2: top + h});
    if (flags(j) & 2) el(hand, "rect", {x: x, y: top, width: Math.max(0, w), height: Math.max(0, h), fill: "none", stroke: "#000"});
  }
}

// Past the SVG limit: every visible rectangle written straight into the
// canvas's pixels (at least one pixel each, so none disappears), then the
// in-place and fixed-offset marks stroked on top. Cost: one pass over the
// rectangles plus the pixels they cover.
var rgba = null, img = null;
function drawCanvas() {
  var dpr = window.devicePixelRatio || 1;
  var cw = Math.round(W * dpr), ch = Math.round(H * dpr);
  if (canvas.width !== cw || canvas.height !== ch) {
    canvas.width = cw; canvas.height = ch; img = null;
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
  }
  var ctx = canvas.getContext("2d");
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, cw, ch);
  if (!useCanvas) return;
  if (!rgba) {
    rgba = new Uint32Array(D.colors.length);
    var bytes = new Uint8Array(rgba.buffer);
    D.colors.forEach(function (c, i) {
      bytes[4 * i] = parseInt(c.substr(1, 2), 16); bytes[4 * i + 1] = parseInt(c.substr(3, 2), 16);
      bytes[4 * i + 2] = parseInt(c.substr(5, 2), 16); bytes[4 * i + 3] = 255;
    });
  }
  if (!img) img = ctx.createImageData(cw, ch);
  var px = new Uint32Array(img.data.buffer);
  px.fill(0);
  var cx0 = Math.round(M.l * dpr), cx1 = Math.round((W - M.r) * dpr);
  var cy0 = Math.round(M.t * dpr), cy1 = Math.round((H - M.b) * dpr);
  // Device pixels per step and per byte, and where step 0 / byte 0 fall.
  var kx = (W - M.l - M.r) / (view.x1 - view.x0) * dpr, bx = M.l * dpr - view.x0 * kx;
  var ky = (H - M.t - M.b) / (view.y1 - view.y0) * dpr, by = (H - M.b) * dpr + view.y0 * ky;
  var vx0 = view.x0, vx1 = view.x1, vy0 = view.y0, vy1 = view.y1, marks = [];
  for (var j = 0; j < n; j++) {
    var s = S[j], e = s + L[j], o = O[j], t = o + Z[j];
    if (e < vx0 || s > vx1 || t < vy0 || o > vy1) continue;
    var x0 = Math.round(bx + s * kx), x1 = Math.max(x0 + 1, Math.round(bx + e * kx));
    var y0 = Math.round(by - t * ky), y1 = Math.max(y0 + 1, Math.round(by - o * ky));
    if (x0 < cx0) x0 = cx0;
    if (x1 > cx1) x1 = cx1;
    if (y0 < cy0) y0 = cy0;
    if (y1 > cy1) y1 = cy1;
    var c = rgba[C[j]];
    for (var y = y0; y < y1; y++) px.fill(c, y * cw + x0, y * cw + x1);
    if (K[j] & 3) marks.push(j);
  }
  ctx.putImageData(img, 0, 0);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.save();
  ctx.beginPath(); ctx.rect(M.l, M.t, W - M.l - M.r, H - M.t - M.b); ctx.clip();
  ctx.strokeStyle = "#111";
  marks.forEach(function (j) {
    var x = X(S[j]), top = Y(O[j] + Z[j]), w = X(S[j] + L[j]) - x, h = Y(O[j]) - top;
    if (w < 3 || h < 3) return;
    ctx.setLineDash(flags(j) & 2 ? [] : [4, 2]);
    ctx.lineWidth = flags(j) & 2 ? 2.5 : 1;
    ctx.strokeRect(x, top, w, h);
    if (!(flags(j) & 2)) { ctx.setLineDash([]); ctx.lineWidth = 2.5; ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke(); }
  });
  ctx.restore();
}

// Label positions at least `gap` apart, pushed down where needed.
function spread(ys, gap) {
  var order = ys.map(function (y, i) { return i; }).sort(function (a, b) { return ys[a] - ys[b]; });
  var out = ys.slice();
  for (var k = 1; k < order.length; k++) out[order[k]] = Math.max(out[order[k]], out[order[k - 1]] + gap);
  return out;
}

// Axes, labels, the arena and bound lines, the peak step, the highlight.
function drawOver() {
  clear(over);
  var x0 = M.l, x1 = W - M.r, y0 = M.t, y1 = H - M.b;
  el(over, "rect", {id: "plot", x: x0, y: y0, width: x1 - x0, height: y1 - y0, fill: "none", stroke: "#999"});
  var ax = el(over, "g", {"font-size": 11, fill: "#333"});
  byteTicks(view.y0, view.y1, 8).forEach(function (b) {
    el(ax, "text", {x: x0 - 6, y: Y(b), dy: 4, "text-anchor": "end"}, human(b));
  });
  stepTicks(Math.ceil(view.x0 - 0.5), Math.floor(view.x1 - 0.5), 12).forEach(function (s) {
    var x = X(s + 0.5);
    el(ax, "line", {x1: x, x2: x, y1: y1, y2: y1 + 5, stroke: "#555"});
    el(ax, "text", {x: x, y: y1 + 18, "text-anchor": "middle"}, stepText(s));
  });
  el(ax, "text", {x: (x0 + x1) / 2, y: y1 + 36, "text-anchor": "middle", "font-size": 12}, "schedule step (time)");
  el(ax, "text", {transform: "translate(16 " + (y0 + y1) / 2 + ") rotate(-90)", "text-anchor": "middle", "font-size": 12}, "memory offset");
  var lines = el(over, "g", {id: "lines", "font-size": 12});
  var ys = D.lines.map(function (l) { return Y(l[0]); }), ly = spread(ys, 15);
  D.lines.forEach(function (l, i) {
    if (ys[i] < y0 - 1 || ys[i] > y1 + 1) return;
    var color = l[2] === "arena" ? "#111" : l[2] === "bound" ? "#1f6fd1" : "#b8860b";
    var attrs = {"class": l[2], x1: x0, x2: x1 + 8, y1: ys[i], y2: ys[i], stroke: color, "stroke-width": 2};
    if (l[2] !== "arena") attrs["stroke-dasharray"] = "6 4";
    el(lines, "line", attrs);
    el(lines, "text", {"class": l[2], x: x1 + 12, y: ly[i], dy: 4, fill: color}, l[1]);
  });
  var px = X(D.peak_step + 0.5);
  if (px >= x0 && px <= x1) {
    el(lines, "line", {id: "peak", x1: px, x2: px, y1: y0 - 4, y2: y1, stroke: "#d62728", "stroke-width": 1.5, "stroke-dasharray": "5 3"});
  }
  el(lines, "text", {id: "peak-label", x: Math.min(Math.max(px, x0 + 80), x1 - 80), y: y0 - 8, "text-anchor": "middle", fill: "#d62728"},
     "peak: step " + stepText(D.peak_step) + ", " + human(D.peak_bytes) + " live");
  if (hovered >= 0) {
    var j = hovered, hx = X(S[j]), ht = Y(O[j] + Z[j]);
    el(over, "rect", {id: "highlight", x: hx - 1, y: ht - 1, width: Math.max(2, X(S[j] + L[j]) - hx + 2),
                      height: Math.max(2, Y(O[j]) - ht + 2), fill: "none", stroke: "#000", "stroke-width": 2});
  }
  var r = box.getBoundingClientRect();
  box.setAttribute("data-plot", [r.left + x0, r.top + window.scrollY + y0, r.left + x1, r.top + window.scrollY + y1].join(" "));
  box.setAttribute("data-view", [view.x0, view.x1, view.y0, view.y1].join(" "));
}

function draw() {
  var t0 = performance.now();
  pending = false;
  W = box.clientWidth; H = box.clientHeight;
  [under, over].forEach(function (s) { s.setAttribute("width", W); s.setAttribute("height", H); });
  drawUnder(); drawCanvas(); drawOver();
  box.setAttribute("data-draw-ms", Math.round(performance.now() - t0));  // for tests and the curious
}
function redraw() { if (!pending) { pending = true; requestAnimationFrame(draw); } }

// The rectangle under (step, bytes): the last drawn wins.
function hit(step, bytes) {
  for (var i = n - 1; i >= 0; i--) {
    if (S[i] <= step && step < S[i] + L[i] && O[i] <= bytes && bytes < O[i] + Z[i]) return i;
  }
  return -1;
}
function line(text, cls) {
  var d = document.createElement("div");
  if (cls) d.className = cls;
  d.textContent = text;
  tip.appendChild(d);
}
// The hover card of rectangle i near (mx, my), in map pixels.
function showTip(i, mx, my) {
  hovered = i;
  if (i < 0) { tip.style.display = "none"; drawOver(); return; }
  clear(tip);
  var f = flags(i), off = O[i] - (D.bases ? D.bases[C[i]] : 0);
  // Exact figures: numbers past 2^53 lose digits as doubles, so a plan
  // holding one carries them as text (x: size, offset, its end, first and
  // last step, steps).
  var e = D.x ? D.x[i] : [Z[i], off, off + Z[i], S[i], S[i] + L[i] - 1, L[i]];
  line(D.names[i], "name");
  line("size " + human(Z[i]) + " (" + group(e[0]) + " bytes)");
  line("offset " + group(e[1]) + " to " + group(e[2]) + " (" + human(off) + ")");
  line("lifetime: steps " + e[3] + " to " + e[4] + " (" + e[5] + " step" + (String(e[5]) === "1" ? "" : "s") + ")");
  line(D.kinds[K[i] >> 2] + ", " + (D.bases ? "memory pool " + D.color_names[C[i]] + ", shared object " + D.obj[i]
                                             : "shared object " + C[i]));
  if (f & 1) line("written in place of " + inPlaceOf[i]);
  if (f & 2) line("fixed offset");
  tip.style.display = "block";
  var tx = mx + 14, ty = my + 14;
  if (tx + tip.offsetWidth > W) tx = Math.max(0, mx - tip.offsetWidth - 10);
  if (ty + tip.offsetHeight > H) ty = Math.max(0, my - tip.offsetHeight - 10);
  tip.style.left = tx + "px"; tip.style.top = ty + "px";
  drawOver();
}
function at(ev) {
  var r = box.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
  return {mx: mx, my: my,
          step: view.x0 + (mx - M.l) / (W - M.l - M.r) * (view.x1 - view.x0),
          bytes: view.y0 + (H - M.b - my) / (H - M.t - M.b) * (view.y1 - view.y0)};
}
var lastMove = null;
box.addEventListener("mousemove", function (ev) {
  var p = at(ev);
  if (drag) {
    var dx = (p.mx - drag.mx) / (W - M.l - M.r) * (drag.v.x1 - drag.v.x0);
    var dy = (p.my - drag.my) / (H - M.t - M.b) * (drag.v.y1 - drag.v.y0);
    view = {x0: drag.v.x0 - dx, x1: drag.v.x1 - dx, y0: drag.v.y0 + dy, y1: drag.v.y1 + dy};
    redraw();
    return;
  }
  if (lastMove === null) requestAnimationFrame(function () {
    var q = lastMove; lastMove = null;
    var inside = q.mx >= M.l && q.mx <= W - M.r && q.my >= M.t && q.my <= H - M.b;
    var i = inside ? hit(q.step, q.bytes) : -1;
    if (i !== hovered || i >= 0) showTip(i, q.mx, q.my);
  });
  lastMove = p;
});
box.addEventListener("mouseleave", function () { drag = null; box.classList.remove("dragging"); showTip(-1, 0, 0); });
box.addEventListener("mousedown", function (ev) {
  var p = at(ev);
  drag = {mx: p.mx, my: p.my, v: {x0: view.x0, x1: view.x1, y0: view.y0, y1: view.y1}};
  box.classList.add("dragging");
  showTip(-1, 0, 0);
  ev.preventDefault();
});
window.addEventListener("mouseup", function () { drag = null; box.classList.remove("dragging"); });
function zoom(p, fx, fy) {
  var sx = Math.min(Math.max(p.step, view.x0), view.x1), sy = Math.min(Math.max(p.bytes, view.y0), view.y1);
  var nx0 = sx - (sx - view.x0) * fx, nx1 = sx + (view.x1 - sx) * fx;
  var ny0 = sy - (sy - view.y0) * fy, ny1 = sy + (view.y1 - sy) * fy;
  if (nx1 - nx0 >= 0.5) { view.x0 = nx0; view.x1 = nx1; }
  if (ny1 - ny0 >= 1) { view.y0 = ny0; view.y1 = ny1; }
  redraw();
}
box.addEventListener("wheel", function (ev) {
  ev.preventDefault();
  var f = Math.exp(Math.max(-1, Math.min(1, ev.deltaY * 0.002)));
  zoom(at(ev), ev.altKey ? 1 : f, ev.shiftKey ? 1 : f);
}, {passive: false});
function reset() { view = {x0: full.x0, x1: full.x1, y0: full.y0, y1: full.y1}; redraw(); }
box.addEventListener("dblclick", reset);
function centre() { return {step: (view.x0 + view.x1) / 2, bytes: (view.y0 + view.y1) / 2}; }
document.getElementById("reset").addEventListener("click", reset);
document.getElementById("zoom-in").addEventListener("click", function () { zoom(centre(), 0.5, 0.5); });
document.getElementById("zoom-out").addEventListener("click", function () { zoom(centre(), 2, 2); });
window.addEventListener("resize", redraw);

// #view=X0,X1,Y0,Y1 and #tensor=NAME (see plan_html.h).
function applyHash() {
  var want = -1;
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var eq = part.indexOf("="), key = part.slice(0, eq), val = part.slice(eq + 1);
    try { val = decodeURIComponent(val); } catch (err) { /* a stray %: as typed */ }
    if (key === "view") {
      var v = val.split(",").map(Number);
      if (v.length === 4 && v.every(isFinite) && v[1] > v[0] && v[3] > v[2]) view = {x0: v[0], x1: v[1], y0: v[2], y1: v[3]};
    } else if (key === "tensor") {
      want = D.names.indexOf(val);
    }
  });
  draw();
  if (want >= 0) {
    var cx = (Math.max(X(S[want]), M.l) + Math.min(X(S[want] + L[want]), W - M.r)) / 2;
    var cy = (Math.max(Y(O[want] + Z[want]), M.t) + Math.min(Y(O[want]), H - M.b)) / 2;
    showTip(want, cx, cy);
  }
}
window.addEventListener("hashchange", applyHash);
applyHash();
})();
)js";

// The map's data as JSON: captions, lines, and one array per rectangle
// field (s: first step, l: steps, o: bottom in bytes, z: size, c: colour,
// k: kind index * 4 + flags; 1 in place, 2 fixed offset).
std::string PlanJson(const MemoryMap& m, const base::CancelToken* cancel) {
  const bool spaces = !m.space_bases.empty();
  std::vector<std::string> kinds;
  auto kind_index = [&kinds](const std::string& kind) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] == kind) return static_cast<int>(i);
    }
    kinds.push_back(kind);
    return static_cast<int>(kinds.size() - 1);
  };
  // Past 2^53 a double (the page's numbers) loses digits: the hover card's
  // figures then come as exact text too.
  constexpr int64_t kExactDouble = int64_t{1} << 53;
  const auto inexact = [](int64_t v) {
    return v > kExactDouble || v < -kExactDouble;
  };
  bool exact_text = inexact(m.top) || inexact(m.first) || inexact(m.end);
  for (const MapRect& r : m.rects) {
    exact_text = exact_text || inexact(r.start) || inexact(r.end) ||
                 inexact(r.y) || inexact(r.y + r.size);
  }
  // Where steps pass 2^53 they go relative to the first (`base`, as
  // text): a page's doubles hold their differences, where 2^62 - 1 and
  // 2^62 are one number. (Every step lies in [first, end].)
  const bool relative = inexact(m.first) || inexact(m.end);
  const auto step = [&](int64_t v) -> uint64_t {
    return static_cast<uint64_t>(v) -
           static_cast<uint64_t>(relative ? m.first : 0);
  };
  const auto step_text = [&](int64_t v) {
    return relative ? absl::StrCat(step(v)) : absl::StrCat(v);
  };
  std::string names, s, l, o, z, c, k, obj, ip, x;
  for (size_t i = 0; i < m.rects.size(); ++i) {
    if (StopDrawing(cancel, i)) break;
    const MapRect& r = m.rects[i];
    const char* sep = i == 0 ? "" : ",";
    absl::StrAppend(&names, sep, JsonString(m.names[i]));
    absl::StrAppend(&s, sep, step_text(r.start));
    absl::StrAppend(&l, sep, step(r.end) - step(r.start));
    absl::StrAppend(&o, sep, r.y);
    absl::StrAppend(&z, sep, r.size);
    absl::StrAppend(&c, sep, r.color);
    absl::StrAppend(
        &k, sep,
        kind_index(m.kinds[i]) * 4 + (r.in_place ? 1 : 0) + (r.fixed ? 2 : 0));
    if (spaces) absl::StrAppend(&obj, sep, r.object);
    if (exact_text) {
      const int64_t offset =
          r.space >= 0 ? r.y - m.space_bases[static_cast<size_t>(r.space)]
                       : r.y;
      absl::StrAppend(&x, sep, "[\"", r.size, "\",\"", offset, "\",\"",
                      offset + r.size, "\",\"", r.start, "\",\"", r.end - 1,
                      "\",\"", r.end - r.start, "\"]");
    }
    if (r.in_place) {
      absl::StrAppend(&ip, ip.empty() ? "" : ",", "[", i, ",",
                      JsonString(m.in_place_of[i]), "]");
    }
  }
  auto strings = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) {
      absl::StrAppend(&out, out.empty() ? "" : ",", JsonString(x));
    }
    return out;
  };
  std::string lines;
  for (const MapLine& line : m.lines) {
    absl::StrAppend(&lines, lines.empty() ? "" : ",", "[", line.y, ",",
                    JsonString(line.label), ",", JsonString(line.style), "]");
  }
  return absl::StrCat(
      "{\"svg_limit\":", kSvgRectLimit,
      relative ? absl::StrCat(",\"base\":\"", m.first, "\"") : "",
      ",\"first\":", step_text(m.first), ",\"end\":", step_text(m.end),
      ",\"top\":", m.top, ",\"peak_step\":", step_text(m.peak_step),
      ",\"peak_bytes\":", m.peak_bytes, ",\"lines\":[", lines, "],\"colors\":[",
      strings(m.colors), "],\"color_names\":[", strings(m.color_names),
      "],\"kinds\":[", strings(kinds), "]",
      spaces ? absl::StrCat(",\"bases\":[", absl::StrJoin(m.space_bases, ","),
                            "],\"obj\":[", obj, "]")
             : "",
      ",\"ip\":[", ip, "],\n\"names\":[", names, "],\n\"s\":[", s,
      "],\n\"l\":[", l, "],\n\"o\":[", o, "],\n\"z\":[", z, "],\n\"c\":[", c,
      "],\n\"k\":[", k, "]",
      exact_text ? absl::StrCat(",\n\"x\":[", x, "]") : "", "}");
}

// The key under the map: a swatch per colour (when few), and the marks.
std::string KeyHtml(const MemoryMap& m) {
  std::string out = absl::StrCat("colour: ", m.color_by);
  if (m.colors.size() <= 24) {
    for (size_t i = 0; i < m.colors.size(); ++i) {
      absl::StrAppend(&out,
                      "<span class=\"sw\" style=\"background:", m.colors[i],
                      "\"></span>", EscapeXml(m.color_names[i]));
    }
  } else {
    absl::StrAppend(&out, " (", m.colors.size(), ")");
  }
  absl::StrAppend(&out,
                  " &middot; dashed outline, dark left edge: written in place "
                  "of its input (hand-over) &middot; black outline: fixed "
                  "offset &middot; red dashes: peak step");
  return out;
}

}  // namespace

std::string PlanHtml(const planner::PlanResult& plan,
                     const planner::PlanOptions& options,
                     const PictureOptions& picture) {
  const MemoryMap m =
      BuildMemoryMap(plan, options, picture.title, picture.cancel);
  if (picture.cancel != nullptr && picture.cancel->Cancelled()) return "";
  // The plan's data is most of the page: not copied once cancelled.
  const std::string data = PlanJson(m, picture.cancel);
  if (picture.cancel != nullptr && picture.cancel->Cancelled()) return "";
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>",
      EscapeXml(absl::StrCat("memplan: ", m.title)), "</title>\n<style>", kCss,
      "</style>\n</head>\n<body>\n<h1 id=\"title\">", EscapeXml(m.title),
      "</h1>\n<p id=\"figures\">", EscapeXml(m.figures),
      "</p>\n<div id=\"bar\"><button id=\"reset\">reset view</button><button "
      "id=\"zoom-in\">+</button><button id=\"zoom-out\">&minus;</button> "
      "wheel: zoom (shift: steps only, alt: bytes only) &middot; drag: pan "
      "&middot; double click: reset &middot; hover: details</div>\n"
      "<div id=\"map\"><svg id=\"under\"></svg><canvas id=\"canvas\"></canvas>"
      "<svg id=\"over\"></svg><div id=\"tip\"></div></div>\n<div id=\"key\">",
      KeyHtml(m),
      "</div>\n<script type=\"application/json\" id=\"plan-data\">\n", data,
      "\n</script>\n<script>", kJs, "</script>\n</body>\n</html>\n");
}

}  // namespace memplan::formats
