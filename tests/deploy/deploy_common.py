"""Helpers shared by the deploy/ tests: skipping, YAML, the Dockerfile."""
import os
import re
import shlex
import sys

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def skip(message):
    print(f"SKIPPED: {message}")
    sys.exit(SKIP)


def load_yaml_module():
    try:
        import yaml  # Debian: python3-yaml (scripts/setup.sh installs it)
    except ImportError:
        skip("python3-yaml is not installed (scripts/setup.sh installs it)")
    return yaml


class Checks:
    """Collects failures so one run reports all of them."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def check(self, condition, message):
        self.count += 1
        if not condition:
            self.failures.append(message)
            print(f"FAIL: {message}")
        return condition

    def finish(self):
        print(f"{self.count - len(self.failures)} passed, "
              f"{len(self.failures)} failed")
        sys.exit(1 if self.failures else 0)


def dockerfile():
    """The runtime stage's USER, EXPOSE, ENTRYPOINT and HEALTHCHECK."""
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    text = re.sub(r"\\\n", " ", text)  # join continued lines
    stages = re.split(r"^FROM ", text, flags=re.M)
    last = stages[-1]
    out = {"base": last.split()[0]}
    for line in last.splitlines():
        line = line.strip()
        if line.startswith("USER "):
            out["user"] = line.split()[1]
        elif line.startswith("EXPOSE "):
            out["expose"] = [int(p.split("/")[0]) for p in line.split()[1:]]
        elif line.startswith("ENTRYPOINT "):
            import json
            out["entrypoint"] = json.loads(line[len("ENTRYPOINT "):])
        elif line.startswith("HEALTHCHECK "):
            out["healthcheck"] = line
    return out


def flag_port(args, name):
    """The port of --name=host:port in `args`, or None."""
    for a in args:
        if a.startswith(f"--{name}="):
            return int(a.rsplit(":", 1)[1])
    return None


def flag_value(args, name):
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None
