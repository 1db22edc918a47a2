#!/bin/bash
# fuse-tests.sh KERATIN BINDIR CASE SRCDIR - keratin-fs mounted with FUSE, as programs meet it.
#
# Each case makes a pool in /dev/shm (or TMPDIR), mounts it in a scratch directory, works
# on it, unmounts it and requires `keratin fs fsck` to find it clean. Cases:
#   posix     the differential POSIX suite (test_fuse_posix) against a tmpfs directory
#   fsx       the random-operation checker (fsx), several seeds, default and writeback mounts
#   real      sqlite3 transactions and integrity_check, git init/add/commit/fsck, tar x and
#             diff -r, make of a small C project
#   kill      SIGKILL of the daemon at random moments under a multi-process workload, 30 times:
#             remount, fsck clean, every fsync'ed file present with its contents
#   faults    damage while mounted: repaired on read, EIO for one page only, found by scrub
#   snapshots browsing DIR/.snapshots/NAME/, restoring with cp, deleting
#   cli       mount and umount refusing what they must, with one line and exit 1 or 2;
#             -o ro reading the files and leaving every byte of the pool as it was
#   requests  the FUSE requests that writes, creations and removals cost, as the daemon
#             counts them
#   mount8    mount(8) with the helper mount.fuse.keratin: mount -t fuse.keratin, an fstab
#             line (mount --fstab), plain umount(8) closing the pool cleanly, a bad pool
#             refused; run in a mount namespace of its own whose /sbin holds only the helper
#             (so nothing of the machine's is touched); needs root and unshare(1)
#   uring     posix, fsx (fewer operations) and real again over FUSE's io_uring transport
#             (-o uring; the ring must serve nearly every request), SIGTERM ending such a
#             mount, and -o uring refused with one line while the kernel's switch is off.
#             Sets the fuse module's enable_uring for the run and restores it.
# Prints SKIP and exits 77 where FUSE cannot mount (no /dev/fuse, no permission).
set -u
KR=$1
BIN=$2
CASE=$3
SRC=$4
SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=${TMPDIR:-/tmp}
WORK=$(mktemp -d "$SHM/keratin-fuse.XXXXXX")
MNT=$WORK/mnt
POOL=$WORK/fs.pool
mkdir -p "$MNT"
status=0

cleanup() {
	if grep -q " $MNT fuse.keratin " /proc/self/mounts 2>/dev/null; then
		"$KR" fs umount "$MNT" >/dev/null 2>&1 || umount -l "$MNT" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	status=1
}

skip_unless_fuse() {
	if [ ! -c /dev/fuse ]; then
		echo "SKIP: /dev/fuse is missing"
		exit 77
	fi
	"$KR" fs mkfs "$WORK/probe.pool" --size 8M --force-pmem >/dev/null || { echo "FAIL: mkfs"; exit 1; }
	if ! "$KR" fs mount "$WORK/probe.pool" "$MNT" --force-pmem 2>"$WORK/probe.err"; then
		echo "SKIP: FUSE cannot mount here: $(cat "$WORK/probe.err")"
		exit 77
	fi
	"$KR" fs umount "$MNT" || { echo "FAIL: umount of the probe"; exit 1; }
	rm -f "$WORK/probe.pool"
}

# Mount options every mount of the case adds (the uring case: uring).
MOUNT_OPTS=

# mkfs + mount with the given mount options (may be empty) and MOUNT_OPTS.
mount_fs() {
	local opts=${1:-}${MOUNT_OPTS:+${1:+,}$MOUNT_OPTS}
	"$KR" fs mkfs "$POOL" --size "${SIZE:-256M}" ${INODES:+--inodes $((INODES / 32 * 32))} --force-pmem >/dev/null ||
		{ fail "mkfs"; exit 1; }
	"$KR" fs mount "$POOL" "$MNT" --force-pmem ${opts:+-o "$opts"} || { fail "mount $opts"; exit 1; }
}

# umount + fsck clean, then remove the pool. Under -o uring, first: the ring served nearly
# every request that may go through it (all but INIT, FORGETs and interrupts, which the
# kernel sends through /dev/fuse).
umount_fsck() {
	case ",$MOUNT_OPTS," in *,uring,*)
		snap_requests
		local ring all
		ring=$(count_of io_uring)
		all=$(echo "$REQ" | awk '$1 !~ /^(io_uring|INIT|FORGET|BATCH_FORGET|INTERRUPT)$/ { n += $2 } END { print n + 0 }')
		echo "uring: $1: the ring served $ring of $all requests that may go through it"
		[ $((ring * 100)) -ge $((all * 95)) ] || fail "$1 under -o uring: the ring served $ring of $all requests"
		;;
	esac
	"$KR" fs umount "$MNT" || fail "umount"
	out=$("$KR" fs fsck "$POOL" --force-pmem 2>&1) || fail "fsck after $1: $out"
	rm -f "$POOL"
}

case_posix() {
	# Every file takes an inode slot and a log page: room for FUSE_BIGDIR entries.
	[ "${FUSE_BIGDIR:-0}" -gt 20000 ] && { SIZE=2G; INODES=$((FUSE_BIGDIR + 4096)); }
	mount_fs allow_other
	ref=$WORK/ref
	mkdir -p "$ref"
	chmod 755 "$WORK" "$ref"
	"$BIN/test_fuse_posix" "$MNT" "$ref" || fail "differential suite"
	umount_fsck posix
}

case_fsx() {
	for opts in "" writeback; do
		SIZE=512M mount_fs "$opts"
		for seed in 1 2 3; do
			"$BIN/fsx" "$MNT/f$seed" "${FSX_OPS:-4000}" "$seed" || fail "fsx seed $seed ${opts:+(-o $opts)}"
		done
		umount_fsck "fsx ${opts:-default}"
	done
}

case_real() {
	SIZE=512M mount_fs ""
	# sqlite3: a few thousand transactions, then its own check.
	{
		echo "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT, n INTEGER);"
		for i in $(seq 1 3000); do
			echo "BEGIN; INSERT INTO t(v, n) VALUES (hex(randomblob(40)), $i); UPDATE t SET n = n + 1 WHERE k = $(( (i * 7) % i + 1 )); COMMIT;"
		done
		echo "DELETE FROM t WHERE k % 5 = 0; VACUUM;"
	} >"$WORK/sql"
	sqlite3 "$MNT/db.sqlite" <"$WORK/sql" >/dev/null || fail "sqlite3 transactions"
	r=$(sqlite3 "$MNT/db.sqlite" "PRAGMA integrity_check; SELECT count(*) FROM t;" | tr '\n' ' ')
	[ "$r" = "ok 2400 " ] || fail "sqlite3 integrity_check/count: $r"

	# tar x of a source tree, then diff -r against the original.
	src=$SRC/src
	tar -C "$(dirname "$src")" -cf "$WORK/src.tar" src || fail "tar c"
	mkdir "$MNT/tree" && tar -C "$MNT/tree" -xf "$WORK/src.tar" || fail "tar x"
	diff -r "$src" "$MNT/tree/src" >/dev/null || fail "diff -r after tar x"

	# git: init, add, commit, fsck.
	(
		cd "$MNT/tree" &&
			git init -q &&
			git -c user.name=t -c user.email=t@t add -A &&
			git -c user.name=t -c user.email=t@t commit -qm tree &&
			git fsck --strict 2>&1 | grep -v '^Checking' | (! grep -q .)
	) || fail "git init/add/commit/fsck"
	(cd "$MNT/tree" && git status --porcelain | (! grep -q .)) || fail "git status not clean"

	# make: a small C project built and run inside the mount.
	mkdir "$MNT/proj"
	cat >"$MNT/proj/a.c" <<'EOF'
int twice(int x) { return 2 * x; }
EOF
	cat >"$MNT/proj/main.c" <<'EOF'
#include <stdio.h>
int twice(int x);
int main(void) { printf("%d\n", twice(21)); return 0; }
EOF
	printf 'prog: main.o a.o\n\t$(CC) -o $@ main.o a.o\n%%.o: %%.c\n\t$(CC) -c -o $@ $<\n' >"$MNT/proj/Makefile"
	(cd "$MNT/proj" && make -s >/dev/null 2>&1 && [ "$(./prog)" = 42 ]) || fail "make and run"
	touch "$MNT/proj/a.c"
	(cd "$MNT/proj" && make -s 2>&1 | grep -q . ; make -q) || fail "make is not up to date after a rebuild"
	umount_fsck real
}

# One workload process: writes files named by its id and a counter, each with contents
# derived from its name, fsyncs it, and only then records the name in its list.
worker() {
	local id=$1 i=0
	while :; do
		f="$MNT/w$id/file$i"
		head -c $(( (i % 7) * 3000 + 100 )) /dev/zero | tr '\0' "$(printf "\\$(printf %o $(( 97 + (i + id) % 26 )))")" >"$f.tmp" 2>/dev/null || exit 0
		sync "$f.tmp" 2>/dev/null || exit 0
		mv "$f.tmp" "$f" 2>/dev/null || exit 0
		sync "$MNT/w$id" 2>/dev/null || exit 0
		echo "$f $(( (i % 7) * 3000 + 100 )) $(( 97 + (i + id) % 26 ))" >>"$WORK/list$id"
		i=$((i + 1))
	done
}

case_kill() {
	"$KR" fs mkfs "$POOL" --size 256M --force-pmem >/dev/null || { fail "mkfs"; exit 1; }
	kills=0 verified=0
	for round in $(seq 1 "${KILLS:-30}"); do
		"$KR" fs mount "$POOL" "$MNT" --force-pmem -f &
		daemon=$!
		for _ in $(seq 200); do grep -q " $MNT fuse.keratin " /proc/self/mounts && break; sleep 0.01; done
		grep -q " $MNT fuse.keratin " /proc/self/mounts || { fail "round $round: no mount"; break; }
		pids=""
		for id in 1 2 3; do
			mkdir -p "$MNT/w$id"
			: >"$WORK/list$id"
			worker "$id" 2>/dev/null &
			pids="$pids $!"
		done
		sleep "0.$(( RANDOM % 4 + 1 ))$(( RANDOM % 10 ))"
		kill -9 "$daemon"
		wait "$daemon" 2>/dev/null
		kills=$((kills + 1))
		umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
		for p in $pids; do wait "$p" 2>/dev/null; done
		out=$("$KR" fs fsck "$POOL" --force-pmem 2>&1) || { fail "round $round: fsck after SIGKILL: $out"; break; }
		"$KR" fs mount "$POOL" "$MNT" --force-pmem || { fail "round $round: remount"; break; }
		lost=0
		for id in 1 2 3; do
			while read -r f len ch; do
				want=$(head -c "$len" /dev/zero | tr '\0' "$(printf "\\$(printf %o "$ch")")" | cksum)
				got=$(cksum <"$f" 2>/dev/null)
				[ "$want" = "$got" ] || { lost=$((lost + 1)); echo "lost or wrong: $f"; }
				verified=$((verified + 1))
			done <"$WORK/list$id"
			rm -rf "$MNT/w$id"
		done
		[ $lost -eq 0 ] || fail "round $round: $lost fsync'ed files lost or wrong"
		"$KR" fs umount "$MNT" || { fail "round $round: umount"; break; }
		[ $status -eq 0 ] || break
	done
	out=$("$KR" fs fsck "$POOL" --force-pmem 2>&1) || fail "final fsck: $out"
	[ $verified -gt 0 ] || fail "the writers recorded no fsync'ed file: the test proved nothing"
	echo "kill: $kills SIGKILLs of the daemon under 3 writers, each followed by fsck; $verified fsync'ed files checked"
}

# Damage the pool file behind the daemon's back while mounted: bytes of one strip (repaired
# on read from parity), two strips of one page (EIO for that page only; the mount stays
# up), and a strip no read touches (found by `keratin fs scrub DIR`).
scribble() { # POOL OFFSET LEN
	head -c "$3" /dev/urandom | dd of="$1" bs=1 seek="$(($2))" conv=notrunc status=none
}
strip_of() { # PATH OFFSET: the pool offset of that byte's strip (the pool must be unmounted)
	"$KR" fs locate "$POOL" "$1" "$2" --force-pmem | sed -n 's/^strip: *\(0x[0-9a-f]*\).*/\1/p'
}
case_faults() {
	SIZE=64M mount_fs ""
	for f in a b c; do seq 1 20000 | sed "s/^/$f /" >"$MNT/$f"; done
	cp "$MNT/a" "$WORK/a.want"
	cp "$MNT/b" "$WORK/b.want"
	truncate -s 1M "$MNT/sparse" # all hole
	"$KR" fs umount "$MNT" || fail "umount"
	# locate names a hole and the end of a file as such (not "No such device or address").
	out=$("$KR" fs locate "$POOL" /sparse 5000 --force-pmem 2>&1) && fail "locate in a hole succeeded: $out"
	case $out in *"offset 5000 is in a hole"*) ;; *) fail "locate in a hole: $out" ;; esac
	out=$("$KR" fs locate "$POOL" /sparse 2M --force-pmem 2>&1) && fail "locate past the end succeeded: $out"
	case $out in *"offset 2097152 is past the end of the file"*) ;; *) fail "locate past the end: $out" ;; esac
	sa=$(strip_of /a 5000) sb0=$(strip_of /b 0) sb1=$(strip_of /b 600) sc=$(strip_of /c 70000)
	[ -n "$sa" ] && [ -n "$sb0" ] && [ -n "$sb1" ] && [ -n "$sc" ] || { fail "locate"; return; }
	"$KR" fs mount "$POOL" "$MNT" --force-pmem || { fail "remount"; return; }
	scribble "$POOL" "$sa" 100
	scribble "$POOL" "$sb0" 512
	scribble "$POOL" "$sb1" 512
	scribble "$POOL" "$sc" 8
	cmp -s "$MNT/a" "$WORK/a.want" || fail "a damaged strip was not repaired on read"
	"$KR" fs info "$MNT" | grep -q '^repairs: *[1-9]' || fail "the repair on read was not counted"
	dd if="$MNT/b" of=/dev/null bs=4096 count=1 status=none 2>"$WORK/err" && fail "a page with two bad strips was read without an error"
	grep -q 'Input/output error' "$WORK/err" || fail "two bad strips: not EIO: $(cat "$WORK/err")"
	cmp -s <(dd if="$MNT/b" bs=4096 skip=1 status=none) <(dd if="$WORK/b.want" bs=4096 skip=1 status=none) ||
		fail "the rest of b was not readable after one bad page"
	ls "$MNT" >/dev/null || fail "the mount went down after EIO"
	"$KR" fs scrub "$MNT" >"$WORK/scrub"; rc=$?
	[ $rc -eq 1 ] || fail "scrub with unrepairable damage exited $rc"
	grep -q ' [1-9][0-9]* repaired, 1 unrepairable' "$WORK/scrub" || fail "scrub did not repair c's strip and report b's page: $(cat "$WORK/scrub")"
	grep -q '/b' "$WORK/scrub" || fail "scrub did not name /b: $(cat "$WORK/scrub")"
	"$KR" fs umount "$MNT" || fail "umount"
	"$KR" fs fsck "$POOL" --force-pmem >/dev/null && fail "fsck passed a pool with a lost page"
	echo "faults: 1 strip repaired on read, 1 page EIO with the rest readable, 1 strip found by scrub"
}

# Snapshots browsed under DIR/.snapshots/NAME/: the tree as it was, read-only, restorable
# with cp; kept across a remount; deleted from the command line.
case_snapshots() {
	mount_fs ""
	mkdir -p "$MNT/d/e"
	seq 1 5000 >"$MNT/d/e/numbers"
	echo first >"$MNT/f"
	ln -s f "$MNT/link"
	"$KR" fs snapshot create "$MNT" monday || fail "snapshot create"
	echo second >"$MNT/f"
	rm -r "$MNT/d"
	"$KR" fs snapshot create "$MNT" tuesday || fail "second snapshot"
	"$KR" fs snapshot create "$MNT" monday 2>"$WORK/err" && fail "a second snapshot named monday"
	[ "$(ls "$MNT/.snapshots" | tr '\n' ' ')" = "monday tuesday " ] || fail "ls .snapshots: $(ls "$MNT/.snapshots")"
	[ "$(cat "$MNT/.snapshots/monday/f")" = first ] || fail "monday's f"
	[ "$(cat "$MNT/.snapshots/tuesday/f")" = second ] || fail "tuesday's f"
	[ "$(readlink "$MNT/.snapshots/monday/link")" = f ] || fail "monday's symlink"
	seq 1 5000 | cmp -s - "$MNT/.snapshots/monday/d/e/numbers" || fail "monday's d/e/numbers"
	[ -e "$MNT/.snapshots/tuesday/d" ] && fail "tuesday has d, removed before it"
	(echo x >"$MNT/.snapshots/monday/f") 2>/dev/null && fail "a write into a snapshot succeeded"
	rm "$MNT/.snapshots/monday/f" 2>/dev/null && fail "an unlink in a snapshot succeeded"
	mkdir "$MNT/.snapshots/new" 2>/dev/null && fail "mkdir in .snapshots succeeded"
	mkdir "$MNT/.snapshots" 2>/dev/null && fail ".snapshots could be made"
	cp -a "$MNT/.snapshots/monday/d" "$MNT/d" || fail "restore by cp"
	seq 1 5000 | cmp -s - "$MNT/d/e/numbers" || fail "the restored copy differs"
	"$KR" fs snapshot list "$MNT" | grep -q '^tuesday ' || fail "snapshot list"
	"$KR" fs umount "$MNT" || fail "umount"
	"$KR" fs snapshot list "$POOL" --force-pmem | grep -q '^monday ' || fail "snapshot list of the pool"
	"$KR" fs mount "$POOL" "$MNT" --force-pmem || fail "remount"
	[ "$(cat "$MNT/.snapshots/monday/f")" = first ] || fail "monday's f after a remount"
	"$KR" fs snapshot delete "$MNT" monday || fail "snapshot delete"
	[ -e "$MNT/.snapshots/monday" ] && fail "monday still listed after delete"
	"$KR" fs snapshot delete "$MNT" monday 2>/dev/null && fail "deleting a missing snapshot succeeded"
	umount_fsck snapshots
	# The kernel caches names, present and absent, for entry_timeout: a snapshot made or
	# deleted must show at once all the same (names under .snapshots, which change by
	# control commands rather than by requests on that directory, are answered uncached).
	mount_fs "attr_timeout=3600,entry_timeout=3600"
	[ -e "$MNT/.snapshots/wednesday" ] && fail "wednesday exists before it was made"
	"$KR" fs snapshot create "$MNT" wednesday || fail "snapshot create wednesday"
	[ -e "$MNT/.snapshots/wednesday" ] || fail "a new snapshot is hidden by a cached absent name"
	"$KR" fs snapshot delete "$MNT" wednesday || fail "snapshot delete wednesday"
	[ -e "$MNT/.snapshots/wednesday" ] && fail "a deleted snapshot is still there by a cached name"
	umount_fsck snapshots
}

case_cli() {
	"$KR" fs mkfs "$POOL" --size 64M --force-pmem >/dev/null || fail "mkfs"
	"$KR" fs mount "$POOL" "$WORK/missing" --force-pmem 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "mount on a missing directory: rc $rc: $(cat "$WORK/err")"
	head -c 1M /dev/zero >"$WORK/zeros"
	"$KR" fs mount "$WORK/zeros" "$MNT" 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q 'not a keratin-fs pool' "$WORK/err" || fail "mount of a non-pool: rc $rc: $(cat "$WORK/err")"
	grep -q " $MNT " /proc/self/mounts && fail "a failed mount left a mount behind"
	"$KR" fs mount "$POOL" "$MNT" --force-pmem -o bogus_option 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] || fail "unknown mount option accepted: rc $rc"
	"$KR" fs mount "$POOL" "$MNT" --force-pmem -o attr_timeout=x 2>"$WORK/err"; rc=$?
	[ $rc -eq 2 ] || fail "bad attr_timeout: rc $rc"
	"$KR" fs mount "$POOL" "$MNT" --force-pmem || fail "mount"
	mkdir -p "$WORK/mnt2"
	"$KR" fs mount "$POOL" "$WORK/mnt2" --force-pmem 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "already mounted at $MNT\$" "$WORK/err" || fail "second mount of a mounted pool: rc $rc: $(cat "$WORK/err")"
	"$KR" fs fsck "$POOL" --force-pmem >/dev/null 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] || fail "fsck of a mounted pool: rc $rc"
	"$KR" fs umount "$WORK/mnt2" 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q 'not a keratin-fs mount' "$WORK/err" || fail "umount of a plain directory: rc $rc"
	echo data >"$MNT/f"
	exec 9<"$MNT/f"
	"$KR" fs umount "$MNT" 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q busy "$WORK/err" || fail "umount of a busy mount: rc $rc: $(cat "$WORK/err")"
	exec 9<&-
	"$KR" fs info "$MNT" | grep -q '^inodes:' || fail "info DIR"
	"$KR" fs scrub "$MNT" | grep -q ' 0 unrepairable' || fail "scrub DIR"
	"$KR" fs umount "$MNT" || fail "umount"
	"$KR" fs fsck "$POOL" --force-pmem --json >"$WORK/json" || fail "fsck --json"
	grep -q '"clean": true' "$WORK/json" || fail "fsck --json: $(cat "$WORK/json")"
	before=$(cksum <"$POOL")
	"$KR" fs fsck "$POOL" --force-pmem >/dev/null
	"$KR" fs info "$POOL" --force-pmem >"$WORK/info"
	[ "$(cksum <"$POOL")" = "$before" ] || fail "fsck or info changed the pool"
	grep -q '^protection: *full' "$WORK/info" && grep -q '^writes: *copy-on-write' "$WORK/info" ||
		fail "info: protection and writes: $(cat "$WORK/info")"
	# A relaxed pool: in-place overwrites through the mount, then a clean check.
	"$KR" fs mkfs "$WORK/relaxed.pool" --size 16M --relaxed --force-pmem >/dev/null || fail "mkfs --relaxed"
	"$KR" fs info "$WORK/relaxed.pool" --force-pmem | grep -q '^writes: *relaxed' || fail "info of a relaxed pool"
	"$KR" fs mount "$WORK/relaxed.pool" "$MNT" --force-pmem || fail "mount relaxed"
	seq 1 3000 >"$MNT/r"
	printf 'XYZ' | dd of="$MNT/r" bs=1 seek=100 conv=notrunc status=none
	[ "$(head -c 103 "$MNT/r" | tail -c 3)" = XYZ ] || fail "relaxed overwrite not read back"
	"$KR" fs umount "$MNT" || fail "umount relaxed"
	"$KR" fs fsck "$WORK/relaxed.pool" --force-pmem >/dev/null || fail "fsck of the relaxed pool"
	# A zone-parity pool: info names the layout; writes through the mount; a clean check
	# (which recomputes every row's parity); a malformed --parity is a usage error.
	"$KR" fs mkfs "$WORK/zone.pool" --size 16M --parity zone:16 --force-pmem >/dev/null || fail "mkfs --parity zone:16"
	"$KR" fs info "$WORK/zone.pool" --force-pmem | grep -q '^data: .*zone parity: 1 parity page per row of 16 pages' ||
		fail "info of a zone-parity pool: $("$KR" fs info "$WORK/zone.pool" --force-pmem)"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o scan_threads=2 || fail "mount zone -o scan_threads=2"
	seq 1 30000 >"$MNT/z"
	printf 'XYZ' | dd of="$MNT/z" bs=1 seek=5000 conv=notrunc status=none
	[ "$(head -c 5003 "$MNT/z" | tail -c 3)" = XYZ ] || fail "zone-parity overwrite not read back"
	"$KR" fs umount "$MNT" || fail "umount zone"
	"$KR" fs fsck "$WORK/zone.pool" --force-pmem >/dev/null || fail "fsck of the zone-parity pool"
	# A daemon killed under its mount: info and snapshot say so (not "Is a directory"),
	# umount removes the mount and exits 1 saying the pool was not closed cleanly.
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem || fail "mount zone again"
	ino=$(stat -c %i "$WORK/zone.pool") # the daemon is the holder of the pool's flock
	pid=$(awk -v ino="$ino" '$2 == "FLOCK" { split($6, d, ":"); if (d[3] == ino) print $5 }' /proc/locks | head -n 1)
	[ -n "$pid" ] && kill -9 "$pid" || fail "no daemon holds the pool"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	for args in "info $MNT" "snapshot create $MNT x" "scrub $MNT"; do
		# shellcheck disable=SC2086 # split on purpose
		"$KR" fs $args 2>"$WORK/err"; rc=$?
		[ $rc -eq 1 ] && grep -q 'daemon serving this mount has died' "$WORK/err" ||
			fail "fs $args on a dead mount: rc $rc: $(cat "$WORK/err")"
	done
	"$KR" fs umount "$MNT" 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q 'daemon had died before.*not closed cleanly' "$WORK/err" ||
		fail "umount of a dead mount: rc $rc: $(cat "$WORK/err")"
	grep -q " $MNT " /proc/self/mounts && fail "umount left the dead mount behind"
	"$KR" fs fsck "$WORK/zone.pool" --force-pmem >/dev/null || fail "fsck after the daemon was killed"
	"$KR" fs mkfs "$WORK/bad.pool" --size 16M --parity zone:1 2>/dev/null
	[ $? = 2 ] && [ ! -e "$WORK/bad.pool" ] || fail "mkfs --parity zone:1 is not a usage error"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o scan_threads=0 2>/dev/null
	[ $? = 2 ] || fail "-o scan_threads=0 is not a usage error"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o poll=1001 2>/dev/null
	[ $? = 2 ] || fail "-o poll=1001 is not a usage error"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o max_write=4095 2>/dev/null
	[ $? = 2 ] || fail "-o max_write=4095 is not a usage error"
	# Long -o lists are passed on whole or refused, never cut: 2050 bytes (as mount(8)'s
	# helper may pass) mount with their last option, ro, in force; past the limit, exit 2.
	long=$(printf 'rw,%.0s' $(seq 681))suid,ro
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o "$long" || fail "mount with a ${#long}-byte -o list"
	touch "$MNT/written" 2>/dev/null && fail "the ro ending a ${#long}-byte -o list was dropped"
	"$KR" fs umount "$MNT" || fail "umount after the ${#long}-byte -o list"
	long=$(printf 'rw,%.0s' $(seq 1400))ro
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o "$long" 2>"$WORK/err"; rc=$?
	[ $rc -eq 2 ] && grep -q '^keratin fs: mount options too long' "$WORK/err" ||
		fail "a ${#long}-byte -o list is not a usage error: rc $rc: $(cat "$WORK/err")"
	grep -q " $MNT " /proc/self/mounts && fail "a ${#long}-byte -o list left a mount behind"
	# -o ro: an inspection mount. Not a byte of the pool changes, not even the mount's own
	# writes (epoch, recovery, repairs), and writes through the mount fail.
	echo kept >"$WORK/kept"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem || fail "mount for -o ro"
	cp "$WORK/kept" "$MNT/kept" || fail "write before -o ro"
	"$KR" fs umount "$MNT" || fail "umount before -o ro"
	local before
	before=$(cksum <"$WORK/zone.pool")
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o ro || fail "mount -o ro"
	cmp -s "$MNT/kept" "$WORK/kept" || fail "-o ro: the file does not read back"
	touch "$MNT/new" 2>/dev/null && fail "-o ro: a file was created"
	# One pool, one mount: a second one, read-only or not, is refused and names the first.
	# (Two read-only daemons would share the pool's lock, and each umount would wait for
	# the other's daemon.)
	mkdir -p "$WORK/mnt2"
	local mode
	for mode in ro rw; do
		"$KR" fs mount "$WORK/zone.pool" "$WORK/mnt2" --force-pmem -o $mode 2>"$WORK/err"; rc=$?
		[ $rc -eq 1 ] && grep -q "already mounted at $MNT\$" "$WORK/err" ||
			fail "a second mount ($mode) beside -o ro: rc $rc: $(cat "$WORK/err")"
		grep -q " $WORK/mnt2 " /proc/self/mounts && { "$KR" fs umount "$WORK/mnt2"; umount -l "$WORK/mnt2" 2>/dev/null; }
	done
	"$KR" fs umount "$MNT" || fail "umount after -o ro"
	[ "$(cksum <"$WORK/zone.pool")" = "$before" ] || fail "-o ro changed the pool file"
	# A read-only mount beside a reader of the pool (a read-only keratin command holds a
	# shared lock, as flock -s does here): allowed, and its umount waits for its own daemon,
	# not for the reader, which is still there when umount returns.
	flock -s "$WORK/zone.pool" sleep 60 &
	local reader=$!
	sleep 0.2
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o ro 2>"$WORK/err" ||
		fail "-o ro beside a reader: $(cat "$WORK/err")"
	"$KR" fs umount "$MNT" 2>"$WORK/err" || fail "umount of -o ro beside a reader: $(cat "$WORK/err")"
	kill -0 $reader 2>/dev/null || fail "umount of -o ro waited for the reader to let go"
	"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem 2>"$WORK/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "in use by another process" "$WORK/err" ||
		fail "a read-write mount beside a reader: rc $rc: $(cat "$WORK/err")"
	grep -q " $MNT " /proc/self/mounts && fail "a refused read-write mount left a mount behind"
	pkill -P $reader sleep 2>/dev/null
	kill $reader 2>/dev/null
	wait $reader 2>/dev/null
	# Two read-only mounts started at the same instant: one wins, the other is refused.
	local round won
	for round in 1 2 3 4 5; do
		"$KR" fs mount "$WORK/zone.pool" "$MNT" --force-pmem -o ro 2>"$WORK/err1" &
		local a=$!
		"$KR" fs mount "$WORK/zone.pool" "$WORK/mnt2" --force-pmem -o ro 2>"$WORK/err2" &
		local b=$!
		won=0
		wait $a && won=$((won + 1))
		wait $b && won=$((won + 1))
		grep -q " $MNT " /proc/self/mounts && "$KR" fs umount "$MNT"
		grep -q " $WORK/mnt2 " /proc/self/mounts && "$KR" fs umount "$WORK/mnt2"
		[ $won -eq 1 ] || fail "two read-only mounts at once, round $round: $won succeeded: $(cat "$WORK/err1" "$WORK/err2")"
	done
	[ "$(cksum <"$WORK/zone.pool")" = "$before" ] || fail "the read-only mounts changed the pool file"
}

# The daemon's request counts (keratin fs requests DIR) into REQ; reading them costs one
# GETXATTR of the root, counted in the next reading.
snap_requests() {
	REQ=$("$KR" fs requests "$MNT") || fail "keratin fs requests"
}
count_of() {
	echo "$REQ" | awk -v op="$1" '$1 == op { n = $2 } END { print n + 0 }'
}

case_requests() {
	# Long timeouts: no cached attribute expires while counting, on a loaded machine too.
	# With adaptive polling, for the idle check at the end (it changes no request count).
	mount_fs "attr_timeout=3600,entry_timeout=3600,poll=1000"
	# Writes: one WRITE each, and no GETXATTR(security.capability) per write (the daemon
	# drops set-user-ID bits itself, FUSE_HANDLE_KILLPRIV_V2): at most one per file.
	snap_requests
	w0=$(count_of WRITE) x0=$(count_of GETXATTR)
	dd if=/dev/zero of="$MNT/w" bs=4k count=64 conv=notrunc status=none
	snap_requests
	w=$(($(count_of WRITE) - w0)) x=$(($(count_of GETXATTR) - x0 - 1))
	[ $w -eq 64 ] || fail "64 writes of 4 KiB: $w WRITE requests"
	[ $x -le 1 ] || fail "64 writes of 4 KiB: $x GETXATTR requests (one per write?)"
	echo "requests: 64 writes of 4 KiB: $w WRITE, $x GETXATTR"
	# Creating 100 files of 4 KiB and removing them. What remains above passthrough_ll's
	# count: one GETXATTR(security.capability) at the first write of each new inode. No
	# GETATTR of the directory: root mounted without allow_other, so the kernel checks no
	# permissions (no default_permissions) and needs no attributes for a check (it forgets a
	# directory's attributes whenever the directory changes). Another user's mount keeps
	# the kernel's checks and so one GETATTR per creation and removal.
	gmax=101
	if [ "$(id -u)" -eq 0 ]; then
		gmax=1
		grep " $MNT " /proc/mounts | grep -q default_permissions &&
			fail "root's mount without allow_other has default_permissions"
	fi
	mkdir "$MNT/d"
	snap_requests
	c0=$(count_of CREATE) w0=$(count_of WRITE) x0=$(count_of GETXATTR) g0=$(count_of GETATTR) l0=$(count_of LOOKUP)
	f0=$(count_of FLUSH)
	for i in $(seq 100); do head -c 4096 /dev/zero >"$MNT/d/f$i"; done
	snap_requests
	c=$(($(count_of CREATE) - c0)) w=$(($(count_of WRITE) - w0)) x=$(($(count_of GETXATTR) - x0 - 1))
	g=$(($(count_of GETATTR) - g0)) l=$(($(count_of LOOKUP) - l0)) f=$(($(count_of FLUSH) - f0))
	echo "requests: 100 creations: $c CREATE, $l LOOKUP, $w WRITE, $x GETXATTR, $g GETATTR, $f FLUSH"
	[ $c -eq 100 ] && [ $w -eq 100 ] || fail "100 creations: $c CREATE, $w WRITE"
	[ $f -eq 0 ] || fail "100 creations: $f FLUSH (close needs none)"
	[ $x -le 100 ] && [ $g -le $gmax ] && [ $l -le 101 ] || fail "100 creations: $x GETXATTR, $g GETATTR, $l LOOKUP"
	u0=$(count_of UNLINK) g0=$(count_of GETATTR)
	# unlink(2) alone (rm(1) would also stat each file).
	python3 -c 'import os, sys
for i in range(1, 101): os.unlink("%s/f%d" % (sys.argv[1], i))' "$MNT/d"
	snap_requests
	u=$(($(count_of UNLINK) - u0)) g=$(($(count_of GETATTR) - g0))
	echo "requests: 100 removals: $u UNLINK, $g GETATTR"
	[ $u -eq 100 ] && [ $g -le $gmax ] || fail "100 removals: $u UNLINK, $g GETATTR"
	# An idle mount costs no CPU time: the daemon's threads look for requests only for a
	# bounded time after one (adaptive polling), then sleep. Over 3 idle seconds, at most
	# 0.1 s (a thread spinning without bound would show 3 s).
	daemon=
	for p in /proc/[0-9]*; do
		for fd in "$p"/fd/*; do
			[ "$(readlink "$fd" 2>/dev/null)" = "$POOL" ] && daemon=${p#/proc/} && break 2
		done
	done
	[ -n "$daemon" ] || fail "no process holds $POOL open"
	cpu() { awk '{ print $14 + $15 }' /proc/"$daemon"/stat; }
	hz=$(getconf CLK_TCK)
	t0=$(cpu)
	sleep 3
	idle=$(($(cpu) - t0))
	echo "requests: idle daemon: $idle ticks of 1/$hz s in 3 s"
	[ $((idle * 10)) -le "$hz" ] || fail "idle daemon used $idle ticks of 1/$hz s in 3 s"
	# Without the kernel's checks, access(2) reaches the daemon, which answers as root's
	# check would: everything, but execute only where an execute bit is set.
	[ "$(id -u)" -eq 0 ] || { umount_fsck requests; return; }
	: >"$MNT/d/plain" && chmod 644 "$MNT/d/plain" && : >"$MNT/d/tool" && chmod 700 "$MNT/d/tool"
	python3 -c 'import os, sys
d = sys.argv[1]
want = {("plain", os.R_OK | os.W_OK): True, ("plain", os.X_OK): False, ("tool", os.X_OK): True,
        (".", os.W_OK | os.X_OK): True, ("absent", os.F_OK): False}
for (name, mode), ok in want.items():
    if os.access(os.path.join(d, name), mode) != ok:
        sys.exit("access(%s, %d) is %s" % (name, mode, not ok))' "$MNT/d" || fail "access(2) as root"
	"$MNT/d/plain" 2>/dev/null && fail "a file without execute bits ran"
	umount_fsck requests
	# With allow_other, other users come in: the kernel checks every access.
	mount_fs allow_other
	grep " $MNT " /proc/mounts | grep -q default_permissions ||
		fail "a mount with allow_other lacks default_permissions"
	umount_fsck requests
	# Writes of 1 MiB are one request each by default, eight with -o max_write=131072.
	for mw in "" 131072; do
		mount_fs ${mw:+max_write=$mw}
		snap_requests
		w0=$(count_of WRITE)
		dd if=/dev/zero of="$MNT/big" bs=1M count=4 status=none
		snap_requests
		w=$(($(count_of WRITE) - w0)) want=$((${mw:+8 * }4))
		echo "requests: 4 writes of 1 MiB${mw:+ with max_write=$mw}: $w WRITE"
		[ $w -eq $want ] || fail "4 writes of 1 MiB${mw:+ with max_write=$mw}: $w WRITE, not $want"
		umount_fsck requests
	done
}

URING_PARAM=/sys/module/fuse/parameters/enable_uring

case_uring() {
	[ -w "$URING_PARAM" ] || { echo "SKIP: cannot set $URING_PARAM (a kernel without io_uring for FUSE, or not root)"; exit 77; }
	URING_OLD=$(cat "$URING_PARAM")
	trap 'echo "$URING_OLD" >"$URING_PARAM"; cleanup' EXIT
	# Refused while the kernel's switch is off: one line naming it, exit 1, nothing mounted.
	echo N >"$URING_PARAM"
	"$KR" fs mkfs "$POOL" --size 64M --force-pmem >/dev/null || { fail "mkfs"; exit 1; }
	out=$("$KR" fs mount "$POOL" "$MNT" --force-pmem -o uring 2>&1)
	rc=$?
	case "$out" in *"without liburing"*) echo "SKIP: $out"; exit 77 ;; esac
	[ $rc -eq 1 ] || fail "-o uring with enable_uring=N: exit $rc, not 1"
	[ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "enable_uring" ||
		fail "-o uring with enable_uring=N: not one line naming enable_uring: $out"
	grep -q " $MNT fuse.keratin " /proc/self/mounts && fail "-o uring with enable_uring=N left a mount"
	echo "uring: refused while off: $out"
	echo Y >"$URING_PARAM" || { echo "SKIP: cannot set $URING_PARAM to Y"; exit 77; }
	# SIGTERM ends a -o uring daemon: unmounted, its ring threads joined, the pool clean.
	"$KR" fs mount "$POOL" "$MNT" --force-pmem -o uring -f &
	daemon=$!
	for _ in $(seq 500); do grep -q " $MNT fuse.keratin " /proc/self/mounts && break; sleep 0.01; done
	echo data >"$MNT/f" && [ "$(cat "$MNT/f")" = data ] || fail "write and read under -o uring"
	kill -TERM "$daemon"
	for _ in $(seq 500); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.01; done
	kill -0 "$daemon" 2>/dev/null && { fail "the -o uring daemon outlived SIGTERM by 5 s"; kill -9 "$daemon"; }
	wait "$daemon" || fail "the -o uring daemon's exit status after SIGTERM"
	grep -q " $MNT fuse.keratin " /proc/self/mounts && fail "SIGTERM left the -o uring mount"
	out=$("$KR" fs fsck "$POOL" --force-pmem 2>&1) || fail "fsck after SIGTERM: $out"
	rm -f "$POOL"
	MOUNT_OPTS=uring
	case_posix
	FSX_OPS=${FSX_OPS:-1500} case_fsx
	case_real
}

# The pool's last session as `keratin fs info` says it.
last_session() {
	"$KR" fs info "$POOL" --force-pmem 2>&1 | sed -n 's/^last session: *//p'
}

case_mount8() {
	if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
		echo "SKIP: mount(8)'s helpers are run for root, in a private mount namespace (unshare)"
		exit 77
	fi
	local sbin
	sbin=$(readlink -f /sbin)
	mkdir "$WORK/sbin"
	ln -s "$KR" "$WORK/sbin/mount.fuse.keratin"
	"$KR" fs mkfs "$POOL" --size 64M --force-pmem >/dev/null || fail "mkfs"
	printf '%s %s fuse.keratin force_pmem,noauto,nofail,x-keratin.test=1,uhelper=udisks2,user=root 0 0\n' "$POOL" "$MNT" >"$WORK/fstab"
	# Each step in the namespace prints one word the checks below look for.
	unshare -m sh -c '
		set -u
		mount --make-rprivate / && mount --bind "$1" "$2" || { echo "namespace-failed"; exit 1; }
		pool=$3 mnt=$4 fstab=$5 kr=$6
		wait_closed() { # umount(8) returns before the daemon has closed the pool
			i=0
			while [ $i -lt 100 ] && ! "$kr" fs info "$pool" --force-pmem >/dev/null 2>&1; do
				sleep 0.1; i=$((i + 1))
			done
		}
		if mount -t fuse.keratin -o force_pmem "$pool" "$mnt"; then
			grep -q "^$pool $mnt fuse.keratin " /proc/self/mounts && echo "typed-mounted"
			echo kept >"$mnt/file" && sync "$mnt/file" && echo "typed-wrote"
			umount "$mnt" && echo "typed-unmounted"
			wait_closed
		fi
		if mount --fstab "$fstab" "$mnt"; then
			[ "$(cat "$mnt/file")" = kept ] && echo "fstab-read"
			umount "$mnt" && echo "fstab-unmounted"
			wait_closed
		fi
		mount -t fuse.keratin -o force_pmem "$pool.missing" "$mnt" 2>"$pool.err" || echo "missing-refused"
		mount -t fuse.keratin -o force_pmem,no_such_option "$pool" "$mnt" 2>>"$pool.err" || echo "option-refused"
		grep -q " $mnt " /proc/self/mounts && umount "$mnt"
		wait_closed
	' sh "$WORK/sbin" "$sbin" "$POOL" "$MNT" "$WORK/fstab" "$KR" >"$WORK/steps" 2>"$WORK/err"
	for step in typed-mounted typed-wrote typed-unmounted fstab-read fstab-unmounted missing-refused option-refused; do
		grep -qx "$step" "$WORK/steps" || fail "mount(8): step $step did not happen ($(tr '\n' ' ' <"$WORK/err"))"
	done
	grep -q "$POOL.missing" "$POOL.err" || fail "mount(8) of a missing pool: the message does not name it: $(cat "$POOL.err")"
	case "$(last_session)" in
	"unmounted cleanly"*) ;;
	*) fail "after umount(8) the last session is: $(last_session)" ;;
	esac
	"$KR" fs fsck "$POOL" --force-pmem >/dev/null || fail "fsck after mount(8)"
	rm -f "$POOL.err"
}

skip_unless_fuse
case "$CASE" in
requests) case_requests ;;
posix) case_posix ;;
fsx) case_fsx ;;
real) case_real ;;
kill) case_kill ;;
cli) case_cli ;;
snapshots) case_snapshots ;;
faults) case_faults ;;
uring) case_uring ;;
mount8) case_mount8 ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
[ $status -eq 0 ] && echo "PASS: fuse $CASE"
exit $status
