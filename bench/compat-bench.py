#!/usr/bin/env python3
"""compat-bench.py - keratin-pmemobj against libpmemobj, on the same program.

bench/pmdk-bench (the libpmemobj baseline driver, with PMDK's example maps compiled from
where libpmemobj-dev installs them) is built twice by bench/pmdk-build.sh: against
Debian's libpmemobj (pmdk-bench) and against keratin-pmemobj (pmdk-bench-kp), from the
same sources. Each measurement is one process on a fresh pool in /dev/shm, pinned to one
CPU, pool prefaulted by both libraries (prefault.at_create), PMEM_IS_PMEM_FORCE=1 for
both. Contenders: keratin-pmemobj (full protection), libpmemobj, libpmemobj with a replica
(a pool set). Rounds are interleaved, and the contenders' order rotates per round.

Workloads: every map (insert, lookup, remove of N keys, PMDK's map abstraction as in
data_store/mapcli); single objects: overwrite in a transaction (TX_ADD, then stores) and
persist (plain stores, then pmemobj_persist), at a few sizes; the btree example (btree.c,
one process per insert, as it is meant to be used).

Fences and written-back lines per operation: keratin's own counters (libkeratin-pmemobj
exports kr_counters_get, which pmdk-bench reads); libpmemobj's through bench/pmem-count.so
(an LD_PRELOAD wrapper of libpmem's flush and drain), in separate, untimed runs.

Output: docs/bench/compat.csv (every row), docs/bench/compat.md (the tables, with the
goals marked), the tables on stdout. --quick: a smoke run (few keys, one round, no files
written unless --out is given).
"""
import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

MAPS = ["ctree", "rbtree", "btree", "skiplist", "rtree", "hashmap", "hashmap_atomic", "hashmap_rp"]
MAP_OPS = ["insert", "lookup", "remove"]
OBJ = [("overwrite", s) for s in (64, 256, 1024, 4096)] + [("persist", s) for s in (8, 64, 256)]
CONTENDERS = [("kp", "plain"), ("pmdk", "plain"), ("pmdk", "replica")]
LABEL = {("kp", "plain"): "keratin-pmemobj", ("pmdk", "plain"): "libpmemobj",
         ("pmdk", "replica"): "libpmemobj-R"}
# The goals: keratin-pmemobj (full protection) over libpmemobj, and over libpmemobj-R.
GOAL_PLAIN, GOAL_REPLICA = 1.0, 0.5
FAILED = {}  # (lib, config, param) -> why its run failed
FIELDS = ["lib", "config", "workload", "param", "threads", "ops", "seconds", "median_ns",
          "p99_ns", "ops_per_s", "fences", "flushed_lines", "logged_bytes", "written_bytes"]


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def driver(args, lib):
    exe = os.path.join(args.build, "pmdk", "pmdk-bench-kp" if lib == "kp" else "pmdk-bench")
    if not os.access(exe, os.X_OK):
        sys.exit("compat-bench: %s is not built (bench/pmdk-build.sh %s/pmdk builds it)"
                 % (exe, args.build))
    return exe


def run(args, lib, cfg, wl, param, ops, count=False):
    """The CSV rows of one pmdk-bench process."""
    cmd = [driver(args, lib), "--config", cfg, "--workload", wl, "--param", str(param),
           "--ops", str(ops), "--dir", args.dir]
    if args.cpu is not None:
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    env = dict(os.environ, PMEM_IS_PMEM_FORCE="1")
    if count and lib == "pmdk":
        env["LD_PRELOAD"] = os.path.join(os.path.abspath(args.build), "pmdk", "pmem-count.so")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode == 3:
        return []  # a structure pmdk-build.sh could not build
    if p.returncode != 0:  # a failure is a result too: reported in the table, not fatal
        why = (p.stderr or p.stdout).strip().splitlines()
        FAILED[(lib, cfg, str(param))] = why[-1][:160] if why else "exit %d" % p.returncode
        print("compat-bench: %s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                   FAILED[(lib, cfg, str(param))]), file=sys.stderr)
        return []
    rows = [dict(zip(FIELDS, line.split(","))) for line in p.stdout.splitlines()
            if line and not line.startswith("lib,")]
    for r in rows:
        r["lib"] = lib
    return rows


def btree_example(args, rounds):
    """Seconds for N inserts into the btree example (one process each), per library."""
    ex = "/usr/share/doc/libpmemobj-dev/examples/btree.c"
    if not os.path.exists(ex):
        return {}
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        exes = {"kp": os.path.join(d, "btree-kp"), "pmdk": os.path.join(d, "btree-pmdk")}
        comp = os.path.join(os.path.abspath(args.build), "compat")
        shim = "-I" + os.path.join(repo, "tests", "check")  # ex_common.h, not in the package
        builds = {
            "kp": ["cc", "-O2", "-w", "-I" + os.path.join(repo, "include", "keratin-pmemobj"),
                   shim, ex, "-o", exes["kp"], "-L" + comp, "-lkeratin-pmemobj",
                   "-Wl,-rpath," + comp],
            "pmdk": ["cc", "-O2", "-w", shim, ex, "-o", exes["pmdk"], "-lpmemobj", "-lpmem"]}
        for lib, cmd in builds.items():
            subprocess.run(cmd, check=True, capture_output=True)
        env = dict(os.environ, PMEM_IS_PMEM_FORCE="1")
        n = args.btree_inserts
        for r in range(rounds):
            for lib in (["kp", "pmdk"] if r % 2 == 0 else ["pmdk", "kp"]):
                pool = os.path.join(d, "btree-%s.pool" % lib)
                if os.path.exists(pool):
                    os.unlink(pool)
                pin = ["taskset", "-c", str(args.cpu)] if args.cpu is not None else []
                t0 = time.monotonic()
                for k in range(n):
                    subprocess.run(pin + [exes[lib], pool, "i", str(k * 7919 % 100003), "v%d" % k],
                                   env=env, check=True, capture_output=True)
                out.setdefault(lib, []).append(time.monotonic() - t0)
                os.unlink(pool)
    return {lib: statistics.median(v) for lib, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--keys", type=int, default=100000, help="keys per map run")
    ap.add_argument("--obj-ops", type=int, default=20000, help="operations per object run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count-keys", type=int, default=20000, help="keys of the counting runs")
    ap.add_argument("--btree-inserts", type=int, default=200)
    cpus = sorted(os.sched_getaffinity(0))  # the CPUs this process may run on
    ap.add_argument("--cpu", type=int, default=cpus[-1] if len(cpus) > 1 else None)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--maps", default=",".join(MAPS))
    ap.add_argument("--out", default=None, help="directory for compat.csv and compat.md")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    maps = args.maps.split(",")
    if args.quick:
        args.keys, args.obj_ops, args.rounds, args.count_keys, args.btree_inserts = 2000, 2000, 1, 1000, 5
    elif args.out is None:
        args.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "bench")

    rows = []
    cells = [("map", m, args.keys) for m in maps] + [(wl, s, args.obj_ops) for wl, s in OBJ]
    for r in range(args.rounds):
        order = CONTENDERS[r % 3:] + CONTENDERS[:r % 3]
        for wl, param, ops in cells:
            for lib, cfg in order:
                for row in run(args, lib, cfg, wl, param, ops):
                    row["round"] = r
                    rows.append(row)
        print("compat-bench: round %d of %d done" % (r + 1, args.rounds), file=sys.stderr)
    counts = []
    for wl, param, _ in cells:
        ops = args.count_keys
        counts += run(args, "pmdk", "plain", wl, param, ops, count=True)
        counts += run(args, "pmdk", "replica", wl, param, ops, count=True)
        counts += run(args, "kp", "plain", wl, param, ops, count=True)
    btree = btree_example(args, args.rounds)

    def med(lib, cfg, wl, param):
        v = [float(x["median_ns"]) for x in rows if (x["lib"], x["config"], x["workload"],
                                                     x["param"]) == (lib, cfg, wl, str(param))]
        return statistics.median(v) if v else None

    def per_op(lib, cfg, wl, param):
        """The loop's time over its operations (ns), median of the rounds. It counts every
        cost: what a per-operation timer misses (a write-back that drains after the timer
        was read) and what a median leaves out (a map's few, long table rebuilds)."""
        v = [float(x["seconds"]) * 1e9 / float(x["ops"]) for x in rows
             if (x["lib"], x["config"], x["workload"], x["param"]) == (lib, cfg, wl, str(param))
             and x["seconds"] and float(x["ops"]) > 0]
        return statistics.median(v) if v else None

    def cnt(lib, cfg, wl, param):
        for x in counts:
            if (x["lib"], x["config"], x["workload"], x["param"]) == (lib, cfg, wl, str(param)):
                return x
        return None

    lines = []
    w = lines.append
    w("Machine: %s, %d CPUs; %s; libpmemobj-dev %s; pinned to CPU %s; %d round(s), "
      "medians of per-operation latency (ns) and of the loops' time per operation, %d keys "
      "per map, %d operations per object run."
      % (cpu_name(), os.cpu_count() or 0, platform.platform(),
         subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libpmemobj-dev"],
                        capture_output=True, text=True).stdout or "?",
         args.cpu, args.rounds, args.keys, args.obj_ops))
    w("Command: `python3 bench/compat-bench.py --build %s --keys %d --rounds %d`"
      % (args.build, args.keys, args.rounds))
    w("")
    w("| workload | keratin-pmemobj | libpmemobj | libpmemobj-R | / libpmemobj (goal %.1f) "
      "| / libpmemobj-R (goal %.1f) | loop ns/op k / p / pR | by loop: / libpmemobj, / libpmemobj-R "
      "| fences/op k / p / pR | lines/op k / p / pR |"
      % (GOAL_PLAIN, GOAL_REPLICA))
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    met = total = met_loop = 0
    for wl, param, _ in cells:
        for op in (MAP_OPS if wl == "map" else [wl]):
            k, p, pr = (med("kp", "plain", op, param), med("pmdk", "plain", op, param),
                        med("pmdk", "replica", op, param))
            if k is None or p is None:
                why = FAILED.get(("kp", "plain", str(param))) or FAILED.get(("pmdk", "plain", str(param)))
                if why and op == (MAP_OPS[0] if wl == "map" else wl):
                    w("| %s %s | failed: %s | | | ✗ | ✗ | | ✗ ✗ | | |" % (op, param, why))
                    total += 2
                continue
            r1 = k / p
            r2 = k / pr if pr else None
            mark1 = "✓" if r1 <= GOAL_PLAIN else "✗"
            mark2 = "-" if r2 is None else ("✓" if r2 <= GOAL_REPLICA else "✗")
            total += 1 + (r2 is not None)
            met += (r1 <= GOAL_PLAIN) + (r2 is not None and r2 <= GOAL_REPLICA)
            lk, lp, lpr = (per_op("kp", "plain", op, param), per_op("pmdk", "plain", op, param),
                           per_op("pmdk", "replica", op, param))
            l1 = lk / lp if lk and lp else None
            l2 = lk / lpr if lk and lpr else None
            met_loop += (l1 is not None and l1 <= GOAL_PLAIN) + (l2 is not None and l2 <= GOAL_REPLICA)
            loop_ns = " / ".join("%.0f" % x if x else "-" for x in (lk, lp, lpr))
            loop_r = " ".join("-" if r is None else "%.2f %s" % (r, "✓" if r <= g else "✗")
                              for r, g in ((l1, GOAL_PLAIN), (l2, GOAL_REPLICA)))
            f = [cnt(*c, op, param) for c in (("kp", "plain"), ("pmdk", "plain"), ("pmdk", "replica"))]
            fences = " / ".join("%.2f" % float(x["fences"]) if x and x["fences"] else "-" for x in f)
            lns = " / ".join("%.1f" % float(x["flushed_lines"]) if x and x["flushed_lines"] else "-"
                             for x in f)
            w("| %s %s | %.0f | %.0f | %s | %.2f %s | %s %s | %s | %s | %s | %s |"
              % (op, param, k, p, "%.0f" % pr if pr else "-", r1, mark1,
                 "-" if r2 is None else "%.2f" % r2, mark2, loop_ns, loop_r, fences, lns))
    w("")
    w("Goal cells met: %d of %d by the medians, %d of %d by the loops' time per operation."
      % (met, total, met_loop, total))
    if btree:
        w("")
        w("The btree example (btree.c, unmodified), %d inserts, one process each (open, one "
          "transaction, close): keratin-pmemobj %.2f s, libpmemobj %.2f s, ratio %.2f. Each "
          "keratin-pmemobj open checks the pool whole (docs/COMPAT.md)."
          % (args.btree_inserts, btree.get("kp", 0), btree.get("pmdk", 0),
             btree.get("kp", 0) / btree["pmdk"] if btree.get("pmdk") else 0))
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "compat.csv"), "w", newline="") as f:
            cw = csv.DictWriter(f, fieldnames=FIELDS + ["round"], extrasaction="ignore")
            cw.writeheader()
            cw.writerows(rows + counts)
        with open(os.path.join(args.out, "compat.md"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
