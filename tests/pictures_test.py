#!/usr/bin/env python3
"""The pictures memplan draws, looked at as a person would.

`memplan plan --emit svg|html` and `memplan bench --emit html` are run on
real inputs; the files are checked with a parser (the SVG with
xml.etree, the HTML with html.parser), then rendered by headless Chromium
into PNGs whose pixels are read back: the picture is not blank, a known
tensor's rectangle shows its colour where the plan puts it, the labels are
there, hover cards and zoom work, 100k rectangles render in bounded time.

Chromium is required: without it every test here fails, saying how to
install it (scripts/setup.sh does). Run one suite with
    MEMPLAN_CLI=... MEMPLAN_SERVER=... MEMPLAN_SOURCE_DIR=... \\
        python3 tests/pictures_test.py SvgMapTest
(CTest does: pictures.SvgMapTest, ...).
"""
import html.parser
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "testing"))
import headless  # noqa: E402
from server import Server  # noqa: E402

CLI = os.environ.get("MEMPLAN_CLI", "")
SERVER = os.environ.get("MEMPLAN_SERVER", "")
SOURCE = os.environ.get("MEMPLAN_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(
                            os.path.abspath(__file__))))
RESNET = os.path.join(SOURCE, "examples", "resnet50.json")
SVG = "{http://www.w3.org/2000/svg}"
# The window the HTML pages are looked at in.
PAGE_W, PAGE_H = 1200, 800


def setUpModule():
    headless.chromium_path()  # fails every test, saying how to install it
    for name, path in (("MEMPLAN_CLI", CLI), ("MEMPLAN_SERVER", SERVER)):
        if not os.access(path, os.X_OK):
            raise RuntimeError("%s=%r is not an executable: build memplan "
                               "and memplan-server first" % (name, path))


def memplan(*args, timeout_s=600, cwd=None):
    """Runs the CLI; returns stdout. Fails the test on a non-zero exit."""
    start = time.monotonic()
    proc = subprocess.Popen([CLI] + list(args), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("memplan %s: no answer in %d s" %
                             (" ".join(args), timeout_s))
    if proc.returncode != 0:
        raise AssertionError("memplan %s exited %d after %.1f s: %s" %
                             (" ".join(args), proc.returncode,
                              time.monotonic() - start, err.decode()))
    return out.decode()


def human(n):
    """Bytes in binary units as a reader expects: '9.77 MiB', '512 B'."""
    units, v, i = ["B", "KiB", "MiB", "GiB", "TiB"], float(n), 0
    while abs(v) >= 1024 and i < 4:
        v, i = v / 1024, i + 1
    if i == 0:
        return "%d B" % n
    return ("%.2f" % v).rstrip("0").rstrip(".") + " " + units[i]


def peak(assignments):
    """(step, bytes) where the planned buffers hold the most bytes. A tensor
    written in place shares its input's buffer: a chain of them is one
    buffer, live from the first one's birth to the last one's death."""
    by_name = {a["name"]: a for a in assignments}

    def root(a):
        while a.get("in_place_of") in by_name:
            a = by_name[a["in_place_of"]]
        return a["name"]

    buffers = {}
    for a in assignments:
        first, end = int(a.get("first_step", 0)), int(a["end_step"])
        b = buffers.setdefault(root(a), [first, end, 0])
        b[0], b[1] = min(b[0], first), max(b[1], end)
        b[2] = max(b[2], int(a["size"]))
    live = {}
    for first, end, size in buffers.values():
        for s in range(first, end):
            live[s] = live.get(s, 0) + size
    step = min(live, key=lambda s: (-live[s], s))
    return step, live[step]


def planned(response):
    return [a for a in response["assignments"] if int(a.get("size", 0)) > 0]


class SvgMapTest(unittest.TestCase):
    """memplan plan resnet50.json --emit svg, parsed and looked at."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        cls.svg_path = os.path.join(cls.tmp, "plan.svg")
        cls.response = json.loads(memplan(
            "plan", RESNET, "--format=json", "--no_timings", "--emit", "svg",
            "-o", cls.svg_path))
        cls.tree = ET.parse(cls.svg_path)  # a malformed SVG fails here
        cls.root = cls.tree.getroot()
        cls.width = int(cls.root.get("width"))
        cls.height = int(cls.root.get("height"))
        cls.png = os.path.join(cls.tmp, "plan.png")
        headless.screenshot("file://" + cls.svg_path, cls.png, cls.width,
                            cls.height)
        cls.image = headless.read_png(cls.png)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def texts(self):
        return ["".join(t.itertext()) for t in self.root.iter(SVG + "text")]

    def rects(self):
        """Tensor name -> its <rect> element."""
        group = [g for g in self.root.iter(SVG + "g")
                 if g.get("id") == "tensors"]
        self.assertEqual(len(group), 1)
        out = {}
        for r in group[0].iter(SVG + "rect"):
            out[r.find(SVG + "title").text.split("\n")[0]] = r
        return out

    def frame(self):
        """Pixel mapping of the plot: (x(step), y(bytes)) functions."""
        plot = [r for r in self.root.iter(SVG + "rect")
                if r.get("id") == "plot"][0]
        x0, y0 = float(plot.get("x")), float(plot.get("y"))
        w, h = float(plot.get("width")), float(plot.get("height"))
        first = float(plot.get("data-first-step"))
        end = float(plot.get("data-end-step"))
        top = float(plot.get("data-top-bytes"))
        return (lambda s: x0 + (s - first) / (end - first) * w,
                lambda b: y0 + h - b / top * h, (x0, y0, x0 + w, y0 + h))

    def test_one_rectangle_per_planned_tensor(self):
        names = {a["name"] for a in planned(self.response)}
        self.assertEqual(set(self.rects()), names)

    def test_title_and_labels_say_what_the_plan_is(self):
        r = self.response
        arena, bound = int(r["arena_size_bytes"]), int(r["lower_bound_bytes"])
        texts = self.texts()
        self.assertEqual(texts[0], "resnet50")
        figures = texts[1]
        for part in ("strategy " + r["strategy"], "arena " + human(arena),
                     "lower bound " + human(bound),
                     "efficiency %.3f" % (arena / bound)):
            self.assertIn(part, figures)
        self.assertIn("arena " + human(arena), texts)
        self.assertIn("lower bound " + human(bound), texts)
        step, live = peak(planned(r))
        self.assertIn("peak: step %d, %s live" % (step, human(live)), texts)
        self.assertIn("schedule step (time)", texts)
        self.assertIn("memory offset", texts)
        self.assertGreaterEqual(
            len([t for t in texts if re.fullmatch(r"\d+(\.\d+)? MiB", t)]), 3)

    def test_rectangles_sit_where_the_plan_puts_them(self):
        x, y, _ = self.frame()
        rects = self.rects()
        for a in planned(self.response):
            r = rects[a["name"]]
            first, end = int(a.get("first_step", 0)), int(a["end_step"])
            offset, size = int(a.get("offset", 0)), int(a["size"])
            with self.subTest(tensor=a["name"]):
                self.assertAlmostEqual(float(r.get("x")), x(first), delta=0.01)
                self.assertAlmostEqual(float(r.get("width")),
                                       x(end) - x(first), delta=0.02)
                self.assertAlmostEqual(float(r.get("y")), y(offset + size),
                                       delta=0.01)
                self.assertAlmostEqual(float(r.get("height")),
                                       y(offset) - y(offset + size),
                                       delta=0.02)

    def test_colours_follow_shared_objects(self):
        rects = self.rects()
        fill_of_pool = {}
        for a in planned(self.response):
            fill = rects[a["name"]].get("fill")
            fill_of_pool.setdefault(int(a.get("pool_id", 0)), set()).add(fill)
        for pool, fills in fill_of_pool.items():
            self.assertEqual(len(fills), 1, "pool %d has colours %s" %
                             (pool, fills))
        all_fills = [next(iter(f)) for f in fill_of_pool.values()]
        self.assertEqual(len(set(all_fills)), len(all_fills))

    def test_screenshot_is_not_blank(self):
        im = self.image
        self.assertEqual((im.width, im.height), (self.width, self.height))
        self.assertGreater(len(im.colours()), 20)
        x, y, (x0, y0, x1, y1) = self.frame()
        coloured = im.count(lambda p: min(p) < 235, (x0, y0, x1, y1))
        # Most of what the tensors' rectangles cover shows coloured (about
        # 28% of the plot for ResNet-50: its input and output are short
        # bars, live from the start to their last use and from their
        # producer to the end).
        covered = sum((x(int(a["end_step"])) - x(int(a.get("first_step", 0))))
                      * (y(int(a.get("offset", 0)))
                         - y(int(a.get("offset", 0)) + int(a["size"])))
                      for a in planned(self.response))
        self.assertGreater(covered, 0.2 * (x1 - x0) * (y1 - y0))
        self.assertGreater(coloured, 0.9 * covered)
        # The title's letters are dark pixels above the plot.
        self.assertGreater(im.count(lambda p: max(p) < 80, (0, 0, x1, 40)),
                           200)

    def test_each_large_tensor_shows_its_colour_where_the_plan_puts_it(self):
        x, y, _ = self.frame()
        rects = self.rects()
        largest = sorted(
            planned(self.response),
            key=lambda a: -(x(int(a["end_step"])) -
                            x(int(a.get("first_step", 0)))) *
            (y(0) - y(int(a["size"]))))[:8]
        for a in largest:
            cx = (x(int(a.get("first_step", 0))) + x(int(a["end_step"]))) / 2
            off, size = int(a.get("offset", 0)), int(a["size"])
            cy = (y(off) + y(off + size)) / 2
            want = headless.hex_colour(rects[a["name"]].get("fill"))
            with self.subTest(tensor=a["name"]):
                self.assertTrue(headless.near(self.image.pixel(cx, cy), want),
                                "%s at (%d, %d) is %s, not its %s" %
                                (a["name"], cx, cy, self.image.pixel(cx, cy),
                                 want))

    def test_arena_line_is_drawn_at_the_arena_top(self):
        _, y, (_, _, x1, _) = self.frame()
        row = y(int(self.response["arena_size_bytes"]))
        on_line = self.image.count(lambda p: min(p) < 200,
                                   (x1 + 1, row - 1, x1 + 8, row + 2))
        above = self.image.count(lambda p: min(p) < 200,
                                 (x1 + 1, row - 12, x1 + 8, row - 8))
        self.assertGreater(on_line, 4)
        self.assertEqual(above, 0)

    def test_a_server_draws_the_same_picture(self):
        with Server(SERVER) as address:
            remote = os.path.join(self.tmp, "remote.svg")
            memplan("plan", RESNET, "--no_timings", "--server", address,
                    "--emit", "svg", "-o", remote)
        with open(remote, "rb") as a, open(self.svg_path, "rb") as b:
            self.assertEqual(a.read(), b.read())



class PageData:
    """The map's data embedded in a plan page (JSON in #plan-data)."""

    @staticmethod
    def of(page):
        found = re.search(r'<script type="application/json" id="plan-data">'
                          r"(.*?)</script>", page, re.S)
        return json.loads(found.group(1))


def dom_attr(dom, element_id, attr):
    found = re.search(r'<[^>]*id="%s"[^>]*>' % element_id, dom)
    if not found:
        return None
    value = re.search(r'\s%s="([^"]*)"' % attr, found.group(0))
    return value.group(1) if value else None


class Mapping:
    """Page pixels of a plan page's view, read from #map's data-plot and
    data-view (set by the page's script after drawing)."""

    def __init__(self, dom):
        self.x0, self.y0, self.x1, self.y1 = map(
            float, dom_attr(dom, "map", "data-plot").split())
        self.v = list(map(float, dom_attr(dom, "map", "data-view").split()))

    def x(self, step):
        return self.x0 + (step - self.v[0]) / (self.v[1] - self.v[0]) * \
            (self.x1 - self.x0)

    def y(self, bytes_):
        return self.y1 - (bytes_ - self.v[2]) / (self.v[3] - self.v[2]) * \
            (self.y1 - self.y0)


class TipText(html.parser.HTMLParser):
    """The lines of the hover card (#tip) in a DOM dump."""

    def __init__(self):
        super().__init__()
        self.depth, self.lines = 0, []

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += 1
            if tag == "div":
                self.lines.append("")
        elif dict(attrs).get("id") == "tip":
            self.depth = 1

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and self.lines:
            self.lines[-1] += data


class HtmlMapTest(unittest.TestCase):
    """memplan plan resnet50.json --emit html, with its scripts run."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        cls.path = os.path.join(cls.tmp, "plan.html")
        cls.response = json.loads(memplan(
            "plan", RESNET, "--format=json", "--no_timings", "--emit", "html",
            "-o", cls.path))
        with open(cls.path, encoding="utf-8") as f:
            cls.page = f.read()
        cls.url = "file://" + cls.path
        # The tensor looked at: the largest activation by area.
        cls.tensor = max(
            (a for a in planned(cls.response) if a.get("kind") ==
             "activation"),
            key=lambda a: int(a["size"]) * (int(a["end_step"]) -
                                            int(a.get("first_step", 0))))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_page_loads_nothing_from_elsewhere(self):
        for pattern in (r"\ssrc=", r"\shref=", r"<link", r"@import",
                        r"url\((?!#)", r"fetch\(", r"XMLHttpRequest",
                        r"https?://(?!www\.w3\.org/2000/svg)"):
            self.assertIsNone(re.search(pattern, self.page), pattern)

    def test_small_plans_are_drawn_as_svg_elements(self):
        dom = headless.dump_dom(self.url, PAGE_W, PAGE_H)
        self.assertEqual(dom_attr(dom, "map", "data-renderer"), "svg")
        names = re.findall(r'<rect [^>]*data-name="([^"]*)"', dom)
        self.assertEqual(sorted(names),
                         sorted(a["name"] for a in planned(self.response)))

    def test_hover_card_shows_name_size_offset_and_lifetime(self):
        a = self.tensor
        dom = headless.dump_dom(self.url + "#tensor=" + a["name"], PAGE_W,
                                PAGE_H)
        tip = TipText()
        tip.feed(dom)
        size, offset = int(a["size"]), int(a.get("offset", 0))
        first, end = int(a.get("first_step", 0)), int(a["end_step"])
        self.assertEqual(tip.lines[0], a["name"])
        self.assertIn("size %s (%s bytes)" % (human(size), "{:,}".format(size)),
                      tip.lines)
        self.assertIn("offset {:,} to {:,} ({})".format(
            offset, offset + size, human(offset)), tip.lines)
        self.assertIn("lifetime: steps %d to %d (%d steps)" %
                      (first, end - 1, end - first), tip.lines)
        self.assertIn("activation, shared object %d" % int(a.get("pool_id", 0)),
                      tip.lines)
        self.assertIsNotNone(dom_attr(dom, "highlight", "stroke"))

    def test_screenshot_shows_the_tensor_its_highlight_and_labels(self):
        a = self.tensor
        url = self.url + "#tensor=" + a["name"]
        m = Mapping(headless.dump_dom(url, PAGE_W, PAGE_H))
        png = os.path.join(self.tmp, "hover.png")
        headless.screenshot(url, png, PAGE_W, PAGE_H)
        im = headless.read_png(png)
        self.assertGreater(len(im.colours()), 20)
        data = PageData.of(self.page)
        want = headless.hex_colour(data["colors"][int(a.get("pool_id", 0))])
        left, right = m.x(int(a.get("first_step", 0))), m.x(int(a["end_step"]))
        off, size = int(a.get("offset", 0)), int(a["size"])
        top, bottom = m.y(off + size), m.y(off)
        # The card opens below and right of the centre: look above-left.
        px, py = left + (right - left) * 0.25, top + (bottom - top) * 0.25
        self.assertTrue(headless.near(im.pixel(px, py), want),
                        "%s at (%d, %d) is %s, not %s" %
                        (a["name"], px, py, im.pixel(px, py), want))
        # The highlight: a black frame just outside the rectangle.
        edge = im.pixel(left - 1, (top + bottom) / 2)
        self.assertTrue(max(edge) < 90, "no highlight at the left edge: %s" %
                        (edge,))
        # The labels right of the plot: dark text next to the arena line.
        arena_row = m.y(int(self.response["arena_size_bytes"]))
        self.assertGreater(
            im.count(lambda p: max(p) < 120,
                     (m.x1 + 10, arena_row - 12, m.x1 + 120, arena_row + 8)),
            30)

    def test_a_view_in_the_address_zooms(self):
        # Zoom onto a small tensor: it fills the middle of the plot.
        a = min(planned(self.response), key=lambda a: int(a["size"]))
        first, end = int(a.get("first_step", 0)), int(a["end_step"])
        off, size = int(a.get("offset", 0)), int(a["size"])
        view = [first - 1, end + 1, off - size, off + 2 * size]
        url = self.url + "#view=" + ",".join(map(str, view))
        dom = headless.dump_dom(url, PAGE_W, PAGE_H)
        m = Mapping(dom)
        self.assertEqual(m.v, view)
        # The axes follow: byte labels are within the view, in small units.
        labels = re.findall(r">(\d+(?:\.\d+)? (?:B|KiB|MiB))</text>", dom)
        self.assertGreaterEqual(len(labels), 2)
        png = os.path.join(self.tmp, "zoom.png")
        headless.screenshot(url, png, PAGE_W, PAGE_H)
        im = headless.read_png(png)
        want = headless.hex_colour(
            PageData.of(self.page)["colors"][int(a.get("pool_id", 0))])
        cx, cy = (m.x(first) + m.x(end)) / 2, (m.y(off) + m.y(off + size)) / 2
        self.assertGreater(m.y(off) - m.y(off + size), 100)  # really zoomed
        self.assertTrue(headless.near(im.pixel(cx, cy), want),
                        "%s at (%d, %d) is %s, not %s" %
                        (a["name"], cx, cy, im.pixel(cx, cy), want))


class HtmlExactFiguresTest(unittest.TestCase):
    """Figures past 2^53 (a double's exact integers) in the hover card, and
    a tensor whose name holds a '%' looked up from the address."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        csv = os.path.join(cls.tmp, "huge.csv")
        with open(csv, "w") as f:
            f.write("id,lower,upper,size\n"
                    "b,-4611686018427387902,-10,2305843009213693951\n"
                    "100%,-10,-9,3\n")
        cls.path = os.path.join(cls.tmp, "huge.html")
        cls.response = json.loads(memplan(
            "plan", csv, "--format=json", "--no_timings", "--emit", "html",
            "-o", cls.path))
        cls.url = "file://" + cls.path
        cls.by_name = {a["name"]: a for a in planned(cls.response)}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def card(self, hash_):
        dom = headless.dump_dom(self.url + hash_, PAGE_W, PAGE_H)
        tip = TipText()
        tip.feed(dom)
        return dom, tip.lines

    def test_the_card_shows_every_digit(self):
        a = self.by_name["b"]
        size, offset = int(a["size"]), int(a.get("offset", 0))
        _, lines = self.card("#tensor=b")
        self.assertIn("size %s (2,305,843,009,213,693,951 bytes)" % human(size),
                      lines)
        self.assertTrue(any(l.startswith("offset {:,} to {:,} (".format(
            offset, offset + size)) for l in lines), lines)
        self.assertIn("lifetime: steps -4611686018427387902 to -11 "
                      "(4611686018427387892 steps)", lines)

    def test_a_stray_percent_in_the_address_still_draws_the_map(self):
        for hash_ in ("#tensor=100%", "#tensor=%E0"):
            with self.subTest(hash_=hash_):
                dom, lines = self.card(hash_)
                names = re.findall(r'<rect [^>]*data-name="([^"]*)"', dom)
                self.assertEqual(sorted(names), ["100%", "b"])
        # Typed as it is, the name finds its tensor's card.
        _, lines = self.card("#tensor=100%")
        self.assertEqual(lines[0], "100%")
        self.assertIn("lifetime: steps -10 to -10 (1 step)", lines)


    def test_steps_past_two_to_the_fifty_three_keep_their_widths(self):
        # Nanosecond timestamps: a double cannot tell 1.7e18 from 1.7e18 +
        # 100, so the page takes steps from the first (exact as text).
        csv = os.path.join(self.tmp, "epoch.csv")
        with open(csv, "w") as f:
            f.write("id,lower,upper,size\n"
                    "a,1700000000000000000,1700000000000000100,64\n"
                    "b,1700000000000000050,1700000000000000200,32\n")
        path = os.path.join(self.tmp, "epoch.html")
        memplan("plan", csv, "--no_timings", "--emit", "html", "-o", path)
        dom = headless.dump_dom("file://" + path + "#tensor=b", PAGE_W,
                                PAGE_H)
        widths = {}
        for tag in re.findall(r'<rect [^>]*data-name="[^"]*"[^>]*>', dom):
            name = re.search(r'data-name="([^"]*)"', tag).group(1)
            widths[name] = float(re.search(r'\swidth="([^"]*)"', tag).group(1))
        self.assertEqual(sorted(widths), ["a", "b"])
        self.assertAlmostEqual(widths["b"] / widths["a"], 1.5, places=2)
        # Tick labels and the peak are exact.
        self.assertIn(">1700000000000000100</text>", dom)
        self.assertRegex(dom, r"peak: step 17000000000000000[5-9]\d")
        tip = TipText()
        tip.feed(dom)
        self.assertIn("lifetime: steps 1700000000000000050 to "
                      "1700000000000000199 (150 steps)", tip.lines)


class LargePlanTest(unittest.TestCase):
    """100,000 buffers: the HTML stays small and draws on a canvas in
    bounded time."""

    BUFFERS = 100_000
    BUDGET_BYTES = 8 << 20  # 84 bytes per rectangle
    RENDER_TIMEOUT_S = 180  # a loaded 2-core machine; it takes ~10 s idle

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        csv = os.path.join(cls.tmp, "large.csv")
        rng = random.Random(15)
        with open(csv, "w") as f:
            f.write("id,lower,upper,size\n")
            for i in range(cls.BUFFERS):
                start = rng.randrange(20000)
                f.write("b%d,%d,%d,%d\n" % (i, start,
                                            start + rng.randrange(1, 200),
                                            rng.randrange(64, 65536)))
        cls.path = os.path.join(cls.tmp, "large.html")
        cls.response = json.loads(memplan(
            "plan", csv, "--format=json", "--no_timings",
            "--strategy=best_fit_size", "--emit", "html", "-o", cls.path))
        with open(cls.path, encoding="utf-8") as f:
            cls.page = f.read()
        cls.url = "file://" + cls.path

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_page_stays_within_its_size_budget(self):
        size = os.path.getsize(self.path)
        self.assertLess(size, self.BUDGET_BYTES,
                        "%d bytes for %d rectangles" % (size, self.BUFFERS))
        self.assertEqual(len(PageData.of(self.page)["names"]), self.BUFFERS)

    def test_renders_on_a_canvas_in_bounded_time(self):
        png = os.path.join(self.tmp, "large.png")
        seconds = headless.screenshot(self.url, png, PAGE_W, PAGE_H,
                                      timeout_s=self.RENDER_TIMEOUT_S)
        print("\n100k rectangles: screenshot in %.1f s" % seconds)
        im = headless.read_png(png)
        self.assertGreater(len(im.colours()), 100)
        dom = headless.dump_dom(self.url, PAGE_W, PAGE_H,
                                timeout_s=self.RENDER_TIMEOUT_S)
        self.assertEqual(dom_attr(dom, "map", "data-renderer"), "canvas")
        print("100k rectangles: one draw of the canvas in %s ms" %
              dom_attr(dom, "map", "data-draw-ms"))
        m = Mapping(dom)
        # Most of the plot is painted.
        painted = im.count(lambda p: min(p) < 235,
                           (m.x0, m.y0, m.x1, m.y1))
        self.assertGreater(painted, 0.5 * (m.x1 - m.x0) * (m.y1 - m.y0))

    def test_zoomed_onto_a_buffer_it_shows_its_colour_and_card(self):
        a = next(x for x in self.response["assignments"] if x["name"] == "b0")
        first, end = int(a.get("first_step", 0)), int(a["end_step"])
        off, size = int(a.get("offset", 0)), int(a["size"])
        span = end - first
        view = [first - span, end + span, off - size, off + 2 * size]
        url = "%s#view=%s&tensor=b0" % (self.url, ",".join(map(str, view)))
        dom = headless.dump_dom(url, PAGE_W, PAGE_H,
                                timeout_s=self.RENDER_TIMEOUT_S)
        tip = TipText()
        tip.feed(dom)
        self.assertEqual(tip.lines[0], "b0")
        m = Mapping(dom)
        png = os.path.join(self.tmp, "large-zoom.png")
        headless.screenshot(url, png, PAGE_W, PAGE_H,
                            timeout_s=self.RENDER_TIMEOUT_S)
        im = headless.read_png(png)
        want = headless.hex_colour(
            PageData.of(self.page)["colors"][int(a.get("pool_id", 0))])
        px = m.x(first) + (m.x(end) - m.x(first)) * 0.25
        py = m.y(off + size) + (m.y(off) - m.y(off + size)) * 0.25
        self.assertTrue(headless.near(im.pixel(px, py), want),
                        "b0 at (%d, %d) is %s, not %s" %
                        (px, py, im.pixel(px, py), want))


class ChartParser(html.parser.HTMLParser):
    """Polylines (name -> [points]), texts and table rows of a bench page."""

    def __init__(self):
        super().__init__()
        self.lines, self.texts, self.cells, self.strokes = {}, [], [], {}
        self._text = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "polyline":
            self.lines.setdefault(a["data-name"], []).append(
                a["points"].split())
            self.strokes[a["data-name"]] = a["stroke"]
        if tag in ("text", "td"):
            self._text = ""

    def handle_endtag(self, tag):
        if tag in ("text", "td") and self._text is not None:
            (self.texts if tag == "text" else self.cells).append(self._text)
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text += data


class BenchHtmlTest(unittest.TestCase):
    """memplan bench resnet50.json --emit html."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        cls.path = os.path.join(cls.tmp, "bench.html")
        cls.response = json.loads(memplan(
            "bench", RESNET, "--format=json", "--emit", "html", "-o",
            cls.path))
        with open(cls.path, encoding="utf-8") as f:
            cls.page = f.read()
        cls.charts = ChartParser()
        cls.charts.feed(cls.page)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_allocator_is_charted_over_the_replay(self):
        rows = self.response["rows"]
        self.assertGreaterEqual(len(rows), 5)
        for row in rows:
            name, series = row["allocator"], row.get("series", [])
            with self.subTest(allocator=name):
                if name != "static_plan":
                    self.assertGreater(len(series), 100)  # --emit asked 512
                reserved = self.charts.lines.get(name + " reserved", [])
                in_use = self.charts.lines.get(name + " in use", [])
                if series:
                    # The shared chart and the allocator's own.
                    self.assertEqual([len(p) for p in reserved],
                                     [len(series)] * 2)
                    self.assertEqual([len(p) for p in in_use], [len(series)])
                self.assertIn(name, self.charts.cells)

    def test_plan_arena_and_latencies_are_labelled(self):
        r = self.response
        texts = self.charts.texts
        self.assertIn("static plan arena " + human(int(r["arena_size_bytes"])),
                      texts)
        self.assertIn("lower bound " + human(int(r["lower_bound_bytes"])),
                      texts)
        for row in r["rows"]:
            if int(row.get("p50_ns", 0)) > 0:
                self.assertIn("p50 {:,} ns".format(int(row["p50_ns"])), texts)
        self.assertIn("not timed", texts)  # the static plan's row

    def test_screenshot_shows_each_allocators_line(self):
        png = os.path.join(self.tmp, "bench.png")
        headless.screenshot("file://" + self.path, png, 1100, 1900)
        im = headless.read_png(png)
        self.assertGreater(len(im.colours()), 20)
        for row in self.response["rows"]:
            name = row["allocator"]
            colour = headless.hex_colour(self.charts.strokes[name +
                                                             " reserved"])
            with self.subTest(allocator=name):
                self.assertGreater(
                    im.count(lambda p, c=colour: headless.near(p, c, 6)), 150)

    def test_a_server_gives_the_same_charts(self):
        remote = os.path.join(self.tmp, "remote.html")
        with Server(SERVER) as address:
            response = json.loads(memplan(
                "bench", RESNET, "--format=json", "--server", address,
                "--emit", "html", "-o", remote))
        charts = ChartParser()
        with open(remote, encoding="utf-8") as f:
            charts.feed(f.read())
        for row in response["rows"]:
            with self.subTest(allocator=row["allocator"]):
                self.assertEqual(
                    [len(p) for p in charts.lines[row["allocator"] +
                                                  " reserved"]],
                    [len(row["series"])] * 2)

    def test_bench_emits_only_html(self):
        proc = subprocess.run(
            [CLI, "bench", RESNET, "--emit", "svg", "-o",
             os.path.join(self.tmp, "x.svg")],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 64)
        self.assertIn(b"bench --emit takes html", proc.stderr)


class MarksTest(unittest.TestCase):
    """In-place hand-overs and fixed offsets are visible as such."""

    IN_PLACE = {"graph": {
        "name": "in place",
        "tensors": [{"name": "x", "size_bytes": 4096},
                    {"name": "h", "size_bytes": 8192},
                    {"name": "h2", "size_bytes": 8192},
                    {"name": "s", "size_bytes": 16384},
                    {"name": "y", "size_bytes": 4096}],
        "ops": [{"name": "fc", "inputs": ["x"], "outputs": ["h"]},
                {"name": "side", "inputs": ["x"], "outputs": ["s"]},
                {"name": "relu", "inputs": ["h"], "outputs": ["h2"],
                 "in_place": True},
                {"name": "out", "inputs": ["h2", "s"], "outputs": ["y"]}],
        "inputs": ["x"], "outputs": ["y"]}}
    FIXED = {"buffers": [
        {"id": "pinned", "start": 0, "end": 3, "size": 4096,
         "fixed_offset": 8192},
        {"id": "b", "start": 1, "end": 4, "size": 2048},
        {"id": "c", "start": 2, "end": 6, "size": 8192}]}

    def draw(self, request, name):
        """The SVG of `request` (parsed) and its screenshot."""
        self.tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        src = os.path.join(self.tmp, name + ".json")
        with open(src, "w") as f:
            json.dump(request, f)
        svg = os.path.join(self.tmp, name + ".svg")
        memplan("plan", src, "--emit", "svg", "-o", svg)
        root = ET.parse(svg).getroot()
        png = os.path.join(self.tmp, name + ".png")
        headless.screenshot("file://" + svg, png, int(root.get("width")),
                            int(root.get("height")))
        rects = {r.find(SVG + "title").text.split("\n")[0]: r
                 for r in root.iter(SVG + "rect")
                 if r.find(SVG + "title") is not None}
        return root, rects, headless.read_png(png)

    def test_in_place_hand_over_is_a_dark_edge_on_a_dashed_rectangle(self):
        root, rects, im = self.draw(self.IN_PLACE, "in_place")
        h, h2 = rects["h"], rects["h2"]
        self.assertEqual(h2.get("class"), "in-place")
        self.assertIn("in place of h", h2.find(SVG + "title").text)
        self.assertEqual(h2.get("fill"), h.get("fill"))  # the same memory
        self.assertEqual(h2.get("y"), h.get("y"))
        x = float(h2.get("x"))
        top, height = float(h2.get("y")), float(h2.get("height"))
        edge = im.count(lambda p: max(p) < 70,
                        (x - 1, top + 2, x + 2, top + height - 2))
        self.assertGreater(edge, 0.8 * (height - 4),
                           "no dark hand-over edge at x=%d" % x)
        # Away from the edge, the rectangle shows its colour.
        want = headless.hex_colour(h2.get("fill"))
        px = x + float(h2.get("width")) / 2
        self.assertTrue(headless.near(im.pixel(px, top + height / 2), want))

    def test_fixed_offset_has_a_black_frame(self):
        _, rects, im = self.draw(self.FIXED, "fixed")
        r = rects["pinned"]
        self.assertEqual(r.get("class"), "fixed")
        x, y = float(r.get("x")), float(r.get("y"))
        w, h = float(r.get("width")), float(r.get("height"))
        black = lambda p: max(p) < 60  # noqa: E731
        # Top and bottom edges black along most of their length.
        for row in (y, y + h):
            self.assertGreater(im.count(black, (x + 3, row - 1, x + w - 3,
                                                row + 1)),
                               0.8 * (w - 6), "edge at y=%d" % row)
        want = headless.hex_colour(r.get("fill"))
        self.assertTrue(headless.near(im.pixel(x + w / 2, y + h / 2), want))
        self.assertEqual(rects["b"].get("class"), None)


class ReportHintTest(unittest.TestCase):
    """The text report's pointer to the pictures, for plans too large for
    its ASCII picture, names commands that draw them."""

    def test_the_hint_draws_the_plan(self):
        tmp = tempfile.mkdtemp(prefix="memplan-pictures-")
        try:
            csv = os.path.join(tmp, "wide.csv")
            with open(csv, "w") as f:
                f.write("id,lower,upper,size\n")
                for i in range(100):
                    f.write("t%d,%d,%d,%d\n" % (i, i, i + 3, 64 + i))
            report = memplan("plan", csv)
            hint = re.search(r"picture: .*too large.*?(--emit svg -o (\S+)) "
                             r"or (--emit html -o (\S+)) draws it", report)
            self.assertIsNotNone(hint, report)
            for flags, name in ((hint.group(1), hint.group(2)),
                                (hint.group(3), hint.group(4))):
                memplan("plan", csv, *flags.split(), cwd=tmp)
                path = os.path.join(tmp, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if name.endswith(".svg"):
                    rects = ET.parse(path).getroot().iter(SVG + "rect")
                    self.assertEqual(
                        len([r for r in rects if r.find(SVG + "title")
                             is not None]), 100)
                else:
                    self.assertEqual(len(PageData.of(text)["names"]), 100)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
