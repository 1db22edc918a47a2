#!/usr/bin/env python3
"""bench/rewrite.py - a large object's new bytes, in place against out of place.

The measurement behind the large-object design (docs/DESIGN.md, "Large objects"): every
byte of an object rewritten in one transaction, either in place (`overwrite`: keratin's
redo log, libpmemobj's undo log) or out of place (`replace`: a new object allocated and
filled, the old one freed, the reference in an array object swapped), by both libraries'
drivers (bench/keratin-bench.c, bench/pmdk-bench.c; 1000 objects each, picked at random),
keratin at full protection, libpmemobj plain and with a replica. Rounds interleave the
contenders in a rotating order; every process is pinned to the same CPU. Lines written
back per transaction: keratin's counters; libpmemobj's from bench/pmem-count.so (separate,
untimed runs), as in bench/run.py.

  python3 bench/rewrite.py [--build build] [--rounds 5] [--ops 5000] [--sizes 4096,...]

Prints the table (medians of the rounds' medians, ns per transaction) and writes the rows
to docs/bench/rewrite.csv.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (run_driver, driver_exes, write_csv, machine: the same drivers)

CONTENDERS = [("keratin", "full", "overwrite"), ("keratin", "full", "replace"),
              ("pmdk", "plain", "overwrite"), ("pmdk", "plain", "replace"),
              ("pmdk", "replica", "overwrite"), ("pmdk", "replica", "replace")]
LABEL = {"keratin": "keratin", "pmdk": "libpmemobj"}


def ratio(a, b):
    return "%.2f" % (a / b) if a is not None and b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--sizes", default="1024,4096,16384,65536")
    cpus = sorted(os.sched_getaffinity(0))  # the CPUs this process may run on
    ap.add_argument("--cpu", default=str(cpus[-1]) if len(cpus) > 1 else None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "docs", "bench"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    exes = run.driver_exes(args)
    if args.cpu is not None:
        exes = {k: ["taskset", "-c", args.cpu, v] for k, v in exes.items()}
    rows = []
    for r in range(args.rounds):
        for size in sizes:
            k = r % len(CONTENDERS)
            for lib, cfg, wl in CONTENDERS[k:] + CONTENDERS[:k]:
                for row in run.run_driver(lib, exes[lib], cfg, wl, size, args.ops):
                    row["round"] = str(r)
                    rows.append(row)
        print("rewrite: round %d of %d done" % (r + 1, args.rounds), file=sys.stderr)
    shim = os.path.abspath(os.path.join(args.build, "pmdk", "pmem-count.so"))
    counts = {}
    os.environ["LD_PRELOAD"] = shim
    try:
        for size in sizes:
            for lib, cfg, wl in CONTENDERS:
                if lib == "pmdk":
                    for row in run.run_driver(lib, exes[lib], cfg, wl, size, min(args.ops, 2000)):
                        counts[(lib, cfg, wl, size)] = float(row["flushed_lines"])
    finally:
        del os.environ["LD_PRELOAD"]

    def med(lib, cfg, wl, size, col="median_ns"):
        v = [float(x[col]) for x in rows if (x["library"], x["config"], x["workload"],
                                            x["param"]) == (lib, cfg, wl, str(size)) and x[col]]
        return statistics.median(v) if v else None

    for size in sizes:
        for lib, cfg, wl in CONTENDERS:
            if lib == "keratin":
                counts[(lib, cfg, wl, size)] = med(lib, cfg, wl, size, "flushed_lines")
    print("%s; %d rounds of %d transactions, pinned to CPU %s; median ns per transaction "
          "(lines written back per transaction)" % (run.machine(), args.rounds, args.ops, args.cpu))
    print("Command: `python3 bench/rewrite.py --rounds %d --ops %d --sizes %s`\n"
          % (args.rounds, args.ops, args.sizes))
    print("| size | " + " | ".join("%s%s %s" % (LABEL[l], "-R" if c == "replica" else "", w)
                                   for l, c, w in CONTENDERS)
          + " | keratin replace / libpmemobj overwrite | / libpmemobj-R overwrite |")
    print("|---:|" + "---:|" * (len(CONTENDERS) + 2))
    for size in sizes:
        cells = []
        for lib, cfg, wl in CONTENDERS:
            m, n = med(lib, cfg, wl, size), counts.get((lib, cfg, wl, size))
            cells.append("%d (%.0f)" % (m, n) if m is not None and n is not None else "-")
        kr = med("keratin", "full", "replace", size)
        p, pr = med("pmdk", "plain", "overwrite", size), med("pmdk", "replica", "overwrite", size)
        print("| %d | %s | %s | %s |" % (size, " | ".join(cells), ratio(kr, p), ratio(kr, pr)))
    os.makedirs(args.out, exist_ok=True)
    run.write_csv(os.path.join(args.out, "rewrite.csv"), run.COLUMNS, rows)


if __name__ == "__main__":
    main()
