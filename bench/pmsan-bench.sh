#!/usr/bin/env bash
# bench/pmsan-bench.sh [--keys N] [--rounds R] [--reorder-keys K] [--reorder-rounds Q]
#                      [--fences F] [--cpus LIST] [--out DIR] [BUILD]
# What the persistence checker pmsan costs on the map benchmarks: each map driver built
# twice with clang-14, plain and through keratin-pmsan-cc, and the two run back to back
# (the order alternating from round to round); the slowdown of a cell is the median over R
# rounds of the instrumented run's seconds over the median of the plain run's.
#
#   PMDK    PMDK's example maps (ctree rbtree btree skiplist rtree, and the hash maps
#           hashmap_tx hashmap_atomic hashmap_rp) and the pmdk-bench driver, built by
#           bench/pmdk-build.sh from where libpmemobj-dev installs them
#   keratin keratin's map library (maps/) and keratin-bench, linked with the plain
#           libkeratin.a of BUILD: the application is checked, the library is not (keratin
#           changes pools only through its own API, so its stores are the library's)
#
# Cells: insert, lookup and remove of N keys (default 100000), each phase timed by the
# driver, with 1 and with 2 threads. Two threads: each inserts, looks up and removes its
# own N / 2 keys in a map of its own, both maps in one pool (the examples and keratin's maps
# take no locks: a map is one thread's); hashmap_rp keeps its state in a process-global
# array and has no 2-thread cell. One-thread runs are pinned (taskset) to the first CPU of
# LIST, two-thread runs to the first two (LIST: the CPUs this script may use). Averages are
# geometric means of the cells' slowdowns. Raw rows: BUILD/pmsan-bench/results.csv.
#
# Reordering on the maps: each map again with K keys (default 100) in an 8 MiB pool, built
# through keratin-pmsan-cc, run without crash images and with
# PMSAN_OPTIONS=reorder=single:check=/bin/true, Q rounds (default 3), 1 and 2 threads.
# Slowdown: the median wall time of the whole run (pool creation to exit: the span pmsan's
# fence count covers) with images over that without; cost per fence = (wall time with
# images - without) / the fences at which pmsan cut images (its summary line: "crash
# images: I checked at F fences"), and per image.
# pmsan sees only fences in instrumented code: libpmemobj's own (transaction commit) and
# keratin's are not, so a transactional map reports 0 fences. Raw rows:
# BUILD/pmsan-bench/reorder.csv. The same price on a fence-bound program of our own,
# bench/pmsan-fences.c (F fences, default 200, two per logged record), in each reorder mode
# (single, accumulative, random; none without a check): BUILD/pmsan-bench/fences.csv.
#
# PMDK runs read tests/check/pmdk_examples.supp (hashmap_atomic's remove reads the entry it
# has just freed: a real bug of the example, suppressed, counted in pmsan's summary). A run
# that fails, or that pmsan reports on, stops the script with its stderr.
#
# Prints Markdown tables with the machine's load average at the start and the end, and
# writes them to BUILD/pmsan-bench/report.md. With --out DIR (make bench: docs/bench) also
# to DIR/pmsan.md, which bench/run.py puts into docs/BENCHMARKS.md, and the raw rows to
# DIR/pmsan.csv, DIR/pmsan-reorder.csv and DIR/pmsan-fences.csv. BUILD defaults to ./build
# and must hold a configured build with LLVM 14 (bin/keratin-pmsan-cc, libkeratin.a).
set -euo pipefail

keys=100000
rounds=5
rkeys=100
rrounds=3
fences=200
cpus=$(taskset -pc $$ | sed 's/.*: //')
docs=
while [[ $# -gt 0 ]]; do
	case $1 in
	--keys) keys=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--reorder-keys) rkeys=$2; shift 2 ;;
	--reorder-rounds) rrounds=$2; shift 2 ;;
	--fences) fences=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--out) docs=$(realpath "$2"); shift 2 ;;
	-h | --help) sed -n '2,45p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
build=$(realpath "${1:-$repo/build}")
pmsan_cc=$build/bin/keratin-pmsan-cc
out=$build/pmsan-bench
supp=$repo/tests/check/pmdk_examples.supp
[[ -x $pmsan_cc ]] || { echo "pmsan-bench: $pmsan_cc missing (needs LLVM 14)" >&2; exit 1; }
[[ -f $build/libkeratin.a ]] || { echo "pmsan-bench: $build/libkeratin.a missing" >&2; exit 1; }
mkdir -p "$out"
export PMEM_IS_PMEM_FORCE=1
export PMEMOBJ_CONF="prefault.at_create=1;prefault.at_open=1"

# The CPUs: "0-1" or "0,1" or "3,5-7" into a list; one-thread runs on the first.
IFS=, read -ra parts <<<"$cpus"
cpu_list=()
for p in "${parts[@]}"; do
	if [[ $p == *-* ]]; then cpu_list+=($(seq "${p%-*}" "${p#*-}")); else cpu_list+=("$p"); fi
done
pin1=${cpu_list[0]}
pin2=${cpu_list[0]},${cpu_list[1]:-${cpu_list[0]}}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

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

# Every cell's "DRIVER STRUCT THREADS", in the order they run.
cells=()
for d in PMDK keratin; do
	maps=(ctree rbtree btree skiplist rtree hashmap)
	[[ $d == PMDK ]] && maps+=(hashmap_atomic hashmap_rp)
	for s in "${maps[@]}"; do
		for t in 1 2; do
			[[ $s == hashmap_rp && $t == 2 ]] || cells+=("$d $s $t")
		done
	done
done

# drive DRIVER VARIANT STRUCT THREADS KEYS [ARGS...]: one run of the map workload, pinned,
# with PMSAN_OPTIONS as the caller set it; its CSV rows on stdout, its stderr in
# $out/run.err. Stops the script if the run fails or pmsan reports.
drive() {
	local d=$1 v=$2 s=$3 t=$4 n=$5 bin pin=$pin1
	shift 5
	bin=$out/keratin-bench-$v
	[[ $d == PMDK ]] && bin=$out/pmdk-$v/pmdk-bench
	((t > 1)) && pin=$pin2
	if ! taskset -c "$pin" "$bin" --workload map --param "$s" --threads "$t" --ops "$n" "$@" \
		2>"$out/run.err"; then
		echo "pmsan-bench: $d $v $s, $t threads, $n keys failed:" >&2
		cat "$out/run.err" >&2
		exit 1
	fi
}

csv=$out/results.csv
echo "driver,variant,struct,threads,op,round,seconds" >"$csv"
# run DRIVER VARIANT STRUCT THREADS ROUND: one timed run, its three rows (insert, lookup,
# remove) into results.csv.
run() {
	local opts=
	[[ $1 == PMDK ]] && opts=suppressions=$supp
	PMSAN_OPTIONS=$opts drive "$1" "$2" "$3" "$4" "$keys" |
		awk -F, -v d="$1" -v v="$2" -v s="$3" -v t="$4" -v r="$5" \
			'$3 ~ /^(insert|lookup|remove)$/ { print d "," v "," s "," t "," $3 "," r "," $7 }' >>"$csv"
}
for r in $(seq "$rounds"); do
	for c in "${cells[@]}"; do
		read -r d s t <<<"$c"
		if ((r % 2)); then run $d plain $s $t $r; run $d pmsan $s $t $r;
		else run $d pmsan $s $t $r; run $d plain $s $t $r; fi
	done
	echo "pmsan-bench: round $r of $rounds done" >&2
done

# Reordering on the maps: the instrumented build without and with crash images, small.
rcsv=$out/reorder.csv
echo "driver,struct,threads,reorder,round,wall_seconds,phase_seconds,fences,images" >"$rcsv"
# reorder_run DRIVER STRUCT THREADS MODE ROUND: MODE none (no check) or single.
reorder_run() {
	local opts= t0 rows wall images
	[[ $1 == PMDK ]] && opts=suppressions=$supp
	[[ $4 == single ]] && opts+="${opts:+:}reorder=single:check=/bin/true"
	t0=$EPOCHREALTIME
	rows=$(PMSAN_OPTIONS=$opts drive "$1" pmsan "$2" "$3" "$rkeys" --pool-mib 8)
	wall=$(echo "$EPOCHREALTIME - $t0" | bc)
	images=$(sed -n 's/^pmsan: crash images: \([0-9]*\) checked at \([0-9]*\) fences.*/\2,\1/p' "$out/run.err")
	[[ $4 == none ]] && images=0,0
	echo "$1,$2,$3,$4,$5,$wall,$(awk -F, '{ s += $7 } END { printf "%.6f", s }' <<<"$rows"),$images" >>"$rcsv"
}
for r in $(seq "$rrounds"); do
	for c in "${cells[@]}"; do
		read -r d s t <<<"$c"
		reorder_run $d $s $t none $r
		reorder_run $d $s $t single $r
	done
	echo "pmsan-bench: map reordering round $r of $rrounds done" >&2
done

# Reordering on pmsan-fences under each reorder mode, 1 and 2 threads.
fcsv=$out/fences.csv
echo "threads,reorder,round,fences,images,seconds" >"$fcsv"
for r in $(seq "$rrounds"); do
	for t in 1 2; do
		pin=$pin1
		((t > 1)) && pin=$pin2
		for mode in none single accumulative random; do
			opts="reorder=$mode:check=/bin/true"
			[[ $mode == none ]] && opts= # pmsan's default with a check is single
			line=$(PMSAN_OPTIONS=$opts taskset -c "$pin" \
				"$out/pmsan-fences-pmsan" /dev/shm/pmsan-bench-fences-$$ "$fences" "$t" 2>"$out/fences.err")
			images=$(sed -n 's/^pmsan: crash images: \([0-9]*\) checked at \([0-9]*\) fences.*/\1,\2/p' "$out/fences.err")
			echo "$t,$mode,$r,${line%%,*},${images%%,*},${line#*,}" >>"$fcsv"
		done
	done
	echo "pmsan-bench: pmsan-fences round $r of $rrounds done" >&2
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$csv" "$keys" "$rounds" "$rcsv" "$rkeys" "$rrounds" "$fcsv" "$load_start" "$load_end" \
	"$(nproc)" "$pin1" "$pin2" <<'PY' | tee "$out/report.md"
import csv, math, statistics, sys
from collections import defaultdict
(res, keys, rounds, rcsv, rkeys, rrounds, fcsv, load0, load1, ncpu, pin1, pin2) = sys.argv[1:]
med = statistics.median
def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
MAPS = {"PMDK": ["ctree", "rbtree", "btree", "skiplist", "rtree", "hashmap", "hashmap_atomic",
                 "hashmap_rp"],
        "keratin": ["ctree", "rbtree", "btree", "skiplist", "rtree", "hashmap"]}
def label(d, s):
    return "hashmap_tx" if d == "PMDK" and s == "hashmap" else s
OPS = ("insert", "lookup", "remove")

t = defaultdict(list)
for r in csv.DictReader(open(res)):
    t[(r["driver"], r["struct"], r["threads"], r["op"], r["variant"])].append(float(r["seconds"]))
print(f"Machine: {ncpu} CPUs, load average (1, 5, 15 min) {load0} at the start, {load1} at "
      f"the end; 1-thread runs pinned to CPU {pin1}, 2-thread runs to CPUs {pin2}.\n")
print(f"Slowdown with pmsan without reordering (instrumented time / plain time), {keys} keys, "
      f"median of {rounds} rounds per cell; 2 threads: one map per thread in one pool, "
      f"{int(keys) // 2} keys each:\n")
print("| driver | structure | insert, 1 thread | lookup, 1 | remove, 1 | insert, 2 threads "
      "| lookup, 2 | remove, 2 |")
print("|---|---|---|---|---|---|---|---|")
ratios = defaultdict(list)  # (driver, threads) -> cell slowdowns
for d, maps in MAPS.items():
    for s in maps:
        cells = []
        for th in ("1", "2"):
            for op in OPS:
                p, i = t.get((d, s, th, op, "plain")), t.get((d, s, th, op, "pmsan"))
                if not p or not i:
                    cells.append("n/a")
                    continue
                x = med(i) / med(p)
                ratios[(d, th)].append(x)
                cells.append(f"{x:.2f}x")
        print(f"| {d} | {label(d, s)} | " + " | ".join(cells) + " |")
print()
print("Geometric mean of the cells' slowdowns:\n")
print("| driver | 1 thread | 2 threads | both |")
print("|---|---|---|---|")
for d in MAPS:
    a, b = ratios[(d, "1")], ratios[(d, "2")]
    print(f"| {d} | {gmean(a):.2f}x ({len(a)} cells, max {max(a):.2f}x) | "
          f"{gmean(b):.2f}x ({len(b)} cells, max {max(b):.2f}x) | {gmean(a + b):.2f}x |")
allx = [x for xs in ratios.values() for x in xs]
one = ratios[("PMDK", "1")] + ratios[("keratin", "1")]
two = ratios[("PMDK", "2")] + ratios[("keratin", "2")]
print(f"| all | {gmean(one):.2f}x | {gmean(two):.2f}x | {gmean(allx):.2f}x |")
print(f"\nAverage slowdown without reordering: {gmean(allx):.2f}x (geometric mean of "
      f"{len(allx)} cells; arithmetic mean {statistics.mean(allx):.2f}x, median "
      f"{med(allx):.2f}x, range {min(allx):.2f}x to {max(allx):.2f}x). Goal <= 2x: "
      f"{'met' if gmean(allx) <= 2 else 'not met'}.")

rr = defaultdict(list)
for r in csv.DictReader(open(rcsv)):
    rr[(r["driver"], r["struct"], r["threads"], r["reorder"])].append(r)
print(f"\nReordering on the maps: the instrumented build with "
      f"`reorder=single:check=/bin/true` against the same without, {rkeys} keys in an 8 MiB "
      f"pool, median of {rrounds} rounds. Slowdown: the whole run's wall time (pool creation "
      f"to exit) with crash images over that without; fences: those pmsan cut crash images at "
      f"(its summary); ms per fence and per image: (wall time with - without) / fences, "
      f"/ images:\n")
print("| driver | structure | threads | slowdown | fences | images | ms per fence | ms per image |")
print("|---|---|---|---|---|---|---|---|")
for d, maps in MAPS.items():
    for s in maps:
        for th in ("1", "2"):
            a, b = rr.get((d, s, th, "none")), rr.get((d, s, th, "single"))
            if not a or not b:
                continue
            wa = med(float(r["wall_seconds"]) for r in a)
            wb = med(float(r["wall_seconds"]) for r in b)
            f = int(med(int(r["fences"] or 0) for r in b))
            im = int(med(int(r["images"] or 0) for r in b))
            pf = f"{(wb - wa) * 1e3 / f:.2f}" if f else "-"
            pi = f"{(wb - wa) * 1e3 / im:.2f}" if im else "-"
            print(f"| {d} | {label(d, s)} | {th} | {wb / wa:.2f}x | {f} | {im} | {pf} | {pi} |")

fr = defaultdict(list)
for r in csv.DictReader(open(fcsv)):
    if r["seconds"] and r["fences"]:
        fr[(r["threads"], r["reorder"])].append(r)
print("\nReordering by mode on bench/pmsan-fences.c (every fence its own, 1 MiB file, "
      f"check=/bin/true), median of {rrounds} rounds; extra time over the run without crash "
      "images (none) per fence and per image:\n")
print("| threads | reorder | fences | images | seconds | ms per fence | ms per image |")
print("|---|---|---|---|---|---|---|")
for th in ("1", "2"):
    base = fr.get((th, "none"))
    if not base:
        continue
    b = med(float(r["seconds"]) for r in base)
    for mode in ("none", "single", "accumulative", "random"):
        rows_ = fr.get((th, mode))
        if not rows_:
            continue
        s = med(float(r["seconds"]) for r in rows_)
        f = int(rows_[0]["fences"])
        im = int(med(int(r["images"] or 0) for r in rows_))
        per_f = f"{(s - b) * 1e3 / f:.2f}" if mode != "none" else "-"
        per_i = f"{(s - b) * 1e3 / im:.2f}" if mode != "none" and im else "-"
        print(f"| {th} | {mode} | {f} | {im} | {s:.3f} | {per_f} | {per_i} |")
PY
if [[ -n $docs ]]; then
	mkdir -p "$docs"
	cp "$out/report.md" "$docs/pmsan.md"
	cp "$csv" "$docs/pmsan.csv"
	cp "$rcsv" "$docs/pmsan-reorder.csv"
	cp "$fcsv" "$docs/pmsan-fences.csv"
fi
