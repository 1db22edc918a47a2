#!/bin/sh
# check-exports.sh CC LIBRARY HEADER... - the ABI of a shared library is exactly what its
# public headers declare: the dynamic symbols LIBRARY defines (nm -D --defined-only) must
# equal the functions HEADERs declare (as GCC's -aux-info lists them, one line per
# declaration with the header it came from). Prints both differences and fails on any.
# Also checks that each header compiles on its own, as C99 and as C++.
set -eu
cc=$1 lib=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each header stands alone, in C99 and in C++.
for h in "$@"; do
	printf '#include "%s"\n' "$h" >"$tmp/one.c"
	"$cc" -std=c99 -Wall -Wextra -Werror -fsyntax-only "$tmp/one.c" ||
		{ echo "FAIL: $h does not compile on its own (C99)"; exit 1; }
	if command -v c++ >/dev/null; then
		c++ -Wall -Wextra -Werror -fsyntax-only -x c++ "$tmp/one.c" ||
			{ echo "FAIL: $h does not compile on its own (C++)"; exit 1; }
	fi
done
for h in "$@"; do
	printf '#include "%s"\n' "$h"
done >"$tmp/all.c"
"$cc" -fsyntax-only -aux-info "$tmp/decls" "$tmp/all.c"
# /* /path/include/keratin.h:123:NC */ extern int kr_pool_create (const char *, ...);
for h in "$@"; do
	grep -F "/* $h:" "$tmp/decls" || true
done | sed -n 's/^.*\*\/ *extern \([^(]*\) (.*$/\1/p' | awk '{ sub(/^\**/, "", $NF); print $NF }' |
	sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '{ print $NF }' | sort -u >"$tmp/exported"

if [ ! -s "$tmp/declared" ]; then
	echo "FAIL: no function declarations found in $*"
	exit 1
fi
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
	echo "FAIL: $lib exports other symbols than its headers declare"
	comm -23 "$tmp/declared" "$tmp/exported" | sed 's/^/  declared, not exported: /'
	comm -13 "$tmp/declared" "$tmp/exported" | sed 's/^/  exported, not declared: /'
	exit 1
fi
echo "PASS: $(basename "$lib") exports exactly the $(wc -l <"$tmp/declared") functions of its headers"
