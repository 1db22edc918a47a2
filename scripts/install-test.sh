#!/bin/sh
# install-test.sh BUILD_DIR SOURCE_DIR: installs the build into a temporary prefix (as
# DESTDIR=... make install would), then builds examples/bank.c against the installed files
# twice, once with pkg-config and once with CMake's find_package(keratin), runs both, and
# checks that the CLI was installed and runs.
set -eu
build=$1
src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keratin-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=/opt/keratin-test
DESTDIR=$tmp/root cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
root=$tmp/root$prefix
for f in include/keratin.h include/keratin_map.h bin/keratin; do
	[ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(ls -d "$root"/lib* | head -n 1)
# keratin.pc finds its prefix from its own place, so the staged copy works as installed.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --variable=libdir keratin)" -ef "$libdir" ] ||
	{ echo "FAIL: keratin.pc's libdir is $(pkg-config --variable=libdir keratin), not $libdir"; exit 1; }
cc "$src/examples/bank.c" $(pkg-config --cflags keratin) $(pkg-config --libs --static keratin) \
	-Wl,-rpath,"$libdir" -o "$tmp/bank-pc"
KERATIN_FORCE_PMEM=1 "$tmp/bank-pc" "$tmp/a.pool" | grep -q "^balances: 900 1100$" ||
	{ echo "FAIL: the pkg-config build does not run"; exit 1; }
mkdir "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(bank C)
find_package(keratin REQUIRED)
add_executable(bank $src/examples/bank.c)
target_link_libraries(bank PRIVATE keratin::keratin)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$root" \
	-DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; echo "FAIL: find_package(keratin)"; exit 1; }
cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; echo "FAIL: CMake consumer build"; exit 1; }
KERATIN_FORCE_PMEM=1 "$tmp/cm/build/bank" "$tmp/b.pool" | grep -q "^balances: 900 1100$" ||
	{ echo "FAIL: the find_package build does not run"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$root/bin/keratin" --help >/dev/null || { echo "FAIL: installed CLI"; exit 1; }
echo "install: headers, libraries, CLI, keratin.pc and the CMake package installed; bank built with pkg-config and with find_package, both run"
