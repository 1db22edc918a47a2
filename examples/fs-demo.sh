#!/bin/bash
# fs-demo.sh KERATIN SRCDIR - keratin-fs in a few steps a user can repeat by hand: make a
# file system, mount it with FUSE, put a real workload on it (a source tree unpacked, a
# sqlite3 database), take a snapshot and restore a removed directory from it, damage a file's bytes in the pool behind the daemon's back and read
# them back repaired, unmount, and check the pool. Prints SKIP and exits 77 where FUSE
# cannot mount.
set -u
KR=$1
SRC=$2
SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=${TMPDIR:-/tmp}
WORK=$(mktemp -d "$SHM/keratin-fs-demo.XXXXXX")
POOL=$WORK/demo.kfs
MNT=$WORK/mnt
mkdir "$MNT"
trap '"$KR" fs umount "$MNT" >/dev/null 2>&1; rm -rf "$WORK"' EXIT

step() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
die() { echo "fs-demo: FAILED: $*"; exit 1; }

[ -c /dev/fuse ] || { echo "fs-demo: SKIP: /dev/fuse is missing"; exit 77; }

step "make a 256 MiB keratin-fs pool and mount it"
run "$KR" fs mkfs "$POOL" --size 256M --force-pmem || die mkfs
if ! run "$KR" fs mount "$POOL" "$MNT" --force-pmem 2>"$WORK/err"; then
	echo "fs-demo: SKIP: FUSE cannot mount here: $(cat "$WORK/err")"
	exit 77
fi

step "a real workload: unpack a source tree, run sqlite3 transactions"
tar -C "$SRC" -cf "$WORK/src.tar" src include docs
run tar -C "$MNT" -xf "$WORK/src.tar" || die "tar x"
diff -r "$SRC/src" "$MNT/src" >/dev/null && echo "diff -r against the original: identical" || die "diff -r"
for i in $(seq 1 500); do echo "INSERT INTO t(v) VALUES ('row $i');"; done |
	sed '1i CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);' | sqlite3 "$MNT/demo.db" || die sqlite3
run sqlite3 "$MNT/demo.db" "PRAGMA integrity_check; SELECT count(*) FROM t;"
run df -h "$MNT"

step "a snapshot, then a mistake, then the file restored from the snapshot"
run "$KR" fs snapshot create "$MNT" before-the-mistake || die "snapshot"
run rm -r "$MNT/src/obj"
run ls "$MNT/.snapshots/" "$MNT/.snapshots/before-the-mistake/src"
run cp -a "$MNT/.snapshots/before-the-mistake/src/obj" "$MNT/src/obj" || die "restore"
diff -r "$SRC/src" "$MNT/src" >/dev/null && echo "src/obj restored: identical to the original" || die "restore differs"

step "damage: 64 random bytes written into a file's data in the pool file, while mounted"
victim=src/obj/tx.c
cp "$MNT/$victim" "$WORK/victim"
"$KR" fs umount "$MNT" || die umount
strip=$("$KR" fs locate "$POOL" "/$victim" 1000 --force-pmem | sed -n 's/^strip: *\(0x[0-9a-f]*\).*/\1/p')
echo "byte 1000 of /$victim lives in the strip at pool offset $strip"
"$KR" fs mount "$POOL" "$MNT" --force-pmem || die "mount again"
head -c 64 /dev/urandom | dd of="$POOL" bs=1 seek=$((strip + 100)) conv=notrunc status=none
echo "reading /$victim through the mount:"
cmp "$MNT/$victim" "$WORK/victim" && echo "  the bytes read are the original ones: the strip failed its CRC and was rebuilt from parity" ||
	die "wrong bytes read"
run "$KR" fs info "$MNT"

step "unmount, then check every structure of the pool (read-only)"
run "$KR" fs umount "$MNT" || die umount
run "$KR" fs fsck "$POOL" --force-pmem || die fsck
echo
echo "fs-demo: OK"
