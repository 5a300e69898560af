#!/usr/bin/python3
"""Models at the size people ship them, planned in-process and by a real
server, and checked against ONNX's own reading of them.

The models are torchvision architectures exported by Debian's python3-torch
(tests/models/export_torchvision.py: random weights, nothing downloaded),
among them one over gRPC's 64 MiB message limit, and a synthetic model of
2 GiB whose weights are external data in a FIFO. They are exported once per
build tree into MEMPLAN_TORCHVISION_MODELS and reused.

For each model:
- `memplan plan MODEL --format json --no_timings` succeeds, and the plan is
  sound: arena >= lower bound > 0, efficiency near 1, no two tensors live
  at once share a byte, every tensor within the arena;
- the same with `--server` against a memplan-server started here on
  127.0.0.1 port 0 prints byte-identical JSON;
- independently, with python3-onnx (`onnx.load(..., load_external_data=
  False)` and ONNX's shape inference): every planned tensor's size is its
  inferred shape times its element size, the graph outputs included;
  the initializers, Constant outputs and what is computed from them alone
  (an Identity of a parameter...) are exactly the `unplanned`, and
  `weights_bytes` is the bytes the file stores of them: the initializers'
  and Constant outputs' alone, each once; planned and unplanned together
  are every value of the graph;
- the 2 GiB model's weights.bin is a FIFO that blocks whoever opens it: both
  processes run in its folder and must answer within a timeout.

Run one model with
    MEMPLAN_CLI=... MEMPLAN_SERVER=... MEMPLAN_SOURCE_DIR=... \\
    MEMPLAN_TORCHVISION_MODELS=build/torchvision-models \\
        /usr/bin/python3 tests/torchvision_models_test.py resnet18
(CTest does: torchvision_models.resnet18, ...); without a name, every
model. Exit 77 (skipped, saying why) only where python3-torch,
python3-torchvision or python3-onnx is missing; scripts/setup.sh installs
them.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "models"))
sys.path.insert(0, os.path.join(HERE, "testing"))
import export_torchvision  # noqa: E402
from server import Server  # noqa: E402

CLI = os.environ.get("MEMPLAN_CLI", "")
SERVER = os.environ.get("MEMPLAN_SERVER", "")
CACHE = os.environ.get("MEMPLAN_TORCHVISION_MODELS") or os.path.join(
    tempfile.gettempdir(), "memplan-torchvision-models")
SKIPPED = 77
# Seconds a plan may take, in-process or through the server; planning these
# models takes well under a second, so running out means a hang (e.g. the
# FIFO of the 2 GiB model opened).
PLAN_TIMEOUT_S = 60
# Seconds to export one model (resnet101, the slowest, takes ~5 s on 2
# cores; torch's import ~2 s more).
EXPORT_TIMEOUT_S = 600
# What `auto` reaches on these chains and DAGs: within 1% of the bound.
MAX_EFFICIENCY = 1.01


def run(args, cwd=None, timeout_s=PLAN_TIMEOUT_S):
    """Runs `args` in a session of its own, killed by its id at the
    timeout. Returns (exit code, stdout bytes, stderr text); exit code None
    on a timeout."""
    proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err.decode(errors="replace")
    return proc.returncode, out, err.decode(errors="replace")


def export(name):
    """The model's path, exported now unless cached. Exits 77 where the
    Python packages are missing."""
    code, out, err = run([sys.executable, export_torchvision.__file__, CACHE,
                          name], timeout_s=EXPORT_TIMEOUT_S)
    if code == SKIPPED:
        print("SKIPPED: " + err.strip(), file=sys.stderr)
        sys.exit(SKIPPED)
    if code != 0:
        raise AssertionError("exporting %s failed (exit %s): %s" %
                             (name, code, err[-3000:]))
    _, path, seconds = out.decode().split()
    if float(seconds) > 0:
        print("%s: exported in %s s" % (name, seconds), file=sys.stderr)
    return path



def plan(path, *extra, cwd=None):
    """`memplan plan PATH --format json --no_timings EXTRA` in folder
    `cwd`: (exit code, stdout bytes, a line saying what went wrong)."""
    args = [CLI, "plan", path, "--format", "json", "--no_timings"]
    args += list(extra)
    start = time.monotonic()
    code, out, err = run(args, cwd=cwd)
    seconds = time.monotonic() - start
    if code is None:
        return code, out, ("memplan %s: no answer in %d s (a FIFO opened?)" %
                           (" ".join(args[1:]), PLAN_TIMEOUT_S))
    return code, out, ("memplan %s exited %d after %.1f s: %s" %
                       (" ".join(args[1:]), code, seconds, err.strip()))


class OnnxView:
    """The model as python3-onnx reads it, without its external data:
    each value's byte size from ONNX's shape inference, the weights."""

    def __init__(self, path):
        import onnx
        from onnx import mapping
        model = onnx.load(path, load_external_data=False)
        graph = model.graph
        item = {k: v.itemsize
                for k, v in mapping.TENSOR_TYPE_TO_NP_TYPE.items()}
        self.sizes = {}  # value name -> bytes
        for t in graph.initializer:
            self.sizes[t.name] = self._product(t.dims) * item[t.data_type]
        self.initializer_bytes = sum(self.sizes.values())
        self.initializers = {t.name for t in graph.initializer}
        # Shape inference reads only small tensors' values: drop the big
        # payloads so that the check costs what the graph costs.
        for t in graph.initializer:
            if t.HasField("raw_data") and len(t.raw_data) > 4096:
                t.ClearField("raw_data")
        inferred = onnx.shape_inference.infer_shapes(model).graph
        for v in list(inferred.input) + list(inferred.value_info) + \
                list(inferred.output):
            tt = v.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in tt.shape.dim]
            if tt.HasField("shape") and None not in dims:
                self.sizes.setdefault(
                    v.name, self._product(dims) * item[tt.elem_type])
        self.inputs = [v.name for v in graph.input
                       if v.name not in self.initializers]
        self.outputs = [v.name for v in graph.output]
        self.values = set(self.inputs) | self.initializers
        self.weights = set(self.initializers)
        self.stored = set(self.initializers)  # weights the file holds
        for node in graph.node:  # in order: a graph is topologically sorted
            outs = [o for o in node.output if o]
            self.values.update(outs)
            ins = [i for i in node.input if i]
            if node.op_type == "Constant" or (ins and all(
                    i in self.weights for i in ins)):
                self.weights.update(outs)
            if node.op_type == "Constant":
                self.stored.update(outs)
                value = [a.t for a in node.attribute if a.name == "value"]
                for o, t in zip(outs, value):
                    self.sizes[o] = (self._product(t.dims) *
                                     item[t.data_type])

    @staticmethod
    def _product(dims):
        n = 1
        for d in dims:
            n *= d
        return n


def some(names, k=5):
    """Up to k names, sorted, for a message."""
    return sorted(names)[:k]


class ModelChecks:
    """One model: the plans (in-process, through a server) and the checks.
    A mixin: cases() makes one unittest.TestCase per model, setting NAME."""

    NAME = None

    @classmethod
    def setUpClass(cls):
        for name, path in (("MEMPLAN_CLI", CLI), ("MEMPLAN_SERVER", SERVER)):
            if not os.access(path, os.X_OK):
                raise RuntimeError("%s=%r is not an executable: build "
                                   "memplan and memplan-server first" %
                                   (name, path))
        cls.path = export(cls.NAME)
        # Both run in the model's folder: a relative weights.bin opened by
        # the CLI or the server would be the FIFO.
        folder = os.path.dirname(cls.path)
        cls.local = plan(cls.path, cwd=folder)
        with Server(SERVER, cwd=folder) as address:
            cls.remote = plan(cls.path, "--server", address, cwd=folder)
        cls.view = OnnxView(cls.path)

    def response(self):
        code, out, message = self.local
        self.assertEqual(code, 0, message)
        return json.loads(out)

    def test_plans_in_process(self):
        r = self.response()
        arena, bound = int(r["arena_size_bytes"]), int(r["lower_bound_bytes"])
        self.assertGreater(bound, 0)
        self.assertGreaterEqual(arena, bound)
        self.assertLessEqual(r["efficiency"], MAX_EFFICIENCY)
        self.assertAlmostEqual(r["efficiency"], arena / bound, places=9)
        self.assertEqual(r["warnings"], [])

    def test_server_plan_equals_in_process(self):
        code, out, message = self.remote
        self.assertEqual(code, 0, message)
        self.assertEqual(self.local[0], 0, self.local[2])
        self.assertEqual(out.decode(), self.local[1].decode())

    def test_no_two_live_tensors_share_a_byte(self):
        r = self.response()
        arena = int(r["arena_size_bytes"])
        placed = [a for a in r["assignments"] if int(a["size"]) > 0]
        self.assertEqual([a["in_place_of"] for a in placed
                          if a["in_place_of"]], [])  # none in these models
        for a in placed:
            self.assertLessEqual(int(a["offset"]) + int(a["size"]), arena,
                                 a["name"])
        placed.sort(key=lambda a: int(a["offset"]))
        for i, a in enumerate(placed):
            a_end = int(a["offset"]) + int(a["size"])
            for b in placed[i + 1:]:
                if int(b["offset"]) >= a_end:
                    break
                live_together = (int(a["first_step"]) < int(b["end_step"])
                                 and int(b["first_step"]) < int(a["end_step"]))
                self.assertFalse(
                    live_together and a["memory_pool"] == b["memory_pool"],
                    "%s and %s are live at once and overlap" %
                    (a["name"], b["name"]))

    def test_sizes_match_onnx_shape_inference(self):
        r, view = self.response(), self.view
        sizes = {a["name"]: int(a["size"]) for a in r["assignments"]}
        unknown = set(sizes) - set(view.sizes)
        self.assertEqual(unknown, set(), "ONNX inferred no static shape for "
                         "%s" % some(unknown))
        wrong = {n: (s, view.sizes[n]) for n, s in sizes.items()
                 if s != view.sizes[n]}
        self.assertEqual(wrong, {}, "memplan's size, ONNX's")
        for name in view.outputs:
            self.assertEqual(sizes.get(name), view.sizes[name], name)
            kind = [a["kind"] for a in r["assignments"] if a["name"] == name]
            self.assertEqual(kind, ["output"], name)
        for name in view.inputs:
            self.assertEqual(sizes.get(name), view.sizes[name], name)

    def test_every_value_is_planned_or_a_weight(self):
        r, view = self.response(), self.view
        planned = {a["name"] for a in r["assignments"]}
        unplanned = {u["name"] for u in r["unplanned"]}
        self.assertEqual(planned & unplanned, set())
        missing = view.values - planned - unplanned
        extra = (planned | unplanned) - view.values
        self.assertEqual((some(missing), some(extra)), ([], []),
                         "values memplan left out, names it made up")
        self.assertEqual(unplanned, view.weights,
                         "unplanned but not a weight: %s; weights planned: %s"
                         % (some(unplanned - view.weights),
                            some(view.weights - unplanned)))
        self.assertEqual({u["kind"] for u in r["unplanned"]}, {"weight"})

    def test_weights_bytes_are_the_initializers_and_constants(self):
        r, view = self.response(), self.view
        stored = sum(view.sizes[w] for w in view.stored)
        self.assertEqual(int(r["weights_bytes"]), stored,
                         "initializers alone: %d bytes" %
                         view.initializer_bytes)
        # Values folded from them are left out of the arena too, but the
        # file does not store them.
        self.assertEqual(sum(int(u["size"]) for u in r["unplanned"]),
                         sum(view.sizes[w] for w in view.weights))


class ExternalDataChecks(ModelChecks):
    """The 2 GiB model: its weights were never opened (the plans above ran
    in its folder, whose weights.bin is a FIFO that blocks a reader)."""

    def test_model_is_over_2_gib_and_its_file_small(self):
        self.assertGreater(self.view.initializer_bytes, 2 << 30)
        self.assertLess(os.path.getsize(self.path), 64 << 10)
        self.assertEqual(int(self.response()["weights_bytes"]),
                         self.view.initializer_bytes)

    def test_weights_bin_is_still_an_unopened_fifo(self):
        import stat
        fifo = os.path.join(os.path.dirname(self.path), "weights.bin")
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))


class FunctionChecks(ModelChecks):
    """An architecture whose blocks are functions of the model (torch.onnx's
    export_modules_as_functions): each call runs its body in its place, as
    ONNX Runtime runs it once it inlined the function, so the plan is the
    plain export's: the same arena and bound, the same tensor sizes, the
    body's values named under their call. ONNX's inference of the main
    graph does not see into the bodies, so the plain export stands in for
    it."""

    def plain(self):
        if not hasattr(type(self), "plain_response"):
            architecture = export_torchvision.FUNCTIONS[self.NAME][0]
            path = export(architecture)
            code, out, message = plan(path, cwd=os.path.dirname(path))
            self.assertEqual(code, 0, message)
            type(self).plain_response = json.loads(out)
        return type(self).plain_response

    def test_model_calls_functions(self):
        import onnx
        model = onnx.load(self.path, load_external_data=False)
        self.assertGreater(len(model.functions), 0)
        called = {n.op_type for n in model.graph.node}
        self.assertTrue(called & {f.name for f in model.functions})

    def test_sizes_match_onnx_shape_inference(self):
        r, plain = self.response(), self.plain()
        for field in ("arena_size_bytes", "lower_bound_bytes",
                      "weights_bytes"):
            self.assertEqual(r[field], plain[field], field)
        self.assertEqual(sorted(int(a["size"]) for a in r["assignments"]),
                         sorted(int(a["size"]) for a in plain["assignments"]))

    def test_every_value_is_planned_or_a_weight(self):
        r, view = self.response(), self.view
        planned = {a["name"] for a in r["assignments"]}
        unplanned = {u["name"] for u in r["unplanned"]}
        self.assertEqual(planned & unplanned, set())
        # The main graph's values are all there under their names; the
        # rest are the bodies' values, under the path of their call.
        self.assertEqual(view.values - planned - unplanned, set())
        calls = {n.name for n in onnx_graph(self.path).node
                 if n.op_type in onnx_functions(self.path)}
        inside = planned - view.values
        self.assertGreater(len(inside), 0)
        self.assertEqual({n for n in inside
                          if not any(n.startswith(c + "/") for c in calls)},
                         set())
        self.assertEqual(unplanned, view.weights)


def onnx_graph(path):
    import onnx
    return onnx.load(path, load_external_data=False).graph


def onnx_functions(path):
    import onnx
    model = onnx.load(path, load_external_data=False)
    return {f.name for f in model.functions}


def cases():
    """name -> TestCase class, one per model of the export script."""
    out = {}
    for name in export_torchvision.MODELS:
        base = (ExternalDataChecks if name == export_torchvision.EXTERNAL
                else FunctionChecks if name in export_torchvision.FUNCTIONS
                else ModelChecks)
        out[name] = type(name, (base, unittest.TestCase), {"NAME": name})
    return out


def main(argv):
    names = argv[1:] or export_torchvision.MODELS
    missing = export_torchvision.missing_packages()
    if missing:
        print("SKIPPED: %s not installed: run scripts/setup.sh, or apt-get "
              "install -y --no-install-recommends %s" %
              (", ".join(missing), " ".join(missing)), file=sys.stderr)
        return SKIPPED
    all_cases = cases()
    unknown = [n for n in names if n not in all_cases]
    if unknown:
        print("unknown models %s; known: %s" %
              (unknown, " ".join(all_cases)), file=sys.stderr)
        return 2
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(
        loader.loadTestsFromTestCase(all_cases[n]) for n in names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
