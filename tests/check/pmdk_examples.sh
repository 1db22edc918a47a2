#!/bin/bash
# pmdk_examples.sh CC OUTDIR - the false-positive run: PMDK's libpmemobj examples, compiled
# with keratin-pmsan-cc (CC) from where libpmemobj-dev installs them (never copied into
# this repository; objects go to OUTDIR) and run on small workloads. No pmsan violation
# may appear except the known bugs listed in pmdk_examples.supp, and each of those must
# still be found (counted as suppressed). Exits 77 (SKIP) if the examples are missing.
# The workloads are check/pmdk_workloads.sh's (shared with compat/differential.sh and
# compat/dropin.sh); this script builds with CC and judges pmsan's reports.
#
# Installed examples that do not run here, and why:
#   manpage.c       the man page's snippet: a pool at a fixed path (/pmem-fs/myfile), nothing done in it
#   setjmp.c        the same fixed path; it shows undefined behaviour (frees garbage pointers after an abort)
#   map/kv_server   a libuv TCP server driven by a client; its maps run in data_store
#   mapcli ctree    crashes on its second insert, uninstrumented too; data_store covers ctree
#   pmemobjfs       a FUSE file system: needs a FUSE mount
#   pminvaders 1, 2 ncurses games: need a terminal and a player
#   examine_arttree an interactive examiner of libart's pools
# (compat/differential.sh, which needs no checker, starts or runs these too: pmdk_workloads more.)
set -u
cc=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ex=/usr/share/doc/libpmemobj-dev/examples
if [[ ! -d $ex ]]; then
	echo "SKIP: $ex is missing (libpmemobj-dev without its examples)"
	exit 77
fi
mkdir -p "$out"
tmp=$(mktemp -d /dev/shm/pmsan-pmdk-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/warnings"
export PMEM_IS_PMEM_FORCE=1
# Reports go to $tmp/log.PID, apart from the programs' own output.
export PMSAN_OPTIONS="suppressions=$here/pmdk_examples.supp:log_path=$tmp/log"
fail=0
runs=0
# shellcheck disable=SC2034 # (for pmdk_workloads.sh)
wl_ex=$ex wl_scratch=$tmp wl_env=()
# shellcheck source=tests/check/pmdk_workloads.sh
. "$here/pmdk_workloads.sh"

# Each case's count of known bugs (pmdk_examples.supp) that pmsan must still find.
declare -A known=(["data_store hashmap_atomic"]=1 ["mapcli hashmap_atomic"]=1 ["slab_allocator"]=1
	["libart remove"]=2)

wl_prog() { echo "$out/$1"; }

wl_build() { # wl_build NAME ARGS...
	local name=$1 s
	shift
	local srcs=()
	for s in "$@"; do
		if [[ $s == [-/]* ]]; then srcs+=("$s"); else srcs+=("$ex/$s"); fi
	done
	if ! "$cc" -g -O1 -w -pthread "${wl_incs[@]}" "${srcs[@]}" -o "$out/$name" -lpmemobj -lpmem \
		-lm 2>"$out/$name.log"; then
		echo "FAIL build $name: $(grep -m1 error "$out/$name.log")"
		fail=1
		return 1
	fi
}

wl_skip() { echo "SKIP $1: $2"; }

# check LABEL WANT_SUPPRESSED EXIT: the reports of the last run(s) ($tmp/log.*).
check() {
	runs=$((runs + 1))
	cat "$tmp"/log.* >"$tmp/reports" 2>/dev/null
	rm -f "$tmp"/log.*
	grep '^pmsan: warning' "$tmp/reports" >>"$tmp/warnings"
	local v s
	v=$(grep -c '^pmsan: rule' "$tmp/reports")
	s=$(sed -n 's/^SUMMARY: pmsan: .* \([0-9]*\) suppressed$/\1/p' "$tmp/reports" |
		awk '{ n += $1 } END { print n + 0 }')
	if [[ $v -ne 0 || $s -ne $2 || $3 -ne 0 ]]; then
		echo "FAIL $1: $v violation(s), $s known bug(s) found (want $2), exit $3"
		grep -v '^    #' "$tmp/reports" | sed 's/^/    /' | head -20
		tail -n 5 "$tmp/out" | sed 's/^/    out: /'
		fail=1
	else
		echo "ok   $1: no violation, $s known bug(s) found"
	fi
}

# wl_case LABEL INPUT STEP...: the steps on one fresh pool, one verdict.
wl_case() {
	local label=$1 input=$2 rc=0 s
	shift 2
	rm -f "$tmp/pool"
	: >"$tmp/out"
	printf '%b' "$input" | wl_step "$tmp/pool" "$1" >>"$tmp/out" 2>&1 || rc=$?
	for s in "${@:2}"; do
		wl_step "$tmp/pool" "$s" </dev/null >>"$tmp/out" 2>&1 || rc=$?
	done
	check "$label" "${known[$label]:-0}" $rc
}

pmdk_workloads

# Warnings (redundant flushes and fences, volatile pointers) are advice, not violations:
# listed for the reader, by kind.
echo "warnings, by kind (distinct source lines):"
sed 's/^pmsan: warning (\([a-z-]*\)).*/\1/' "$tmp/warnings" 2>/dev/null | sort | uniq -c | sed 's/^/    /'
echo "$runs runs, $([[ $fail == 0 ]] && echo "no false positive" || echo FAILED)"
exit $fail
