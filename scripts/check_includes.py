#!/usr/bin/env python3
"""Checks that every #include between memplan's folders is one that
ARCHITECTURE.md's module table allows ("may include" column).

  scripts/check_includes.py [REPO_ROOT]

Exit 0 when every include is allowed; 1, listing each forbidden include
as FILE:LINE, otherwise. Only includes of the repository's own folders
count: a path such as "onnx/onnx_pb.h" that is not a file of the repository
belongs to a third-party library. Generated headers count for the folder
that generates them (memplan/v1/*.pb.h: proto/).
"""
import os
import re
import sys

GENERATED = {"memplan/": "proto", "grpc/health/": "proto"}
# What a unit test (*_test.cc) may include besides its folder's allowance.
TEST_EXTRA = {"onnx", "tflite"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(root):
    """folder -> set of folders it may include, or None for anything."""
    text = open(os.path.join(root, "ARCHITECTURE.md"), encoding="utf-8").read()
    section = text.split("## Modules and what each may depend on", 1)[1]
    section = section.split("\n## ", 1)[0]
    order, allowed = [], {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].endswith("/"):
            continue
        folder = cells[0].rstrip("/")
        may = cells[-1]
        order.append(folder)
        if may in ("anything", "-"):
            allowed[folder] = None
            continue
        names = set()
        for part in re.split(r",\s*", may):
            if part == "everything above":
                names.update(order[:-1])
            elif part.startswith("engine and everything below"):
                names.update(order[: order.index("engine") + 1])
            else:
                names.add(part.split()[0])
        allowed[folder] = names
    return allowed


def owner(root, path):
    """The repository folder an included path belongs to, or None."""
    for prefix, folder in GENERATED.items():
        if path.startswith(prefix):
            return folder
    if "/" not in path or not os.path.isfile(os.path.join(root, path)):
        return None
    return path.split("/", 1)[0]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    allowed = read_table(root)
    bad = []
    for folder, names in sorted(allowed.items()):
        if names is None:
            continue
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = owner(root, m.group(1))
                        if target is None or target == folder:
                            continue
                        extra = TEST_EXTRA if name.endswith("_test.cc") else set()
                        if target not in names | extra:
                            bad.append(f"{rel}:{number}: {folder}/ may not "
                                       f"include {m.group(1)} ({target}/)")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} include(s) that ARCHITECTURE.md forbids")
        return 1
    print("includes: every include between folders is one ARCHITECTURE.md "
          "allows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
