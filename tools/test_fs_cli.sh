#!/bin/sh
# test_fs_cli.sh - end-to-end checks of `keratin fs`, run by ctest as
#
#     test_fs_cli.sh PATH/TO/keratin CASE
#
# files: mkfs, mkdir, put, ls, cat, rm, info; usage: bad command lines exit 2 with one line
# of error and a hint; damage: check finds a damaged superblock and a damaged inode slot
# without changing a byte (exit 1), repair fixes them, check is then clean. Pools are small
# and live in /dev/shm where there is one. Prints every failed check and exits 1 if any.
set -u
KR=$1
CASE=$2
if [ -d /dev/shm ] && [ -w /dev/shm ]; then BASE=/dev/shm; else BASE=${TMPDIR:-/tmp}; fi
DIR=$(mktemp -d "$BASE/keratin-fs-cli.XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
P=$DIR/p.pool

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# expect STATUS ARGS...: runs keratin fs ARGS --force-pmem, output in $DIR/out and $DIR/err.
expect() {
	want=$1
	shift
	"$KR" fs "$@" --force-pmem >"$DIR/out" 2>"$DIR/err"
	got=$?
	[ "$got" -eq "$want" ] || fail "'keratin fs $*' exited $got, expected $want; stderr: $(cat "$DIR/err")"
}

has() {
	grep -q -- "$2" "$DIR/$1" || fail "no line matching '$2' in $1 of the last command: $(cat "$DIR/$1")"
}

case $CASE in
files)
	expect 0 mkfs "$P" --size 16M
	expect 0 mkdir "$P" /docs
	printf 'hello, keratin-fs\n' >"$DIR/in.txt"
	expect 0 put "$P" "$DIR/in.txt" /docs/a.txt
	expect 0 ls "$P" /docs
	has out "^100644   1 .* 18 a.txt$"
	expect 0 cat "$P" /docs/a.txt
	cmp -s "$DIR/out" "$DIR/in.txt" || fail "cat gave other bytes than put"
	expect 0 info "$P"
	has out "^inodes: *255 (252 free)$"
	has out "^last session: *unmounted cleanly"
	expect 1 rm "$P" /docs
	has err "Directory not empty"
	expect 0 rm "$P" /docs/a.txt
	expect 0 rm "$P" /docs
	expect 1 cat "$P" /docs/a.txt
	has err "^keratin fs: /docs/a.txt: No such file or directory$"
	expect 0 check "$P"
	has out "0 problems$"
	;;
usage)
	for args in "" "bogus $P" "mkfs $P" "ls $P" "put $P x" "info $P --size 1M" "mkfs $P --size 1Q"; do
		# shellcheck disable=SC2086
		expect 2 $args
		[ "$(wc -l <"$DIR/err")" -eq 2 ] || fail "'keratin fs $args': not two lines on stderr"
		has err "^Try 'keratin fs --help'\.$"
	done
	printf 'not a pool' >"$DIR/np"
	expect 1 check "$DIR/np"
	has err "too small for a keratin-fs pool"
	head -c 65536 /dev/zero >"$DIR/zeros"
	expect 1 check "$DIR/zeros"
	has err "not a keratin-fs pool$"
	expect 1 mkfs "$DIR/small" --size 1M
	;;
damage)
	expect 0 mkfs "$P" --size 16M --inodes 64
	printf 'data\n' >"$DIR/in.txt"
	expect 0 put "$P" "$DIR/in.txt" /f
	# The superblock's reserved bytes, and inode 2's slot (4 journals: the table at 20480).
	printf 'XXXXXXXX' | dd of="$P" bs=1 seek=300 conv=notrunc 2>/dev/null
	printf 'XXXXXXXX' | dd of="$P" bs=1 seek=$((20480 + 2 * 128 + 40)) conv=notrunc 2>/dev/null
	cp "$P" "$DIR/before"
	expect 1 check "$P"
	has out "repairable: superblock at pool offset 0$"
	has out "repairable: inode slot at pool offset"
	has out "2 problems$"
	cmp -s "$P" "$DIR/before" || fail "check changed the pool file"
	expect 0 info "$P"
	has out "^repairs: *2 needed at mount$"
	expect 0 repair "$P"
	has out "0 unrepairable$"
	expect 0 check "$P"
	has out "0 problems$"
	expect 0 cat "$P" /f
	has out "^data$"
	;;
*)
	echo "test_fs_cli.sh: unknown case '$CASE'" >&2
	exit 2
	;;
esac

[ "$fails" -eq 0 ] || {
	echo "$fails check(s) failed"
	exit 1
}
