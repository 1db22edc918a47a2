#!/bin/bash
# pmemobj-demo.sh BUILD_DIR - `make demo`'s third part: a libpmemobj program on keratin.
#
# PMDK's mapcli example, compiled unmodified from where libpmemobj-dev installs it against
# keratin-pmemobj, fills a B-tree with keys. Then the pool gets a media error (a lost page,
# reported as a bad block) and a scribble (bytes no one reports), both inside the tree's
# nodes, and mapcli prints the tree again: the same keys, because opening the pool repaired
# both. The last step shows what the scribble does to a program that reads without
# keratin's check (KERATIN_PMEMOBJ_SCRUB=0, what libpmemobj would do): wrong keys or a crash.
# Exits 77 (skipped) without the examples.
set -u
build=$(cd "${1:-build}" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ex=/usr/share/doc/libpmemobj-dev/examples
keratin=$build/tools/keratin
if [[ ! -d $ex/map ]]; then
	echo "pmemobj demo: SKIP ($ex is missing)"
	exit 77
fi
tmp=$(mktemp -d /dev/shm/kp-demo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export PMEM_IS_PMEM_FORCE=1
say() { printf '\n== %s\n' "$*"; }

say "PMDK's mapcli example, unmodified, built against keratin-pmemobj"
srcs=("$ex/map/mapcli.c" "$ex/map/map.c" "$ex/map/map_btree.c" "$ex/tree_map/btree_map.c")
for m in ctree rbtree rtree skiplist hashmap_tx hashmap_atomic hashmap_rp; do
	srcs+=("$ex/map/map_$m.c")
done
srcs+=("$ex/tree_map/ctree_map.c" "$ex/tree_map/rbtree_map.c" "$ex/tree_map/rtree_map.c"
	"$ex/list_map/skiplist_map.c" "$ex/hashmap/hashmap_tx.c" "$ex/hashmap/hashmap_atomic.c"
	"$ex/hashmap/hashmap_rp.c")
echo "cc mapcli.c ... \$(pkg-config --cflags --libs keratin-pmemobj)"
cc -w -O1 -pthread -I"$repo/include/keratin-pmemobj" -I"$repo/tests/check" -I"$ex" -I"$ex/map" \
	-I"$ex/tree_map" -I"$ex/hashmap" -I"$ex/list_map" "${srcs[@]}" -o "$tmp/mapcli" \
	-L"$build/compat" -lkeratin-pmemobj -Wl,-rpath,"$build/compat" || exit 1
pool=$tmp/btree.pool
keys() { printf 'p\nq\n' | "$tmp/mapcli" btree "$pool" 1 2>&1 | tr -d '$' | grep -v '^ *$'; }
printf 'n 60\nq\n' | "$tmp/mapcli" btree "$pool" 1 >/dev/null
keys >"$tmp/before"
echo "mapcli btree: 60 random keys inserted; the tree holds:"
fold -w 96 -s "$tmp/before" | head -n 3 | sed 's/^/    /'
"$keratin" info "$pool" --force-pmem | grep -E '^(pool|live objects|protection):'

say "Two faults inside the tree's nodes"
# The two largest objects are nodes (mapcli's other objects are smaller): a lost page under
# the first, 16 random bytes over the first key of the second (a node begins with its
# item count, then its items: key, value).
mapfile -t nodes < <("$build/tests/kp_objects" "$pool" | sort -k2 -n -r | head -n 2)
read -r node _ <<<"${nodes[0]}"
"$keratin" inject "$pool" media --offset "$node" --force-pmem | sed 's/^/    /'
read -r node _ <<<"${nodes[1]}"
"$keratin" inject "$pool" scribble --offset "$((node + 8))" --length 16 --seed 7 \
	--force-pmem | sed 's/^/    /'
cp "$pool" "$tmp/unchecked.pool"
cp "$pool.badblocks" "$tmp/unchecked.pool.badblocks" 2>/dev/null
echo "keratin check (reads only):"
"$keratin" check "$pool" --force-pmem | grep -E '^(objects|result)' | sed 's/^/    /'

say "mapcli again: pmemobj_open repairs the pool before the program reads it"
keys >"$tmp/after"
if cmp -s "$tmp/before" "$tmp/after"; then
	echo "the same 60 keys: both faults repaired"
else
	echo "FAIL: the keys differ after the faults"
	diff "$tmp/before" "$tmp/after" | head
	exit 1
fi
"$keratin" check "$pool" --force-pmem | grep -E '^result' | sed 's/^/    /'

say "The same damage, read without keratin's check (as libpmemobj would read it)"
pool=$tmp/unchecked.pool
KERATIN_PMEMOBJ_SCRUB=0 keys >"$tmp/unchecked" 2>&1
if cmp -s "$tmp/before" "$tmp/unchecked"; then
	echo "this time the scribble missed every key the program reads"
else
	echo "the program reads other keys (or fails): < what was stored, > what it read"
	diff <(tr -s ' ' '\n' <"$tmp/before") <(tr -s ' ' '\n' <"$tmp/unchecked") | grep '^[<>]' |
		head -n 6 | sed 's/^/    /'
fi
