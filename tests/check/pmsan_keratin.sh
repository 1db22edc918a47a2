#!/bin/bash
# pmsan_keratin.sh CC SRC BUILD OUT - no false positive on keratin's own programs: the map
# benchmark driver (bench/keratin-bench.c with maps/) and the crash-and-recover demo
# (examples/demo.c with kvmap.c), compiled with keratin-pmsan-cc (CC) and linked with the
# plain libkeratin.a of BUILD (the application is checked, the library is not), run on
# small workloads; the map workloads again with keratin's debug mode on
# (KERATIN_DEBUG_PROTECT=1: kr_get points into a read-only view of the pool, which pmsan
# follows too), each removing every key it inserted. Any pmsan violation, or a
# failed run, fails the test.
set -u
cc=$1 src=$2 build=$3 out=$4
mkdir -p "$out"
tmp=$(mktemp -d /dev/shm/pmsan-keratin-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export PMSAN_OPTIONS="log_path=$tmp/log"
fail=0
lib=(-I"$src/include" -I"$src/tools" "$src/tools/util.c" "$build/libkeratin.a" -lisal -lm -pthread)

build() { # build NAME SOURCES...
	local name=$1
	shift
	if ! "$cc" -g -O1 -std=gnu11 -o "$out/$name" "$@" "${lib[@]}" 2>"$out/$name.log"; then
		echo "FAIL build $name: $(grep -m1 error "$out/$name.log")"
		fail=1
		return 1
	fi
}

run() { # run LABEL PROG ARGS...
	local label=$1 rc=0
	shift
	"$@" >"$tmp/out" 2>&1 || rc=$?
	local v
	v=$(cat "$tmp"/log.* 2>/dev/null | grep -c '^pmsan: rule')
	if [[ $rc -ne 0 || $v -ne 0 ]]; then
		echo "FAIL $label: exit $rc, $v violation(s)"
		cat "$tmp"/log.* 2>/dev/null | grep -v '^    #' | head -10 | sed 's/^/    /'
		tail -n 5 "$tmp/out" | sed 's/^/    out: /'
		fail=1
	else
		echo "ok   $label"
	fi
	rm -f "$tmp"/log.*
}

if build keratin-bench -I"$src/maps" "$src/bench/keratin-bench.c" "$src"/maps/*.c; then
	for m in ctree rbtree btree skiplist rtree hashmap; do
		run "keratin-bench map $m" "$out/keratin-bench" --workload map --param $m --ops 2000 \
			--pool-mib 64 --dir "$tmp"
		run "keratin-bench map $m (debug mode)" env KERATIN_DEBUG_PROTECT=1 \
			"$out/keratin-bench" --workload map --param $m --ops 2000 --pool-mib 64 --dir "$tmp"
	done
	run "keratin-bench overwrite" "$out/keratin-bench" --workload overwrite --param 256 \
		--ops 2000 --pool-mib 64 --dir "$tmp"
fi
if build keratin-demo -I"$src/examples" "$src/examples/demo.c" "$src/examples/kvmap.c"; then
	cd "$tmp" && run "keratin-demo" "$out/keratin-demo" --keys 2000 --seed 7
fi
exit $fail
