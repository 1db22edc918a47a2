#!/usr/bin/env python3
"""bench/profile.py - where one keratin-bench measurement spends its time, timed part only.

Runs keratin-bench under `perf record` (DWARF call graphs, pinned to one CPU) and keeps
only the samples whose stack passes through the function that does the timed operations,
so that pool creation, prefaulting and the warm-up allocations (often most of a run) do
not drown the profile. Prints the self time of the hottest functions and the inclusive
time of the library's stages, as shares of those samples.

    python3 bench/profile.py [--build DIR] [--cpu N] [--top N] [--root FUNC] \\
        -- --workload tx_free --param 64 --config full --ops 200000

The root defaults by workload: overwrite_one (overwrite), alloc_op / free_op (alloc,
tx_alloc / free, tx_free), and kr_map_insert for map (give --root kr_map_lookup or
kr_map_remove for the other phases). Needs perf; exits 77 with SKIP where it cannot record.

On a virtual machine perf samples with a timer, and a sample that lands during a stall is
charged to an instruction shortly after the one that stalled: the first locked instruction
after a commit's fence waits for the write-backs, and its wait often shows in the next
function.
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

ROOTS = {"overwrite": "overwrite_one", "alloc": "alloc_op", "tx_alloc": "alloc_op",
         "free": "free_op", "tx_free": "free_op", "map": "kr_map_insert"}


def samples(data):
    """The stacks of perf.data, leaf first, as lists of symbol names."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], check=True,
                         capture_output=True, text=True).stdout
    stacks, cur = [], []
    for line in out.splitlines():
        if not line.strip():
            if cur:
                stacks.append(cur)
            cur = []
            continue
        parts = line.split(None, 1)
        name = parts[1] if len(parts) > 1 else parts[0]
        cur.append(name.replace(" (inlined)", ""))
    if cur:
        stacks.append(cur)
    return stacks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cpu", default="1", help="CPU to pin to (taskset list)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--root", help="function whose samples count (default: by workload)")
    ap.add_argument("--callers", metavar="FUNC",
                    help="also the functions that called FUNC in those samples")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = [x for x in a.bench_args if x != "--"]
    if "--workload" not in args:
        ap.error("keratin-bench arguments after --, with --workload")
    workload = args[args.index("--workload") + 1]
    root = a.root or ROOTS.get(workload)
    if not root:
        ap.error("no default root for workload %s: give --root" % workload)
    bench = os.path.join(a.build, "bench", "keratin-bench")
    if not os.access(bench, os.X_OK):
        sys.exit("profile.py: %s not built" % bench)
    if not shutil.which("perf"):
        print("SKIP: perf is not installed")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["taskset", "-c", a.cpu, "perf", "record", "-q", "-F", "4999",
               "--call-graph", "dwarf,16384", "-o", data, bench] + args
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0 or not os.path.exists(data):
            print("SKIP: perf record failed: %s" % run.stderr.strip().splitlines()[-1:])
            return 77
        print("# %s" % " ".join(["keratin-bench"] + args))
        for line in run.stdout.splitlines():
            print("# " + line)
        stacks = samples(data)
    sel = [s for s in stacks if root in s]
    if not sel:
        sys.exit("profile.py: no sample passes through %s" % root)
    n = len(sel)
    print("# %d of %d samples pass through %s; shares of those" % (n, len(stacks), root))
    print("\nself time")
    for name, c in collections.Counter(s[0] for s in sel).most_common(a.top):
        print("  %5.1f %%  %s" % (100.0 * c / n, name))
    incl = collections.Counter()
    for s in sel:
        for name in set(s[:s.index(root)]):
            incl[name] += 1
    print("\ninclusive (below %s)" % root)
    for name, c in incl.most_common(a.top):
        print("  %5.1f %%  %s" % (100.0 * c / n, name))
    if a.callers:
        # The nearest frame above FUNC that is not FUNC's own inlined wrapper name.
        callers = collections.Counter()
        for s in sel:
            if a.callers in s:
                i = s.index(a.callers)
                up = [f for f in s[i + 1:] if a.callers not in f and not f.startswith("__GI_")]
                callers[up[0] if up else "?"] += 1
        print("\ncallers of %s" % a.callers)
        for name, c in callers.most_common(a.top):
            print("  %5.1f %%  %s" % (100.0 * c / n, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
