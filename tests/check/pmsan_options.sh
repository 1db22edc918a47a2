#!/bin/bash
# pmsan_options.sh CC CASEBIN CASESRC - pmsan's options, report format and build paths,
# on the checker test programs (CASEBIN: their build directory, CASESRC: their sources):
# exitcode, halt_on_error, log_path, suppressions, reorder=random, the options parser
# (separators, booleans, help=1, refusals), the report line, its process and its stack,
# the wrapper's --help, a separate compile and link through make CC=keratin-pmsan-cc, and
# an -O0 build.
set -u
cc=$(realpath "$1")
bin=$(realpath "$2")
src=$(realpath "$3")
tmp=$(mktemp -d /dev/shm/pmsan-opts-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export PMEM_IS_PMEM_FORCE=1
fail=0

ok() { echo "ok   $1"; }
bad() {
	echo "FAIL $1"
	sed 's/^/    /' "$tmp/out"
	fail=1
}
# has NAME ERE: the last output has a line matching ERE (else the check fails).
has() {
	if grep -Eq "$2" "$tmp/out"; then
		ok "$1"
	else
		bad "$1: no line matches $2"
	fi
}
# t NAME EXPECTED_EXIT PROGRAM ARGS... (PMSAN_OPTIONS from the environment)
t() {
	local name=$1 want=$2
	shift 2
	"$@" >"$tmp/out" 2>&1
	rc=$?
	[[ $rc -eq $want ]] || { bad "$name: exit $rc, want $want"; return 1; }
}

PMSAN_OPTIONS=exitcode=3 t "exitcode=3" 3 "$bin/r1_missing_flush.bug" "$tmp/pool" && ok "exitcode=3"

if PMSAN_OPTIONS=halt_on_error=1 t "halt_on_error" 66 "$bin/pmdk_rtree_unlogged.bug" "$tmp/pool"; then
	n=$(grep -c '^pmsan: rule 2 ' "$tmp/out")
	if [[ $n -eq 1 ]]; then
		ok "halt_on_error=1 stops at the first of three violations"
	else
		bad "halt_on_error: $n reports"
	fi
fi

if PMSAN_OPTIONS=log_path=$tmp/log t "log_path" 66 "$bin/r2_unlogged_write.bug" "$tmp/pool"; then
	if ! grep -q pmsan "$tmp/out" && grep -q '^pmsan: rule 2 ' "$tmp"/log.*; then
		ok "log_path: reports in log.PID, none on stderr"
	else
		bad "log_path"
	fi
fi

printf '# a comment\nunlogged-write:insert\n' >"$tmp/supp"
if PMSAN_OPTIONS=suppressions=$tmp/supp t "suppressions" 0 "$bin/pmdk_rtree_unlogged.bug" "$tmp/pool"; then
	has "suppressions: three reports suppressed by function" \
		'^SUMMARY: pmsan: 0 violations, 0 warnings, 3 suppressed$'
fi
printf 'missing-flush:r1_missing_flush.bug.c:20\n' >"$tmp/supp"
PMSAN_OPTIONS=suppressions=$tmp/supp t "suppression by file:line" 0 "$bin/r1_missing_flush.bug" \
	"$tmp/pool" && ok "suppressions: by file:line"
printf 'no-such-rule:x\n' >"$tmp/supp"
PMSAN_OPTIONS=suppressions=$tmp/supp t "bad suppression" 1 "$bin/r1_missing_flush.bug" "$tmp/pool" &&
	has "a bad suppression line is refused" "bad suppression line"

# The options parser: one table, both separators, booleans as words or digits, help=1,
# and a refusal that says why.
PMSAN_OPTIONS=help=1 t "help=1" 66 "$bin/r1_missing_flush.bug" "$tmp/pool" && {
	# Every option the manual's table documents, and no other, is listed, with a type,
	# a default and a description; and the program still runs.
	sed -n '/^## Options/,/^## /s/^| `\([a-z_]*\)` |.*/\1/p' "$src/../../../docs/CHECKER.md" |
		sort >"$tmp/doc_keys"
	sed -n 's/^  \([a-z_]*\) *\(bool\|int\|uint64\|string\|choice\) *default .*[a-z].*/\1/p' \
		"$tmp/out" | sort >"$tmp/help_keys"
	if [[ -s "$tmp/doc_keys" ]] && cmp -s "$tmp/doc_keys" "$tmp/help_keys"; then
		ok "help=1 lists the $(wc -l <"$tmp/help_keys") options the manual documents"
	else
		bad "help=1: documented $(tr '\n' ' ' <"$tmp/doc_keys"), listed $(tr '\n' ' ' <"$tmp/help_keys")"
	fi
	has "help=1: the program still runs" '^pmsan: rule 1 \(missing-flush\)'
	# keratin-pmsan-cc(1) documents each of them too.
	page=$src/../../../docs/man/keratin-pmsan-cc.1
	missing=$(while read -r k; do grep -q "^\.BR $k =" "$page" || echo "$k"; done <"$tmp/help_keys")
	[[ -z "$missing" ]] && ok "keratin-pmsan-cc(1) documents every option" ||
		bad "keratin-pmsan-cc(1) lacks: $missing"
}
# The wrapper's own help, not clang's.
if "$cc" --help >"$tmp/out" 2>&1 && head -n 1 "$tmp/out" | grep -q '^usage: keratin-pmsan-cc' &&
	! grep -q OVERVIEW "$tmp/out"; then
	ok "keratin-pmsan-cc --help prints the wrapper's help"
else
	bad "keratin-pmsan-cc --help"
fi
PMSAN_OPTIONS="exitcode=7 halt_on_error=true" t "space separator, true" 7 \
	"$bin/pmdk_rtree_unlogged.bug" "$tmp/pool" && {
	n=$(grep -c '^pmsan: rule 2 ' "$tmp/out")
	[[ $n -eq 1 ]] && ok "spaces separate options; halt_on_error=true" ||
		bad "space separator: $n reports"
}
PMSAN_OPTIONS="stack=false:warnings=0" t "false, 0" 66 "$bin/r2_unlogged_write.bug" "$tmp/pool" &&
	if grep -q '^    #0' "$tmp/out"; then bad "stack=false printed a stack"; else
		ok "stack=false: no stack"; fi
bad_opt() { # bad_opt OPTIONS ERE: refused with status 1 and a line matching ERE
	PMSAN_OPTIONS=$1 t "refused: $1" 1 "$bin/r1_missing_flush.bug" "$tmp/pool" &&
		has "refused: $1" "$2"
}
bad_opt reorder=sideways '^pmsan: PMSAN_OPTIONS: reorder=sideways refused: want none, single, accumulative or random$'
bad_opt max_cases=0 '^pmsan: PMSAN_OPTIONS: max_cases=0 refused: want 1 to 999999$'
bad_opt exitcode=x '^pmsan: PMSAN_OPTIONS: exitcode=x refused: not a number$'
bad_opt stack=maybe '^pmsan: PMSAN_OPTIONS: stack=maybe refused: want true, false, 1 or 0$'
bad_opt no_such=1 '^pmsan: PMSAN_OPTIONS: no_such=1 refused: no such option \(help=1 lists them\)$'
bad_opt "check=/bin/true:reorder=none" 'reorder=none refused: check= needs images'

r6=$bin/r6_missing_barrier
PMSAN_OPTIONS="check='$r6.bug --check':reorder=random:seed=5" t "reorder=random" 66 "$r6.bug" \
	"$tmp/pool" && has "reorder=random finds the missing barrier" \
	'^pmsan: rule 6 \(missing-barrier\): .*r6_missing_barrier\.bug\.c:40 \(main\)$'

# The report line, and the stack under an immediate report.
if PMSAN_OPTIONS= t "format" 66 "$bin/r2_unlogged_write.bug" "$tmp/pool"; then
	re='^pmsan: rule 2 \(unlogged-write\): store of 8 bytes .* at .*r2_unlogged_write\.bug\.c:25 \(main\)$'
	if grep -Eq "$re" "$tmp/out" && grep -Eq '^    #0 main .*r2_unlogged_write\.bug\.c:25' "$tmp/out" &&
		grep -q "^    process [0-9]*, thread [0-9]*$" "$tmp/out" &&
		[[ $(tail -n 1 "$tmp/out") == 'SUMMARY: pmsan: 1 violation (rule 2: 1), 0 warnings, 0 suppressed' ]]; then
		ok "report line, process and thread, symbolised stack, SUMMARY as the last line"
	else
		bad "report format"
	fi
fi

# The three warnings, which do not change the exit status, and warnings=0.
cat >"$tmp/warn.c" <<'C'
#include <libpmem.h>
#include <stdint.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	size_t n;
	uint64_t *p = pmem_map_file(argv[1], 4096, PMEM_FILE_CREATE, 0600, &n, NULL);
	int *heap = malloc(sizeof(int));
	p[0] = 1;
	pmem_persist(p, 8);
	pmem_flush(p, 8);
	pmem_drain();
	pmem_drain();
	p[1] = (uint64_t)(uintptr_t)heap;
	pmem_persist(&p[1], 8);
	pmem_unmap(p, 4096);
	free(heap);
	return 0;
}
C
if "$cc" -g -O1 "$tmp/warn.c" -o "$tmp/warn" -lpmem >"$tmp/out" 2>&1; then
	if PMSAN_OPTIONS= t "warnings" 0 "$tmp/warn" "$tmp/pool"; then
		has "warning: redundant flush" '^pmsan: warning \(redundant-flush\): .*warn\.c:11 \(main\)$'
		has "warning: redundant fence" '^pmsan: warning \(redundant-fence\): .*warn\.c:13 \(main\)$'
		has "warning: volatile pointer" '^pmsan: warning \(volatile-pointer\): .*the heap.*warn\.c:14 \(main\)$'
		has "warnings counted, exit 0" '^SUMMARY: pmsan: 0 violations, 3 warnings, 0 suppressed$'
	fi
	PMSAN_OPTIONS=warnings=0 t "warnings=0" 0 "$tmp/warn" "$tmp/pool" &&
		has "warnings=0 silences them" '^SUMMARY: pmsan: 0 violations, 0 warnings, 0 suppressed$'
else
	bad "warnings program build"
fi

# make CC=keratin-pmsan-cc: compile and link as separate steps, with make's own rules.
mkdir "$tmp/make"
cp "$src/r1_missing_flush.bug.c" "$src/case.h" "$tmp/make/"
printf 'LDLIBS = -lpmemobj -lpmem\nCFLAGS = -g -O1\nr1_missing_flush.bug: r1_missing_flush.bug.o\n' \
	>"$tmp/make/Makefile"
if make -s -C "$tmp/make" CC="$cc" >"$tmp/out" 2>&1; then
	PMSAN_OPTIONS= t "make" 66 "$tmp/make/r1_missing_flush.bug" "$tmp/pool" &&
		has "make CC=keratin-pmsan-cc: separate compile and link" \
		'^pmsan: rule 1 \(missing-flush\): .*r1_missing_flush\.bug\.c:20 \(main\)$'
else
	bad "make CC=keratin-pmsan-cc"
fi

# -O0, without -g (the wrapper asks for line tables).
if "$cc" -O0 "$src/r1b_partial_flush.bug.c" -o "$tmp/o0" -lpmemobj -lpmem >"$tmp/out" 2>&1; then
	PMSAN_OPTIONS= t "-O0" 66 "$tmp/o0" "$tmp/pool" &&
		has "-O0 without -g: the report still names the line" \
		'^pmsan: rule 1b \(partial-flush\): .*r1b_partial_flush\.bug\.c:22 \(main\)$'
else
	bad "-O0 build"
fi
exit $fail
