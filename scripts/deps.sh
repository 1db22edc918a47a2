#!/usr/bin/env bash
# deps.sh - install the Debian packages keratin needs to build, test and demo, if missing.
# Idempotent and quiet when everything is present; needs root (or sudo) only to install.
# DEPS=no (e.g. `make demo DEPS=no`) installs nothing, for those who install by hand; it
# still names what is missing. DEPS_LOCK_WAIT: seconds to wait for apt's lock (600).
set -euo pipefail

# build + tests: compiler toolchain, CMake, ISA-L (CRC-32C, XOR), pkg-config;
# clang + its runtime for the libFuzzer target and the sanitizer builds; libpmemobj-dev
# (the baseline, whose example maps the benchmark builds from its documentation) and
# python3 (the benchmark harness), which `make check` smoke-runs; clang-14 and llvm-14-dev
# for the persistence checker pmsan (its pass plugin builds against LLVM 14; llvm-14 brings
# llvm-symbolizer for its stacks), libclang-14-dev for keratin-pmscan, the static checker
# (a plugin of clang's analyzer), and the headers that libpmemobj's examples include beyond
# libpmemobj's own (libpmemlog, libpmemblk; libuv for map/kv_server.c, FUSE 2's fuse.h for
# pmemobjfs.c): keratin-pmscan's false-positive run analyses every installed example.
# libfuse3-dev and fuse3 for keratin fs mount (FUSE low-level API; fusermount3; its
# passthrough_ll example is the FUSE benchmark's peer), liburing-dev for its -o uring. The FUSE benchmark (bench/fuse-bench.sh,
# smoke-run by make check) also drives fio and sqlite3 and makes an ext4 peer (e2fsprogs).
# liblmdb-dev and libsqlite3-dev: the peers of bench/kv-files (durable key-value commits on
# an ordinary file system: keratin's page-cache mode against LMDB and SQLite in WAL mode).
# glusterfs-server and glusterfs-client for the cluster test (keratin-fs as the bricks of a
# GlusterFS volume, tests/gluster/), with attr (setfattr) and iproute2 (ip) that it uses;
# git for its clone.
pkgs=(build-essential cmake pkg-config libisal-dev clang libclang-rt-14-dev
	libpmemobj-dev python3 clang-14 llvm-14-dev libclang-14-dev libpmemlog-dev libpmemblk-dev
	libuv1-dev libfuse-dev
	libfuse3-dev fuse3 liburing-dev fio sqlite3 e2fsprogs liblmdb-dev libsqlite3-dev
	glusterfs-server glusterfs-client attr iproute2 git)
if [ "${1:-}" = "--bench" ]; then
	pkgs+=(gnuplot-nox) # the report's plots
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${DEPS:-yes}" = "no" ]; then
	echo "deps: DEPS=no, so not installing: ${missing[*]} (the build may fail without them)" >&2
	exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg (an unattended upgrade, a second terminal) may hold the package
# locks: wait for them, up to DEPS_LOCK_WAIT seconds (default 600), rather than fail.
lock=(-o "DPkg::Lock::Timeout=${DEPS_LOCK_WAIT:-600}")
if command -v fuser >/dev/null && fuser /var/lib/dpkg/lock-frontend /var/lib/apt/lists/lock >/dev/null 2>&1; then
	echo "deps: another package manager holds the lock; waiting up to ${DEPS_LOCK_WAIT:-600} s"
fi
$SUDO apt-get "${lock[@]}" update -qq </dev/null
$SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
