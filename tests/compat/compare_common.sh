# shellcheck shell=bash disable=SC2034
# (SC2034: wl_* are for check/pmdk_workloads.sh.)
# compare_common.sh - what differential.sh and dropin.sh share: check/pmdk_workloads.sh's
# workloads run once on Debian's libpmemobj and once on keratin-pmemobj, on pools in
# /dev/shm, their outputs and exit statuses compared; after every step of a keratin run the
# pool it left must pass `keratin check` (exit 0) without a byte of it changing. Sourced,
# never run.
#
# The sourcing script calls cmp_setup BUILD_DIR OUT_DIR, defines
#   wl_build NAME ARG...   (check/pmdk_workloads.sh) the programs for both sides, reporting
#                          a failure with cmp_fail
#   wl_prog NAME           the program NAME for the side being run ($side)
#   side_env               wl_env for $side, beyond the common part (cmp_env)
#   side_verify POOL STEP  after each step on $side: one line per problem, nothing if none
# then calls cmp_run.
#
# Legitimate differences, made comparable:
#   - rand() seeded with time(NULL) (data_store, buffons_needle_problem, pminvaders): every
#     run has fixed_srand.so preloaded, which seeds with 1 whatever the program asks.
#   - program paths in messages (usage lines print argv[0]): the side's directory becomes BIN.
#   - bash's report of a program killed by a signal names its PID: dropped (the exit status,
#     128 + the signal, is compared).
#   - pmemobj_alloc_usable_size is exact in keratin (libpmemobj rounds up to its block
#     size); no example prints it (slab_allocator asserts it equals the size of its own
#     allocation class's unit, true of both), so nothing is normalised for it.
#   - pmemobj_errormsg's text is each library's own: no workload prints it on a path that
#     both take (a step printing it would show up here as a difference).
# Every pool is at the same path on both sides, so paths in outputs need no normalising.
# The programs link the library as built: a sanitizer build's would need them built with
# the sanitizer too, so tests/CMakeLists.txt registers these scripts in the normal build only.

cmp_setup() {
	if (($# != 2)); then
		echo "usage: $0 BUILD_DIR OUT_DIR" >&2
		exit 2
	fi
	build=$(cd "$1" && pwd) || exit 1
	out=$2
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	ex=${PMEMOBJ_EXAMPLES:-/usr/share/doc/libpmemobj-dev/examples}
	if [[ ! -d $ex ]]; then
		echo "SKIP: $ex is missing (libpmemobj-dev without its examples)"
		exit 77
	fi
	keratin=$build/tools/keratin
	kplib=$build/compat/libkeratin-pmemobj.so.1
	if [[ ! -x $keratin || ! -e $kplib ]]; then
		echo "FAIL: $keratin or $kplib is missing: build the targets keratin and keratin_pmemobj_shared"
		echo "0 passed, 1 failed, 0 skipped"
		exit 1
	fi
	mkdir -p "$out" || exit 1
	out=$(cd "$out" && pwd)
	tmp=$(mktemp -d /dev/shm/kp-compat-XXXXXX) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	export PMEM_IS_PMEM_FORCE=1 # both libraries read it
	passed=0 failed=0 skipped=0
	cc=${CC:-cc}
	if ! "$cc" -shared -fPIC -O1 -o "$out/fixed_srand.so" "$repo/tests/compat/fixed_srand.c" \
		-ldl 2>"$out/fixed_srand.log"; then
		cmp_fail "build fixed_srand.so" "$(head -n 3 "$out/fixed_srand.log")"
	fi
	wl_ex=$ex
	wl_scratch=$tmp
	wl_limit=120
	wl_env=()
	# shellcheck source=tests/check/pmdk_workloads.sh
	. "$repo/tests/check/pmdk_workloads.sh"
}

cmp_ok() {
	echo "ok   $1"
	passed=$((passed + 1))
}
cmp_fail() { # cmp_fail NAME WHAT [DETAIL]: DETAIL's lines indented under the verdict
	echo "FAIL $1: $2"
	[[ -n ${3:-} ]] && sed 's/^/    /' <<<"$3"
	failed=$((failed + 1))
}
wl_skip() {
	echo "SKIP $1: $2"
	skipped=$((skipped + 1))
}

# cmp_env: wl_env of $side: the seed shim and the side's own variables (side_env).
cmp_env() {
	wl_env=(LD_PRELOAD="$out/fixed_srand.so")
	side_env
}

# cmp_check_pool POOL STEP: keratin check on the pool of a keratin run, read-only. The
# pool's CRC (cksum, about 3 GB/s here where md5sum does 0.5: md5sum was a sixth of this
# script's CPU time) before and after: a changed byte changes it.
cmp_check_pool() {
	local before after
	[[ -e $1 ]] || return 0
	before=$(cksum <"$1")
	if ! "$keratin" check --quiet "$1" >"$tmp/check.out" 2>&1; then
		# its verdict line, else its last word (an error)
		echo "keratin check failed after step $2: $({ sed -n 's/^result: *//p' "$tmp/check.out"
			grep -v '^ *$' "$tmp/check.out" | tail -n 1; } | head -n 1)"
	fi
	after=$(cksum <"$1")
	[[ $before == "$after" ]] || echo "keratin check changed the pool after step $2"
}

# cmp_side LABEL INPUT STEP...: run the steps for $side into $tmp/$side.out ("[step N exit
# S]" after each step's output, the pool's presence at the end), problems into
# $tmp/problems. Returns 77 if a libpmemobj step said SKIP.
cmp_side() {
	local input=$2 i=0 rc s bindir
	shift 2
	rm -rf "$tmp/case"
	mkdir "$tmp/case"
	local pool=$tmp/case/pool
	cmp_env
	bindir=$(dirname "$(wl_prog x)")
	: >"$tmp/$side.out"
	for s in "$@"; do
		i=$((i + 1))
		if ((i == 1)); then
			printf '%b' "$input" | wl_step "$pool" "$s"
		else
			wl_step "$pool" "$s" </dev/null
		fi >"$tmp/step.out" 2>&1
		rc=$?
		if [[ $side == libpmemobj && $rc == 77 ]] && grep -aq '^SKIP: ' "$tmp/step.out"; then
			sed -n 's/^SKIP: //p' "$tmp/step.out" | head -n 1 >"$tmp/skip"
			return 77
		fi
		{
			grep -aEv "^$wl_here/pmdk_workloads.sh: line [0-9]+: +[0-9]+ " "$tmp/step.out" |
				sed "s|$bindir/|BIN/|g"
			echo "[step $i exit $rc]"
		} >>"$tmp/$side.out"
		[[ $side == keratin ]] && cmp_check_pool "$pool" "$i" >>"$tmp/problems"
		side_verify "$pool" "$i" >>"$tmp/problems"
	done
	echo "[pool $([[ -e $pool ]] && echo present || echo absent)]" >>"$tmp/$side.out"
}

# CMP_ONLY (a bash regex): only the programs and cases whose names match run; the others
# say SKIP, with where the whole set runs. Empty: everything.
# CMP_SHOW (non-empty): a known difference's diff is printed too.
cmp_selected() {
	[[ -z ${CMP_ONLY:-} || $1 =~ $CMP_ONLY ]] && return 0
	wl_skip "$1" "not in this run's set (CMP_ONLY); make torture runs them all"
	return 1
}

# cmp_diff: the two sides' outputs, as a unified diff; an output may hold binary bytes
# (a file read back through a mount), shown as cat -v does.
cmp_diff() {
	diff -a -u --label libpmemobj --label keratin-pmemobj "$tmp/libpmemobj.out" \
		"$tmp/keratin.out" | cat -v
}

# wl_case LABEL INPUT STEP...: both sides, then the verdict.
wl_case() {
	local label=$1 what=
	cmp_selected "$label" || return 0
	: >"$tmp/problems"
	for side in libpmemobj keratin; do
		if ! cmp_side "$@" && [[ -s $tmp/skip ]]; then
			wl_skip "$label" "$(cat "$tmp/skip")"
			rm -f "$tmp/skip"
			return
		fi
	done
	if ! cmp -s <(grep -a '^\[step' "$tmp/libpmemobj.out") <(grep -a '^\[step' "$tmp/keratin.out"); then
		what="exit status differs"
	fi
	if ! cmp -s <(grep -av '^\[step' "$tmp/libpmemobj.out") <(grep -av '^\[step' "$tmp/keratin.out"); then
		what="${what:+$what, }output differs"
	fi
	[[ -s $tmp/problems ]] && what="${what:+$what, }$(wc -l <"$tmp/problems") check(s) failed"
	if [[ -n ${KNOWN_DIFF[$label]:-} ]]; then
		# A difference docs/COMPAT.md documents: shown as such, never as passing; a case
		# that stops differing fails until it leaves the list.
		if [[ -z $what ]]; then
			cmp_fail "$label" "listed as a known difference but no longer differs: remove it"
		else
			echo "KNOWN $label: $what, as documented: ${KNOWN_DIFF[$label]}"
			[[ -n ${CMP_SHOW:-} ]] && cmp_diff | head -n 60
			known=$((known + 1))
		fi
	elif [[ -z $what ]]; then
		cmp_ok "$label"
	else
		cmp_fail "$label" "$what" "$(cat "$tmp/problems"
			cmp_diff | sed -n '3,16p')"
	fi
}

# cmp_src ARG: an example's source under $ex, or ARG itself (absolute path, flag).
cmp_src() {
	if [[ $1 == [-/]* ]]; then echo "$1"; else echo "$ex/$1"; fi
}

# cmp_compile PROG CFLAGS_VAR LIBS_VAR ARG...: build one program from the workload's ARGs
# (cmp_src) with the flags in the arrays named CFLAGS_VAR (before) and LIBS_VAR (after);
# the compiler's words go to PROG.log. At -O0: both sides are built alike and only their
# outputs are compared, and -O0 compiles mapcli and its maps 2.5 times faster than -O1.
cmp_compile() {
	local prog=$1 a
	local -n pre=$2 post=$3
	shift 3
	local srcs=()
	for a in "$@"; do srcs+=("$(cmp_src "$a")"); done
	mkdir -p "$(dirname "$prog")"
	"$cc" -g -O0 -w -pthread "${pre[@]}" "${wl_incs[@]}" "${srcs[@]}" -o "$prog" "${post[@]}" \
		-lm 2>"$prog.log"
}

# cmp_build_failed NAME PROG: report a failed build (its first error).
cmp_build_failed() {
	cmp_fail "build $1" "$(grep -m1 -E 'error|undefined' "$2.log")"
}

# Cases whose difference docs/COMPAT.md documents (label -> the reason).
declare -A KNOWN_DIFF=(
	["pmemobjfs mount"]="pmemobjfs snapshots one byte of a block (TX_ADD of a TOID(char)) and writes the whole block; keratin-pmemobj keeps a transaction's snapshotted ranges, so the check at the next open repairs the rest of the block back (COMPAT.md, transactions)"
	["libart remove"]="art.c's remove_child4 writes a child's prefix in a transaction without adding the child (a bug of the example, which pmsan and keratin-pmscan report); keratin's check finds those bytes outside every snapshot, and the next open repairs them back (COMPAT.md, transactions)"
)
known=0

cmp_run() {
	pmdk_workloads more
	echo "$known known difference(s), each documented in docs/COMPAT.md"
	echo "$passed passed, $failed failed, $skipped skipped"
	((failed == 0))
}
