#!/usr/bin/env bash
# bench/pmsan-bench.sh [--keys N] [--rounds R] [--fences F] [--out DIR] [BUILD] - what the
# persistence checker pmsan costs: each map benchmark built twice with clang-14, plain and through
# keratin-pmsan-cc (pmsan without crash images), and run in alternation; the slowdown is the
# instrumented run's time over the plain one's, per structure and operation. Then the same
# for 1 and 2 threads (mt_overwrite of 64-byte objects, N transactions in all), and the price
# of crash images (reordering) per fence and per image.
#
#   PMDK    PMDK's example maps (ctree rbtree btree skiplist rtree hashmap) and the
#           pmdk-bench driver, built by bench/pmdk-build.sh from where libpmemobj-dev
#           installs them (CC=clang-14, then CC=keratin-pmsan-cc)
#   keratin keratin's map library (maps/) and keratin-bench, linked with the plain
#           libkeratin.a of BUILD: the application is checked, the library is not (keratin
#           changes pools only through its own API, so its stores are the library's)
#
# Each (driver, structure) runs R rounds, plain and instrumented back to back; a cell is
# the median over rounds of the run's total seconds for N keys. Prints a Markdown table
# and writes the raw rows to BUILD/pmsan-bench/results.csv. BUILD defaults to ./build and
# must hold a configured build with LLVM 14 (bin/keratin-pmsan-cc, libkeratin.a).
#
# Reordering: the maps' fences are inside libpmemobj or keratin, which pmsan does not see,
# so crash images are priced on bench/pmsan-fences.c (F fences of its own, 2 per logged
# record, 1 and 2 threads), run with PMSAN_OPTIONS=check=/bin/true:reorder=single,
# accumulative, random, and without a check (none): (time - time without) / fences and
# / images, the counts from pmsan's summary line. Raw rows: BUILD/pmsan-bench/reorder.csv.
#
# With --out DIR (make bench: docs/bench) the tables also go to DIR/pmsan.md, which
# bench/run.py puts into docs/BENCHMARKS.md, and the raw rows to DIR/pmsan.csv and
# DIR/pmsan-reorder.csv.
set -euo pipefail

keys=100000
rounds=3
fences=200
docs=
while [[ $# -gt 0 ]]; do
	case $1 in
	--keys) keys=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--fences) fences=$2; shift 2 ;;
	--out) docs=$(realpath "$2"); shift 2 ;;
	-h | --help) sed -n '2,34p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
build=$(realpath "${1:-$repo/build}")
pmsan_cc=$build/bin/keratin-pmsan-cc
out=$build/pmsan-bench
[[ -x $pmsan_cc ]] || { echo "pmsan-bench: $pmsan_cc missing (needs LLVM 14)" >&2; exit 1; }
[[ -f $build/libkeratin.a ]] || { echo "pmsan-bench: $build/libkeratin.a missing" >&2; exit 1; }
mkdir -p "$out"
export PMEM_IS_PMEM_FORCE=1
export PMEMOBJ_CONF="prefault.at_create=1;prefault.at_open=1"
export PMSAN_OPTIONS=

echo "pmsan-bench: building ..." >&2
CC=clang-14 "$here/pmdk-build.sh" "$out/pmdk-plain" >/dev/null
CC=$pmsan_cc "$here/pmdk-build.sh" "$out/pmdk-pmsan" >/dev/null
for v in plain pmsan; do
	cc=clang-14
	[[ $v == pmsan ]] && cc=$pmsan_cc
	"$cc" -O2 -g -std=gnu11 -pthread -I"$repo/include" -I"$repo/tools" -I"$repo/maps" \
		-o "$out/keratin-bench-$v" "$here/keratin-bench.c" "$repo"/maps/*.c "$repo/tools/util.c" \
		"$build/libkeratin.a" -lisal -lm
	"$cc" -O2 -g -pthread -o "$out/pmsan-fences-$v" "$here/pmsan-fences.c" -lpmem
done

csv=$out/results.csv
echo "driver,variant,struct,op,round,seconds" >"$csv"
# run DRIVER VARIANT STRUCT ROUND: one run, its three rows (insert, lookup, remove); a
# STRUCT of mt1 or mt2 is mt_overwrite of 64-byte objects with 1 or 2 threads, one row.
run() {
	local bin args=(--workload map --param "$3" --ops "$keys")
	[[ $3 == mt* ]] && args=(--workload mt_overwrite --param 64 --threads "${3#mt}" --ops "$keys")
	bin=$out/keratin-bench-$2
	[[ $1 == PMDK ]] && bin=$out/pmdk-$2/pmdk-bench
	"$bin" "${args[@]}" 2>/dev/null |
		awk -F, -v d="$1" -v v="$2" -v s="$3" -v r="$4" \
			'$3 ~ /^(insert|lookup|remove|mt_overwrite)$/ { print d "," v "," s "," $3 "," r "," $7 }' >>"$csv"
}
for r in $(seq "$rounds"); do
	for s in ctree rbtree btree skiplist rtree hashmap mt1 mt2; do
		for d in PMDK keratin; do
			# alternate which variant goes first
			if ((r % 2)); then run $d plain $s $r; run $d pmsan $s $r;
			else run $d pmsan $s $r; run $d plain $s $r; fi
		done
	done
	echo "pmsan-bench: round $r of $rounds done" >&2
done

# Reordering: pmsan-fences under each reorder mode, 1 and 2 threads.
rcsv=$out/reorder.csv
echo "threads,reorder,round,fences,images,seconds" >"$rcsv"
for r in $(seq "$rounds"); do
	for t in 1 2; do
		for mode in none single accumulative random; do
			opts="reorder=$mode:check=/bin/true"
			[[ $mode == none ]] && opts= # pmsan's default with a check is single
			line=$(PMSAN_OPTIONS=$opts \
				"$out/pmsan-fences-pmsan" /dev/shm/pmsan-bench-fences-$$ "$fences" "$t" 2>"$out/fences.err")
			images=$(sed -n 's/^pmsan: crash images: \([0-9]*\) checked at \([0-9]*\) fences.*/\1,\2/p' "$out/fences.err")
			echo "$t,$mode,$r,${line%%,*},${images%%,*},${line#*,}" >>"$rcsv"
		done
	done
	echo "pmsan-bench: reordering round $r of $rounds done" >&2
done

python3 - "$csv" "$keys" "$rounds" "$rcsv" <<'PY' | tee "$out/report.md"
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
t = defaultdict(list)
for r in rows:
    t[(r["driver"], r["struct"], r["op"], r["variant"])].append(float(r["seconds"]))
print(f"Slowdown with pmsan (instrumented time / plain time), {sys.argv[2]} keys, "
      f"median of {sys.argv[3]} rounds:\n")
print("| driver | structure | insert | lookup | remove |")
print("|---|---|---|---|---|")
ratios = defaultdict(list)
for d in ("PMDK", "keratin"):
    for s in ("ctree", "rbtree", "btree", "skiplist", "rtree", "hashmap"):
        cells = []
        for op in ("insert", "lookup", "remove"):
            p, i = t.get((d, s, op, "plain")), t.get((d, s, op, "pmsan"))
            if not p or not i:
                cells.append("n/a")
                continue
            x = statistics.median(i) / statistics.median(p)
            ratios[d].append(x)
            cells.append(f"{x:.2f}x")
        print(f"| {d} | {s} | " + " | ".join(cells) + " |")
print()
for d, xs in ratios.items():
    print(f"{d}: mean slowdown {statistics.mean(xs):.2f}x over {len(xs)} cells "
          f"(max {max(xs):.2f}x)")
allx = [x for xs in ratios.values() for x in xs]
print(f"all: mean slowdown {statistics.mean(allx):.2f}x over {len(allx)} cells")

print(f"\nThreads: mt_overwrite of 64-byte objects, {sys.argv[2]} transactions "
      f"in all, slowdown (median plain seconds):\n")
print("| driver | 1 thread | 2 threads |")
print("|---|---|---|")
for d in ("PMDK", "keratin"):
    cells = []
    for s in ("mt1", "mt2"):
        p, i = t.get((d, s, "mt_overwrite", "plain")), t.get((d, s, "mt_overwrite", "pmsan"))
        cells.append(f"{statistics.median(i) / statistics.median(p):.2f}x "
                     f"({statistics.median(p):.3f} s)" if p and i else "n/a")
    print(f"| {d} | " + " | ".join(cells) + " |")

rr = defaultdict(list)
for r in csv.DictReader(open(sys.argv[4])):
    if r["seconds"] and r["fences"]:
        rr[(r["threads"], r["reorder"])].append(r)
print("\nReordering (crash images, check=/bin/true) on pmsan-fences, median of rounds; extra "
      "time over the run without crash images (none) per fence and per image:\n")
print("| threads | reorder | fences | images | seconds | ms per fence | ms per image |")
print("|---|---|---|---|---|---|---|")
for th in ("1", "2"):
    base = rr.get((th, "none"))
    if not base:
        continue
    b = statistics.median(float(r["seconds"]) for r in base)
    for mode in ("none", "single", "accumulative", "random"):
        rows_ = rr.get((th, mode))
        if not rows_:
            continue
        s = statistics.median(float(r["seconds"]) for r in rows_)
        f = int(rows_[0]["fences"])
        im = int(rows_[0]["images"] or 0)
        per_f = f"{(s - b) * 1e3 / f:.2f}" if mode != "none" else "-"
        per_i = f"{(s - b) * 1e3 / im:.2f}" if mode != "none" and im else "-"
        print(f"| {th} | {mode} | {f} | {im} | {s:.3f} | {per_f} | {per_i} |")
PY
if [[ -n $docs ]]; then
	mkdir -p "$docs"
	cp "$out/report.md" "$docs/pmsan.md"
	cp "$csv" "$docs/pmsan.csv"
	cp "$rcsv" "$docs/pmsan-reorder.csv"
fi
