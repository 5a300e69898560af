"""A real memplan-server for the Python tests: on 127.0.0.1, port 0, its
process group killed by id when the `with` block ends.

    with Server(SERVER_PATH) as address:   # "127.0.0.1:PORT"
        subprocess.run([CLI, "plan", "g.json", "--server", address])
"""

import os
import re
import select
import signal
import subprocess


class Server:
    """memplan-server on 127.0.0.1 port 0, run in folder `cwd` (default:
    the caller's), metrics on a port of their own unless `metrics` is
    false. Once started, `proc` is its process."""

    def __init__(self, binary, cwd=None, metrics=True):
        self.binary = binary
        self.cwd = cwd
        self.metrics = "127.0.0.1:0" if metrics else ""
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(
            [self.binary, "--address=127.0.0.1:0",
             "--metrics_address=" + self.metrics], cwd=self.cwd,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        found = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
        if not found:
            self.__exit__()
            raise AssertionError("memplan-server did not start: %r" % line)
        return found.group(1)

    def __exit__(self, *_):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
