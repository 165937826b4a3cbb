#!/usr/bin/python3
"""Checks the relative links and images in the repository's Markdown files.

    /usr/bin/python3 tests/docs/check_links.py [ROOT] [--exclude DIR]...
    /usr/bin/python3 tests/docs/check_links.py --self-test

Every inline link and image ([text](path), [text](path#anchor), ![alt](path), <path> inside the parentheses
included) and every reference definition ([label]: path) in the Markdown files under ROOT (default: the
repository this script is in) must:
  - resolve to a file or directory that exists inside ROOT (a link that leaves ROOT, by `..` or by a
    symlink, is broken even when its target exists; a path starting with `/` is taken from ROOT, as GitHub
    takes it from the repository's root);
  - when it has a #anchor into a Markdown file (the file itself for a bare #anchor), name a heading of that
    file by GitHub's rules (lowercase; punctuation other than `-` and `_` removed; each space a `-`; a
    repeated heading gets -1, -2, ...), or an id/name given in HTML there.
http://, https:// and mailto: links are not checked; another URL scheme is reported. Links inside fenced
code blocks and inline code are not links and are skipped. Indented code blocks are not recognised (a link
written in one is checked).

The files: when ROOT is a git work tree's top, `git ls-files` (tracked files, and untracked ones that are
not ignored, so that a new page is checked before its commit) ending in .md, plus README.md, docs/*.md and
bench/README.md; otherwise every *.md under ROOT. --exclude DIR (relative to ROOT; default
tests/docs/fixtures, the self-test's deliberately broken files) leaves a directory's files out.

Each broken link is printed as `FILE:LINE: target — reason`; the exit status is 1 when there is one, else 0
(2 for bad usage). --self-test runs the checker on a copy of tests/docs/fixtures/broken and passes (exit 0)
only when it exits 1 and reports exactly the fixture's three broken links: a missing file, an anchor that
names no heading, and a link out of the root to a file that does exist.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_EXCLUDES = ["tests/docs/fixtures"]
ALWAYS = ["README.md", "bench/README.md"]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
REFDEF = re.compile(r"^ {0,3}\[((?:[^\]\\]|\\.)+)\]:[ \t]*(<[^>]*>|\S+)")
HTML_ID = re.compile(r"""<[a-zA-Z][^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']""")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
IGNORED_SCHEMES = ("http:", "https:", "mailto:")


# ----- reading Markdown ---------------------------------------------------------------------------------------

def blocks(lines):
    """Yields (kind, first line number, lines) for the file's blocks outside fenced code: kind 'para' for a
    run of non-blank lines, 'fence' for a fenced code block (yielded so that callers can skip it)."""
    i, n = 0, len(lines)
    para, para_start = [], 0
    while i < n:
        line = lines[i]
        m = FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            if para:
                yield "para", para_start, para
                para = []
            marker = m.group(1)
            start = i
            i += 1
            while i < n:
                c = FENCE.match(lines[i])
                if c and c.group(1)[0] == marker[0] and len(c.group(1)) >= len(marker) and not c.group(2).strip():
                    break
                i += 1
            yield "fence", start + 1, lines[start:i + 1]
            i += 1
            continue
        if line.strip():
            if not para:
                para_start = i + 1
            para.append(line)
        elif para:
            yield "para", para_start, para
            para = []
        i += 1
    if para:
        yield "para", para_start, para


def code_spans(text):
    """The [start, end) ranges of inline code in a paragraph's text (CommonMark: a run of N backticks opens
    a span that the next run of exactly N backticks closes; an unmatched run is literal)."""
    spans = []
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text)]
    used = set()
    for a, (s, e) in enumerate(runs):
        if a in used or (s > 0 and text[s - 1] == "\\"):
            continue
        for b in range(a + 1, len(runs)):
            if b in used:
                continue
            s2, e2 = runs[b]
            if e2 - s2 == e - s:
                spans.append((s, e2))
                used.update(range(a, b + 1))
                break
    return spans


def link_destinations(text):
    """(offset, destination) for each inline link or image in text: the destination after `](`, either
    <...> or a run without spaces whose parentheses balance."""
    out = []
    for m in re.finditer(r"\]\(", text):
        i = m.end()
        while i < len(text) and text[i] in " \t\n":
            i += 1
        if i < len(text) and text[i] == "<":
            j = text.find(">", i + 1)
            if j < 0:
                continue
            out.append((m.start(), text[i + 1:j]))
            continue
        depth, j = 0, i
        while j < len(text):
            ch = text[j]
            if ch == "\\" and j + 1 < len(text):
                j += 2
                continue
            if ch in " \t\n":
                break
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        if j < len(text) and (text[j] == ")" or text[j] in " \t\n") and j > i:
            out.append((m.start(), text[i:j]))
    return out


def links_in(lines):
    """(line number, destination) for every link and image outside code."""
    found = []
    for kind, start, block in blocks(lines):
        if kind != "para":
            continue
        text = "\n".join(block)
        spans = code_spans(text)

        def in_code(pos):
            return any(s <= pos < e for s, e in spans)

        def line_of(pos):
            return start + text.count("\n", 0, pos)

        for pos, dest in link_destinations(text):
            if not in_code(pos):
                found.append((line_of(pos), dest))
        offset = 0
        for line in block:
            m = REFDEF.match(line)
            if m and not in_code(offset + m.start(2)):
                dest = m.group(2)
                if dest.startswith("<") and dest.endswith(">"):
                    dest = dest[1:-1]
                found.append((line_of(offset), dest))
            offset += len(line) + 1
    return found


def plain_heading_text(text):
    """A heading's text as GitHub renders it, before the slug: inline code keeps its content, links and
    images their text, emphasis markers and HTML tags go."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"!?\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "")
    text = re.sub(r"(\*+|_{2,})", "", text)
    text = re.sub(r"(?<![\w])_(.+?)_(?![\w])", r"\1", text)
    return text.strip()


def slug(text):
    """GitHub's heading id: lowercase, every character that is not a letter, mark, digit, space, `-` or `_`
    removed, each space a `-`."""
    out = []
    for ch in plain_heading_text(text).lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LMN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors_of(lines):
    """Every id a link may name in a Markdown file: its headings' slugs (duplicates numbered -1, -2, ...) and
    the ids and names of its HTML elements."""
    seen = {}
    ids = set()
    for kind, _, block in blocks(lines):
        if kind != "para":
            continue
        for k, line in enumerate(block):
            text = None
            m = ATX.match(line)
            if m:
                text = m.group(2) or ""
            elif k + 1 < len(block) and SETEXT.match(block[k + 1]) and not line.lstrip().startswith(("|", "-", "*", "+", ">")):
                if k == 0 or not block[k - 1].strip():
                    text = line.strip()
            if text is not None:
                base = slug(text)
                n = seen.get(base, 0)
                ids.add(base if n == 0 else f"{base}-{n}")
                seen[base] = n + 1
            for h in HTML_ID.finditer(line):
                ids.add(h.group(1))
    return ids


# ----- checking -----------------------------------------------------------------------------------------------

def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def ignored_dirs(root):
    """The directories ROOT's .gitignore leaves out, for a tree git cannot list: (names ignored anywhere,
    paths from ROOT). Only plain directory patterns (`build/`, `/bench/out/`) are understood."""
    anywhere, anchored = set(), set()
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.endswith("/") or line.startswith(("#", "!")) or any(c in line for c in "*?["):
                    continue
                path = line.strip("/")
                if line.startswith("/") or "/" in path:
                    anchored.add(path)
                else:
                    anywhere.add(path)
    except OSError:
        pass
    return anywhere, anchored


def markdown_files(root, excludes):
    root_real = os.path.realpath(root)
    names = set()
    top = None
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    if top and os.path.realpath(top) == root_real:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                                 "--", "*.md"], capture_output=True, text=True, check=True).stdout
        names.update(p for p in listed.split("\0") if p)
        names.update(ALWAYS)
        docs = os.path.join(root, "docs")
        if os.path.isdir(docs):
            names.update("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    else:
        ignored = ignored_dirs(root)
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel = "" if rel == "." else rel + "/"
            dirnames[:] = sorted(d for d in dirnames
                                 if not d.startswith(".") and d not in ignored[0] and rel + d not in ignored[1])
            for f in filenames:
                if f.endswith(".md"):
                    names.add(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    ex = [e.strip("/") + "/" for e in excludes]
    return sorted(n for n in names
                  if os.path.isfile(os.path.join(root, n)) and not any((n + "/").startswith(e) for e in ex))


def check(root, excludes):
    """Returns the broken links as (file, line, target, reason)."""
    root_real = os.path.realpath(root)
    anchor_cache = {}
    broken = []

    def anchors(path):
        if path not in anchor_cache:
            anchor_cache[path] = anchors_of(read_lines(path))
        return anchor_cache[path]

    for name in markdown_files(root, excludes):
        path = os.path.join(root, name)
        for line, dest in links_in(read_lines(path)):
            target = dest
            if not target or target.lower().startswith(IGNORED_SCHEMES):
                continue
            if SCHEME.match(target):
                broken.append((name, line, dest, "not a relative link (only http, https and mailto URLs are allowed)"))
                continue
            part, _, anchor = target.partition("#")
            part = part.split("?", 1)[0]
            part = urllib.parse.unquote(part)
            anchor = urllib.parse.unquote(anchor)
            if part == "":
                resolved = path
            elif part.startswith("/"):
                resolved = os.path.join(root, part.lstrip("/"))
            else:
                resolved = os.path.join(os.path.dirname(path), part)
            resolved = os.path.normpath(resolved)
            real = os.path.realpath(resolved)
            if os.path.commonpath([root_real, real]) != root_real:
                broken.append((name, line, dest, "leaves the repository"))
                continue
            if not os.path.exists(resolved):
                broken.append((name, line, dest, "no such file or directory"))
                continue
            if anchor and os.path.isfile(resolved) and resolved.endswith(".md"):
                ids = anchors(resolved)
                if anchor not in ids and anchor.lower() not in ids:
                    where = "this file" if part == "" else os.path.relpath(resolved, root)
                    broken.append((name, line, dest, f"no heading in {where} has the anchor #{anchor}"))
    broken.sort(key=lambda b: (b[0], b[1]))
    return broken


def main(argv):
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    root, excludes = None, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--exclude" and i + 1 < len(args):
            excludes.append(args[i + 1])
            i += 2
            continue
        if a.startswith("-") or root is not None:
            print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
            return 2
        root = a
        i += 1
    root = root or REPO
    if not os.path.isdir(root):
        print(f"check_links.py: {root}: not a directory", file=sys.stderr)
        return 2
    broken = check(root, excludes or DEFAULT_EXCLUDES)
    for name, line, target, reason in broken:
        print(f"{name}:{line}: {target} — {reason}")
    return 1 if broken else 0


# ----- the self-test ------------------------------------------------------------------------------------------

# What the fixture's README.md holds that is broken, and nothing else may be reported.
EXPECTED = [
    ("missing.md", "no such file or directory"),
    ("target.md#no-such-heading", "no heading in target.md has the anchor #no-such-heading"),
    ("../outside.md", "leaves the repository"),
]


def self_test():
    fixtures = os.path.join(HERE, "fixtures")
    with tempfile.TemporaryDirectory(prefix="sluice-check-links-") as tmp:
        # The copy keeps the layout: ROOT = tmp/broken, and tmp/outside.md exists beside it, so that only
        # the containment check can catch ../outside.md.
        root = os.path.join(tmp, "broken")
        shutil.copytree(os.path.join(fixtures, "broken"), root)
        shutil.copy(os.path.join(fixtures, "outside.md"), tmp)
        assert os.path.isfile(os.path.join(root, "..", "outside.md"))
        run = subprocess.run([sys.executable, os.path.abspath(__file__), root], capture_output=True, text=True)
    print(run.stdout, end="")
    print(run.stderr, end="", file=sys.stderr)
    failures = []
    if run.returncode != 1:
        failures.append(f"exit status {run.returncode}, want 1")
    reported = [l for l in run.stdout.splitlines() if l.strip()]
    for target, reason in EXPECTED:
        want = re.compile(r"^README\.md:\d+: " + re.escape(target) + " — " + re.escape(reason) + "$")
        if not any(want.match(l) for l in reported):
            failures.append(f"not reported: README.md:N: {target} — {reason}")
    if len(reported) != len(EXPECTED):
        failures.append(f"{len(reported)} lines reported, want {len(EXPECTED)} (a good link or one in code was flagged?)")
    if failures:
        for f in failures:
            print("self-test FAILED: " + f, file=sys.stderr)
        return 1
    print("self-test passed: the checker exits 1 and names the missing file, the bad anchor and the link out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
