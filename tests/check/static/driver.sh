#!/bin/bash
# driver.sh DRIVER - keratin-pmscan's interface: exit status (0 clean, 1 findings, 2 usage
# or unreadable input, a clang that is not there), the one-line report, SARIF output
# (--sarif FILE), files analysed together as one program, and the build interception mode
# (keratin-pmscan make ...), on two of the shared cases. Exits 77 (SKIP) when the checker
# is not built.
set -u
driver=${1:+$(realpath "$1")}
cases=$(cd "$(dirname "${BASH_SOURCE[0]}")/../cases" && pwd)
if [[ -z $driver || ! -f $driver ]]; then
	echo "SKIP: keratin-pmscan is not built (clang-14 development files missing)"
	exit 77
fi
tmp=$(mktemp -d /tmp/pmscan-driver-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bug=$cases/r4_use_after_free.bug.c
fixed=$cases/r4_use_after_free.fixed.c
line=$(grep -n 'expect: 4 use-after-free' "$bug" | cut -d: -f1)

expect() { # expect LABEL WANT_STATUS STATUS
	if [[ $3 -ne $2 ]]; then
		echo "FAIL $1: exit status $3, want $2"
		sed 's/^/    /' "$tmp/out" "$tmp/err" | head -10
		fail=1
	else
		echo "ok   $1 (exit $3)"
	fi
}

python3 "$driver" "$fixed" -- -I"$cases" >"$tmp/out" 2>"$tmp/err"
expect "clean file" 0 $?
python3 "$driver" --sarif "$tmp/r.sarif" "$bug" -- -I"$cases" >"$tmp/out" 2>"$tmp/err"
expect "file with a bug" 1 $?
re="^pmsan: rule 4 \(use-after-free\): .* at $bug:$line \(main\) \(static\)$"
if [[ $(wc -l <"$tmp/out") -ne 1 ]] || ! grep -Eq "$re" "$tmp/out"; then
	echo "FAIL report line: want one line matching '$re', got:"
	sed 's/^/    /' "$tmp/out"
	fail=1
else
	echo "ok   report line"
fi
if python3 - "$tmp/r.sarif" "$bug" "$line" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["version"] == "2.1.0", doc["version"]
run = doc["runs"][0]
assert run["tool"]["driver"]["name"] == "keratin-pmscan"
assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {"1", "1a", "1b", "1c", "2", "3", "4"}
(res,) = run["results"]
loc = res["locations"][0]["physicalLocation"]
assert res["ruleId"] == "4", res["ruleId"]
assert loc["artifactLocation"]["uri"] == sys.argv[2], loc
assert loc["region"]["startLine"] == int(sys.argv[3]), loc
PY
then echo "ok   SARIF"; else echo "FAIL SARIF: $(head -c 300 "$tmp/r.sarif")"; fail=1; fi
python3 "$driver" "$tmp/missing.c" >"$tmp/out" 2>"$tmp/err"
expect "missing file" 2 $?
python3 "$driver" --no-such-option "$bug" >"$tmp/out" 2>"$tmp/err"
expect "unknown option" 2 $?

# Files given together are one program: an object allocated in one file's function and left
# unwritten by the other's transaction is found only when the two are analysed together.
cat >"$tmp/alloc.c" <<'C'
#include <libpmemobj.h>
PMEMoid item_new(size_t size) { return pmemobj_tx_alloc(size, 1); }
C
cat >"$tmp/use.c" <<'C'
#include <libpmemobj.h>
PMEMoid item_new(size_t size);
struct root { PMEMoid item; };
void add(PMEMobjpool *pop, struct root *r)
{
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&r->item, sizeof(r->item));
		r->item = item_new(64);
	} TX_END
}
C
python3 "$driver" "$tmp/use.c" >"$tmp/out" 2>"$tmp/err"
expect "one file of two, alone" 0 $?
python3 "$driver" "$tmp/use.c" "$tmp/alloc.c" >"$tmp/out" 2>"$tmp/err"
expect "both files together" 1 $?
grep -q "^pmsan: rule 3 (uninitialized-alloc): .* at $tmp/alloc.c:2 (item_new) (static)$" "$tmp/out" ||
	{ echo "FAIL together: want rule 3 at alloc.c:2, got:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1; }
# clang-extdef-mapping is looked for beside the clang that --clang resolves to (a link
# whose own name would give a mapper name no PATH holds).
real=$(realpath "$(command -v clang-14)")
if [[ -x $(dirname "$real")/clang-extdef-mapping ]]; then
	mkdir "$tmp/bin"
	ln -s "$real" "$tmp/bin/my-clang"
	python3 "$driver" --clang "$tmp/bin/my-clang" "$tmp/use.c" "$tmp/alloc.c" >"$tmp/out" 2>"$tmp/err"
	expect "together, mapper beside the real clang" 1 $?
fi
# A clang that is not there: one line that says so and exit 2, also where the files would
# be analysed together (with clang-14's name, the mapper is found on PATH).
for clang in /nonexistent/clang /nonexistent/clang-14; do
	python3 "$driver" --clang "$clang" "$tmp/use.c" "$tmp/alloc.c" >"$tmp/out" 2>"$tmp/err"
	expect "missing $clang" 2 $?
	if [[ -s $tmp/out || $(wc -l <"$tmp/err") -ne 1 ]] || grep -q Traceback "$tmp/err"; then
		echo "FAIL missing $clang: want one line on stderr, got:"
		sed 's/^/    /' "$tmp/out" "$tmp/err" | head -10
		fail=1
	else
		echo "ok   missing $clang: one line"
	fi
done

# keratin-pmscan make: the build's compiler is intercepted; each compiled file is analysed.
mkdir "$tmp/proj"
cp "$cases/case.h" "$bug" "$fixed" "$tmp/proj/"
printf 'all: bug fixed\nbug: r4_use_after_free.bug.c\n\t$(CC) -O1 -o $@ $< -lpmemobj\n%s\n' \
	'fixed: r4_use_after_free.fixed.c' >"$tmp/proj/Makefile"
printf '\t$(CC) -O1 -o $@ $< -lpmemobj\n' >>"$tmp/proj/Makefile"
(cd "$tmp/proj" && python3 "$driver" make -s fixed) >"$tmp/out" 2>"$tmp/err"
expect "make, clean target" 0 $?
[[ -x $tmp/proj/fixed ]] || { echo "FAIL make: the program was not built"; fail=1; }
(cd "$tmp/proj" && python3 "$driver" --sarif "$tmp/m.sarif" make -s) >"$tmp/out" 2>"$tmp/err"
expect "make, target with a bug" 1 $?
if ! grep -q "r4_use_after_free.bug.c:$line (main) (static)$" "$tmp/out" ||
	[[ $(grep -c '^pmsan: rule' "$tmp/out") -ne 1 ]] || ! grep -q '"ruleId": "4"' "$tmp/m.sarif"; then
	echo "FAIL make: want the one finding of the bug file (and in SARIF), got:"
	sed 's/^/    /' "$tmp/out" "$tmp/err"
	fail=1
else
	echo "ok   make report and SARIF"
fi
(cd "$tmp/proj" && python3 "$driver" make -s no-such-target) >"$tmp/out" 2>"$tmp/err"
expect "make, failing build" 2 $?
exit $fail
