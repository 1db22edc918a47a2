#!/usr/bin/env python3
"""kv-files.py - durable key-value commits on an ordinary file system: keratin in page-cache
mode against LMDB and SQLite (WAL), interleaved over rounds (bench/kv-files.c runs one
engine at a time).

Writes docs/bench/kv-files.csv (every row) and docs/bench/kv-files.md (the table), and puts
the table between the kv-files markers of docs/BENCHMARKS.md (run.py keeps it there when it
rewrites the report). --quick: one round of a few commits, checks that every engine printed
every cell, writes nothing (make check runs it).
"""
import argparse
import csv
import datetime
import io
import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import put_between_markers  # noqa: E402 (bench/run.py, beside this file)

ENGINES = ["keratin-hashmap", "keratin-btree", "lmdb", "sqlite"]
KERATIN = ["keratin-hashmap", "keratin-btree"]
PEERS = ["lmdb", "sqlite"]
NAMES = {"keratin-hashmap": "keratin hashmap", "keratin-btree": "keratin btree",
         "lmdb": "LMDB", "sqlite": "SQLite WAL"}
SIZES = [64, 256, 1024, 4096]
BATCHES = [1, 10]
PHASES = ["insert", "update"]
BEGIN, END = "<!-- kv-files begin -->", "<!-- kv-files end -->"


def run_one(exe, engine, size, batch, commits, where):
    cmd = [exe, "--engine", engine, "--size", str(size), "--batch", str(batch),
           "--commits", str(commits), "--dir", where, "--header"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("kv-files.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    if sorted(r["phase"] for r in rows) != PHASES:
        sys.exit("kv-files.py: %s printed %d rows, not one per phase" % (" ".join(cmd), len(rows)))
    return rows


def machine():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return "%s, %d CPUs; Linux %s" % (cpu, os.cpu_count() or 0, platform.release())


def table(rows, rounds):
    """Markdown lines: per cell, median over rounds of each engine's median commit latency,
    keratin's ratios to each peer with the goal (<= 1), syncs per commit and write
    amplification."""
    med = {}
    for key in {(r["engine"], int(r["size"]), int(r["batch"]), r["phase"]) for r in rows}:
        sel = [r for r in rows if (r["engine"], int(r["size"]), int(r["batch"]), r["phase"]) == key]
        med[key] = {c: statistics.median(float(r[c]) for r in sel)
                    for c in ("median_us", "p99_us", "syncs_per_commit", "dirtied_per_byte")}
    L = []
    L.append("| value | keys per commit | phase | " + " | ".join(NAMES[e] for e in ENGINES) +
             " | " + " | ".join("%s / %s" % (NAMES[k].split()[1], NAMES[p].split()[0])
                               for k in KERATIN for p in PEERS) +
             " | syncs per commit | bytes dirtied per value byte |")
    L.append("|" + "---:|" * 3 + "---:|" * len(ENGINES) + "---:|" * 4 + "---|---|")
    met = total = 0
    for size in SIZES:
        for batch in BATCHES:
            for ph in PHASES:
                cells = [med.get((e, size, batch, ph)) for e in ENGINES]
                if any(c is None for c in cells):
                    continue
                lat = {e: med[(e, size, batch, ph)]["median_us"] for e in ENGINES}
                ratios = []
                for k in KERATIN:
                    for p in PEERS:
                        r = lat[k] / lat[p]
                        total += 1
                        met += r <= 1.0
                        ratios.append("%.2f %s" % (r, "✓" if r <= 1.0 else "✗"))
                L.append("| %d B | %d | %s | %s | %s | %s | %s |" % (
                    size, batch, ph, " | ".join("%.0f" % lat[e] for e in ENGINES), " | ".join(ratios),
                    " / ".join("%.2f" % med[(e, size, batch, ph)]["syncs_per_commit"] for e in ENGINES),
                    " / ".join("%.1f" % med[(e, size, batch, ph)]["dirtied_per_byte"] for e in ENGINES)))
    return L, met, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--commits", type=int, default=500, help="commits per phase (default 500)")
    ap.add_argument("--dir", default="/var/tmp", help="an ordinary file system (default /var/tmp)")
    ap.add_argument("--out", default="docs/bench")
    ap.add_argument("--quick", action="store_true", help="smoke run: checks the cells, writes nothing")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "kv-files")
    if not os.path.exists(exe):
        print("SKIP: %s is not built (liblmdb-dev and libsqlite3-dev: scripts/deps.sh)" % exe)
        sys.exit(77)
    if args.quick:
        args.rounds, args.commits = 1, 10
    sizes = [64, 4096] if args.quick else SIZES
    rows = []
    for rnd in range(args.rounds):
        for size in sizes:
            for batch in BATCHES:
                # The engines in a rotated order each round: none always runs first.
                k = rnd % len(ENGINES)
                for e in ENGINES[k:] + ENGINES[:k]:
                    for r in run_one(exe, e, size, batch, args.commits, args.dir):
                        r["round"] = rnd
                        rows.append(r)
    lines, met, total = table(rows, args.rounds)
    if args.quick:
        want = len(sizes) * len(BATCHES) * len(PHASES)
        if len(lines) - 2 != want:
            sys.exit("kv-files.py: %d of %d cells complete" % (len(lines) - 2, want))
        print("kv-files.py: all %d cells measured for %d engines (quick: nothing written)" %
              (want, len(ENGINES)))
        return
    fs = rows[0]["fs"]
    cmd = "bench/kv-files.py --rounds %d --commits %d --dir %s" % (args.rounds, args.commits, args.dir)
    md = ["Median latency of a durable commit in microseconds (the median over %d rounds of "
          "each run's median of %d commits per phase); keratin's ratio to each peer with the "
          "goal (≤ 1.0) ✓ met or ✗ missed: %d of %d cells met. Command: `%s` (%s). Machine: %s; "
          "files on %s (%s). Every engine durable at each commit, pinned to CPU 0, in a fresh "
          "directory; keratin full protection, page-cache mode. Syncs per commit count the "
          "fsync, fdatasync and msync calls of each engine (in the order of the columns); LMDB "
          "also writes its meta page through a descriptor opened O_DSYNC, a second round trip "
          "per commit that count does not see. Bytes dirtied per value byte: "
          "`/proc/self/io` write_bytes (page-granular) over the value bytes committed.\n" % (
              args.rounds, args.commits, met, total, cmd, datetime.date.today().isoformat(),
              machine(), fs, args.dir)] + lines
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "kv-files.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "kv-files.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    report = os.path.join(args.out, "..", "BENCHMARKS.md")
    put_between_markers(report, BEGIN, END, "\n".join(md), "kv-files.py")
    print("kv-files.py: %d of %d goal cells met; table in %s and %s" % (
        met, total, os.path.join(args.out, "kv-files.md"), report))


if __name__ == "__main__":
    main()
