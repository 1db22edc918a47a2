#!/usr/bin/env python3
"""pmdk_examples.py - keratin-pmscan on the example programs libpmemobj-dev installs.

    pmdk_examples.py DRIVER          the false-positive test (make check)
    pmdk_examples.py DRIVER --bench  the analysis time of each file, one at a time (make bench)

Every C file of the examples is analysed where the package put them (found with
`dpkg -L libpmemobj-dev`; nothing is copied into this repository), with examples/ex_common.h
beside this script standing in for the helper header the package does not install; a file
of a program made of several (PROGRAMS) is analysed together with the others. The
examples hold no persistence bug the static rules cover (the known ones were fixed
upstream) but the ones in REAL_BUGS below: each of those must be found with its rule and
line, and every other finding is a false positive. The test prints the findings per file,
compares the number of files with any false positive against PmemConjurer's 12 of 66, and
fails unless the files and their counts are exactly those pinned in pmdk-fp.txt (whose
comments give each one's cause): a new false positive fails, and so does one that went
away, until the pin is lowered. Exits 77 (SKIP) when the checker is not built or the
examples are missing.
"""
import concurrent.futures
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = re.compile(r"^pmsan: rule (\S+) \(([a-z-]+)\): .* at (.*):(\d+) \((.*)\) \(static\)$")
TIME = re.compile(r"^(.*): ([0-9.]+) s$")

# The real bugs of the examples that the static rules cover (pmsan finds each at run time):
# (FILE analysed, RULE, where the report is: the base name of its file and its LINE, what).
# Each must be found. The report may be in another file of the program (PROGRAMS).
REAL_BUGS = [
    ("hashmap/hashmap_atomic.c", "4", "hashmap_atomic.c", 312,
     "hm_atomic_remove returns a field of the entry POBJ_LIST_REMOVE_FREE has just freed"),
    ("slab_allocator/main.c", "3", "slab_allocator.c", 75,
     "main's transaction allocates through slab_tx_alloc, where it is reported, and never "
     "writes the object"),
    ("libart/art.c", "2", "art.c", 1162,
     "remove_child4 merges the node's prefix into its only child, never added to the "
     "transaction"),
    ("libart/art.c", "2", "art.c", 1164, "the same child's partial_len"),
]

# Files analysed together with another of their program's (keratin-pmscan's cross translation
# unit analysis): the file named, then the others.
PROGRAMS = {"slab_allocator/main.c": ["slab_allocator/slab_allocator.c"]}


def examples_dir():
    try:
        out = subprocess.run(["dpkg", "-L", "libpmemobj-dev"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.endswith("/examples/Makefile"):
            return os.path.dirname(line)
    d = "/usr/share/doc/libpmemobj-dev/examples"
    return d if os.path.isdir(d) else None


def pinned():
    pins = {}
    with open(os.path.join(HERE, "pmdk-fp.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, count = line.split()
                pins[name] = int(count)
    return pins


def analyse(driver, ex, name):
    flags = ["-D_FILE_OFFSET_BITS=64", "-DFUSE_USE_VERSION=28", "-DUSE_CTREE", "-I", os.path.join(HERE, "examples")]
    for sub in ("", "map", "tree_map", "hashmap", "list_map", "linkedlist", "libart",
                "slab_allocator"):
        flags += ["-I", os.path.join(ex, sub)]
    files = [os.path.join(ex, f) for f in [name] + PROGRAMS.get(name, [])]
    p = subprocess.run([sys.executable, driver, "--times"] + files + ["--"] + flags,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    reports = [l for l in p.stdout.splitlines() if REPORT.match(l)]
    secs = None
    for l in p.stderr.splitlines():
        m = TIME.match(l)
        if m:
            secs = (secs or 0) + float(m.group(2))
    err = None
    if p.returncode not in (0, 1):
        err = ([l for l in p.stderr.splitlines() if "not analysed" in l] or ["?"])[0]
    return name, reports, secs, err


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    driver, bench = argv[0], "--bench" in argv[1:]
    if not driver or not os.path.isfile(driver):
        print("SKIP: keratin-pmscan is not built (clang-14 development files missing)")
        return 77
    ex = examples_dir()
    if not ex:
        print("SKIP: libpmemobj-dev's examples are not installed")
        return 77
    names = sorted(os.path.relpath(os.path.join(d, f), ex)
                   for d, _, fs in os.walk(ex) for f in fs if f.endswith(".c"))
    jobs = 1 if bench else (os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda n: analyse(driver, ex, n), names))
    if bench:
        times = [(s, n) for n, _, s, err in results if s is not None and not err]
        print("keratin-pmscan analysis time per file, %d files of %s:" % (len(times), ex))
        for s, n in sorted(times, reverse=True):
            print("    %7.2f s  %s" % (s, n))
        xs = [s for s, _ in times]
        print("mean %.2f s, median %.2f s, max %.2f s, total %.1f s (PmemConjurer: under 1 s "
              "to about 10 s per file)" % (statistics.mean(xs), statistics.median(xs), max(xs),
                                             sum(xs)))
        return 0
    pins, fail, with_fp, real = pinned(), 0, 0, 0
    for name, reports, _, err in results:
        if err:
            print("FAIL %s: not analysed: %s" % (name, err))
            fail = 1
            continue
        for bug_file, rule, at_file, line, what in REAL_BUGS:
            if bug_file != name:
                continue
            hits = [r for r in reports if REPORT.match(r).group(1) == rule and
                    os.path.basename(REPORT.match(r).group(3)) == at_file and
                    int(REPORT.match(r).group(4)) == line]
            print("%s %s: rule %s %s at %s:%d (%s)"
                  % ("ok  " if hits else "FAIL", name, rule, "found" if hits else "NOT found",
                     at_file, line, what))
            fail |= not hits
            real += bool(hits)
            reports = [r for r in reports if r not in hits]
        want = pins.get(name, 0)
        if reports:
            with_fp += 1
        mark = "ok  " if len(reports) == want else "FAIL"
        if len(reports) != want:
            fail = 1
        if reports or want:
            print("%s %s: %d finding(s), pinned %d" % (mark, name, len(reports), want))
            for r in reports[:3]:
                print("        " + r)
    for name in pins:
        if name not in names:
            print("FAIL %s is pinned but not among the examples" % name)
            fail = 1
    print("keratin-pmscan: %d of %d reports of real bugs found; false positives in %d of %d example files "
          "(PmemConjurer: 12 of 66), %d finding(s) in all; %s"
          % (real, len(REAL_BUGS), with_fp, len(names), sum(len(r) for _, r, _, _ in results),
             "as pinned" if not fail else "NOT as pinned (pmdk-fp.txt, REAL_BUGS)"))
    return fail


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
