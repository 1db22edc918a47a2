#!/usr/bin/env python3
"""run_cases.py - keratin-pmscan against programs whose bugs are marked in their source.

    run_cases.py DRIVER MODE [-IDIR...] DIR|FILE...      MODE: strict or lenient

Every C and C++ file in the directories, and every file named, is analysed alone (with -I
its directory, and the -I flags given). A line marked
`/* expect: R NAME */` must draw a report of rule R there, or on a line of the same file
marked `/* related: R NAME */`; every report must answer such a marker; a file without
markers must draw none. Rules 5 and 6 are not static rules: their markers are skipped.

In lenient mode (PmemConjurer's: any flush or undo-log add of part of an object counts for
all of it) the markers listed in lenient-misses.txt beside this script are the ones the
leniency must miss; they are checked the other way round, so the list stays true.

Prints one line per file and a per-rule count; exits 0 on success, 1 on a mismatch, 77
(SKIP) when the checker is not built.
"""
import os
import re
import subprocess
import sys

STATIC_RULES = {"1": "missing-flush", "1a": "flush-not-pm", "1b": "partial-flush", "1c": "missing-fence",
                "2": "unlogged-write", "3": "uninitialized-alloc", "4": "use-after-free"}
MARK = re.compile(r"/\*\s*(expect|related):\s*(\S+)\s+([a-z-]+)\s*\*/")
REPORT = re.compile(r"^pmsan: rule (\S+) \(([a-z-]+)\): (.*) at (.*):(\d+) \((.*)\) \(static\)$")
HERE = os.path.dirname(os.path.abspath(__file__))


def markers(path):
    expect, related = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            for kind, rule, name in MARK.findall(line):
                if rule not in STATIC_RULES:
                    continue
                if STATIC_RULES[rule] != name:
                    sys.exit("%s:%d: rule %s is called %s, not %s"
                             % (path, n, rule, STATIC_RULES[rule], name))
                if kind == "expect":
                    expect.append((rule, n))
                else:
                    related.setdefault(rule, set()).add(n)
    return expect, related


def lenient_misses():
    misses = set()
    with open(os.path.join(HERE, "lenient-misses.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                where, rule = line.split()
                name, _, n = where.rpartition(":")
                misses.add((name, int(n), rule))
    return misses


def main(argv):
    if len(argv) < 3 or argv[1] not in ("strict", "lenient"):
        sys.exit(__doc__)
    driver, mode = argv[0], argv[1]
    incs = [a for a in argv[2:] if a.startswith("-I")]
    paths = [a for a in argv[2:] if not a.startswith("-I")]
    if not driver or not os.path.isfile(driver):
        print("SKIP: keratin-pmscan is not built (clang-14 development files missing)")
        return 77
    misses = lenient_misses() if mode == "lenient" else set()
    failures, found_per_rule, missed_per_rule, nfiles = 0, {}, {}, 0
    files = []
    for a in paths:
        if os.path.isdir(a):
            files += [os.path.join(a, n) for n in sorted(os.listdir(a)) if n.endswith((".c", ".cpp"))]
        else:
            files.append(a)
    for path in files:
        d, name = os.path.split(path)
        nfiles += 1
        expect, related = markers(path)
        cmd = [sys.executable, driver, "-q"] + (["--strict"] if mode == "strict" else [])
        p = subprocess.run(cmd + [path, "--", "-I", d] + incs, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        reports = []
        for line in p.stdout.splitlines():
            m = REPORT.match(line)
            if not m:
                print("%s: unparsable output: %s" % (name, line))
                failures += 1
                continue
            reports.append((m.group(1), int(m.group(5)), line))
        used = set()
        problems = []
        if p.returncode not in (0, 1) or (p.returncode == 1) != bool(reports):
            problems.append("driver exit status %d with %d reports: %s"
                            % (p.returncode, len(reports), p.stderr.strip()))
        for rule, n in expect:
            skip = (name, n, rule) in misses
            hit = None
            for i, (r, line, _) in enumerate(reports):
                if i in used or r != rule:
                    continue
                if line == n or line in related.get(rule, ()):
                    hit = i
                    break
            if skip:
                if hit is not None:
                    problems.append("line %d rule %s is listed as a lenient miss but "
                                    "was reported" % (n, rule))
                    used.add(hit)
                continue
            if hit is None:
                problems.append("line %d: expected rule %s, not reported" % (n, rule))
                missed_per_rule[rule] = missed_per_rule.get(rule, 0) + 1
            else:
                used.add(hit)
                found_per_rule[rule] = found_per_rule.get(rule, 0) + 1
        for i, (r, line, text) in enumerate(reports):
            if i not in used:
                problems.append("unexpected: " + text)
        if problems:
            failures += 1
            print("FAIL %s" % name)
            for pr in problems:
                print("    " + pr)
        else:
            print("ok   %s (%d expected)" % (name, len(expect)))
    total = sum(found_per_rule.values())
    print("%s mode: %d files, %d expected findings found (%s), %d missed, %d files failed"
          % (mode, nfiles, total,
             ", ".join("rule %s: %d" % (r, found_per_rule[r]) for r in sorted(found_per_rule)),
             sum(missed_per_rule.values()), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
