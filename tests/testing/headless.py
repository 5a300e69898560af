"""Looking at pictures from tests: headless Chromium (Debian's `chromium`,
installed for the tests by scripts/setup.sh) takes screenshots and dumps
the DOM after scripts ran; a PNG decoder (standard library only) gives the
pixels. Every process is started in a session of its own and the whole
group is killed by its id when the call ends or times out.

    png = headless.screenshot("file:///tmp/plan.svg", "/tmp/plan.png",
                              1200, 720)
    image = headless.read_png(png)
    r, g, b = image.pixel(300, 200)
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib

# Flags that work in a container as root, with no GPU, no D-Bus and no
# network: nothing is fetched, nothing is updated, nothing is synced.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--hide-scrollbars",
    "--force-device-scale-factor=1", "--mute-audio",
]


class MissingChromium(Exception):
    """Chromium is not installed: the picture tests cannot look."""


def chromium_path():
    """The chromium binary, or raises MissingChromium saying what to do."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise MissingChromium(
        "chromium is not installed, so the pictures cannot be looked at: "
        "run scripts/setup.sh (it installs Debian's chromium for the "
        "picture tests) or `apt-get install chromium`")


def run_bounded(args, timeout_s):
    """Runs `args` in a new session; kills its process group (by the
    leader's pid) at the end or after `timeout_s`. Returns (exit code,
    stdout bytes, stderr bytes, seconds). Raises TimeoutError on timeout."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        raise TimeoutError("%s did not finish within %s s" %
                           (os.path.basename(args[0]), timeout_s))
    finally:
        _kill_group(proc.pid)  # helpers the browser left behind
    return proc.returncode, out, err, time.monotonic() - start


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _chromium(extra, url, width, height, timeout_s):
    profile = tempfile.mkdtemp(prefix="memplan-chromium-")
    try:
        args = [chromium_path()] + CHROMIUM_FLAGS + [
            "--user-data-dir=" + profile,
            "--window-size=%d,%d" % (width, height)] + extra + [url]
        return run_bounded(args, timeout_s)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(url, png_path, width, height, timeout_s=120):
    """Renders `url` in a width x height window into `png_path`. Returns
    the seconds it took. Raises RuntimeError if no PNG came out."""
    if os.path.exists(png_path):
        os.remove(png_path)
    code, _, err, seconds = _chromium(["--screenshot=" + png_path], url,
                                      width, height, timeout_s)
    if code != 0 or not os.path.exists(png_path):
        raise RuntimeError("chromium --screenshot %s failed (exit %s): %s" %
                           (url, code, err.decode(errors="replace")[-2000:]))
    return seconds


_FRAME_HEIGHT = {}


def _frame_height(width, height, timeout_s):
    """--dump-dom lays a page out in a viewport shorter than the window
    (by a browser frame's height), --screenshot in the whole window: the
    difference, measured once on a probe page."""
    if (width, height) not in _FRAME_HEIGHT:
        probe_dir = tempfile.mkdtemp(prefix="memplan-probe-")
        try:
            probe = os.path.join(probe_dir, "probe.html")
            with open(probe, "w") as f:
                f.write("<!DOCTYPE html><body><script>document.body."
                        "setAttribute('data-inner', innerHeight)</script>")
            code, out, err, _ = _chromium(["--dump-dom"], "file://" + probe,
                                          width, height, timeout_s)
        finally:
            shutil.rmtree(probe_dir, ignore_errors=True)
        found = re.search(rb'data-inner="(\d+)"', out)
        if code != 0 or not found:
            raise RuntimeError("chromium --dump-dom probe failed (exit %s): %s"
                               % (code, err.decode(errors="replace")[-2000:]))
        _FRAME_HEIGHT[(width, height)] = height - int(found.group(1))
    return _FRAME_HEIGHT[(width, height)]


def dump_dom(url, width, height, timeout_s=120):
    """The document of `url` as serialized after its scripts ran, laid out
    in a width x height viewport: the same layout a screenshot() of the
    same size shows."""
    frame = _frame_height(width, height, timeout_s)
    code, out, err, _ = _chromium(["--dump-dom"], url, width, height + frame,
                                  timeout_s)
    if code != 0:
        raise RuntimeError("chromium --dump-dom %s failed (exit %s): %s" %
                           (url, code, err.decode(errors="replace")[-2000:]))
    return out.decode("utf-8", errors="replace")


class Image:
    """Decoded pixels: rows of RGB(A) bytes."""

    def __init__(self, width, height, channels, rows):
        self.width, self.height, self.channels = width, height, channels
        self.rows = rows

    def pixel(self, x, y):
        """(r, g, b) at integer pixel (x, y)."""
        x, y = int(x), int(y)
        i = x * self.channels
        return tuple(self.rows[y][i:i + 3])

    def count(self, predicate, box=None):
        """How many pixels in box (x0, y0, x1, y1; default all) satisfy
        predicate((r, g, b))."""
        x0, y0, x1, y1 = box or (0, 0, self.width, self.height)
        n = 0
        c = self.channels
        for y in range(max(0, int(y0)), min(self.height, int(y1))):
            row = self.rows[y]
            for x in range(max(0, int(x0)), min(self.width, int(x1))):
                i = x * c
                if predicate((row[i], row[i + 1], row[i + 2])):
                    n += 1
        return n

    def colours(self):
        """The set of distinct (r, g, b) values."""
        seen = set()
        c = self.channels
        for row in self.rows:
            for i in range(0, len(row), c):
                seen.add((row[i], row[i + 1], row[i + 2]))
        return seen


def read_png(path):
    """Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium
    writes). Raises ValueError for anything else."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG" % path)
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("%s has no IHDR" % path)
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError("%s: unsupported PNG (depth %d, colour type %d, "
                         "interlace %d)" % (path, depth, colour, interlace))
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    return Image(width, height, channels,
                 _unfilter(raw, width * channels, height, channels))


def _unfilter(raw, stride, height, bpp):
    """Undoes the PNG row filters (None, Sub, Up, Average, Paeth)."""
    rows, prev, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif kind != 0:
            raise ValueError("bad PNG filter type %d" % kind)
        rows.append(line)
        prev = line
    return rows


def hex_colour(text):
    """'#4e79a7' -> (78, 121, 167)."""
    text = text.lstrip("#")
    return tuple(int(text[i:i + 2], 16) for i in (0, 2, 4))


def near(a, b, tolerance=3):
    """Two colours equal within `tolerance` per channel (antialiasing and
    colour management move a channel by a unit or two)."""
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))
