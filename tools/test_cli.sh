#!/bin/sh
# test_cli.sh - end-to-end checks of the keratin command line, run by ctest as
#
#     test_cli.sh PATH/TO/keratin create-info|usage|not-a-pool
#
# create-info: pools are created and described; usage: bad command lines exit 2 with one
# line of error and a hint; not-a-pool: files that are not pools exit 1 with one line.
# Prints every failed check and exits 1 if there was any.
set -u
KR=$1
CASE=$2
DIR=$(mktemp -d "${TMPDIR:-/tmp}/keratin-cli.XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# expect STATUS COMMAND...: runs COMMAND with its output in $DIR/out and $DIR/err.
expect() {
	want=$1
	shift
	"$@" >"$DIR/out" 2>"$DIR/err"
	got=$?
	[ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want; stderr: $(cat "$DIR/err")"
}

# has FILE PATTERN: FILE has a line matching the basic regular expression PATTERN.
has() {
	grep -q -- "$2" "$DIR/$1" || fail "no line matching '$2' in $1 of the last command: $(cat "$DIR/$1")"
}

lines() {
	n=$(wc -l <"$DIR/$1")
	[ "$n" -eq "$2" ] || fail "$1 of the last command has $n lines, expected $2: $(cat "$DIR/$1")"
}

# usage_error ARGS...: exit 2, nothing on stdout, the error and the hint on stderr.
usage_error() {
	expect 2 "$KR" "$@"
	lines out 0
	lines err 2
	has err "^keratin"
	has err "^Try 'keratin.* --help'\.$"
}

# lib_error PATH ARGS...: exit 1, nothing on stdout, one line naming PATH on stderr.
lib_error() {
	path=$1
	shift
	expect 1 "$KR" "$@"
	lines out 0
	lines err 1
	has err "^keratin: $path: ."
}

case $CASE in
create-info)
	P=$DIR/a.pool
	expect 0 "$KR" create "$P" --size 16M
	lines out 1
	has out "^created $P: 16.0 MiB"
	lines err 0 # not a terminal: no progress bar
	expect 0 "$KR" info "$P"
	for key in uuid "pool size" "durability mode" zones rows "row size" "zone size" lanes \
		"heap size" used free "live objects" "max object size" "parity overhead" \
		"metadata overhead" recovered; do
		has out "^$key: "
	done
	has out "^pool size: *16777216 (16.0 MiB)$"
	has out "^durability mode: *page cache$"
	has out "^rows: *100 data"
	has out "^lanes: *16 x [0-9.]* KiB$"
	has out "^parity overhead: *[0-9]* ([0-9.]* [KMG]*i*B, [0-9.]*% of pool)$"
	has out "^recovered: *no$"
	# The value column is aligned: every value starts in the same column.
	[ "$(awk '{ match($0, /: +/); print RSTART + RLENGTH }' "$DIR/out" | sort -u | wc -l)" -eq 1 ] ||
		fail "info values are not aligned: $(cat "$DIR/out")"

	P=$DIR/b.pool
	expect 0 "$KR" create --size=32MiB --rows 10 --lanes 4 --lane-kib 64 --force-pmem "$P"
	expect 0 "$KR" info --force-pmem "$P"
	has out "^pool size: *33554432 "
	has out "^durability mode: *emulated$"
	has out "^rows: *10 data"
	has out "^lanes: *4 x 64.0 KiB$"

	lib_error "$P" create "$P" --size 16M # the file exists
	;;
usage)
	P=$DIR/u.pool
	usage_error
	usage_error frob
	usage_error --frob
	usage_error create "$P"
	usage_error create "$P" --size
	usage_error create "$P" --size 12Q
	usage_error create "$P" --size abc
	usage_error create "$P" --size -5
	usage_error create "$P" --size 0
	usage_error create "$P" --size 99999999999T
	usage_error create "$P" --size 16M --rows 0
	usage_error create "$P" --size 16M --lanes x
	usage_error create "$P" --size 16M --lane-kib 4294967296
	usage_error create "$P" --size 16M --lane-kib 6
	usage_error create "$P" --size 16M --bogus
	usage_error create "$P" --size 16M -x
	usage_error create "$P" extra --size 16M
	usage_error create --size 16M
	usage_error info
	usage_error info "$P" extra
	usage_error info "$P" --size 16M
	usage_error help frob
	usage_error help create info
	[ -e "$P" ] && fail "a failed command line created $P"

	for args in --help -h help "help create" "help info" "create --help" "info --help" \
		"help --help"; do
		# shellcheck disable=SC2086 # split on purpose
		expect 0 "$KR" $args
		has out "^usage: keratin"
		lines err 0
	done
	expect 0 "$KR" help create
	has out "--size SIZE"
	;;
not-a-pool)
	echo "hello, I am not a pool" >"$DIR/text"
	lib_error "$DIR/text" info "$DIR/text"
	: >"$DIR/empty"
	lib_error "$DIR/empty" info "$DIR/empty"
	dd if=/dev/zero of="$DIR/zeros" bs=1M count=16 2>/dev/null
	lib_error "$DIR/zeros" info "$DIR/zeros"
	lib_error "$DIR/missing" info "$DIR/missing"
	lib_error "$DIR" info "$DIR"
	;;
*)
	echo "test_cli.sh: unknown case '$CASE'" >&2
	exit 2
	;;
esac

[ "$fails" -eq 0 ] || {
	echo "$fails check(s) failed"
	exit 1
}
