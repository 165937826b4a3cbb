#!/usr/bin/python3
"""Checks that a source tree's includes run one way: from a higher layer down to a lower one.

    /usr/bin/python3 tests/layout/check_layers.py [ROOT] [LAYERS]...
    /usr/bin/python3 tests/layout/check_layers.py --self-test

A layers file (default: layers.txt and proxy/layers.txt under ROOT, the repository this script is in) names
the folders of one directory, lowest first, one rank a line; folders named on the same line are siblings.
`#` starts a comment. Its first non-comment line is `dir: PATH`, the directory it describes (relative to
ROOT; `.` for ROOT itself, where only the named folders are read: tests, benches and builds stand outside).

Every .h and .cpp file under that directory belongs to the folder named for the longest prefix of its path
(proxy/codec/h1/message.cpp: `codec/h1`; proxy/telemetry/proto/x.h: `telemetry`). Each of its
`#include "DIR/..."` lines must name a file of its own folder or of a folder of a lower rank. Reported:
  - an include of a higher folder, or of a sibling (a back arrow);
  - a source file in no named folder (the directory's root, or a folder the layers file does not rank);
  - a named folder that does not exist (a stale layers file).

Each finding is printed as `FILE:LINE: what`; the exit status is 1 when there is one, else 0 (2 for bad
usage). --self-test copies the directory of each default layers file into a temporary tree, adds one include
from a header of its lowest folder up to a header of its highest, and passes (exit 0) only when the checker
then reports that line, and nothing else the real tree does not.
"""

import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_LAYERS = ["layers.txt", "proxy/layers.txt"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".cpp")


def read_layers(path):
    """Returns (dir, [[folder, ...], ...]) lowest rank first."""
    directory, ranks = None, []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if directory is None:
                if not line.startswith("dir:"):
                    raise ValueError(f"{path}: the first line must be `dir: PATH`, not {line!r}")
                directory = line[len("dir:"):].strip().strip("/") or "."
                continue
            ranks.append(line.split())
    if directory is None or not ranks:
        raise ValueError(f"{path}: names no directory or no folder")
    return directory, ranks


def folder_of(relpath, rank_of):
    """The ranked folder holding `relpath` (relative to the layered directory), or None."""
    parts = relpath.split("/")[:-1]
    for n in range(len(parts), 0, -1):
        name = "/".join(parts[:n])
        if name in rank_of:
            return name
    return None


def check(root, layers_path):
    directory, ranks = read_layers(layers_path)
    rank_of = {}
    for rank, names in enumerate(ranks):
        for name in names:
            rank_of[name] = rank
    findings = []
    base = os.path.join(root, directory)
    prefix = "" if directory == "." else directory + "/"
    for name in rank_of:
        if not os.path.isdir(os.path.join(base, name)):
            findings.append(f"{os.path.relpath(layers_path, root)}: {name}: no such folder in {directory}/")
    tops = [base] if directory != "." else [os.path.join(base, n) for n in sorted(rank_of) if "/" not in n]
    walked = [w for top in tops for w in os.walk(top)]
    for dirpath, dirnames, filenames in walked:
        dirnames.sort()
        for filename in sorted(filenames):
            if not filename.endswith(SOURCES):
                continue
            path = os.path.join(dirpath, filename)
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            shown = prefix + rel
            mine = folder_of(rel, rank_of)
            if mine is None:
                findings.append(f"{shown}:1: in no folder that {os.path.relpath(layers_path, root)} ranks")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or not m.group(1).startswith(prefix):
                        continue
                    target = m.group(1)[len(prefix):]
                    theirs = folder_of(target, rank_of)
                    if theirs is None and directory == ".":
                        continue  # a header beside the source, or a generated or system one
                    if theirs is None:
                        findings.append(f"{shown}:{number}: includes {m.group(1)}, in no ranked folder")
                    elif theirs != mine and rank_of[theirs] >= rank_of[mine]:
                        how = "a sibling" if rank_of[theirs] == rank_of[mine] else "a higher layer"
                        findings.append(f"{shown}:{number}: {mine}/ includes {m.group(1)}: {theirs}/ is {how}")
    return findings


def main(argv):
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    if any(a.startswith("-") for a in args):
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(args[0]) if args else REPO
    layer_files = [os.path.join(root, p) for p in (args[1:] or DEFAULT_LAYERS)]
    findings = []
    for layers in layer_files:
        try:
            findings += check(root, layers)
        except (OSError, ValueError) as e:
            print(e, file=sys.stderr)
            return 2
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} finding(s): includes must run from a higher layer to a lower one", file=sys.stderr)
        return 1
    print("layers: every include runs down (" + ", ".join(os.path.relpath(p, root) for p in layer_files) + ")")
    return 0


# ----- the self-test ------------------------------------------------------------------------------------------

def self_test():
    failed = False
    for layers_rel in DEFAULT_LAYERS:
        directory, ranks = read_layers(os.path.join(REPO, layers_rel))
        with tempfile.TemporaryDirectory() as tmp:
            if directory == ".":
                for names in ranks:
                    for name in names:
                        shutil.copytree(os.path.join(REPO, name), os.path.join(tmp, name))
            else:
                shutil.copytree(os.path.join(REPO, directory), os.path.join(tmp, directory))
            lowest, highest = ranks[0][0], ranks[-1][0]
            victim = None
            for dirpath, _, filenames in sorted(os.walk(os.path.join(tmp, directory, lowest))):
                headers = sorted(f for f in filenames if f.endswith(".h"))
                if headers:
                    victim = os.path.join(dirpath, headers[0])
                    break
            target = None
            for dirpath, _, filenames in sorted(os.walk(os.path.join(tmp, directory, highest))):
                headers = sorted(f for f in filenames if f.endswith(".h"))
                if headers:
                    target = os.path.relpath(os.path.join(dirpath, headers[0]), tmp).replace(os.sep, "/")
                    break
            if victim is None or target is None:
                print(f"self-test FAILED: {layers_rel}: no header in {lowest}/ or {highest}/", file=sys.stderr)
                return 1
            with open(victim, encoding="utf-8") as f:
                lines = f.read().split("\n")
            lines.insert(1, f'#include "{target}"')
            with open(victim, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            shutil.copy(os.path.join(REPO, layers_rel), os.path.join(tmp, layers_rel))
            clean = check(REPO, os.path.join(REPO, layers_rel))
            found = check(tmp, os.path.join(tmp, layers_rel))
            expected = os.path.relpath(victim, tmp).replace(os.sep, "/") + ":2: "
            new = [f for f in found if f not in clean]
            if len(new) != 1 or not new[0].startswith(expected) or target not in new[0]:
                print(f"self-test FAILED: {layers_rel}: a back arrow {expected}-> {target} gave {new}",
                      file=sys.stderr)
                failed = True
            else:
                print(f"self-test: {new[0]}")
    if failed:
        return 1
    print("self-test passed: the checker names a deliberate include from the lowest layer up to the highest")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
