#!/usr/bin/python3
"""The memplan Python module as a build pipeline uses it (Debian's python3;
PYTHONPATH points at build/python)."""
import json
import os
import tempfile
import time
import unittest

import memplan

SOURCE = os.environ.get("MEMPLAN_SOURCE_DIR", ".")

# Pisarchyk and Lee's eight buffers, [start, end): 124 bytes is optimal.
PAPER = [("t0", 0, 2, 32), ("t1", 1, 5, 28), ("t2", 2, 6, 36),
         ("t3", 3, 6, 16), ("t4", 4, 6, 8), ("t5", 5, 8, 64),
         ("t6", 6, 9, 10), ("t7", 7, 9, 40)]


def overlaps(a, b):
    same_time = a["start"] < b["end"] and b["start"] < a["end"]
    same_bytes = (a["offset"] < b["offset"] + b["size"]
                  and b["offset"] < a["offset"] + a["size"])
    return same_time and same_bytes


class MemplanModuleTest(unittest.TestCase):

    def test_buffers_plan_to_the_lower_bound(self):
        plan = memplan.plan_buffers(PAPER)
        self.assertEqual(plan.arena, 124)
        self.assertEqual(plan.lower_bound, 124)
        self.assertAlmostEqual(plan.efficiency, 1.0)
        self.assertEqual(sorted(plan.offsets), [b[0] for b in PAPER])
        a = plan.assignments
        for i in range(len(a)):
            for j in range(i + 1, len(a)):
                self.assertFalse(overlaps(a[i], a[j]), (a[i], a[j]))

    def test_dicts_alignment_and_options(self):
        plan = memplan.plan_buffers(
            [{"name": "a", "start": 0, "end": 2, "size": 10, "alignment": 64},
             {"name": "b", "start": 1, "end": 3, "size": 10, "alignment": 64}],
            strategy="first_fit_size", effort=1000)
        self.assertEqual(plan.offsets["a"] % 64, 0)
        self.assertEqual(plan.offsets["b"] % 64, 0)
        self.assertEqual(plan.arena, 74)
        self.assertEqual(plan.lower_bound, 74)  # padding counted honestly
        self.assertEqual(plan.strategy, "first_fit_size")

    def test_the_alignment_option_aligns_buffers_without_their_own(self):
        buffers = [("a", 0, 2, 32), {"name": "b", "start": 1, "end": 3,
                                     "size": 28}]
        packed = memplan.plan_buffers(buffers)  # 1, as a CSV's rows
        self.assertEqual(packed.arena, 60)
        aligned = memplan.plan_buffers(buffers, alignment=64)
        self.assertEqual(aligned.offsets["a"] % 64, 0)
        self.assertEqual(aligned.offsets["b"] % 64, 0)
        self.assertEqual(aligned.arena, 92)
        self.assertEqual(aligned.lower_bound, 92)
        # A buffer's own alignment stays.
        own = memplan.plan_buffers([("a", 0, 2, 32, 1), ("b", 1, 3, 28, 1)],
                                   alignment=64)
        self.assertEqual(own.arena, 60)

    def test_time_limited_says_when_the_clock_cut_the_search(self):
        path = os.path.join(SOURCE, "bench/data/minimalloc/D.1048576.csv")
        with open(path) as f:
            rows = [line.strip().split(",") for line in f][1:]
        buffers = [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]
        cut = memplan.plan_buffers(buffers, optimize=True, time_budget_ms=1)
        self.assertTrue(cut.time_limited)
        a, b = (memplan.plan_buffers(buffers, optimize=True, effort=2000,
                                     time_budget_ms=60000) for _ in range(2))
        self.assertFalse(a.time_limited)
        self.assertFalse(a.proven_optimal)  # the effort stopped the search
        self.assertEqual(a.offsets, b.offsets)

    def test_graph_keeps_weights_out_unless_asked(self):
        graph = {"tensors": [{"name": "x", "size_bytes": 256},
                             {"name": "w", "size_bytes": 128},
                             {"name": "h", "size_bytes": 512},
                             {"name": "y", "size_bytes": 256}],
                 "ops": [{"name": "fc", "inputs": ["x", "w"], "outputs": ["h"]},
                         {"name": "out", "inputs": ["h"], "outputs": ["y"]}],
                 "inputs": ["x"], "outputs": ["y"]}
        # x dies after fc and y is born at out: x + h = h + y = 768 bytes.
        plan = memplan.plan_graph(graph)
        self.assertEqual(plan.arena, 768)
        self.assertEqual(plan.weights_bytes, 128)
        self.assertNotIn("w", plan.offsets)
        # w (128) live for the whole run beside them.
        self.assertEqual(memplan.plan_graph(graph, weights="arena").arena, 896)
        # x kept for the whole run: x + h + y at out.
        self.assertEqual(
            memplan.plan_graph(graph, io="arena_keep_inputs").arena, 1024)

    def test_files_and_json(self):
        plan = memplan.plan_file(os.path.join(SOURCE, "examples/resnet50.json"))
        self.assertGreaterEqual(plan.arena, plan.lower_bound)
        response = json.loads(memplan.plan_json(json.dumps(
            {"buffers": [{"id": "a", "start": 0, "end": 1, "size": 8}]})))
        self.assertEqual(response["arena_size_bytes"], "8")
        self.assertEqual(response["schema_version"], 2)

    def test_model_errors_say_how_python_sets_dims(self):
        # The import's messages name the CLI's --dim and --input.
        mlp = os.path.join(SOURCE, "tests/fuzz/corpus/onnx_import_fuzz/mlp.onnx")
        with self.assertRaisesRegex(ValueError, r"dims=\{NAME: N\}"):
            memplan.plan_file(mlp)
        self.assertGreater(memplan.plan_file(mlp, dims={"batch": 1}).arena, 0)

    def test_errors_are_python_exceptions(self):
        with self.assertRaisesRegex(ValueError, "unknown strategy 'nope'"):
            memplan.plan_buffers(PAPER, strategy="nope")
        with self.assertRaisesRegex(ValueError, "start"):
            memplan.plan_buffers([("a", 3, 1, 8)])
        with self.assertRaises(FileNotFoundError):
            memplan.plan_file("/nonexistent/model.onnx")
        with tempfile.NamedTemporaryFile(suffix=".bin") as f:
            f.write(b"\x89PNG\r\n\x1a\n")
            f.flush()
            with self.assertRaisesRegex(ValueError, "unsupported input format"):
                memplan.plan_file(f.name)

    def test_arguments_of_the_wrong_type_say_so(self):
        for bad, error, pattern in [
                (("a", 0, 1, 8.5), TypeError, "size must be an int, not float"),
                (("a", 0, 1, "8"), TypeError, "size must be an int, not str"),
                (("a", 0, 1, True), TypeError, "size must be an int, not bool"),
                (("a", 0, 1, 2 ** 70), OverflowError,
                 "size does not fit in 64 bits"),
                ((42, 0, 1, 8), TypeError, "name must be a str or bytes"),
                ({"name": "a", "start": 0, "end": 1}, ValueError,
                 "has no 'size'")]:
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(error, pattern):
                    memplan.plan_buffers([bad])
        # numpy's integers are ints (they have __index__)
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            plan = memplan.plan_buffers(
                [("a", numpy.int64(0), numpy.int32(2), numpy.int64(64))])
            self.assertEqual(plan.arena, 64)
        # bytes are names too: what is not UTF-8 is escaped (the text rule)
        plan = memplan.plan_buffers([(b"\xff\xfe", 0, 1, 8)])
        self.assertEqual(list(plan.offsets), ["\\xFF\\xFE"])

    def test_options_of_a_request_file_hold_unless_given(self):
        request = {"buffers": [{"id": "a", "start": 0, "end": 2, "size": 10},
                               {"id": "b", "start": 1, "end": 3, "size": 10}],
                   "options": {"alignment": 256,
                               "strategy": "first_fit_size"}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "request.json")
            with open(path, "w") as f:
                json.dump(request, f)
            plan = memplan.plan_file(path)
            self.assertEqual(plan.strategy, "first_fit_size")
            self.assertEqual(plan.offsets["b"] % 256, 0)
            self.assertEqual(plan.arena, 266)
            # a keyword given replaces the file's option, the rest hold
            plan = memplan.plan_file(path, alignment=64)
            self.assertEqual(plan.arena, 74)
            self.assertEqual(plan.strategy, "first_fit_size")
        # a whole request's dict, likewise
        self.assertEqual(memplan.plan_graph(request).arena, 266)

    def test_odd_keys_names_paths_and_options_are_refused(self):
        with self.assertRaisesRegex(ValueError, "has the key 'alignmnet'"):
            memplan.plan_buffers([{"name": "a", "start": 0, "end": 1,
                                   "size": 8, "alignmnet": 64}])
        # a str that is not text (os.fsdecode of a non-UTF-8 byte)
        with self.assertRaises(UnicodeEncodeError):
            memplan.plan_buffers([("a\udcff", 0, 1, 8)])
        # as open(): not a file cut at the NUL
        with self.assertRaisesRegex(ValueError, "embedded null byte"):
            memplan.plan_file(os.path.join(SOURCE, "examples/resnet50.json")
                              + "\0/../x")
        for options, error, pattern in [
                ({"capacity": 2 ** 70}, OverflowError,
                 "capacity does not fit in 64 bits"),
                ({"alignment": True}, TypeError,
                 "alignment must be an int, not bool"),
                ({"time_budget_ms": 1.5}, TypeError,
                 "time_budget_ms must be an int, not float")]:
            with self.subTest(options=options):
                with self.assertRaisesRegex(error, pattern):
                    memplan.plan_buffers(PAPER, **options)

    def test_a_file_name_that_is_not_utf8_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            raw = os.path.join(os.fsencode(d), b"graph\xff.json")
            with open(raw, "w") as f:
                json.dump({"buffers": [{"id": "a", "start": 0, "end": 1,
                                        "size": 8}]}, f)
            for path in (raw, os.fsdecode(raw)):
                with self.subTest(path=path):
                    self.assertEqual(memplan.plan_file(path).arena, 8)

    def test_exiting_with_a_plan_running_in_a_daemon_thread(self):
        # While the interpreter finishes, a daemon thread taking the GIL
        # back was ended by unwinding it, and the unwinding freed Python
        # objects without the GIL (a fatal error, SIGABRT): now its plan
        # is stopped and the thread waits for the process to end. The
        # object freed last sleeps while the interpreter finishes, so the
        # threads' 50 ms polls fall in that time on every run.
        import subprocess
        import sys
        code = ("import threading, time, memplan\n"
                "b = [('b%d' % i, i % 97, i % 97 + 1 + (i * 7) % 50,\n"
                "      64 * (1 + (i * 13) % 29)) for i in range(3000)]\n"
                "for _ in range(2):\n"
                "    threading.Thread(target=memplan.plan_buffers, args=(b,),\n"
                "        kwargs={'strategy': 'exact', 'time_budget_ms': 20000},\n"
                "        daemon=True).start()\n"
                "class Slow:\n"
                "    def __del__(self, sleep=time.sleep):\n"
                "        sleep(0.3)\n"
                "slow = Slow()\n"
                "time.sleep(0.5)\n"
                "print('exiting', flush=True)\n")
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-c", code],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stderr, "")
        self.assertIn("exiting", out.stdout)
        self.assertLess(time.monotonic() - start, 15)  # not the 20 s budget

    def test_an_unreadable_file_is_a_permission_error(self):
        import subprocess
        import sys
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "graph.json")
            with open(path, "w") as f:
                f.write("{}")
            os.chmod(path, 0)
            os.chmod(d, 0o755)
            code = ("import memplan\n"
                    "try:\n"
                    "    memplan.plan_file(%r)\n"
                    "except PermissionError as e:\n"
                    "    print('PermissionError', e)\n" % path)
            cmd = [sys.executable, "-c", code]
            env = dict(os.environ)
            if os.geteuid() == 0:  # root reads any file: as nobody, with
                # a copy of the module nobody can read (the build tree may
                # be in root's home)
                import shutil
                shutil.copy(memplan.__file__, d)
                env["PYTHONPATH"] = d
                cmd = ["setpriv", "--reuid=65534", "--regid=65534",
                       "--clear-groups"] + cmd
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 timeout=60, env=env, cwd=d)
            self.assertIn("PermissionError", out.stdout, out.stderr)
            self.assertIn("Permission denied", out.stdout)

    def test_paths_may_be_path_objects(self):
        import pathlib
        plan = memplan.plan_file(
            pathlib.Path(SOURCE) / "examples" / "resnet50.json")
        self.assertGreaterEqual(plan.arena, plan.lower_bound)

    def test_ctrl_c_cancels_a_long_plan_at_once(self):
        # A search given 20 s, interrupted after 1 s: KeyboardInterrupt
        # comes within a second, not when the budget ends.
        import signal
        import threading
        import time
        buffers = [("b%d" % i, i % 97, i % 97 + 1 + (i * 7) % 50,
                    64 * (1 + (i * 13) % 29)) for i in range(3000)]
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        try:
            with self.assertRaises(KeyboardInterrupt):
                memplan.plan_buffers(buffers, strategy="exact",
                                     time_budget_ms=20000)
        finally:
            timer.cancel()
        self.assertLess(time.monotonic() - start, 6.0)

    def test_plans_run_without_the_gil(self):
        # Another Python thread runs on while a plan searches for 1.5 s:
        # its longest stall stays far below the plan's time (holding the
        # GIL, the plan would stop it for all of that).
        import threading
        buffers = [("b%d" % i, i % 97, i % 97 + 1 + (i * 7) % 50,
                    64 * (1 + (i * 13) % 29)) for i in range(3000)]
        request = json.dumps({
            "buffers": [{"id": n, "start": s, "end": e, "size": z}
                        for n, s, e, z in buffers],
            "options": {"strategy": "exact", "time_budget_ms": 1500}})
        for name, call in [
                ("plan_buffers", lambda: memplan.plan_buffers(
                    buffers, strategy="exact", time_budget_ms=1500)),
                ("plan_json", lambda: memplan.plan_json(request))]:
            with self.subTest(entry=name):
                planner = threading.Thread(target=call)
                start = time.monotonic()
                planner.start()
                stall, last = 0.0, time.monotonic()
                while planner.is_alive() and last - start < 30:
                    now = time.monotonic()
                    stall, last = max(stall, now - last), now
                planner.join()
                self.assertGreater(last - start, 1.0)  # it did search
                self.assertLess(stall, 0.5)

    def test_version(self):
        self.assertRegex(memplan.__version__, r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main(verbosity=2)
