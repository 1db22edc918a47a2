#!/usr/bin/env python3
"""check-invariants.py ROOT [--list] - every numbered invariant has a check.

The core files open with an essay whose "Invariants" section numbers the rules the file
keeps. Each rule must be checked in one of two ways:

  in code   KR_INVARIANT("file.c", N, cond) in src/ (compat/: KP_INVARIANT(N, cond) for
            compat.h), compiled in by -DKR_DEBUG_INVARIANTS=ON, which the ASan build of
            `make check` turns on;
  by a test a test source under tests/ that says "checks invariant file.c N" (or
            "checks invariants a.c 1, b.c 2") in a comment at the code that fails when the
            rule breaks.

Invariants not yet checked are listed, one "file N" per line, in
tests/invariants-unchecked.txt. The script fails when a stated invariant is neither
checked nor listed (a new rule without a check), when a listed one is checked or no longer
stated (the list must shrink as checks arrive), and when a check names an invariant that
no essay states. With --list it prints every invariant and what checks it.
"""
import os
import re
import sys

ITEM = re.compile(r"^\s*\*(\s+)(\d+)\.\s")
CODE = re.compile(r'KR_INVARIANT\(\s*"([\w.]+)",\s*(\d+)')
COMPAT = re.compile(r"KP_INVARIANT\(\s*(\d+)")
TEST = re.compile(r"checks invariants? ((?:[\w.]+\.[ch] \d+(?:, (?:and )?| and |))+)")
PAIR = re.compile(r"([\w.]+\.[ch]) (\d+)")


def sources(root, dirs, exts):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.join(base, f)


def stated(path):
    """The invariant numbers of the file's opening comment's Invariants section."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    if not lines or not lines[0].startswith("/*"):
        return []
    nums, indent, inside = [], None, False
    for line in lines:
        if re.match(r"^\s*\*\s+Invariants\b", line):
            inside = True
            continue
        if line.strip().startswith("*/"):
            break
        if not inside:
            continue
        m = ITEM.match(line)
        if m:
            indent = len(m.group(1))
            nums.append(int(m.group(2)))
            continue
        # A line at the items' own indentation that is not an item ends the list.
        body = re.match(r"^\s*\*(\s+)\S", line)
        if indent is not None and body and len(body.group(1)) <= indent:
            break
    return nums


def main():
    if len(sys.argv) < 2:
        print("usage: check-invariants.py ROOT [--list]", file=sys.stderr)
        return 2
    root, listing = sys.argv[1], "--list" in sys.argv[2:]
    invariants = {}  # (file, n) -> [how it is checked]
    for path in sources(root, ["src", "compat"], (".c", ".h")):
        for n in stated(path):
            invariants[(os.path.basename(path), n)] = []
    orphans = []
    for path in sources(root, ["src", "compat"], (".c", ".h")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(path, root)
        found = [(m.group(1), int(m.group(2)), m.start()) for m in CODE.finditer(text)]
        if "/compat/" in "/" + rel:
            found += [("compat.h", int(m.group(1)), m.start()) for m in COMPAT.finditer(text)
                      if not text[max(0, m.start() - 8):m.start()].endswith("define ")]
        for name, n, at in found:
            where = "code %s:%d" % (rel, text.count("\n", 0, at) + 1)
            (invariants[(name, n)] if (name, n) in invariants else orphans).append(
                where if (name, n) in invariants else "%s names %s %d" % (where, name, n))
    for path in sources(root, ["tests"], (".c", ".h", ".sh", ".py")):
        if os.path.basename(path) == "check-invariants.py":
            continue  # its own description of the marker
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(path, root)
        for m in TEST.finditer(text):
            where = "test %s:%d" % (rel, text.count("\n", 0, m.start()) + 1)
            for name, n in PAIR.findall(m.group(1)):
                key = (name, int(n))
                if key in invariants:
                    invariants[key].append(where)
                else:
                    orphans.append("%s names %s %s" % (where, name, n))

    listed_path = os.path.join(root, "tests", "invariants-unchecked.txt")
    listed = set()
    with open(listed_path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, n = line.split()
                listed.add((name, int(n)))

    unchecked = {k for k, v in invariants.items() if not v}
    if listing:
        for (name, n) in sorted(invariants):
            how = invariants[(name, n)]
            print("%-16s %2d  %s" % (name, n, "; ".join(how) if how else "UNCHECKED"))
    problems = []
    for k in sorted(unchecked - listed):
        problems.append("invariant %s %d is stated, but nothing checks it and it is not in "
                        "tests/invariants-unchecked.txt" % k)
    for k in sorted(listed - unchecked):
        problems.append("%s %d is listed as unchecked, but it is %s: remove it from "
                        "tests/invariants-unchecked.txt" % (k[0], k[1], "checked" if k in invariants
                                                            else "stated nowhere"))
    problems += ["a check of an invariant no essay states: " + o for o in orphans]
    total, done = len(invariants), len(invariants) - len(unchecked)
    files = len({name for name, _ in invariants})
    for p in problems:
        print("FAIL: " + p)
    print("%s: %d of %d stated invariants checked (%d%%) in %d files; %d listed as not yet "
          "checked" % ("PASS" if not problems else "FAIL", done, total,
                       100 * done // max(total, 1), files, len(unchecked)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
