#!/bin/sh
# run.sh BUILD_DIR POOL_DIR [CFLAGS] - installs the build into a temporary prefix
# (cmake --install) and builds consumer.c against it twice, with pkg-config and with
# find_package(keratin), running each; checks what the install put where, that DESTDIR
# stages under DESTDIR, and that the installed keratin command and manual pages work;
# where the persistence checkers were built, that the installed keratin-pmsan-cc and
# keratin-pmscan find a use after free from the moved prefix.
# CFLAGS (sanitizer flags of the build under test) are used for both consumer builds.
set -eu
build=$1 pooldir=$2 cflags=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name 'libkeratin.so' | head -n 1)")
[ -n "$libdir" ] || fail "no libkeratin.so under $prefix"
for f in bin/keratin include/keratin.h include/keratin_region.h include/keratin_hmap.h \
	include/keratin_map.h share/man/man1/keratin.1; do
	[ -e "$prefix/$f" ] || fail "$f not installed"
done
for f in libkeratin.a libkeratin-map.so libkeratin-map.a pkgconfig/keratin.pc \
	cmake/keratin/keratinConfig.cmake cmake/keratin/keratinConfigVersion.cmake \
	cmake/keratin/keratinTargets.cmake; do
	[ -e "$libdir/$f" ] || fail "$libdir/$f not installed"
done
soname=$(readelf -d "$libdir/libkeratin.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ -e "$libdir/$soname" ] || fail "SONAME $soname has no file in $libdir"
"$prefix/bin/keratin" --help >/dev/null || fail "installed keratin --help"

# 1. pkg-config, as a Makefile would use it.
pc="env PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config"
$pc --exists keratin-map || fail "pkg-config does not find keratin-map"
[ "$($pc --variable=libdir keratin | xargs realpath)" = "$(realpath "$libdir")" ] ||
	fail "keratin.pc libdir $($pc --variable=libdir keratin) is not $libdir"
# shellcheck disable=SC2046,SC2086
cc $cflags -o "$tmp/consumer-pc" "$here/consumer.c" $($pc --cflags --libs keratin-map) \
	-Wl,-rpath,"$libdir" || fail "build with pkg-config"
"$tmp/consumer-pc" "$pooldir/pkg-install-pc.pool" || fail "consumer built with pkg-config"

# 1b. keratin-pmemobj: a libpmemobj program (the README's counter.c) built with pkg-config
# keratin-pmemobj, run twice, its pool checked; the drop-in directory for LD_LIBRARY_PATH.
for f in include/keratin-pmemobj/libpmemobj.h include/keratin-pmemobj/libpmemobj/tx.h \
	share/man/man7/keratin-pmemobj.7; do
	[ -e "$prefix/$f" ] || fail "$f not installed"
done
[ -e "$libdir/keratin-pmemobj/libpmemobj.so.1" ] || fail "the drop-in libpmemobj.so.1 is not installed"
# shellcheck disable=SC2046,SC2086
cc $cflags -o "$tmp/counter" "$here/../../examples/snippets/counter.c" \
	$($pc --cflags --libs keratin-pmemobj) -Wl,-rpath,"$libdir" || fail "build with pkg-config keratin-pmemobj"
kp_pool=$pooldir/pkg-install-kp.pool
rm -f "$kp_pool"
PMEM_IS_PMEM_FORCE=1 "$tmp/counter" "$kp_pool" >/dev/null &&
	[ "$(PMEM_IS_PMEM_FORCE=1 "$tmp/counter" "$kp_pool")" = "runs: 2, last note: written by run 2" ] ||
	fail "counter.c built with pkg-config keratin-pmemobj"
"$prefix/bin/keratin" check "$kp_pool" --force-pmem >/dev/null || fail "keratin check of counter.c's pool"
rm -f "$kp_pool"

# 2. find_package(keratin) in a CMake project of its own.
cmake -S "$here" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$cflags" \
	-DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cm.log" 2>&1 &&
	cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1 ||
	{ cat "$tmp/cm.log"; fail "build with find_package(keratin)"; }
"$tmp/cm/consumer" "$pooldir/pkg-install-cmake.pool" || fail "consumer built with find_package"

# 3. DESTDIR stages the same tree below it.
DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/keratin >/dev/null 2>&1 ||
	fail "DESTDIR install"
[ -e "$tmp/stage/opt/keratin/bin/keratin" ] && [ -e "$tmp/stage/opt/keratin/include/keratin.h" ] ||
	fail "DESTDIR install did not stage under DESTDIR"

# 4. The persistence checkers (built only in normal builds with clang-14), installed
# relative to their own directory, so they work from a prefix other than the configured one.
checked=
uaf=$here/../check/cases/r4_use_after_free.bug.c
if [ -e "$build/bin/keratin-pmsan-cc" ]; then
	[ -x "$prefix/bin/keratin-pmsan-cc" ] || fail "keratin-pmsan-cc not installed"
	"$prefix/bin/keratin-pmsan-cc" -g -O1 -o "$tmp/uaf" "$uaf" -lpmemobj -lpmem ||
		fail "build with the installed keratin-pmsan-cc"
	rc=0
	PMEM_IS_PMEM_FORCE=1 "$tmp/uaf" "$pooldir/pkg-install-pmsan.pool" >"$tmp/pmsan.out" 2>&1 || rc=$?
	rm -f "$pooldir/pkg-install-pmsan.pool"
	[ $rc -eq 66 ] && grep -q '^pmsan: rule 4 (use-after-free)' "$tmp/pmsan.out" ||
		{ cat "$tmp/pmsan.out"; fail "installed pmsan: exit $rc, want 66 and a rule 4 report"; }
	checked="$checked, keratin-pmsan-cc"
fi
if [ -e "$build/tools/keratin-pmscan" ]; then
	rc=0
	"$prefix/bin/keratin-pmscan" "$uaf" >"$tmp/pmscan.out" 2>&1 || rc=$?
	[ $rc -eq 1 ] && grep -q '^pmsan: rule 4 (use-after-free).*(static)$' "$tmp/pmscan.out" ||
		{ cat "$tmp/pmscan.out"; fail "installed keratin-pmscan: exit $rc, want 1 and a rule 4 report"; }
	checked="$checked, keratin-pmscan"
fi
echo "PASS: installed, built with pkg-config and with find_package, DESTDIR staged$checked"
