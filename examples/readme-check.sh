#!/bin/sh
# readme-check.sh README BANK: the README's first code block is examples/bank.c, byte for
# byte, and the program works as the README says: the first run creates the pool and
# moves 100 from one account to the other, the second run opens it and moves 100 more.
set -u
readme=$1
bank=$2
src=$(dirname "$0")/bank.c
block=$(awk '/^```c$/ { n++; if (n == 1) { on = 1; next } } /^```$/ { on = 0 } on' "$readme")
[ "$block" = "$(cat "$src")" ] || { echo "FAIL: README's first code block is not examples/bank.c"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/keratin-bank.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
out1=$(KERATIN_FORCE_PMEM=1 "$bank" "$dir/bank.pool") || { echo "FAIL: first run: $out1"; exit 1; }
out2=$(KERATIN_FORCE_PMEM=1 "$bank" "$dir/bank.pool") || { echo "FAIL: second run: $out2"; exit 1; }
[ "$out1" = "balances: 900 1100" ] && [ "$out2" = "balances: 800 1200" ] ||
	{ echo "FAIL: balances '$out1' then '$out2'"; exit 1; }
echo "readme: the first example is examples/bank.c and runs: $out1, then $out2"
