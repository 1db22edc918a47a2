#!/bin/bash
# faults.sh BUILD_DIR OUT_DIR [TRIALS] - a libpmemobj program's pool under faults.
#
# PMDK's mapcli example, compiled unmodified against keratin-pmemobj, fills a map (btree,
# rbtree, hashmap_tx: 400 random keys, a fixed seed) and prints it: that is the reference.
# Then, per trial, a copy of the pool gets one fault with `keratin inject` (a media error:
# a lost page, listed as a bad block; or a scribble: 1 to 64 random bytes no one reports),
# aimed inside one of the map's live objects (listed by the objects helper, picked by the
# trial number), and mapcli prints the map again. The program
# must print the reference (the open repaired the damage), or fail with a message and a
# nonzero exit. Never other keys. After a trial whose program ran, `keratin check` must
# find the pool sound: the repair was written back.
#
# Then: keratin check, repair and scrub on a program's pool; two lost pages in one page
# column (beyond repair: a clean error); a libpmemobj pool given by mistake (named as one).
#
# For contrast each scribble trial also runs with the open-time check off
# (KERATIN_PMEMOBJ_SCRUB=0), where the program reads the damage as libpmemobj's would:
# counted, not judged.
#
# Last line: "N passed, M failed". Exits 77 (SKIP) without the examples.
set -u
build=$1
out=$2
trials=${3:-12}
objects=$build/tests/kp_objects
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
ex=/usr/share/doc/libpmemobj-dev/examples
if [[ ! -d $ex/map ]]; then
	echo "SKIP: $ex is missing (libpmemobj-dev without its examples)"
	exit 77
fi
mkdir -p "$out"
tmp=$(mktemp -d /dev/shm/kp-faults-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export PMEM_IS_PMEM_FORCE=1
keratin=$build/tools/keratin

maps=(map/map.c map/map_ctree.c map/map_btree.c map/map_rbtree.c map/map_rtree.c
	map/map_skiplist.c map/map_hashmap_tx.c map/map_hashmap_atomic.c map/map_hashmap_rp.c
	tree_map/ctree_map.c tree_map/btree_map.c tree_map/rbtree_map.c tree_map/rtree_map.c
	list_map/skiplist_map.c hashmap/hashmap_tx.c hashmap/hashmap_atomic.c hashmap/hashmap_rp.c)
srcs=("$ex/map/mapcli.c")
for m in "${maps[@]}"; do srcs+=("$ex/$m"); done
if ! cc -w -O0 -pthread -I"$repo/include/keratin-pmemobj" -I"$repo/tests/check" -I"$ex" \
	-I"$ex/map" -I"$ex/tree_map" -I"$ex/hashmap" -I"$ex/list_map" "${srcs[@]}" \
	-o "$out/mapcli" -L"$build/compat" -lkeratin-pmemobj -Wl,-rpath,"$build/compat" \
	2>"$out/mapcli.log"; then
	echo "FAIL build mapcli: $(grep -m1 error "$out/mapcli.log")"
	echo "0 passed, 1 failed"
	exit 1
fi

pass=0 fail=0 repaired=0 clean_errors=0 unharmed=0 wrong_unchecked=0
print_map() { # print_map TYPE POOL -> stdout: the keys; exit status: mapcli's
	printf 'p\nq\n' | "$out/mapcli" "$1" "$2" 1 2>"$tmp/err" | tr -d '$' | grep -v '^ *$'
	return "${PIPESTATUS[1]}"
}

for type in btree rbtree hashmap_tx; do
	pool=$tmp/$type.pool
	printf 'n 400\nq\n' | "$out/mapcli" "$type" "$pool" 1 >/dev/null 2>&1
	if ! print_map "$type" "$pool" >"$tmp/ref" || [[ $(wc -w <"$tmp/ref") -lt 400 ]]; then
		echo "FAIL $type: no reference map ($(head -c 200 "$tmp/err"))"
		fail=$((fail + 1))
		continue
	fi
	mapfile -t objs < <("$objects" "$pool")
	for ((t = 1; t <= trials; t++)); do
		kind=media
		((t % 2 == 0)) && kind=scribble
		victim=$tmp/trial.pool
		cp "$pool" "$victim"
		rm -f "$victim.badblocks"
		read -r ooff osize _ <<<"${objs[$(((t * 7919) % ${#objs[@]}))]}"
		at=$((ooff + (t * 131) % osize))
		len=$((1 + t % 64))
		((at + len > ooff + osize)) && len=$((ooff + osize - at))
		lenopt=()
		[[ $kind == scribble ]] && lenopt=(--length "$len")
		if ! "$keratin" inject "$victim" "$kind" --offset "$at" "${lenopt[@]}" --seed "$t" \
			--force-pmem >"$tmp/inject" 2>&1; then
			echo "FAIL $type trial $t: inject: $(head -n1 "$tmp/inject")"
			fail=$((fail + 1))
			continue
		fi
		# What a reader would see: damage check can detect (read-only), before anything runs.
		damaged=0
		"$keratin" check "$victim" --force-pmem >"$tmp/check0" 2>&1 || damaged=1
		if [[ $kind == scribble ]]; then # the contrast run, on its own copy
			cp "$victim" "$tmp/raw.pool"
			KERATIN_PMEMOBJ_SCRUB=0 print_map "$type" "$tmp/raw.pool" >"$tmp/raw" 2>/dev/null
			cmp -s "$tmp/raw" "$tmp/ref" || wrong_unchecked=$((wrong_unchecked + 1))
			rm -f "$tmp/raw.pool"
		fi
		print_map "$type" "$victim" >"$tmp/got"
		rc=$?
		label="$type trial $t ($kind at $(printf '0x%x' "$at"), in the object at $ooff)"
		if [[ $rc -eq 0 ]] && cmp -s "$tmp/got" "$tmp/ref"; then
			if ! "$keratin" check "$victim" --force-pmem >"$tmp/check1" 2>&1; then
				echo "FAIL $label: read right, but the repair was not kept: $(tail -n1 "$tmp/check1")"
				fail=$((fail + 1))
				continue
			fi
			if ((damaged)); then repaired=$((repaired + 1)); else unharmed=$((unharmed + 1)); fi
			pass=$((pass + 1))
		elif [[ $rc -ne 0 ]] && [[ -s $tmp/err ]] && ! grep -qv -x -F -f "$tmp/ref" "$tmp/got"; then
			echo "ok   $label: clean error: $(head -n1 "$tmp/err")"
			clean_errors=$((clean_errors + 1))
			pass=$((pass + 1))
		else
			echo "FAIL $label: exit $rc, wrong output:"
			diff "$tmp/ref" "$tmp/got" | head -5 | sed 's/^/    /'
			head -n2 "$tmp/err" | sed 's/^/    err: /'
			fail=$((fail + 1))
		fi
	done
	# keratin's own commands on the program's pool: a scribble repaired offline by
	# `keratin repair`, then `keratin scrub` finds nothing; the program (with its own
	# check off) reads the reference.
	read -r ooff osize _ <<<"${objs[0]}"
	cp "$pool" "$victim"
	rm -f "$victim.badblocks"
	if "$keratin" inject "$victim" scribble --offset "$((ooff + osize / 2))" --length 8 --seed 3 \
		--force-pmem >/dev/null 2>&1 && ! "$keratin" check "$victim" --force-pmem >/dev/null 2>&1 &&
		"$keratin" repair "$victim" --force-pmem >/dev/null 2>&1 &&
		"$keratin" scrub "$victim" --force-pmem >/dev/null 2>&1 &&
		KERATIN_PMEMOBJ_SCRUB=0 print_map "$type" "$victim" >"$tmp/got" && cmp -s "$tmp/got" "$tmp/ref"; then
		echo "ok   $type: keratin check, repair and scrub on the program's pool"
		pass=$((pass + 1))
	else
		echo "FAIL $type: keratin check/repair/scrub on the program's pool"
		fail=$((fail + 1))
	fi
	# Beyond repair: two lost pages in one page column (the object's, and the same column
	# one row down), so parity cannot rebuild either. The program must fail cleanly.
	info=$("$keratin" info "$pool" --json --force-pmem | tr ',' '\n')
	field() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" <<<"$info"; }
	row=$(($(field heap_size) / ($(field nzones) * $(field rows)))) # data rows are the heap
	read -r ooff _ <<<"${objs[$((${#objs[@]} / 2))]}"
	cp "$pool" "$victim"
	rm -f "$victim.badblocks"
	"$keratin" inject "$victim" media --offset "$ooff" --force-pmem >/dev/null 2>&1 &&
		"$keratin" inject "$victim" media --offset "$((ooff + row))" --force-pmem >/dev/null 2>&1
	print_map "$type" "$victim" >"$tmp/got"
	rc=$?
	if [[ -z $row || $rc -eq 0 ]] || [[ ! -s $tmp/err ]] || grep -qv -x -F -f "$tmp/ref" "$tmp/got"; then
		echo "FAIL $type beyond repair: exit $rc, row size '$row', output $(wc -l <"$tmp/got") lines," \
			"error '$(head -n1 "$tmp/err")'"
		fail=$((fail + 1))
	else
		echo "ok   $type beyond repair: clean error: $(head -n1 "$tmp/err")"
		clean_errors=$((clean_errors + 1))
		pass=$((pass + 1))
	fi
	echo "ok   $type: $trials trials done"
done
# A libpmemobj pool (made by Debian's libpmemobj) given to the program by mistake: a clean
# error that names it, from the program and from the keratin command; the file unchanged.
printf '%s\n' '#include <libpmemobj.h>' 'int main(int c, char **v) {' \
	'PMEMobjpool *p = pmemobj_create(v[1], "x", PMEMOBJ_MIN_POOL, 0600);' \
	'if (p) pmemobj_close(p); return p == NULL; }' >"$tmp/mkpool.c"
if cc -w "$tmp/mkpool.c" -o "$tmp/mkpool" -lpmemobj -lpmem 2>/dev/null && "$tmp/mkpool" "$tmp/pmdk.pool"; then
	sum=$(md5sum <"$tmp/pmdk.pool")
	printf 'p\nq\n' | "$out/mapcli" btree "$tmp/pmdk.pool" 1 >/dev/null 2>"$tmp/err"
	rc=$?
	"$keratin" info "$tmp/pmdk.pool" >/dev/null 2>"$tmp/err2"
	if [[ $rc -ne 0 ]] && grep -q "libpmemobj pool" "$tmp/err" && grep -q "libpmemobj (PMDK) pool" "$tmp/err2" &&
		[[ $(md5sum <"$tmp/pmdk.pool") == "$sum" ]]; then
		echo "ok   a libpmemobj pool: $(head -n1 "$tmp/err")"
		pass=$((pass + 1))
	else
		echo "FAIL a libpmemobj pool: exit $rc: '$(head -n1 "$tmp/err")' / '$(head -n1 "$tmp/err2")'"
		fail=$((fail + 1))
	fi
else
	echo "SKIP a libpmemobj pool: cannot make one with Debian's libpmemobj"
fi
echo "faults: $repaired repaired before the program read them, $unharmed left nothing a check finds" \
	"(bytes that happened to be rewritten as they were), $clean_errors clean errors, 0 wrong reads allowed;" \
	"with the open-time check off, $wrong_unchecked of the scribble trials read wrong keys"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
