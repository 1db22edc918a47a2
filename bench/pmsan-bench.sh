#!/usr/bin/env bash
# bench/pmsan-bench.sh [--keys N] [--rounds R] [BUILD] - what the persistence checker pmsan
# costs: each map benchmark built twice with clang-14, plain and through keratin-pmsan-cc
# (pmsan without crash images), and run in alternation; the slowdown is the instrumented
# run's time over the plain one's, per structure and operation.
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
set -euo pipefail

keys=100000
rounds=3
while [[ $# -gt 0 ]]; do
	case $1 in
	--keys) keys=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	-h | --help) sed -n '2,18p' "$0"; exit 0 ;;
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
done

csv=$out/results.csv
echo "driver,variant,struct,op,round,seconds" >"$csv"
# run DRIVER VARIANT STRUCT ROUND: one run, its three rows (insert, lookup, remove).
run() {
	local bin
	if [[ $1 == PMDK ]]; then
		bin=$out/pmdk-$2/pmdk-bench
		"$bin" --workload map --param "$3" --ops "$keys" 2>/dev/null
	else
		"$out/keratin-bench-$2" --workload map --param "$3" --ops "$keys" 2>/dev/null
	fi | awk -F, -v d="$1" -v v="$2" -v s="$3" -v r="$4" \
		'$3 ~ /^(insert|lookup|remove)$/ { print d "," v "," s "," $3 "," r "," $7 }' >>"$csv"
}
for r in $(seq "$rounds"); do
	for s in ctree rbtree btree skiplist rtree hashmap; do
		for d in PMDK keratin; do
			# alternate which variant goes first
			if ((r % 2)); then run $d plain $s $r; run $d pmsan $s $r;
			else run $d pmsan $s $r; run $d plain $s $r; fi
		done
	done
	echo "pmsan-bench: round $r of $rounds done" >&2
done

python3 - "$csv" "$keys" "$rounds" <<'PY'
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
PY
