#!/bin/sh
# test_cli.sh - end-to-end checks of the keratin command line, run by ctest as
#
#     test_cli.sh PATH/TO/keratin CASE PATH/TO/kr-fill
#
# create-info: pools are created and described; usage: bad command lines exit 2 with one
# line of error and a hint; not-a-pool: files that are not pools exit 1 with one line;
# check-repair: damage is found by check (exit 1), undone by repair and scrub, and damage
# parity cannot undo is reported; media: emulated media errors are repaired by the next
# open; map: the picture and its SVG; region: protected regions' sidecars; kinds: info
# and check on every kind of file; messages: what
# users read when something fails (no source locations unless KERATIN_DEBUG=1); fs-files,
# fs-usage, fs-damage: keratin-fs pools through `keratin fs`; progress: progress bars only
# on a terminal, never with --quiet. Pools are small (16 MiB) and
# live in /dev/shm where there is one, filled by kr-fill. Prints every failed check and exits
# 1 if there was any.
set -u
KR=$1
CASE=$2
FILL=${3:-}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then BASE=/dev/shm; else BASE=${TMPDIR:-/tmp}; fi
DIR=$(mktemp -d "$BASE/keratin-cli.XXXXXX") || exit 1
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

# new_pool NAME: a 16 MiB pool $DIR/NAME.pool holding kr-fill's objects. Sets P to its path,
# BIG to the oid of kr-fill's 256 KiB object, which is wider than a row of this pool, and
# SMALL to that of its 100-byte object, which lies in one page.
new_pool() {
	P=$DIR/$1.pool
	"$KR" create "$P" --size 16M --force-pmem >/dev/null || fail "cannot create $P"
	"$FILL" "$P" 300 --force-pmem >"$DIR/fill" || fail "kr-fill $P failed: $(cat "$DIR/fill")"
	BIG=$(sed -n 's/^big object: \(0x[0-9a-f]*\) .*/\1/p' "$DIR/fill")
	SMALL=$(sed -n 's/^small object: \(0x[0-9a-f]*\) .*/\1/p' "$DIR/fill")
	if [ -z "$BIG" ] || [ -z "$SMALL" ]; then fail "kr-fill printed no oids: $(cat "$DIR/fill")"; fi
}

# no_escapes FILE: output that is not a terminal has no colour codes.
no_escapes() {
	! grep -q "$(printf '\033')" "$DIR/$1" || fail "escape codes in $1 of the last command"
}

case $CASE in
fs-files)
	# keratin fs: a pool made, files put in by path, listed, read back, removed.
	P=$DIR/fs.pool
	expect 0 "$KR" fs mkfs "$P" --size 16M --force-pmem
	expect 0 "$KR" fs mkdir "$P" /docs --force-pmem
	printf 'hello, keratin-fs\n' >"$DIR/in.txt"
	expect 0 "$KR" fs put "$P" "$DIR/in.txt" /docs/a.txt --force-pmem
	expect 0 "$KR" fs ls "$P" /docs --force-pmem
	has out "^100644   1 .* 18 a.txt$"
	expect 0 "$KR" fs cat "$P" /docs/a.txt --force-pmem
	cmp -s "$DIR/out" "$DIR/in.txt" || fail "cat gave other bytes than put"
	expect 0 "$KR" fs info "$P" --force-pmem
	has out "^inodes: *255 (252 free)$"
	has out "^last session: *unmounted cleanly"
	expect 1 "$KR" fs rm "$P" /docs --force-pmem
	has err "Directory not empty"
	expect 0 "$KR" fs rm "$P" /docs/a.txt --force-pmem
	expect 0 "$KR" fs rm "$P" /docs --force-pmem
	expect 1 "$KR" fs cat "$P" /docs/a.txt --force-pmem
	has err "^keratin fs: /docs/a.txt: No such file or directory$"
	expect 0 "$KR" fs check "$P" --force-pmem
	has out "0 problems$"
	;;
fs-usage)
	P=$DIR/fs.pool
	for args in "" "bogus $P" "mkfs $P" "ls $P" "put $P x" "info $P --size 1M" "mkfs $P --size 1Q"; do
		# shellcheck disable=SC2086
		expect 2 "$KR" fs $args
		lines err 2
		has err "^Try 'keratin fs --help'\.$"
	done
	printf 'not a pool' >"$DIR/np"
	expect 1 "$KR" fs check "$DIR/np"
	has err "too small for a keratin-fs pool"
	head -c 65536 /dev/zero >"$DIR/zeros"
	expect 1 "$KR" fs check "$DIR/zeros"
	has err "not a keratin-fs pool; .*by 'keratin fs mkfs'"
	expect 1 "$KR" fs mkfs "$DIR/small" --size 1M
	;;
progress)
	# Progress bars: never when stderr is not a terminal, or with --quiet; on a
	# pseudo-terminal (script(1)) for fs mkfs, fsck and scrub and pool check, repair and
	# scrub (no delay, so that quick work draws too).
	export KERATIN_PROGRESS_DELAY_MS=0
	new_pool c
	for verb in check repair scrub; do
		expect 0 "$KR" $verb "$P" --force-pmem
		lines err 0
		if command -v script >/dev/null; then
			script -qc "$KR $verb $P --force-pmem" /dev/null >"$DIR/tty" 2>&1 </dev/null
			grep -q "ing \[#*\.*\] *[0-9]*%" "$DIR/tty" || fail "no progress bar for pool $verb on a terminal"
			script -qc "$KR $verb $P --force-pmem --quiet" /dev/null >"$DIR/tty" 2>&1 </dev/null
			! grep -q "ing \[" "$DIR/tty" || fail "a progress bar for pool $verb --quiet"
		fi
	done
	P=$DIR/fs.pool
	expect 0 "$KR" fs mkfs "$P" --size 64M --force-pmem
	lines err 0
	for verb in fsck scrub; do
		expect 0 "$KR" fs $verb "$P" --force-pmem
		lines err 0
	done
	if ! command -v script >/dev/null; then
		echo "SKIP: script(1) is missing: no pseudo-terminal checks"
	else
		for cmd in "mkfs $P --size 64M:formatting" "fsck $P:checking" "scrub $P:scrubbing" \
			"fsck $P --repair:repairing"; do
			[ "${cmd%% *}" = mkfs ] && rm -f "$P"
			script -qc "$KR fs ${cmd%%:*} --force-pmem" /dev/null >"$DIR/tty" 2>&1 </dev/null
			grep -q "${cmd##*:} \[#*\.*\] *[0-9]*%" "$DIR/tty" || fail "no progress bar for '${cmd%%:*}' on a terminal: $(od -c "$DIR/tty" | head -3)"
			grep -q "$(printf '\033')\[K" "$DIR/tty" || fail "the bar of '${cmd%%:*}' is not erased"
			[ "${cmd%% *}" = mkfs ] && rm -f "$P"
			script -qc "$KR fs ${cmd%%:*} --force-pmem --quiet" /dev/null >"$DIR/tty" 2>&1 </dev/null
			! grep -q "${cmd##*:} \[" "$DIR/tty" || fail "a progress bar for '${cmd%%:*} --quiet'"
			[ -f "$P" ] || fail "no pool after '${cmd%%:*} --quiet': $(cat "$DIR/tty")"
		done
	fi
	;;
fs-damage)
	# Damage found by check without changing a byte, undone by repair.
	P=$DIR/fs.pool
	expect 0 "$KR" fs mkfs "$P" --size 16M --inodes 64 --force-pmem
	printf 'data\n' >"$DIR/in.txt"
	expect 0 "$KR" fs put "$P" "$DIR/in.txt" /f --force-pmem
	# The superblock's reserved bytes, and inode 2's slot (4 journals: the table at 20480).
	printf 'XXXXXXXX' | dd of="$P" bs=1 seek=300 conv=notrunc 2>/dev/null
	printf 'XXXXXXXX' | dd of="$P" bs=1 seek=$((20480 + 2 * 128 + 40)) conv=notrunc 2>/dev/null
	cp "$P" "$DIR/before"
	expect 1 "$KR" fs check "$P" --force-pmem
	has out "repairable: superblock at pool offset 0$"
	has out "repairable: inode slot at pool offset"
	has out "2 problems$"
	cmp -s "$P" "$DIR/before" || fail "check changed the pool file"
	expect 0 "$KR" fs info "$P" --force-pmem
	has out "^repairs: *2 since mount"
	expect 0 "$KR" fs repair "$P" --force-pmem
	has out "0 unrepairable$"
	expect 0 "$KR" fs check "$P" --force-pmem
	has out "0 problems$"
	expect 0 "$KR" fs cat "$P" /f --force-pmem
	has out "^data$"
	# inject takes a file-system pool at a given offset: a media error in /f's data page
	# is rebuilt from zone parity at the next mount (page parity covers one strip of a
	# page, not a whole lost page: that gives EIO for the page, tested by fs_media).
	usage_error inject "$P" media
	P=$DIR/zone.pool
	expect 0 "$KR" fs mkfs "$P" --size 16M --parity zone:8 --force-pmem
	expect 0 "$KR" fs put "$P" "$DIR/in.txt" /f --force-pmem
	expect 0 "$KR" fs locate "$P" /f 0 --force-pmem
	page=$(sed -n 's/^data page: *\(0x[0-9a-f]*\)$/\1/p' "$DIR/out")
	[ -n "$page" ] || fail "fs locate printed no data page: $(cat "$DIR/out")"
	expect 0 "$KR" inject "$P" media --offset "$page" --force-pmem
	dd if="$P" bs=4096 skip=$((page / 4096)) count=1 status=none | grep -q '^data$' &&
		fail "inject media left /f's page readable"
	expect 0 "$KR" fs cat "$P" /f --force-pmem
	has out "^data$"
	;;
kinds)
	# info and check take every kind of file keratin makes and say which one they found;
	# each is judged by its own command and left unchanged.
	F=$DIR/k.dat
	yes keratin | head -c 1048576 >"$F"
	expect 0 "$KR" region protect "$F"
	for f in "$F" "$F.krs"; do
		before=$(cksum <"$f")
		expect 0 "$KR" info "$f"
		has out "^kind: *protected region"
		has out "^state: *clean"
		expect 0 "$KR" check "$f"
		has out "^result: *sound$"
		[ "$(cksum <"$f")" = "$before" ] || fail "info/check changed $f"
	done
	expect 0 "$KR" fs mkfs "$DIR/k.kfs" --size 8M --force-pmem
	expect 0 "$KR" info "$DIR/k.kfs" --force-pmem
	has out "^kind: *keratin-fs pool$"
	has out "^inodes: "
	expect 0 "$KR" check "$DIR/k.kfs" --force-pmem
	has out " 0 problems$"
	expect 0 "$KR" check --json "$DIR/k.kfs" --force-pmem
	has out '"clean": true'
	printf 'KRHAMP1\0' >"$DIR/k.map"
	head -c 8184 /dev/zero >>"$DIR/k.map"
	expect 0 "$KR" check "$DIR/k.map"
	has out "^kind: *single-trip hash map$"
	has out "unprotected map"
	expect 2 "$KR" info --json "$DIR/k.map"
	;;
region)
	# A protected region's sidecar: made, shown, checked; a flipped byte found and undone.
	F=$DIR/r.dat
	yes keratin | head -c 4194304 >"$F"
	cp "$F" "$DIR/orig"
	lib_error "$F" region status "$F"
	expect 0 "$KR" region protect "$F"
	has out "^protected: *1024 pages, 256 stripes, sidecar $F.krs$"
	expect 0 "$KR" region status "$F"
	has out "^state: *clean"
	has out "^covered: *1024 of 1024 pages (100.0%)$"
	has out "^crash level: *2 "
	expect 0 "$KR" region check "$F"
	has out "^result: *sound$"
	has out "^stripes checked: *256$"
	# check --deep on a file with a sidecar is the region check.
	expect 0 "$KR" check --deep "$F"
	has out "^stripes checked: *256$"
	has out "^result: *sound$"
	printf 'Q' | dd of="$F" bs=1 seek=100000 conv=notrunc 2>/dev/null
	expect 1 "$KR" region check "$F"
	has out "^damaged pages: *1$"
	has out "^result: *DAMAGED, first bad: data page 24 (offset 0x18000)$"
	cmp -s "$F" "$DIR/orig" && fail "check changed nothing, so the damage must still be there"
	expect 0 "$KR" region repair "$F"
	has out "^pages rebuilt: *1$"
	has out "^result: *sound after repairs$"
	cmp -s "$F" "$DIR/orig" || fail "repair did not restore the file byte for byte"
	expect 0 "$KR" region scrub "$F" --rate 1000
	has out "^speed: "
	has out "^result: *sound$"
	# Damage in the sidecar's redundancy is reported once, as what it is, where it is:
	# a parity page (stripe 5) and a page of stored checksums (the first). Repair restores
	# each page byte for byte (the rest of the sidecar records the sessions).
	S=$F.krs
	poff=$(( $(od -A n -t u8 -j 128 -N 8 "$S") + 5 * 4096 ))
	coff=$(od -A n -t u8 -j 112 -N 8 "$S" | tr -d ' ')
	page() { dd if="$S" bs=4096 skip=$(($1 / 4096)) count=1 2>/dev/null; }
	page $poff >"$DIR/parity.orig"
	page $coff >"$DIR/crcs.orig"
	printf 'Q' | dd of="$S" bs=1 seek=$((poff + 7)) conv=notrunc 2>/dev/null
	expect 1 "$KR" region check "$F"
	has out "^damaged pages: *0$"
	has out "^damaged parity: *1 page$"
	has out "^damaged checksums: *0 pages"
	has out "^result: *DAMAGED, first bad: parity page of stripe 5 (sidecar offset $(printf '0x%x' $poff))$"
	expect 0 "$KR" region repair "$F"
	has out "^parity rebuilt: *1$"
	page $poff | cmp -s - "$DIR/parity.orig" || fail "repair did not restore the parity page"
	printf 'Q' | dd of="$S" bs=1 seek=$((coff + 40)) conv=notrunc 2>/dev/null
	expect 1 "$KR" region check "$F"
	has out "^damaged pages: *0$"
	has out "^damaged checksums: *1 page of the checksum array$"
	has out "^result: *DAMAGED, first bad: checksum page 0 (sidecar offset $(printf '0x%x' $coff))$"
	expect 0 "$KR" region repair "$F"
	page $coff | cmp -s - "$DIR/crcs.orig" || fail "repair did not restore the checksum page"
	expect 0 "$KR" region check "$F"
	has out "^result: *sound$"
	# After a crash: one damaged page of a cold segment is one damaged page.
	G=$DIR/g.dat
	yes keratin | head -c 8388608 >"$G"
	"$FILL" --region-crash "$G" || fail "kr-fill --region-crash failed"
	printf 'Q' | dd of="$G" bs=1 seek=$((700 * 4096 + 9)) conv=notrunc 2>/dev/null
	expect 1 "$KR" region check "$G"
	has out "^damaged pages: *1$"
	has out "^result: *DAMAGED, first bad: data page 700 (offset 0x2bc000)$"
	expect 0 "$KR" region repair "$G"
	has out "^damaged pages: *1$"
	has out "^pages rebuilt: *1$"
	# Bad command lines and a sidecar that is not one.
	usage_error region
	usage_error region bogus "$F"
	usage_error region check
	usage_error region check "$F" extra
	usage_error region check "$F" --rate 5
	usage_error region scrub "$F" --rate x
	head -c 20000 /dev/zero >"$DIR/bad.krs"
	lib_error "$F" region check "$F" --sidecar "$DIR/bad.krs"
	;;
create-info)
	P=$DIR/a.pool
	expect 0 "$KR" create "$P" --size 16M
	lines out 1
	has out "^created $P: 16.0 MiB"
	lines err 0 # not a terminal: no progress bar
	expect 0 "$KR" info "$P"
	for key in uuid "pool size" "durability mode" zones rows "row size" "zone size" lanes \
		"heap size" used free "live objects" "max object size" "parity overhead" \
		"metadata overhead" redundancy recovered "repairable at open"; do
		has out "^$key: "
	done
	has out "^pool size: *16777216 (16.0 MiB)$"
	has out "^durability mode: *page cache$"
	has out "^rows: *100 data"
	has out "^lanes: *16 x [0-9.]* KiB$"
	has out "^parity overhead: *[0-9]* ([0-9.]* [KMG]*i*B, [0-9.]*% of pool)$"
	has out "^recovered: *no$"
	has out "^redundancy: *meta checksums, object checksums, parity, log replica$"
	has out "^protection: *full (crashes, media errors and scribbles repaired)$"
	has out "^plain reads: *not verified by default"
	has out "^repairable at open: *0 pages after media errors, 0 items after checksum errors$"
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

	# The lesser protection levels, for measuring what each mechanism costs.
	for level in none:none "ml:meta checksums, log replica" "mlp:meta checksums, parity, log replica"; do
		Q=$DIR/${level%%:*}.pool
		expect 0 "$KR" create --size 16M --protection "${level%%:*}" --force-pmem "$Q"
		expect 0 "$KR" info --force-pmem "$Q"
		has out "^redundancy: *${level#*:}$"
	done

	lib_error "$P" create "$P" --size 16M # the file exists

	# --json is valid JSON for any path bytes: a name that is not UTF-8 (bytes 0xff, 0xc3
	# without its continuation, an overlong '/'), a quote and a tab come back byte for byte.
	Q=$(printf '%s/n\377\303x\300\257"\tq\303\251.pool' "$DIR")
	expect 0 "$KR" create "$Q" --size 16M --force-pmem
	expect 0 "$KR" info --json "$Q" --force-pmem
	python3 -c 'import json,os,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); assert os.fsencode(sys.argv[2]) == d["file"].encode("utf-8", "surrogateescape"), d["file"]' "$DIR/out" "$Q" ||
		fail "info --json of a non-UTF-8 path: $(cat "$DIR/out")"
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
	usage_error create "$P" --size 16M --protection most
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
	for cmd in check repair scrub map; do
		usage_error $cmd
		usage_error $cmd "$P" extra
		usage_error $cmd "$P" --bogus
	done
	usage_error map "$P" --svg
	usage_error map "$P" --svg ""
	usage_error inject
	usage_error inject "$P"
	usage_error inject "$P" frob
	usage_error inject "$P" media extra
	usage_error inject "$P" media --offset xyz
	usage_error inject "$P" media --offset -5
	usage_error inject "$P" media --offset 0x
	usage_error inject "$P" media --length 10
	usage_error inject "$P" scribble --length 0
	usage_error inject "$P" scribble --seed abc
	[ -e "$P" ] && fail "a failed command line created $P"

	for args in --help -h help "help create" "help info" "create --help" "info --help" \
		"help --help" "check --help" "repair -h" "help scrub" "inject --help" "map --help"; do
		# shellcheck disable=SC2086 # split on purpose
		expect 0 "$KR" $args
		has out "^usage: keratin"
		lines err 0
	done
	expect 0 "$KR" help create
	has out "--size SIZE"
	has out "^accepts: new pool$"
	# The overview says which kind of file each command takes.
	expect 0 "$KR" --help
	has out "^  map  *pool  "
	has out "^  inject  *pool, fs  "
	has out "^  fs  *fs  "
	for c in info check repair scrub; do
		has out "^  $c  *any kind  "
	done
	has out "^  region   region  "
	;;
messages)
	# A user's message says what failed, where and what to do; where in keratin's source the
	# damage was detected only with KERATIN_DEBUG=1.
	new_pool m
	"$KR" inject "$P" scribble --seed 3 --force-pmem >/dev/null || fail "inject failed"
	expect 1 "$KR" check "$P" --force-pmem
	has err "^keratin: $P: .* at pool offset 0x[0-9a-f]*; 'keratin repair' rebuilds"
	grep -q '\.c:[0-9]' "$DIR/err" && fail "source location in a user's message: $(cat "$DIR/err")"
	expect 1 env KERATIN_DEBUG=1 "$KR" check "$P" --force-pmem
	has err "(detected at [a-z_]*\.c:[0-9]*)"
	lib_error "$P" create "$P" --size 16M
	has err "; remove it or choose another path$"
	echo "hello, I am not a pool" >"$DIR/text"
	lib_error "$DIR/text" info "$DIR/text"
	has err "; pools are made by 'keratin create'"
	# A pool that lost its end is a pool: the message says so, not how pools are made.
	new_pool t
	truncate -s 8M "$P"
	lib_error "$P" info "$P" --force-pmem
	has err "file has 8388608 bytes, pool needs 16777216; the file lost its end"
	grep -q "pools are made by" "$DIR/err" && fail "a truncated pool told how pools are made: $(cat "$DIR/err")"
	;;
rm)
	# keratin rm: the file and its side files; nothing else, nothing in use.
	new_pool r
	expect 0 "$KR" inject "$P" media --offset 0x10000 --force-pmem
	[ -e "$P.badblocks" ] || fail "inject made no bad-block list"
	expect 0 "$KR" rm "$P"
	has out "^removed $P.badblocks$"
	has out "^removed $P$"
	[ -e "$P" ] || [ -e "$P.badblocks" ] && fail "rm left files behind"
	lib_error "$P" rm "$P"
	expect 0 "$KR" rm --force "$P"
	lines out 0
	# A protected region's data file goes with its sidecar; the sidecar alone is refused.
	head -c 1M /dev/urandom >"$DIR/reg"
	expect 0 "$KR" region protect "$DIR/reg"
	lib_error "$DIR/reg.krs" rm "$DIR/reg.krs"
	expect 0 "$KR" rm "$DIR/reg"
	has out "^removed $DIR/reg.krs$"
	[ -e "$DIR/reg" ] || [ -e "$DIR/reg.krs" ] && fail "rm left a region's files behind"
	# Not keratin's: refused, kept.
	echo "hello, I am not a pool" >"$DIR/text"
	lib_error "$DIR/text" rm "$DIR/text"
	has err "not a keratin file"
	[ -e "$DIR/text" ] || fail "rm removed a file that is not keratin's"
	# In use: a file-system pool held by an inspection of it is refused.
	expect 0 "$KR" fs mkfs "$DIR/fs.pool" --size 16M --force-pmem
	flock -s "$DIR/fs.pool" sleep 3 &
	sleep 0.5
	lib_error "$DIR/fs.pool" rm "$DIR/fs.pool"
	has err "in use"
	wait
	expect 0 "$KR" rm "$DIR/fs.pool"
	usage_error rm
	usage_error rm "$DIR/a" "$DIR/b"
	usage_error rm --bogus "$DIR/a"
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
	lib_error "$DIR/text" check "$DIR/text"
	lib_error "$DIR/zeros" repair "$DIR/zeros"
	lib_error "$DIR/missing" scrub "$DIR/missing"
	lib_error "$DIR/zeros" map "$DIR/zeros"
	lib_error "$DIR/zeros" inject "$DIR/zeros" media
	lib_error "$DIR/missing" inject "$DIR/missing" media --offset 0
	# Only pools and file-system pools take faults: the file is left alone, with no
	# bad-block list made for it.
	cp "$DIR/text" "$DIR/text.before"
	lib_error "$DIR/text" inject "$DIR/text" media --offset 0
	has err "not a keratin pool or file-system pool"
	cmp -s "$DIR/text" "$DIR/text.before" && [ ! -e "$DIR/text.badblocks" ] ||
		fail "inject changed a file that is not a pool"
	;;
check-repair)
	new_pool c
	expect 0 "$KR" check "$P" --force-pmem
	for key in pool recovered "repairable at open" objects "chunk records" "parity columns" \
		unrepairable scanned result; do
		has out "^$key: "
	done
	has out "^objects: *[1-9][0-9]* checked, 0 bad$"
	has out "^parity columns: *[1-9][0-9]* checked, 0 disagreeing$"
	has out "^scanned: *[0-9.]* MiB in [0-9.]* m*s, [0-9.]* GB/s$"
	has out "^result: *sound$"
	lines err 0
	# The deep check adds the space audit and the invariants, and writes nothing either.
	cp "$P" "$DIR/before"
	expect 0 "$KR" check --deep "$P" --force-pmem
	has out "^space audit: *16.0 MiB = [0-9.]* [KM]*i*B used + .* metadata$"
	has out "^allocator: *[1-9][0-9]* objects; chunks: "
	has out "^invariants: *all hold$"
	cmp -s "$P" "$DIR/before" || fail "check --deep changed the pool file"
	expect 0 "$KR" check --deep --json "$P" --force-pmem
	has out '"deep": {"pool_size": 16777216, .*"problems": 0, "first_problem": ""}'
	usage_error repair --deep "$P"

	# Bytes inside the small object: its checksum fails, one parity column disagrees.
	expect 0 "$KR" inject "$P" scribble --offset $((SMALL + 10)) --length 50
	has out "^scribble: 50 random bytes written at 0x"
	expect 1 "$KR" check "$P" --force-pmem
	has out "^objects: .*, 1 bad$"
	has out "^parity columns: .*, 1 disagreeing$"
	has out "^result: *DAMAGED, first bad offset $SMALL (data page, zone 0 row [0-9]* column [0-9]*)$"
	lines err 1
	has err "^keratin: $P: "
	expect 0 "$KR" repair "$P" --force-pmem
	has out "^pages rebuilt: *1$"
	has out "^parity recomputed: *0 columns$"
	has out "^unrepairable: *0$"
	has out "^result: *sound after repairs$"
	lines err 0
	expect 0 "$KR" check "$P" --force-pmem
	has out "^result: *sound$"

	# The defaults, a random place and length, in an empty pool: only parity sees them, and
	# a scrub pass recomputes it.
	P=$DIR/empty.pool
	"$KR" create "$P" --size 16M --force-pmem >/dev/null
	expect 0 "$KR" inject "$P" scribble --seed 42 --force-pmem
	has out "^scribble: [0-9]* random bytes* written at 0x[0-9a-f]* (seed 42)$"
	has out "^  \(in\|from\) the data page, zone 0 row [0-9]* column [0-9]*$"
	expect 1 "$KR" check "$P" --force-pmem
	has out "^parity columns: .*, [1-9][0-9]* disagreeing$"
	expect 0 "$KR" scrub "$P" --force-pmem
	has out "^scrub: [0-9.]* GB/s ([0-9.]* MiB in [0-9.]* m*s)$"
	has out "^parity recomputed: *[1-9][0-9]* columns*$"
	has out "^result: *sound after repairs$"
	expect 0 "$KR" check "$P" --force-pmem

	# Two damaged pages in one page column cannot be rebuilt: one row's width and a page
	# of the big object, from its second page on, hits that page's column in two rows.
	new_pool u
	rowsize=$("$KR" info "$P" | sed -n 's/^row size: *\([0-9]*\) .*/\1/p')
	expect 0 "$KR" inject "$P" scribble --offset $(((BIG & ~4095) + 4096)) --length $((rowsize + 4096))
	expect 1 "$KR" repair "$P" --force-pmem
	has out "^unrepairable: *[1-9][0-9]*$"
	has out "^result: *DAMAGED"
	lines err 1
	expect 1 "$KR" check "$P" --force-pmem
	;;
media)
	new_pool m
	expect 0 "$KR" inject "$P" media --seed 7 --force-pmem
	has out "^media error: page 0x[0-9a-f]*000 overwritten with 4096 random bytes (seed 7)$"
	has out "^  in the data page, zone 0 row [0-9]* column [0-9]*$"
	has out "^  reported as a bad block"
	[ -s "$P.badblocks" ] || fail "inject media left no $P.badblocks"
	# Inspection changes nothing: check and info find the damage and repair it in a
	# private view only; the file and the bad-block list stay as they were.
	cp "$P" "$DIR/damaged"
	cp "$P.badblocks" "$DIR/damaged.bb"
	expect 1 "$KR" check "$P" --force-pmem
	has out "^repairable at open: *1 page after media errors"
	has out "^result: *REPAIRABLE"
	expect 0 "$KR" info "$P" --force-pmem
	has out "^repairable at open: *1 page after media errors"
	cmp -s "$P" "$DIR/damaged" || fail "check or info changed the pool file"
	cmp -s "$P.badblocks" "$DIR/damaged.bb" || fail "check or info changed the bad-block list"
	expect 1 "$KR" check "$P" --json --force-pmem
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["result"] == "repairable" and d["repairable_at_open"]["media_pages"] == 1 and d["readonly_view"] is True, d' "$DIR/out" ||
		fail "check --json of a repairable pool: $(cat "$DIR/out")"
	expect 0 "$KR" info "$P" --json --force-pmem
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"] == "pool" and d["objects"] > 0, d' "$DIR/out" ||
		fail "info --json: $(cat "$DIR/out")"
	cmp -s "$P" "$DIR/damaged" || fail "check --json or info --json changed the pool file"
	expect 0 "$KR" repair "$P" --force-pmem
	has out "^repaired at open: *1 page after media errors"
	has out "^result: *sound after repairs$"
	[ -e "$P.badblocks" ] && fail "repair left the bad-block list"
	# Damage a check finds in the data (not at open): listed with its offset and contents.
	"$KR" inject "$P" scribble --offset $((BIG + 8192)) --length 64 >/dev/null
	expect 1 "$KR" check "$P" --json --force-pmem
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["result"] == "damaged" and d["bad"]["objects"] >= 1 and len(d["damaged"]) >= 1 and all("holds" in x and x["offset"] > 0 for x in d["damaged"]), d' "$DIR/out" ||
		fail "check --json of a damaged pool: $(cat "$DIR/out")"
	# Messages are for users: where in keratin the damage was noticed only on request.
	expect 1 "$KR" check "$P" --force-pmem
	grep -q "detected at" "$DIR/err" && fail "a source location in a user's message: $(cat "$DIR/err")"
	KERATIN_DEBUG=1 "$KR" check "$P" --force-pmem >/dev/null 2>"$DIR/err"
	grep -q "detected at [a-z_]*\.c:[0-9]" "$DIR/err" || fail "KERATIN_DEBUG=1 shows no source location: $(cat "$DIR/err")"
	expect 0 "$KR" repair "$P" --force-pmem
	expect 0 "$KR" check "$P" --force-pmem
	has out "^result: *sound$"
	# A page of the big object, and the first copy of the header: given offsets need no
	# open, so nothing is described; the next open rebuilds each.
	for off in $((BIG + 4096)) 0; do
		expect 0 "$KR" inject "$P" media --offset $off
		lines out 2
		expect 0 "$KR" repair "$P" --force-pmem
		has out "^repaired at open: *1 page after media errors"
		has out "^pages rebuilt: *0$"
		has out "^result: *sound after repairs$"
		expect 0 "$KR" check "$P" --force-pmem
		has out "^result: *sound$"
	done
	expect 0 "$KR" info "$P" --force-pmem
	has out "^repairable at open: *0 pages" # the list was emptied by the repairing open
	# A read-only file is inspected; a pool another process has open for writing is not.
	chmod 0444 "$P"
	expect 0 "$KR" check "$P" --force-pmem
	has out "^result: *sound$"
	chmod 0644 "$P"

	usage_error inject "$P" media --offset 16M
	usage_error inject "$P" media --offset 0x1000000
	usage_error inject "$P" scribble --offset 0xfff000 --length 8K
	expect 0 "$KR" inject "$P" scribble --offset 0xfff000 --length 4K # the last page is in
	;;
locate)
	new_pool l
	cp "$P" "$DIR/before"
	expect 0 "$KR" locate "$P" $((SMALL + 4)) --force-pmem
	has out "^holds: *data page, zone 0 row [0-9]* column [0-9]*$"
	has out "^parity: *0x[0-9a-f]*$"
	has out "^object: *$SMALL (100 bytes), a byte of it$"
	expect 0 "$KR" locate "$P" $((SMALL - 16)) --force-pmem
	has out "^object: *$SMALL (100 bytes), its header$"
	expect 0 "$KR" locate "$P" 0x10 --force-pmem
	has out "^holds: *header page$"
	has out "^other copy: *0xfff010$"
	grep -q "^parity" "$DIR/out" && fail "a header byte has a parity byte: $(cat "$DIR/out")"
	cmp -s "$P" "$DIR/before" || fail "locate changed the pool file"
	lib_error "$P" locate "$P" 16M --force-pmem
	has err "beyond the pool"
	usage_error locate "$P"
	usage_error locate "$P" 12 extra
	usage_error locate "$P" 0xZZ
	;;
map)
	new_pool p
	expect 0 "$KR" map "$P" --force-pmem --svg "$DIR/p.svg"
	has out "^$P: 16.0 MiB, 1 zone of 100 data rows + 1 parity row, [0-9]* pages ([0-9.]* KiB) per row$"
	has out "^1 character = 1 page (4.0 KiB)$"
	has out "^  other  HCLL*\[heap\]RR*-*CH$"
	has out "^zone 0$"
	has out "^  row 0  MM*[#.][#.]*$"
	has out "^  row 99 [#.][#.]*$"
	has out "^  parity PP*$"
	has out "^  row [0-9]* .*#"
	[ "$(grep -c '^  row [0-9]' "$DIR/out")" -eq 100 ] || fail "map has not 100 data rows"
	has out "^legend:  H header  C control"
	has out "^[0-9]* objects, [0-9.]* [KM]iB of payload, on [0-9]* pages$"
	has out "^check: sound$"
	has out "^wrote $DIR/p.svg$"
	lines err 0
	no_escapes out
	grep -q "^<svg xmlns=\"http://www.w3.org/2000/svg\" " "$DIR/p.svg" || fail "no <svg in the SVG"
	grep -q "^</svg>$" "$DIR/p.svg" || fail "no </svg> in the SVG"
	grep -q "<title>keratin pool $P (16.0 MiB)</title>" "$DIR/p.svg" || fail "no title in the SVG"
	[ "$(grep -c '^<rect ' "$DIR/p.svg")" -gt 3500 ] || fail "the SVG has not a rectangle per page"
	if command -v xmllint >/dev/null; then
		xmllint --noout "$DIR/p.svg" || fail "the SVG is not well-formed XML"
	fi

	# Damage in the picture: X where a check finds it, + where the open repaired a page.
	expect 0 "$KR" inject "$P" scribble --offset $((SMALL + 10)) --length 50
	expect 0 "$KR" inject "$P" media --offset $((BIG + 40 * 4096))
	expect 0 "$KR" map "$P" --force-pmem
	[ "$(grep '^  row' "$DIR/out" | tr -cd X | wc -c)" -eq 1 ] || fail "not one X: $(cat "$DIR/out")"
	[ "$(grep '^  row' "$DIR/out" | tr -cd + | wc -c)" -eq 1 ] || fail "not one +: $(cat "$DIR/out")"
	has out "^check: 1 damaged page, 0 unrepairable; first bad offset $SMALL; the open repaired 1 page after media errors$"
	lib_error "$DIR/nodir/p.svg" map "$P" --svg "$DIR/nodir/p.svg"
	lib_error "$DIR/missing" map "$DIR/missing" --svg "$DIR/m.svg"
	[ -e "$DIR/m.svg" ] && fail "a failed map left $DIR/m.svg"
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
