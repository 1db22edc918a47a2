#!/usr/bin/env bash
# bench/pmdk-build.sh - build pmdk-bench, the libpmemobj (PMDK) baseline driver, at
# benchmark time.
#
# Usage: bench/pmdk-build.sh [OUTDIR]     (default OUTDIR: build/pmdk of this repository)
#
# PMDK's example map structures (ctree, rbtree, btree, skiplist, rtree, and the three hash
# maps hashmap_tx, hashmap_atomic and hashmap_rp) are compiled straight from the copy that
# Debian's libpmemobj-dev installs under /usr/share/doc/libpmemobj-dev/examples; none of
# their source is ever copied into this repository. Whatever the build needs besides them (sources Debian ships gzipped, the
# ex_common.h shim below, objects) is written to OUTDIR, a build artefact.
#
# A structure whose sources are missing or do not compile is left out: the script says so
# on stderr, and pmdk-bench then reports that structure as unavailable (exit status 3).
# The script fails only if pmdk-bench itself cannot be built.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
out=${1:-$repo/build/pmdk}
ex=/usr/share/doc/libpmemobj-dev/examples
cc=${CC:-cc}
cflags=(-O2 -std=gnu11 -pthread)
libs=(-lpmemobj -lpmem -lpthread)

say() { echo "pmdk-build: $*" >&2; }

if [[ ! -d $ex ]]; then
	say "$ex is missing: installing libpmemobj-dev"
	export DEBIAN_FRONTEND=noninteractive
	# A fresh machine may have no package lists yet: update once and retry.
	apt-get install -y --no-install-recommends libpmemobj-dev ||
		{ apt-get update && apt-get install -y --no-install-recommends libpmemobj-dev; }
fi
if [[ ! -d $ex ]]; then
	# e.g. a dpkg path-exclude for /usr/share/doc/* drops the examples on install.
	say "error: $ex still missing after installing libpmemobj-dev (dpkg path-exclude?)"
	exit 1
fi

mkdir -p "$out/src" "$out/obj" "$out/include"
rm -f "$out"/obj/*.o "$out/pmdk-bench"

# Debian compresses some documentation files. Every example directory we use is mirrored
# into $out/src with its *.gz members decompressed; the include path lists that mirror
# before the original, and a source is compiled from the original when it is not gzipped.
dirs=(map tree_map list_map hashmap)
incs=(-I"$out/include")
for d in "${dirs[@]}"; do
	mkdir -p "$out/src/$d"
	if [[ -d $ex/$d ]]; then
		for gz in "$ex/$d"/*.gz; do
			[[ -e $gz ]] || continue
			b=$(basename "$gz" .gz)
			zcat "$gz" >"$out/src/$d/$b"
		done
	fi
	incs+=(-I"$out/src/$d" -I"$ex/$d")
done

# locate REL: print the path to compile for example file REL (original or decompressed).
locate() {
	if [[ -f $ex/$1 ]]; then
		echo "$ex/$1"
	elif [[ -f $out/src/$1 ]]; then
		echo "$out/src/$1"
	else
		return 1
	fi
}

# ctree_map.c and rtree_map.c include <ex_common.h>, which lives one level above the
# libpmemobj examples in PMDK's tree (src/examples/) and is not in the Debian package. It
# is written here with just what those two files use: MIN and find_last_set_64 (index of
# the most significant set bit). memcpy/memmove (rtree) need <string.h>.
cat >"$out/include/ex_common.h" <<'EOF'
/* ex_common.h - written by bench/pmdk-build.sh: the helpers PMDK's tree_map examples
 * expect from PMDK's src/examples/ex_common.h, which libpmemobj-dev does not ship. */
#ifndef EX_COMMON_H
#define EX_COMMON_H
#include <stdint.h>
#include <string.h>
#ifndef MIN
#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#endif
/* Position of the highest set bit of val (val != 0), as in PMDK. */
static inline int find_last_set_64(uint64_t val) { return 63 - __builtin_clzll(val); }
#endif
EOF

# compile REL [OBJDIR [FLAGS...]]: compile one example source into OBJDIR (default
# $out/obj) with FLAGS first; on failure print why, return 1.
compile() {
	local rel=$1 dir=${2:-$out/obj} src obj log
	shift $(($# < 2 ? $# : 2))
	if ! src=$(locate "$rel"); then
		echo "$rel: not in $ex"
		return 1
	fi
	obj=$dir/$(basename "$rel" .c).o
	log=$dir/$(basename "$rel" .c).log
	# -w: the examples are PMDK's code, built as shipped; their warnings are not ours.
	if ! "$cc" "${cflags[@]}" -w "$@" "${incs[@]}" -c "$src" -o "$obj" 2>"$log"; then
		echo "$rel: $(grep -m1 -i 'error' "$log" || head -n1 "$log")"
		return 1
	fi
}

objs=()
defs=()
built=()
missing=()
if why=$(compile map/map.c); then
	objs+=("$out/obj/map.o")
	defs+=(-DPMDK_HAVE_MAP=1)
	# name  macro  sources (the map_*.c wrapper and the structure itself)
	while read -r name macro srcs; do
		ok=1
		why=
		for s in $srcs; do
			if ! w=$(compile "$s"); then
				ok=0
				why+="${why:+; }$w"
			fi
		done
		if ((ok)); then
			for s in $srcs; do objs+=("$out/obj/$(basename "$s" .c).o"); done
			defs+=("-D$macro=1")
			built+=("$name")
		else
			missing+=("$name")
			say "cannot build structure $name: $why"
		fi
	done <<'EOF'
ctree PMDK_HAVE_CTREE map/map_ctree.c tree_map/ctree_map.c
rbtree PMDK_HAVE_RBTREE map/map_rbtree.c tree_map/rbtree_map.c
btree PMDK_HAVE_BTREE map/map_btree.c tree_map/btree_map.c
skiplist PMDK_HAVE_SKIPLIST map/map_skiplist.c list_map/skiplist_map.c
rtree PMDK_HAVE_RTREE map/map_rtree.c tree_map/rtree_map.c
hashmap PMDK_HAVE_HASHMAP map/map_hashmap_tx.c hashmap/hashmap_tx.c
hashmap_atomic PMDK_HAVE_HASHMAP_ATOMIC map/map_hashmap_atomic.c hashmap/hashmap_atomic.c
hashmap_rp PMDK_HAVE_HASHMAP_RP map/map_hashmap_rp.c hashmap/hashmap_rp.c
EOF
else
	missing=(ctree rbtree btree skiplist rtree hashmap hashmap_atomic hashmap_rp)
	say "cannot build the map abstraction ($why): every structure is unavailable"
fi

# keratin's protected regions (--config regionMS) when the library is built next door and
# links as it is (a sanitizer build's library does not: then pmdk-bench goes without).
# $out/pmdk-bench.region marks a pmdk-bench that has them (bench/run.py looks).
kr_lib=$(dirname "$out")/libkeratin.a
rm -f "$out/pmdk-bench.region"
if [[ -f $kr_lib ]] && "$cc" "${cflags[@]}" -Wall -Wextra "${defs[@]}" -DKR_HAVE_REGION=1 \
	"${incs[@]}" -I"$here" -I"$repo/include" -o "$out/pmdk-bench" "$here/pmdk-bench.c" "${objs[@]}" \
	"$kr_lib" "${libs[@]}" -lisal 2>"$out/obj/region-link.log"; then
	touch "$out/pmdk-bench.region"
else
	say "pmdk-bench without --config regionMS (no usable $kr_lib; see $out/obj/region-link.log)"
	"$cc" "${cflags[@]}" -Wall -Wextra "${defs[@]}" "${incs[@]}" -I"$here" \
		-o "$out/pmdk-bench" "$here/pmdk-bench.c" "${objs[@]}" "${libs[@]}"
fi

# pmem-count.so: preloaded into pmdk-bench by run.py's counting runs, so that libpmemobj's
# fences, written-back lines and bytes are counted as keratin counts its own.
"$cc" "${cflags[@]}" -Wall -Wextra -fPIC -shared -I"$here" -o "$out/pmem-count.so" \
	"$here/pmem-count.c" -ldl

# pmdk-bench-kp: the same driver and the same example sources, built against keratin's
# libpmemobj-compatible library (include/keratin-pmemobj, build/compat) when it is built
# next door: the benchmark of keratin-pmemobj against libpmemobj (bench/compat-bench.py).
kp_lib=$(dirname "$out")/compat/libkeratin-pmemobj.so
rm -f "$out/pmdk-bench-kp"
if [[ -f $kp_lib ]]; then
	mkdir -p "$out/obj-kp"
	kp_objs=()
	kp_flags=(-I"$repo/include/keratin-pmemobj")
	for o in "${objs[@]}"; do
		base=$(basename "$o" .o)
		rel=$(cd "$ex" && find map tree_map list_map hashmap -name "$base.c" -print -quit 2>/dev/null)
		[[ -n $rel ]] || rel=$(cd "$out/src" && find . -name "$base.c" -print -quit | sed 's|^\./||')
		if w=$(compile "$rel" "$out/obj-kp" "${kp_flags[@]}"); then
			kp_objs+=("$out/obj-kp/$base.o")
		else
			say "pmdk-bench-kp: $w"
		fi
	done
	if [[ ${#kp_objs[@]} -eq ${#objs[@]} ]] &&
		"$cc" "${cflags[@]}" -Wall -Wextra "${defs[@]}" "${kp_flags[@]}" "${incs[@]}" -I"$here" \
			-o "$out/pmdk-bench-kp" "$here/pmdk-bench.c" "${kp_objs[@]}" \
			-L"$(dirname "$kp_lib")" -lkeratin-pmemobj \
			-Wl,-rpath,"$(cd "$(dirname "$kp_lib")" && pwd)" \
			-ldl -lpthread 2>"$out/obj-kp/link.log"; then
		echo "pmdk-build: built $out/pmdk-bench-kp (the same sources on keratin-pmemobj)"
	else
		say "pmdk-bench-kp not built (see $out/obj-kp/*.log)"
	fi
fi

ver=$(dpkg-query -W -f='${Version}' libpmemobj-dev 2>/dev/null || echo unknown)
echo "pmdk-build: built $out/pmdk-bench (libpmemobj-dev $ver, $cc ${cflags[*]}," \
	"maps from $ex: ${built[*]:-none}; unavailable: ${missing[*]:-none})"
