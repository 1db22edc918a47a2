#!/usr/bin/env python3
"""bench/run.py - keratin against libpmemobj and libpmemobj with a replica, side by side.

Runs bench/keratin-bench (keratin at four protection levels) and bench/pmdk-bench
(libpmemobj plain and replicated through a pool set, its example map structures built
from /usr/share/doc/libpmemobj-dev/examples) on the same workloads, interleaved: every
round runs every contender on every workload once, in an order that rotates from round
to round, so that a slow spell of the machine falls on all of them. Each driver
invocation is one measurement on a fresh, prefaulted pool in /dev/shm and prints CSV.

The raw rows go to docs/bench/results.csv; medians over the rounds, the spread (min-max
of the rounds' medians) and the ratios go to docs/BENCHMARKS.md, with gnuplot plots in
docs/bench/. Nothing here judges: a number that misses a target is reported as a miss.

  bench/run.py [--runs N] [--keys N] [--ops N] [--quick] [--no-report] [--build DIR]

keratin-fs (bench/fs-bench) runs in the same `make bench`: its tables (protection levels,
relaxed mode, write protection and tmpfs; the space an aged pool spends on redundancy) go
between the fs-bench markers of docs/BENCHMARKS-FS.md. `--fs-only` runs just that part.
"""
import argparse
import csv
import glob
import json
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys

COLUMNS = ["library", "config", "workload", "param", "threads", "ops", "seconds",
           "median_ns", "p99_ns", "ops_per_s", "fences", "flushed_lines", "logged_bytes",
           "written_bytes"]
SIZES = [64, 256, 1024, 4096, 16384, 65536]
MT_SIZES = [64, 1024, 4096]
MT_SCALING = 1.9  # target: throughput of two threads over one, distinct objects
STRUCTS = ["ctree", "rbtree", "btree", "skiplist", "rtree", "hashmap"]
KR_LEVELS = ["none", "ml", "mlp", "full"]
PMDK_CONFIGS = ["plain", "replica"]
CONTENDERS = [("keratin", c) for c in KR_LEVELS] + [("pmdk", c) for c in PMDK_CONFIGS]
# libpmemobj's pool attached as a keratin protected region (lazy redundancy), for the maps.
REGION_CONTENDERS = [("pmdk", "region1000"), ("pmdk", "region10000")]
LABEL = {("keratin", "none"): "keratin-none", ("keratin", "ml"): "keratin-ML",
         ("keratin", "mlp"): "keratin-MLP", ("keratin", "full"): "keratin (full)",
         ("pmdk", "plain"): "libpmemobj", ("pmdk", "replica"): "libpmemobj-R",
         ("pmdk", "region1000"): "libpmemobj + region 1 s",
         ("pmdk", "region10000"): "libpmemobj + region 10 s"}
# Protected-region microbenchmarks (bench/region-bench): patterns, and the protections
# (period in ms for lazy).
REGION_PATTERNS = ["write", "zipf", "read"]
REGION_MODES = [("none", 0), ("sync", 0), ("lazy", 1000), ("lazy", 5000), ("lazy", 10000),
                ("lazy", 30000)]
HMAP_COLUMNS = ["library", "config", "workload", "param", "entries", "ops", "seconds",
                "ops_per_s", "fences_per_op", "recovery_s_per_gib"]
HMAP_LINES = [1, 2, 4, 8, 16]
HMAP_SIZES = [1000, 65536, 1048576, 4194304]
HMAP_MAX_FILE = 3 << 30  # bytes of map file in /dev/shm; larger combinations are skipped
# Variants of the single-trip map measured at one size: two threads (both commits), and
# protection (KR_HMAP_PROTECT), one thread and two.
HMAP_VARIANT_LINES = [1, 4, 16]
HMAP_VARIANTS = [("one", ["--threads", "2"]), ("two", ["--threads", "2"]),
                 ("one", ["--protect"]), ("one", ["--protect", "--threads", "2"])]
REGION_COLUMNS = ["pattern", "mode", "period_ms", "size_mib", "seconds", "ops", "ops_per_s",
                  "passes", "dirty_per_pass", "stripes_per_pass", "pass_ms_mean", "pass_ms_max",
                  "bg_cpu_pct", "faults_per_pass", "unseals"]


def run_driver(lib, exe, config, workload, param, ops, threads=1):
    # exe: the driver's path, or a command list ending with it (bench/rewrite.py pins it)
    cmd = (exe if isinstance(exe, list) else [exe]) + [
        "--config", config, "--workload", workload, "--param", str(param),
        "--ops", str(ops), "--threads", str(threads)]
    if lib == "pmdk" and workload in ("overwrite", "mt_overwrite", "replace"):
        cmd += ["--objects", "1000"]  # keratin-bench's fixed 1000 objects per thread
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("run.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    rows = [dict(zip(COLUMNS, line.split(","))) for line in p.stdout.splitlines() if line]
    for r in rows:
        if len(r) != len(COLUMNS):
            sys.exit("run.py: %s printed a malformed row" % " ".join(cmd))
    return rows


def map_items(args):
    """One item per structure, for the contenders asked for (all, without --contenders)."""
    items = []
    for s in STRUCTS:
        # PMDK's skip list example has 4 levels and grows superlinearly (about 7 s of CPU
        # for 100k inserts, 43 s for 200k): it gets its own, smaller key count.
        keys = min(args.keys, args.skiplist_keys) if s == "skiplist" else args.keys
        items.append([(lib, cfg, "map", s, keys, 1) for lib, cfg in args.map_contenders])
    return items


def region_seconds(args, period_ms):
    """A lazy run covers at least one whole period and then some."""
    return args.region_seconds + (period_ms / 1000.0 if period_ms else 0)


def measure_regions(args, exe):
    """The region microbenchmarks: every pattern under every protection, rotated per round,
    then the first-store costs once."""
    items = [(pat, mode, per) for pat in REGION_PATTERNS for mode, per in args.region_modes]
    rows = []
    for rnd in range(args.region_runs):
        k = rnd % len(items)
        for i, (pat, mode, per) in enumerate(items[k:] + items[:k]):
            cmd = [exe, "--pattern", pat, "--mode", mode, "--size", str(args.region_mib),
                   "--seconds", "%.2f" % region_seconds(args, per)]
            if per:
                cmd += ["--period", str(per)]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit("run.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                          p.stderr.strip()))
            r = dict(zip(REGION_COLUMNS, p.stdout.strip().split(",")))
            if len(r) != len(REGION_COLUMNS):
                sys.exit("run.py: %s printed a malformed row" % " ".join(cmd))
            r["round"] = str(rnd)
            rows.append(r)
            if sys.stderr.isatty():
                print("\r  region round %d: %d/%d" % (rnd + 1, i + 1, len(items)), end="",
                      file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    p = subprocess.run([exe, "--first-store", "--size", str(min(args.region_mib, 256))],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("run.py: region-bench --first-store failed: %s" % p.stderr.strip())
    first = list(csv.DictReader(p.stdout.splitlines()))
    return rows, first


def plan(args):
    """Every measurement of one round: (library, config, workload, param, ops, threads)."""
    if args.maps_only:
        return map_items(args)
    items = []
    for wl in SINGLE_WORKLOADS:
        for size in args.sizes:
            items.append([(lib, cfg, wl, size, args.ops, 1) for lib, cfg in CONTENDERS])
    if args.objects_only:
        return items
    for size in MT_SIZES:
        for t in (1, 2):
            items.append([(lib, cfg, "mt_overwrite", size, args.ops, t)
                          for lib, cfg in (("keratin", "full"), ("pmdk", "plain"),
                                           ("pmdk", "replica"))])
    items += map_items(args)
    items.append([("keratin", "full", "create", args.create_mib, 1, 1),
                  ("pmdk", "plain", "create", args.create_mib, 1, 1)])
    items.append([("keratin", "full", "repair", 256, args.repairs, 1)])
    items.append([("keratin", "full", "scrub", args.create_mib, 1, 1)])
    return items


def measure(args, exes):
    rows = []
    items = plan(args)
    total = args.runs * sum(len(i) for i in items)
    done = 0
    for rnd in range(args.runs):
        for item in items:
            k = rnd % len(item)
            for lib, cfg, wl, param, ops, threads in item[k:] + item[:k]:
                for r in run_driver(lib, exes[lib], cfg, wl, param, ops, threads):
                    r["round"] = str(rnd)
                    rows.append(r)
                done += 1
                if sys.stderr.isatty():
                    print("\r  %d/%d measurements" % (done, total), end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return rows


# ---- aggregation ----------------------------------------------------------------------
def fnum(r, col):
    return float(r[col]) if r[col] not in ("", None) else None


def summarize(rows):
    """(library, config, workload, param, threads) -> medians and spreads over rounds."""
    groups = {}
    for r in rows:
        key = (r["library"], r["config"], r["workload"], r["param"], r["threads"])
        groups.setdefault(key, []).append(r)
    out = {}
    for key, rs in groups.items():
        med = [fnum(r, "median_ns") for r in rs]
        tput = [fnum(r, "ops_per_s") for r in rs]
        s = {"n": len(rs), "median_ns": statistics.median(med),
             "p99_ns": statistics.median(fnum(r, "p99_ns") for r in rs),
             "min_ns": min(med), "max_ns": max(med),
             "ops_per_s": statistics.median(tput), "min_ops": min(tput), "max_ops": max(tput)}
        for c in ("fences", "flushed_lines", "logged_bytes", "written_bytes"):
            vals = [fnum(r, c) for r in rs if fnum(r, c) is not None]
            s[c] = statistics.median(vals) if vals else None
        out[key] = s
    return out


def get(summ, lib, cfg, wl, param, threads=1):
    return summ.get((lib, cfg, wl, str(param), str(threads)))


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_ratio(x):
    return "-" if x is None else "%.2f" % x


# ---- persistence costs, both libraries counted the same way ----------------------------
# keratin counts in pm/pmem.c (every keratin-bench row carries its counters); libpmemobj is
# counted by bench/pmem-count.so, an LD_PRELOAD wrapper of libpmem's flush, drain and copy
# calls, in separate runs (never the timed ones) of COUNT_OPS transactions.
COUNT_OPS = 2000
# alloc and free keep the new oid in a slot of a persistent array (an allocation a crash
# cannot leak); tx_alloc and tx_free are libpmemobj's own benchmark pattern (pmembench's
# obj_tx_alloc / obj_tx_free: one transaction per object, oids in DRAM, and
# pmemobj_tx_alloc, which does not zero, against keratin's zero-filled kr_tx_alloc).
SINGLE_WORKLOADS = ("overwrite", "alloc", "free", "tx_alloc", "tx_free")


def measure_counts(args, exes):
    """Rows of libpmemobj's counters: every single-object workload, plain and replicated."""
    shim = os.path.join(args.build, "pmdk", "pmem-count.so")
    if not os.path.exists(shim):
        sys.exit("run.py: %s not built (bench/pmdk-build.sh builds it)" % shim)
    rows = []
    os.environ["LD_PRELOAD"] = os.path.abspath(shim)
    try:
        for wl in SINGLE_WORKLOADS:
            for size in args.sizes:
                for cfg in PMDK_CONFIGS:
                    rows += run_driver("pmdk", exes["pmdk"], cfg, wl, size,
                                       min(args.ops, COUNT_OPS))
    finally:
        del os.environ["LD_PRELOAD"]
    for r in rows:
        if r["flushed_lines"] == "":
            sys.exit("run.py: pmdk-bench printed no counters under %s" % shim)
    return rows


# The goals of the single-object table: keratin's latency over libpmemobj's, (level,
# baseline, workload) -> goal for a size. An unprotected keratin must meet at least what a
# fully protected one must.
def goal(level, base, wl, size):
    if base == "replica":
        return 0.5
    if wl == "overwrite":
        if level == "none":
            return 0.6
        return 0.7 if size <= 1024 else 1.0
    return 1.0


GOAL_CELLS = [("full", "plain"), ("full", "replica"), ("none", "plain"), ("none", "replica")]


def goal_table(summ, sizes):
    """The goals as a Markdown table: every cell keratin's median over libpmemobj's, the goal,
    and whether it is met. Returns (lines, met, total, misses), misses one line per cell
    missed, naming its target."""
    L = ["| workload | size | " + " | ".join(
        "%s / %s" % (LABEL[("keratin", lvl)], LABEL[("pmdk", base)])
        for lvl, base in GOAL_CELLS) + " |",
         "|---|---:|" + "---:|" * len(GOAL_CELLS)]
    met = total = 0
    misses = []
    for wl in SINGLE_WORKLOADS:
        for size in sizes:
            cells = []
            for lvl, base in GOAL_CELLS:
                k, b = get(summ, "keratin", lvl, wl, size), get(summ, "pmdk", base, wl, size)
                r = ratio(k and k["median_ns"], b and b["median_ns"])
                g = goal(lvl, base, wl, size)
                if r is None:
                    cells.append("-")
                    continue
                total += 1
                met += r <= g
                cells.append("%.2f (≤ %.1f) %s" % (r, g, "✓" if r <= g else "✗"))
                if r > g:
                    misses.append("%s %d B: %s at %.2fx %s's latency (target %.1fx)" % (
                        wl, size, LABEL[("keratin", lvl)], r, LABEL[("pmdk", base)], g))
            L.append("| %s | %d | %s |" % (wl, size, " | ".join(cells)))
    return L, met, total, misses


def cost_table(summ, counts, sizes):
    """Lines written back per transaction and write amplification (bytes written back per
    byte the transaction commits: lines x 64 / size), both libraries counted the same way."""
    L = ["| workload | size | " + " | ".join(
        "%s lines | %s WA" % (LABEL[c], LABEL[c]) for c in COST_CONTENDERS) + " |",
         "|---|---:|" + "---:|---:|" * len(COST_CONTENDERS)]
    for wl in SINGLE_WORKLOADS:
        for size in sizes:
            cells = []
            for lib, cfg in COST_CONTENDERS:
                s = get(counts if lib == "pmdk" else summ, lib, cfg, wl, size)
                if not s or s["flushed_lines"] is None:
                    cells += ["-", "-"]
                    continue
                cells += ["%.1f" % s["flushed_lines"], "%.2f" % (s["flushed_lines"] * 64 / size)]
            L.append("| %s | %d | %s |" % (wl, size, " | ".join(cells)))
    return L


COST_CONTENDERS = [("keratin", "full"), ("keratin", "none"), ("pmdk", "plain"),
                   ("pmdk", "replica")]
GOALS_BEGIN, GOALS_END = "<!-- goals begin -->", "<!-- goals end -->"


def goals_section(args, summ, counts):
    """The goals' table and the persistence costs behind it, between markers (a run with
    --objects-only replaces just this part of the report)."""
    table, met, total, _ = goal_table(summ, args.sizes)
    L = [GOALS_BEGIN, "## Goals: single-object transactions against libpmemobj\n",
         "Median latency of keratin over libpmemobj's, measured in the same run (%d rounds "
         "of %d transactions, rotated order); goal in brackets, ✓ met, ✗ missed. %d of %d "
         "cells meet their goal. Command: `%s`. Machine: %s; load average %s at the start "
         "of the run.\n" % (args.runs, args.ops, met, total, args.goals_command, machine(),
                            getattr(args, "load", "unknown"))]
    L += table
    L += ["", "Cache lines written back per transaction (*lines*) and write amplification "
          "(*WA*: lines x 64 bytes over the bytes the transaction commits), counted the same "
          "way for both libraries: keratin by its own counters (pm/pmem.c), libpmemobj by "
          "bench/pmem-count.so, an LD_PRELOAD wrapper of libpmem's flush, drain and copy "
          "calls (in separate, untimed runs of %d transactions). An allocation commits the "
          "object's size.\n" % min(args.ops, COUNT_OPS)]
    L += cost_table(summ, counts, args.sizes)
    L += ["", GOALS_END, ""]
    return L


def goal_misses(summ, sizes, command):
    """The goal cells missed, as a list between markers (a run with --objects-only replaces
    it with the goals' section, so that both always come from the same run)."""
    misses = goal_table(summ, sizes)[3]
    L = [MISSES_BEGIN, "Single-object goals missed in the goals' run (`%s`):\n" % command]
    L += ["- " + m for m in misses] or ["- none"]
    return L + ["", MISSES_END, ""]


MISSES_BEGIN, MISSES_END = "<!-- goal misses begin -->", "<!-- goal misses end -->"


# ---- report -------------------------------------------------------------------------
def command_args():
    """This run's arguments as BENCH_ARGS, without where it built and wrote."""
    out, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--build", "--out"):
            skip = True
        elif not a.startswith(("--build=", "--out=")):
            out.append(a)
    return " ".join(out)


def machine():
    def sh(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, shell=True).stdout.strip()
        except OSError:
            return "?"
    cpu = sh("lscpu | sed -n 's/^Model name: *//p' | head -1")
    cores = os.cpu_count()
    mem = sh("free -g | awk '/^Mem:/ {print $2}'")
    pmdk = sh("dpkg-query -W -f '${Version}' libpmemobj-dev")
    return ("%s, %s cores, %s GiB RAM; Linux %s; %s; libpmemobj %s; pools on /dev/shm (tmpfs) "
            "as emulated persistent memory" % (cpu, cores, mem, platform.release(),
                                               platform.platform(), pmdk))


def gnuplot_png(outdir, name, xs, value, style, settings, spread=False):
    """One PNG: a column per contender, a row per x; value(contender, x) or None. With spread,
    value gives (median, min, max) and each contender gets three columns, for error bars."""
    dat = os.path.join(outdir, name + ".dat")
    width = 3 if spread else 1
    with open(dat, "w") as f:
        f.write("# x " + " ".join('"%s"' % LABEL[c] + (" min max" if spread else "")
                                  for c in CONTENDERS) + "\n")
        for x in xs:
            vals = []
            for c in CONTENDERS:
                v = value(c, x)
                vals += [None] * width if v is None else list(v) if spread else [v]
            f.write("%s %s\n" % (x, " ".join("NaN" if v is None else "%.0f" % v for v in vals)))
    cols = " , ".join("'%s' using %s title '%s'" % (
        dat, style % tuple(range(2 + width * i, 2 + width * (i + 1))), LABEL[c])
        for i, c in enumerate(CONTENDERS))
    script = "set terminal png size 1000,540; set output '%s'; %s; plot %s" % (
        os.path.join(outdir, name + ".png"), settings, cols)
    subprocess.run(["gnuplot", "-e", script], check=True)
    return "bench/%s.png" % name


# Latency plots by object size: workload, file name, what one operation is.
LATENCY_PLOTS = [("overwrite", "latency", "Single-object overwrite transaction"),
                 ("alloc", "latency-alloc", "Allocation (one transaction each)"),
                 ("free", "latency-free", "Free (one transaction each)"),
                 ("tx_alloc", "latency-tx-alloc", "Allocation (pmembench pattern)"),
                 ("tx_free", "latency-tx-free", "Free (pmembench pattern)")]


def latency_plots(outdir, summ, prefix=""):
    """Latency per object size of overwrite, alloc and free, every contender measured, with
    error bars (the spread of the rounds' medians)."""
    def latency(wl):
        def value(c, size):
            s = get(summ, c[0], c[1], wl, size)
            return s and (s["median_ns"], s["min_ns"], s["max_ns"])
        return value

    pngs = []
    for wl, name, what in LATENCY_PLOTS:
        if not any(get(summ, c[0], c[1], wl, size) for c in CONTENDERS for size in SIZES):
            continue
        pngs.append(gnuplot_png(
            outdir, prefix + name, SIZES, latency(wl), "1:%d:%d:%d with yerrorlines",
            "set logscale xy; set xlabel 'object size (bytes)'; "
            "set ylabel 'median ns per operation'; "
            "set title '%s latency; bars: min-max of the rounds (lower is better)'; "
            "set key top left; set grid" % what, spread=True))
    return pngs


def plot(outdir, summ, args):
    """PNG plots with gnuplot: the latency plots, structure throughput."""
    if not shutil.which("gnuplot"):
        return []

    def inserts(c, st):
        s = get(summ, c[0], c[1], "insert", st)
        return s and s["ops_per_s"] / 1000

    return latency_plots(outdir, summ) + [gnuplot_png(
        outdir, "structures", STRUCTS, inserts, "%d:xtic(1)",
        "set style data histograms; set style histogram clustered gap 1; "
        "set style fill solid 0.8 border -1; set ylabel 'thousand inserts per second'; "
        "set title 'Map inserts, %d keys (skip list %d), one transaction each "
        "(higher is better)'; set key top right; set grid ytics; set yrange [0:*]"
        % (args.keys, min(args.keys, args.skiplist_keys)))]


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def maps_table(w, path):
    """A maps-only run (--maps-only) at its own key count, as one more table."""
    rows = read_rows(path)
    summ = summarize(rows)
    present = [c for c in CONTENDERS + REGION_CONTENDERS if any((c[0], c[1]) == k[:2] for k in summ)]
    rounds = max(int(r["round"]) for r in rows) + 1
    keys = sorted({int(r["ops"]) for r in rows}, reverse=True)
    w("### The structures at %s keys\n" % " / ".join("%d" % k for k in keys))
    w("A separate maps-only run (`bench/run.py --maps-only`), %d round%s; the keys column gives "
      "each structure's key count. Thousand operations per second, median [spread].\n"
      % (rounds, "" if rounds == 1 else "s"))
    has = lambda lib, cfg: (lib, cfg) in present
    w("| structure | op | keys | " + " | ".join(LABEL[c] for c in present) +
      (" | full / libpmemobj" if has("pmdk", "plain") else "") +
      (" | full / libpmemobj-R" if has("pmdk", "replica") else "") + " |")
    w("|---|---|---:|" + "---:|" * len(present) + "---:|" * (has("pmdk", "plain") + has("pmdk", "replica")))
    for st in STRUCTS:
        for op in ("insert", "remove", "lookup"):
            cells, n = [], ""
            for lib, cfg in present:
                x = get(summ, lib, cfg, op, st)
                if x:
                    n = next(r["ops"] for r in rows if r["param"] == st)
                cells.append("%.0f [%.0f-%.0f]" % (x["ops_per_s"] / 1e3, x["min_ops"] / 1e3,
                                                  x["max_ops"] / 1e3) if x else "-")
            full = get(summ, "keratin", "full", op, st)
            extra = ""
            for cfg in ("plain", "replica"):
                if has("pmdk", cfg):
                    b = get(summ, "pmdk", cfg, op, st)
                    extra += " | " + fmt_ratio(ratio(full and full["ops_per_s"], b and b["ops_per_s"]))
            w("| %s | %s | %s | %s%s |" % (st, op, n, " | ".join(cells), extra))
    w("")


def grouped(rows, key):
    """Rows by key(row), and the median of a column over one group (None: no such group
    or no values)."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)

    def med(k, col):
        vals = [float(r[col]) for r in groups.get(k, []) if r[col] not in ("", None)]
        return statistics.median(vals) if vals else None
    return groups, med


def regions_section(w, outdir, summ):
    """Protected regions: region-bench's rows (regions.csv, firststore.csv) and the maps
    of libpmemobj with its pool attached as a region (results.csv)."""
    path = os.path.join(outdir, "regions.csv")
    if not os.path.exists(path):
        return
    rows = read_rows(path)
    groups, med = grouped(rows, lambda r: (r["pattern"], r["mode"], int(r["period_ms"])))

    rounds = max(int(r["round"]) for r in rows) + 1
    lazy = sorted({k[2] for k in groups if k[1] == "lazy"})
    w("## Protected regions (lazy redundancy)\n")
    w("`bench/region-bench`: one thread makes random 64-byte accesses to a %s MiB file in "
      "/dev/shm mapped MAP_SHARED, for %s s (lazy runs: plus one period, so that at least one "
      "background pass happens inside the timed window). **write**: stores, pages uniform; "
      "**zipf**: stores, pages Zipf-distributed (theta 0.99, hot pages scattered); **read**: "
      "loads. **none**: no redundancy; **sync**: every store also patches its page's CRC-32C "
      "incrementally and XORs its delta into the stripe's parity, then writes back the three "
      "lines and fences (a Pangolin-style synchronous scheme, the Vilamb paper's comparison); "
      "**lazy**: a protected region (`kr_region_open`, stripes of 4+1 pages, 2 MiB segments) "
      "with the background thread at the period shown. Median of %d round%s; the machine has "
      "2 vCPUs, so the background thread shares them with the store thread.\n" % (
          rows[0]["size_mib"],
          "%.3g" % statistics.median(float(r["seconds"]) for r in rows if r["mode"] != "lazy"),
          rounds, "" if rounds == 1 else "s"))
    w("Million operations per second; in brackets, the ratio to no redundancy.\n")
    w("| pattern | none | sync | " + " | ".join("lazy %g s" % (p / 1000) for p in lazy) + " |")
    w("|---|---:|---:|" + "---:|" * len(lazy))
    for pat in REGION_PATTERNS:
        base = med((pat, "none", 0), "ops_per_s")
        if base is None:
            continue
        cells = ["%.1f" % (base / 1e6)]
        for mode, per in [("sync", 0)] + [("lazy", p) for p in lazy]:
            v = med((pat, mode, per), "ops_per_s")
            cells.append("%.1f (%.2f)" % (v / 1e6, v / base) if v else "-")
        w("| %s | %s |" % (pat, " | ".join(cells)))
    w("")
    w("Per background pass (lazy): pages recomputed (the pages written in the period: the "
      "vulnerable pages, not covered until the pass ends), stripes whose parity was "
      "recomputed, pass time (mean / longest), the time-to-coverage bound (period + longest "
      "pass: a store is covered when the first pass that starts after it ends), CPU of the "
      "background thread as a share of one core, and minor faults of the process per second "
      "of the run (nearly all of them the write-protect faults of first stores: about one per "
      "page written per period, plus the first touch of each page after attach).\n")
    w("| pattern | period | passes | pages / pass | stripes / pass | pass ms | coverage within | "
      "background CPU | faults / s |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pat in REGION_PATTERNS:
        for per in lazy:
            key = (pat, "lazy", per)
            if key not in groups:
                continue
            w("| %s | %g s | %.0f | %.0f | %.0f | %.1f / %.1f | %.2f s | %.1f%% | %.0f |" % (
                pat, per / 1000, med(key, "passes"), med(key, "dirty_per_pass"),
                med(key, "stripes_per_pass"), med(key, "pass_ms_mean"), med(key, "pass_ms_max"),
                per / 1000 + med(key, "pass_ms_max") / 1000, med(key, "bg_cpu_pct"),
                statistics.median(float(r["faults_per_pass"]) * max(1.0, float(r["passes"])) /
                                  float(r["seconds"]) for r in groups[key])))
    w("")
    fpath = os.path.join(outdir, "firststore.csv")
    if os.path.exists(fpath):
        w("The cost of a store that is the first to its page in a period (`region-bench "
          "--first-store`, 256 MiB file, every other page): it pays the write-protect fault "
          "once per page per period; the first store into a sealed segment also pays the "
          "unseal trap (SIGSEGV, hot bit persisted, mprotect of 2 MiB) once per segment until "
          "the segment is sealed again.\n")
        w("| store | ns per page |")
        w("|---|---:|")
        for r in read_rows(fpath):
            w("| %s | %s |" % (r["kind"], r["ns_per_page"]))
        w("")
    # The maps: from a maps-only run with the region contenders if there is one (all its
    # contenders measured together), else from the main run.
    mpaths = sorted(glob.glob(os.path.join(outdir, "maps-regions-*.csv")))
    if mpaths:
        mrows = read_rows(mpaths[-1])
        summ = summarize(mrows)
        keys = max(int(r["ops"]) for r in mrows)
        mrounds = max(int(r["round"]) for r in mrows) + 1
    else:
        keys = mrounds = None
    have = [c for c in REGION_CONTENDERS if any(k[:2] == c for k in summ)]
    if have:
        if keys:
            w("The structures below come from `bench/run.py --maps-only --keys %d --contenders "
              "pmdk:plain,pmdk:region1000,pmdk:region10000,keratin:full` (%d round%s; skip "
              "lists fewer keys).\n" % (keys, mrounds, "" if mrounds == 1 else "s"))
        w("libpmemobj's example structures with the pool attached as a protected region "
          "(`kr_region_attach(path, pop, size, ...)` after `pmemobj_create`: one call), "
          "against plain libpmemobj and keratin (full); thousand operations per second, "
          "median; in brackets the ratio to plain libpmemobj. Each run is a few seconds, so "
          "at 10 s no pass falls inside it: that column shows the first-store faults alone.\n")
        w("| structure | op | libpmemobj | " + " | ".join(LABEL[c] for c in have) +
          " | keratin (full) |")
        w("|---|---|---:|" + "---:|" * len(have) + "---:|")
        for st in STRUCTS:
            for op in ("insert", "remove", "lookup"):
                b = get(summ, "pmdk", "plain", op, st)
                if not b:
                    continue
                cells = []
                for lib, cfg in have + [("keratin", "full")]:
                    x = get(summ, lib, cfg, op, st)
                    cells.append("%.0f (%.2f)" % (x["ops_per_s"] / 1e3, x["ops_per_s"] / b["ops_per_s"])
                                 if x else "-")
                w("| %s | %s | %.0f | %s |" % (st, op, b["ops_per_s"] / 1e3, " | ".join(cells)))
        w("")
        for c in have:
            rs = [get(summ, c[0], c[1], op, st)["ops_per_s"] / get(summ, "pmdk", "plain", op, st)["ops_per_s"]
                  for st in STRUCTS for op in ("insert", "remove", "lookup")
                  if get(summ, c[0], c[1], op, st) and get(summ, "pmdk", "plain", op, st)]
            if rs:
                gm = statistics.geometric_mean(rs)
                w("- %s over libpmemobj, geometric mean of the %d rows: %.2f (%+.0f%%); "
                  "rows range %.2f-%.2f." % (LABEL[c], len(rs), gm, (gm - 1) * 100, min(rs), max(rs)))
        w("")


def report(args, summ, outdir, plots, notes):
    L = []
    w = L.append
    w("# keratin benchmarks\n")
    w("Generated by `make bench` (`bench/run.py`) on %s. Do not edit by hand: the text "
      "between the tables comes from `bench/report-notes.md`.\n" %
      datetime.date.today().isoformat())
    w("**Machine:** %s.\n" % machine())
    w("**Method:** %d rounds; each round runs every contender on every workload once, in "
      "an order that rotates between rounds; each measurement is a fresh pool, prefaulted "
      "(keratin `KR_OPEN_PREFAULT`; PMDK `PMEMOBJ_CONF=prefault.at_create=1;prefault.at_open=1`), "
      "both libraries forced to treat tmpfs as persistent memory (`KR_OPEN_FORCE_PMEM`, "
      "`PMEM_IS_PMEM_FORCE=1`). Tables give the median over rounds of each round's median "
      "(and 99th percentile) latency, and the spread of the rounds' medians (min-max). "
      "Raw rows: `docs/bench/results.csv`. Single-object runs time %d transactions; maps "
      "use %d keys (skip lists %d: PMDK's 4-level example slows down superlinearly). "
      "Command: `make bench BENCH_ARGS=\"%s\"`.\n" % (
          args.runs, args.ops, args.keys, min(args.keys, args.skiplist_keys), args.command))
    w("Contenders: **libpmemobj** (PMDK %s, Debian) plain, and **libpmemobj-R** (one replica "
      "in a second file through a pool set); keratin at four protection levels: **none** "
      "(one log copy, no checksums, no parity), **ML** (+ replicated log and checksummed "
      "allocator records), **MLP** (+ zone parity), **full** (+ object checksums), as the "
      "Pangolin paper's Pangolin/-ML/-MLP/-MLPC.\n" % "1.12")
    w("Contents: [single-object transactions](#single-object-transactions), [persistence "
      "cost per transaction](#persistence-cost-per-transaction-keratins-counters), [two "
      "threads](#two-threads-random-overwrites-of-distinct-objects), [key-value "
      "structures](#key-value-structures), [creation, repair, scrub](#pool-creation-repair-"
      "scrub), [protected regions](#protected-regions-lazy-redundancy), [single-trip hash "
      "map](#single-trip-hash-map), [ordinary files against LMDB and SQLite](#ordinary-files-"
      "keratin-against-lmdb-and-sqlite), [against the targets](#against-the-targets).\n")
    for p in plots:
        w("![%s](%s)\n" % (p, p))
    if notes:
        w(notes.strip() + "\n")

    for line in goals_section(args, summ, args.counts):
        w(line)
    w("## Single-object transactions\n")
    w("Median latency in ns per transaction (spread of round medians in brackets); ratios "
      "are keratin (full) over the baseline: below 1 means keratin is faster.\n")
    w("| workload | size | " + " | ".join(LABEL[c] for c in CONTENDERS) +
      " | full / libpmemobj | full / libpmemobj-R |")
    w("|---|---:|" + "---:|" * len(CONTENDERS) + "---:|---:|")
    misses = []
    for wl in SINGLE_WORKLOADS:
        for size in args.sizes:
            cells = []
            for lib, cfg in CONTENDERS:
                s = get(summ, lib, cfg, wl, size)
                cells.append("%.0f [%.0f-%.0f]" % (s["median_ns"], s["min_ns"], s["max_ns"])
                             if s else "-")
            full = get(summ, "keratin", "full", wl, size)
            p = get(summ, "pmdk", "plain", wl, size)
            r = get(summ, "pmdk", "replica", wl, size)
            rp = ratio(full and full["median_ns"], p and p["median_ns"])
            rr = ratio(full and full["median_ns"], r and r["median_ns"])
            w("| %s | %d | %s | %s | %s |" % (wl, size, " | ".join(cells), fmt_ratio(rp),
                                                fmt_ratio(rr)))
    w("")
    w("99th percentile latency (ns):\n")
    w("| workload | size | " + " | ".join(LABEL[c] for c in CONTENDERS) + " |")
    w("|---|---:|" + "---:|" * len(CONTENDERS))
    for wl in SINGLE_WORKLOADS:
        for size in args.sizes:
            cells = []
            for lib, cfg in CONTENDERS:
                s = get(summ, lib, cfg, wl, size)
                cells.append("%.0f" % s["p99_ns"] if s else "-")
            w("| %s | %d | %s |" % (wl, size, " | ".join(cells)))
    w("")
    w("## Persistence cost per transaction (keratin's counters)\n")
    w("| workload | size | level | fences | flushed lines | logged bytes | written bytes |")
    w("|---|---:|---|---:|---:|---:|---:|")
    fence_misses = []
    for wl in SINGLE_WORKLOADS:
        for size in args.sizes:
            for lvl in KR_LEVELS:
                s = get(summ, "keratin", lvl, wl, size)
                if not s or s["fences"] is None:
                    continue
                w("| %s | %d | %s | %.2f | %.1f | %.0f | %.0f |" % (
                    wl, size, lvl, s["fences"], s["flushed_lines"], s["logged_bytes"],
                    s["written_bytes"]))
                if lvl == "full" and s["fences"] > 1.05:
                    fence_misses.append(
                        "%s %d B: %.2f fences per transaction (target: one fence per "
                        "commit, as kept; the extra commits are the allocator's: a "
                        "transaction that takes the first block of a new run commits the "
                        "run first, in a transaction of its own)" % (wl, size, s["fences"]))
    w("")
    w("## Two threads: random overwrites of distinct objects\n")
    w("Throughput in thousand transactions per second (all threads), median [spread].\n")
    w("| size | threads | keratin (full) | libpmemobj | libpmemobj-R | full / libpmemobj |")
    w("|---:|---:|---:|---:|---:|---:|")
    for size in MT_SIZES:
        one = get(summ, "keratin", "full", "mt_overwrite", size, 1)
        two = get(summ, "keratin", "full", "mt_overwrite", size, 2)
        scale = ratio(two and two["ops_per_s"], one and one["ops_per_s"])
        if scale is not None and scale < MT_SCALING:
            misses.append("two threads, %d B overwrites: keratin (full) gains %.2fx from "
                          "the second thread (target %.1fx)" % (size, scale, MT_SCALING))
        for t in (1, 2):
            k = get(summ, "keratin", "full", "mt_overwrite", size, t)
            p = get(summ, "pmdk", "plain", "mt_overwrite", size, t)
            r = get(summ, "pmdk", "replica", "mt_overwrite", size, t)
            cell = lambda s: "%.0f [%.0f-%.0f]" % (s["ops_per_s"] / 1e3, s["min_ops"] / 1e3,
                                                  s["max_ops"] / 1e3) if s else "-"
            w("| %d | %d | %s | %s | %s | %s |" % (size, t, cell(k), cell(p), cell(r),
                                                   fmt_ratio(ratio(k and k["ops_per_s"],
                                                                   p and p["ops_per_s"]))))
    w("")
    w("## Key-value structures\n")
    w("Thousand operations per second, median [spread]; each insert or remove is one "
      "transaction; ratios are keratin (full) throughput over the baseline's: above 1 means "
      "keratin is faster.\n")
    w("| structure | op | " + " | ".join(LABEL[c] for c in CONTENDERS) +
      " | full / libpmemobj | full / libpmemobj-R |")
    w("|---|---|" + "---:|" * len(CONTENDERS) + "---:|---:|")
    for st in STRUCTS:
        for op in ("insert", "remove", "lookup"):
            cells = []
            for lib, cfg in CONTENDERS:
                s = get(summ, lib, cfg, op, st)
                cells.append("%.0f [%.0f-%.0f]" % (s["ops_per_s"] / 1e3, s["min_ops"] / 1e3,
                                                  s["max_ops"] / 1e3) if s else "-")
            full = get(summ, "keratin", "full", op, st)
            p = get(summ, "pmdk", "plain", op, st)
            r = get(summ, "pmdk", "replica", op, st)
            rp = ratio(full and full["ops_per_s"], p and p["ops_per_s"])
            rr = ratio(full and full["ops_per_s"], r and r["ops_per_s"])
            w("| %s | %s | %s | %s | %s |" % (st, op, " | ".join(cells), fmt_ratio(rp),
                                              fmt_ratio(rr)))
            if rp is not None and rp < 1.0:
                misses.append("%s %s: full protection at %.2fx libpmemobj's throughput "
                              "(target: at least 1x)" % (st, op, rp))
    w("")
    w("Fences per operation (keratin, full):\n")
    w("| structure | insert | remove | lookup |")
    w("|---|---:|---:|---:|")
    for st in STRUCTS:
        cells = []
        for op in ("insert", "remove", "lookup"):
            s = get(summ, "keratin", "full", op, st)
            cells.append("%.2f" % s["fences"] if s and s["fences"] is not None else "-")
        w("| %s | %s |" % (st, " | ".join(cells)))
    w("")
    for path in sorted(glob.glob(os.path.join(outdir, "maps-[0-9]*.csv"))):
        maps_table(w, path)
    w("## Pool creation, repair, scrub\n")
    k = get(summ, "keratin", "full", "create", args.create_mib)
    p = get(summ, "pmdk", "plain", "create", args.create_mib)
    if k:
        w("- Pool creation (%d MiB, timed per GiB): keratin %.2f s/GiB%s." % (
            args.create_mib, k["median_ns"] / 1e9,
            ", libpmemobj %.2f s/GiB" % (p["median_ns"] / 1e9) if p else ""))
    s = get(summ, "keratin", "full", "repair", 256)
    if s:
        w("- Online repair of one poisoned 4 KiB data page (256 MiB pool, 100 rows per zone, "
          "%d repairs per round): median %.1f us, 99th percentile %.1f us." % (
              args.repairs, s["median_ns"] / 1e3, s["p99_ns"] / 1e3))
    s = get(summ, "keratin", "full", "scrub", args.create_mib)
    if s:
        w("- Scrub (a full `kr_pool_check`: every parity column, chunk record and object "
          "checksum) of a %d MiB pool half full of 4 KiB objects: %.2f GB/s." % (
              args.create_mib, s["ops_per_s"] / 1e9))
    w("")
    compat_section(w, outdir)
    regions_section(w, outdir, summ)
    hmap_section(w, outdir)
    kv_files_section(w, outdir)
    pmsan_section(w, outdir)
    w("## Against the targets\n")
    for line in goal_misses(summ, args.sizes, args.goals_command):
        w(line)
    if misses or fence_misses:
        w("The other misses, measured in this run against the project's targets (each line "
          "names its target; a miss is reported, never tuned away):\n")
        for m in misses + fence_misses:
            w("- " + m)
    else:
        w("Every other target was met in this run.")
    w("")
    with open(os.path.join(outdir, "..", "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description="keratin vs libpmemobj benchmarks")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--keys", type=int, default=1000000, help="keys per map (default 1M)")
    ap.add_argument("--skiplist-keys", type=int, default=100000,
                    help="keys for the skip lists (default 100k: PMDK's is superlinear)")
    ap.add_argument("--ops", type=int, default=20000, help="transactions per single-object run")
    ap.add_argument("--repairs", type=int, default=200, help="page repairs per round")
    ap.add_argument("--create-mib", type=int, default=1024, help="pool size for create/scrub")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 round, tiny sizes, no report (make check)")
    ap.add_argument("--no-report", action="store_true", help="measure only")
    ap.add_argument("--maps-only", action="store_true",
                    help="only the structures; rows go to OUT/maps-KEYS.csv, which the "
                         "report shows as one more table")
    ap.add_argument("--objects-only", action="store_true",
                    help="only the single-object transactions and their persistence costs: "
                         "rows go to OUT/objects.csv and OUT/counts.csv, the goals' tables "
                         "to stdout and between the goals markers of docs/BENCHMARKS.md")
    ap.add_argument("--contenders", default="",
                    help="with --maps-only: e.g. keratin:full,pmdk:plain,pmdk:replica")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite docs/BENCHMARKS.md and the plots from OUT/results.csv; "
                    "with --objects-only, the goals section from OUT/objects.csv")
    ap.add_argument("--regions-only", action="store_true",
                    help="only the protected-region microbenchmarks; rows go to "
                         "OUT/regions.csv and OUT/firststore.csv, then the report is rewritten")
    ap.add_argument("--no-regions", action="store_true",
                    help="skip the protected-region microbenchmarks")
    ap.add_argument("--region-runs", type=int, default=2, help="region rounds (default 2)")
    ap.add_argument("--region-mib", type=int, default=1024,
                    help="region benchmark file size (default 1024 MiB)")
    ap.add_argument("--region-seconds", type=float, default=3.0,
                    help="seconds per region run, plus one period for lazy runs (default 3)")
    ap.add_argument("--hmap-only", action="store_true",
                    help="only the single-trip map benchmarks; rows go to OUT/hmap.csv, then "
                         "the report is rewritten")
    ap.add_argument("--hmap-runs", type=int, default=1, help="map rounds (default 1)")
    ap.add_argument("--fs-only", action="store_true",
                    help="only keratin-fs (bench/fs-bench): its tables go to docs/BENCHMARKS-FS.md")
    ap.add_argument("--build", default="build", help="build directory (default build)")
    ap.add_argument("--out", default="docs/bench", help="where results and plots go")
    args = ap.parse_args()
    args.contenders = ([tuple(c.split(":", 1)) for c in args.contenders.split(",")]
                       if args.contenders else CONTENDERS)
    # The maps of a full run also measure libpmemobj's pool attached as a protected region,
    # when pmdk-bench was built with keratin (bench/pmdk-build.sh leaves a marker).
    regions = os.path.exists(os.path.join(args.build, "pmdk", "pmdk-bench.region"))
    args.map_contenders = (args.contenders if args.maps_only
                           else CONTENDERS + (REGION_CONTENDERS if regions else []))
    args.region_modes = REGION_MODES
    args.sizes = SIZES
    for c in args.contenders:
        if c not in CONTENDERS + REGION_CONTENDERS:
            sys.exit("run.py: unknown contender %s (e.g. keratin:full, pmdk:replica)" % ":".join(c))
    if args.report_only and args.objects_only:
        measure_objects(args)
        return
    if args.report_only:
        with open(os.path.join(args.out, "run.json")) as f:
            saved = json.load(f)
        for k, v in saved.items():
            setattr(args, k, v)
        write_report(args, read_rows(os.path.join(args.out, "results.csv")))
        return
    if args.quick:
        args.runs, args.keys, args.ops, args.repairs, args.create_mib = 1, 2000, 200, 5, 64
        args.region_runs, args.region_mib, args.region_seconds = 1, 64, 0.2
        args.region_modes = [("none", 0), ("sync", 0), ("lazy", 100)]
        args.sizes = [64, 4096, 65536]  # smallest, page, largest: every code path
        args.no_report = True
    args.command = command_args()
    args.load = "%.1f" % os.getloadavg()[0]
    args.goals_command = ("bench/run.py " + args.command if args.objects_only else
                          "make bench" + (' BENCH_ARGS="%s"' % args.command if args.command
                                          else ""))
    if args.objects_only:
        measure_objects(args)
        return
    fs_exe = os.path.join(args.build, "bench", "fs-bench")
    if not os.access(fs_exe, os.X_OK):
        sys.exit("run.py: fs-bench not built (%s); run `make bench`" % fs_exe)
    measure_fs(args, fs_exe)
    if args.fs_only:
        return
    exes = {"keratin": os.path.join(args.build, "bench", "keratin-bench"),
            "pmdk": os.path.join(args.build, "pmdk", "pmdk-bench"),
            "region": os.path.join(args.build, "bench", "region-bench"),
            "hmap": os.path.join(args.build, "bench", "hmap-bench")}
    for lib, exe in exes.items():
        if not os.access(exe, os.X_OK):
            sys.exit("run.py: %s not built (%s); run `make bench`" % (lib, exe))
    args.hmap_sizes = [1000, 20000] if args.quick else HMAP_SIZES
    args.hmap_variant_size = args.hmap_sizes[-2]
    region_rows = first = hmap_rows = None
    if args.hmap_only or not (args.maps_only or args.regions_only):
        hmap_rows = measure_hmap(args, exes)
    if not (args.maps_only or args.no_regions or args.hmap_only):
        region_rows, first = measure_regions(args, exes["region"])
    if args.regions_only or args.hmap_only:
        os.makedirs(args.out, exist_ok=True)
        if region_rows:
            write_region_csvs(args.out, region_rows, first)
        if hmap_rows:
            write_csv(os.path.join(args.out, "hmap.csv"), HMAP_COLUMNS, hmap_rows)
        if os.path.exists(os.path.join(args.out, "results.csv")):
            with open(os.path.join(args.out, "run.json")) as f:
                for k, v in json.load(f).items():
                    setattr(args, k, v)
            write_report(args, read_rows(os.path.join(args.out, "results.csv")))
        return
    rows = measure(args, exes)
    count_rows = measure_counts(args, exes)
    if args.no_report:
        print("run.py: %d rows, every workload measured%s%s" %
              (len(rows), ", %d region rows" % len(region_rows) if region_rows else "",
               ", %d map rows" % len(hmap_rows) if hmap_rows else ""))
        return
    os.makedirs(args.out, exist_ok=True)
    if region_rows:
        write_region_csvs(args.out, region_rows, first)
    if hmap_rows:
        write_csv(os.path.join(args.out, "hmap.csv"), HMAP_COLUMNS, hmap_rows)
    # A maps-only run with libpmemobj attached as a region feeds the regions section.
    tag = "maps-regions" if any(c in REGION_CONTENDERS for c in args.contenders) else "maps"
    name = "%s-%d.csv" % (tag, args.keys) if args.maps_only else "results.csv"
    write_csv(os.path.join(args.out, name), COLUMNS, rows)
    if not args.maps_only:
        write_csv(os.path.join(args.out, "counts.csv"), COLUMNS, count_rows)
    if args.maps_only:
        print("run.py: %d rows in %s; `bench/run.py --report-only` puts them in the report" %
              (len(rows), os.path.join(args.out, name)))
        return
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump({k: getattr(args, k) for k in ("runs", "keys", "skiplist_keys", "ops",
                                                 "repairs", "create_mib", "command",
                                                 "goals_command", "load")}, f)
    write_report(args, rows)


FS_OPS = ["create", "append 4K", "overwrite 4K", "overwrite 512", "read 4K", "unlink"]
FS_BEGIN, FS_END = "<!-- fs-bench begin -->", "<!-- fs-bench end -->"


def fs_tables(out):
    """Checks fs-bench's output is complete: a row of 15 positive numbers per operation and
    a space row of five percentages for each parity layout (page, zone), and the mount-scan
    row. Returns the markdown lines; exits on a gap."""
    rows = {}
    space = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in FS_OPS:
            rows[cells[0]] = cells[1:]
        elif (line.startswith("|") and len(cells) == 8 and cells[0].split(" ")[0] in ("page", "zone")
              and all(c.endswith("%") for c in cells[3:])):
            space[cells[0].split(" ")[0]] = cells[3:]
    for op in FS_OPS:
        vals = rows.get(op)
        try:
            ok = vals is not None and len(vals) == 15 and all(float(v) > 0 for v in vals)
        except ValueError:
            ok = False
        if not ok:
            sys.exit("run.py: fs-bench's table has no complete row for %s" % op)
    if len(space) != 2 or not all(0 <= float(c.rstrip(" %")) <= 100 for row in space.values() for c in row):
        sys.exit("run.py: fs-bench printed no space table for both parity layouts")
    if not any(line.startswith("| mount scan ") and len(line.split("|")) == 8 for line in out.splitlines()):
        sys.exit("run.py: fs-bench printed no mount-scan row")
    return out.rstrip("\n")


def measure_fs(args, exe):
    cmd = [exe, "--quick"] if args.quick else [exe, "--ops", "2000", "--rounds", "11"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("run.py: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
    tables = fs_tables(p.stdout)
    if args.no_report:
        print("run.py: fs-bench table complete (%d operations, space)" % len(FS_OPS))
        return
    path = os.path.join(args.out, "..", "BENCHMARKS-FS.md")
    put_between_markers(path, FS_BEGIN, FS_END, "`%s` (%s)\n\n%s" % (
        " ".join(["build/bench/fs-bench"] + cmd[1:]), datetime.date.today().isoformat(), tables), "run.py")
    print("run.py: fs-bench tables in %s" % path)


def put_between_markers(path, begin, end, body, prog):
    """Replaces what lies between the lines begin and end of the file at path with body
    (kv-files.py uses it too); exits if either marker is missing."""
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        sys.exit("%s: %s has no %s ... %s markers" % (prog, path, begin, end))
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(path, "w") as f:
        f.write("%s%s\n%s\n%s%s" % (head, begin, body, end, tail))


def measure_hmap(args, exes):
    """The single-trip map (one and two fences, every entry size and map size) and, at the
    same key counts, keratin's transactional hashmap and PMDK's hashmap_tx, in one run."""
    rows = []
    for rnd in range(args.hmap_runs):
        for n in args.hmap_sizes:
            for lines in HMAP_LINES:
                if n * lines * 64 * 1.25 > HMAP_MAX_FILE:
                    continue
                runs = [("one", []), ("two", [])]
                if n == args.hmap_variant_size and lines in HMAP_VARIANT_LINES:
                    runs += HMAP_VARIANTS
                for mode, extra in runs:
                    cmd = [exes["hmap"], "--lines", str(lines), "--entries", str(n), "--mode",
                           mode] + extra
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    if p.returncode != 0:
                        sys.exit("run.py: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
                    for line in p.stdout.splitlines():
                        r = dict(zip(HMAP_COLUMNS, line.split(",")))
                        r["round"] = str(rnd)
                        rows.append(r)
            for lib, cfg in (("keratin", "full"), ("pmdk", "plain")):
                for r in run_driver(lib, exes[lib], cfg, "map", "hashmap", n):
                    rows.append({"library": lib, "config": cfg, "workload": r["workload"],
                                 "param": "hashmap", "entries": str(n), "ops": r["ops"],
                                 "seconds": r["seconds"], "ops_per_s": r["ops_per_s"],
                                 "fences_per_op": r["fences"], "recovery_s_per_gib": "",
                                 "round": str(rnd)})
            if sys.stderr.isatty():
                print("\r  map round %d: %d entries done" % (rnd + 1, n), end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return rows


def compat_section(w, outdir):
    """keratin-pmemobj against libpmemobj on the same program, as bench/compat-bench.py
    last wrote it (make bench runs it after this report, so it is the previous run's)."""
    path = os.path.join(outdir, "compat.md")
    if not os.path.exists(path):
        return
    w("## libpmemobj programs: keratin-pmemobj against libpmemobj\n")
    w("From the last `bench/compat-bench.py` (`make bench`), written %s; raw rows "
      "`docs/bench/compat.csv`. One driver (`bench/pmdk-bench.c` with PMDK's example maps, "
      "compiled from libpmemobj-dev's copy) built against keratin-pmemobj (full protection) "
      "and against libpmemobj, with and without a replica; what keratin-pmemobj does per "
      "operation is in `docs/DESIGN.md` (libpmemobj programs on keratin). A failed cell says "
      "why the run stopped. Fences and lines per operation: keratin's counters and "
      "`bench/pmem-count.so` for libpmemobj (k / p / pR).\n" %
      datetime.date.fromtimestamp(os.path.getmtime(path)).isoformat())
    w(open(path).read().strip() + "\n")


def pmsan_section(w, outdir):
    """The persistence checker's costs, as bench/pmsan-bench.sh last wrote them (make bench
    runs it after this report, so they are the previous run's)."""
    path = os.path.join(outdir, "pmsan.md")
    if not os.path.exists(path):
        return
    w("## The persistence checker pmsan\n")
    w("From the last `bench/pmsan-bench.sh --out docs/bench` (`make bench-checkers`), "
      "written %s; raw rows `docs/bench/pmsan.csv` (timed cells), `docs/bench/pmsan-reorder.csv` "
      "(reordering on the maps), `docs/bench/pmsan-fences.csv` (reordering by mode); what the "
      "columns mean: `docs/CHECKER.md` (Cost).\n" %
      datetime.date.fromtimestamp(os.path.getmtime(path)).isoformat())
    w(open(path).read().strip() + "\n")


KV_FILES_MISSES = ("Where keratin misses, from the counts beside the cells: a commit of ten new 4 KiB values also commits new allocator runs (about seven such values fill a 32 KiB chunk), one sync each, 2.5 syncs per commit where the peers spend 1; and updates of 1 KiB and more log their bytes twice (lane and replica: 6.5 bytes dirtied per value byte at 4 KiB against SQLite's 4.0), where SQLite appends them once to its WAL, so SQLite's single sync writes less. Small values cost keratin one sync per commit and fewer dirtied bytes than either peer: the log carries only the changed bytes, and the homes go to storage in batches, once per half lane (the p99 column of docs/bench/kv-files.csv shows those batches).")


def kv_files_section(w, outdir):
    """Durable key-value commits on ordinary files against LMDB and SQLite, as
    bench/kv-files.py last wrote them (between its markers, which it rewrites alone)."""
    path = os.path.join(outdir, "kv-files.md")
    w("## Ordinary files: keratin against LMDB and SQLite\n")
    w("A pool on an ordinary file system runs in page-cache mode: a commit syncs its log lines "
      "in one round trip to the device, the homes follow in batches (docs/DESIGN.md). Here one commit inserts or updates 1 or 10 values of 64 B to 4 KiB under "
      "64-bit keys, through keratin's hash map or B-tree (libkeratin-map, values in objects "
      "of their own), LMDB (one write transaction, `MDB_INTEGERKEY`) and SQLite (WAL, "
      "`synchronous=FULL`, `INSERT OR REPLACE`), each durable at every commit "
      "(`make bench-files`, bench/kv-files.c).\n")
    w("<!-- kv-files begin -->")
    w(open(path).read().strip() if os.path.exists(path) else "Not measured yet: `make bench-files`.")
    w("<!-- kv-files end -->\n")
    w("%s\n" % KV_FILES_MISSES)


def hmap_section(w, outdir):
    path = os.path.join(outdir, "hmap.csv")
    if not os.path.exists(path):
        return
    rows = read_rows(path)
    g, med_col = grouped(rows, lambda r: (r["library"], r["config"], r["workload"], r["param"],
                                          int(r["entries"])))
    med = lambda key, col="ops_per_s": med_col(key, col)

    rounds = max(int(r["round"]) for r in rows) + 1
    sizes = sorted({k[4] for k in g})
    w("## Single-trip hash map\n")
    w("`bench/hmap-bench` (`kr_hmap`, 8-byte keys, the value filling the entry) against the same "
      "map committing the classic way (payload, fence, marks, fence: `KR_HMAP_TWO_FENCES`), "
      "and, at the same key counts, keratin's transactional hashmap (libkeratin-map, full "
      "protection) and PMDK's hashmap_tx example, 8-byte keys and values. Phases: insert "
      "every key, update every key (random order), look every key up, delete every key. "
      "Median of %d round%s; thousand operations per second. Map files above %d GiB are "
      "skipped (tmpfs).\n" % (rounds, "" if rounds == 1 else "s", HMAP_MAX_FILE >> 30))
    big = max(sizes)
    for n in sizes:
        lines = [l for l in HMAP_LINES if ("stps", "one", "insert", str(l), n) in g]
        if not lines:
            continue
        w("**%d entries.** One fence over two fences (the single-trip gain), by entry size:\n" % n)
        w("| op | " + " | ".join("%d line%s: 1 / 2 fences" % (l, "" if l == 1 else "s") for l in lines) + " |")
        w("|---|" + "---:|" * len(lines))
        for op in ("insert", "update", "lookup", "delete"):
            cells = []
            for l in lines:
                a, b = med(("stps", "one", op, str(l), n)), med(("stps", "two", op, str(l), n))
                cells.append("%.0f / %.0f (%+.0f%%)" % (a / 1e3, b / 1e3, (a / b - 1) * 100) if a and b else "-")
            w("| %s | %s |" % (op, " | ".join(cells)))
        w("")
    w("Against the transactional maps (single-trip map with 1-line entries; ratios: the "
      "single-trip map over each):\n")
    w("| entries | op | single-trip | keratin hashmap (full) | PMDK hashmap_tx | over keratin | over PMDK |")
    w("|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for op, kop in (("insert", "insert"), ("delete", "remove"), ("lookup", "lookup")):
            a = med(("stps", "one", op, "1", n))
            k = med(("keratin", "full", kop, "hashmap", n))
            p = med(("pmdk", "plain", kop, "hashmap", n))
            f = lambda x: "%.0f" % (x / 1e3) if x else "-"
            r = lambda x: "%.2f" % (a / x) if a and x else "-"
            w("| %d | %s | %s | %s | %s | %s | %s |" % (n, op, f(a), f(k), f(p), r(k), r(p)))
    w("")
    vn = max((k[4] for k in g if k[1] in ("one-2t", "one-prot")), default=None)
    vlines = [l for l in HMAP_VARIANT_LINES if ("stps", "one-2t", "insert", str(l), vn) in g]
    if vn and vlines:
        w("**Two threads** (`--threads 2`: each phase's keys split in two runs done at once; "
          "2 vCPUs), %d entries: thousand operations per second with 1 / 2 threads, and "
          "the speedup:\n" % vn)
        w("| op | " + " | ".join("%d line%s, one fence" % (l, "" if l == 1 else "s") for l in vlines)
          + " | " + " | ".join("%d line%s, two fences" % (l, "" if l == 1 else "s") for l in vlines) + " |")
        w("|---|" + "---:|" * (2 * len(vlines)))
        for op in ("insert", "update", "lookup", "delete"):
            cells = []
            for mode in ("one", "two"):
                for l in vlines:
                    a, b = med(("stps", mode, op, str(l), vn)), med(("stps", mode + "-2t", op, str(l), vn))
                    cells.append("%.0f / %.0f (%.2fx)" % (a / 1e3, b / 1e3, b / a) if a and b else "-")
            w("| %s | %s |" % (op, " | ".join(cells)))
        w("")
        w("**Protected** (`KR_HMAP_PROTECT`: the map's pages under a lazily protected region, "
          "1 s period, sealing, 16 MiB/s scrub), %d entries: thousand operations per second "
          "unprotected / protected, one thread; and protected with two threads:\n" % vn)
        w("| op | " + " | ".join("%d line%s" % (l, "" if l == 1 else "s") for l in vlines) +
          " | " + " | ".join("%d line%s, 2 threads" % (l, "" if l == 1 else "s") for l in vlines) + " |")
        w("|---|" + "---:|" * (2 * len(vlines)))
        for op in ("insert", "update", "lookup", "delete"):
            cells = []
            for l in vlines:
                a, b = med(("stps", "one", op, str(l), vn)), med(("stps", "one-prot", op, str(l), vn))
                cells.append("%.0f / %.0f (%.2f)" % (a / 1e3, b / 1e3, b / a) if a and b else "-")
            for l in vlines:
                b = med(("stps", "one-prot-2t", op, str(l), vn))
                cells.append("%.0f" % (b / 1e3) if b else "-")
            w("| %s | %s |" % (op, " | ".join(cells)))
        w("")
        w("Recovery of a protected map (region attach, every page verified, then the log scan), "
          "seconds per GiB: %s (unprotected: %s).\n" % (
              ", ".join("%d line%s %.2f" % (l, "" if l == 1 else "s",
                                            med(("stps", "one-prot", "update", str(l), vn), "recovery_s_per_gib"))
                        for l in vlines),
              ", ".join("%.2f" % med(("stps", "one", "update", str(l), vn), "recovery_s_per_gib")
                        for l in vlines)))
    w("Fences per update, as keratin's counters count them: single-trip %s, two fences %s, "
      "keratin hashmap insert %s. Recovery (open of a full map, index rebuilt by a scan), "
      "seconds per GiB of map file at %d entries: %s.\n" % (
          "/".join("%.2f" % med(("stps", "one", "insert", "1", n), "fences_per_op") for n in sizes[:1]),
          "/".join("%.2f" % med(("stps", "two", "insert", "1", n), "fences_per_op") for n in sizes[:1]),
          "%.2f" % (med(("keratin", "full", "insert", "hashmap", big), "fences_per_op") or 0),
          big, ", ".join("%d line%s %.2f" % (l, "" if l == 1 else "s",
                                               med(("stps", "one", "update", str(l), big),
                                                   "recovery_s_per_gib"))
                         for l in HMAP_LINES if ("stps", "one", "update", str(l), big) in g)))


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=columns + ["round"])
        wr.writeheader()
        wr.writerows(rows)


def write_region_csvs(outdir, rows, first):
    write_csv(os.path.join(outdir, "regions.csv"), REGION_COLUMNS, rows)
    with open(os.path.join(outdir, "firststore.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=["kind", "ns_per_page"])
        wr.writeheader()
        wr.writerows(first)


def driver_exes(args):
    exes = {"keratin": os.path.join(args.build, "bench", "keratin-bench"),
            "pmdk": os.path.join(args.build, "pmdk", "pmdk-bench")}
    for lib, exe in exes.items():
        if not os.access(exe, os.X_OK):
            sys.exit("run.py: %s not built (%s); run `make bench`" % (lib, exe))
    return exes


OBJECTS_RUN_KEYS = ("runs", "ops", "sizes", "goals_command", "load")


def measure_objects(args):
    """--objects-only: the single-object rounds and the counting runs, then the goals. With
    --report-only, the goals again from the rows and settings a measuring run saved."""
    saved = os.path.join(args.out, "objects-run.json")
    if args.report_only:
        with open(saved) as f:
            for k, v in json.load(f).items():
                setattr(args, k, v)
        rows = read_rows(os.path.join(args.out, "objects.csv"))
        count_rows = read_rows(os.path.join(args.out, "objects-counts.csv"))
    else:
        exes = driver_exes(args)
        rows = measure(args, exes)
        count_rows = measure_counts(args, exes)
    summ = summarize(rows)
    lines = goals_section(args, summ, summarize(count_rows))
    print("\n".join(lines[1:-2]))
    if args.no_report:
        return
    os.makedirs(args.out, exist_ok=True)
    if not args.report_only:
        write_csv(os.path.join(args.out, "objects.csv"), COLUMNS, rows)
        write_csv(os.path.join(args.out, "objects-counts.csv"), COLUMNS, count_rows)
        with open(saved, "w") as f:
            json.dump({k: getattr(args, k) for k in OBJECTS_RUN_KEYS}, f)
    path = os.path.join(args.out, "..", "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else ""
    a, b = text.find(GOALS_BEGIN), text.find(GOALS_END)
    pngs = latency_plots(args.out, summ, "goals-") if shutil.which("gnuplot") else []
    section = "\n".join(lines[:-2] + ["![%s](%s)\n" % (p, p) for p in pngs] + lines[-2:-1])
    if a >= 0 and b > a:
        text = text[:a] + section + text[b + len(GOALS_END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    a, b = text.find(MISSES_BEGIN), text.find(MISSES_END)
    if a >= 0 and b > a:
        misses = "\n".join(goal_misses(summ, args.sizes, args.goals_command)[:-1])
        text = text[:a] + misses + text[b + len(MISSES_END):]
    with open(path, "w") as f:
        f.write(text)
    print("run.py: goals written to %s" % os.path.normpath(path))


def write_report(args, rows):
    summ = summarize(rows)
    counts_path = os.path.join(args.out, "counts.csv")
    args.counts = summarize(read_rows(counts_path)) if os.path.exists(counts_path) else {}
    args.sizes = getattr(args, "sizes", SIZES)
    args.goals_command = getattr(args, "goals_command", "make bench")
    plots = plot(args.out, summ, args)
    notes_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report-notes.md")
    notes = open(notes_path).read() if os.path.exists(notes_path) else ""
    report(args, summ, args.out, plots, notes)
    print("\n".join(goals_section(args, summ, args.counts)[1:-2]))
    print("run.py: %d rows; wrote %s and %d plots in %s" %
          (len(rows), os.path.normpath(os.path.join(args.out, "..", "BENCHMARKS.md")), len(plots),
           args.out))


if __name__ == "__main__":
    main()
