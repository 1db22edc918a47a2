#!/bin/sh
# check-layers.sh CC SRC LAYERS.TXT - the build keeps the library's layers apart.
#
# LAYERS.TXT is written by CMakeLists.txt from its kr_layer table, one line per layer:
#   NAME:LAYERS IT STANDS ON:INCLUDE FOLDERS ITS FILES ARE REALLY COMPILED WITH
# Checked here:
#   - the declared layers form a ladder: a layer stands only on layers declared before it;
#   - for every layer, a planted one-line file that includes a header, compiled with
#     exactly that layer's include folders:
#       - every header of the layer's own folder and of the layers it stands on compiles
#         (so a planted include is the only thing that can fail, and each header stands
#         alone);
#       - every header of any other layer (a higher one, or a sibling) is not found ("No
#         such file", or only a system header of the same name, as "shadow.h" finds
#         glibc's <shadow.h>). A layer whose include path reaches one fails the test.
set -eu
cc=$1 src=$2 table=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0 planted=0 allowed=0 seen=" "
while IFS=: read -r layer on dirs; do
	for lower in $on; do
		case "$seen" in
		*" $lower "*) ;;
		*) echo "FAIL: layer $layer stands on $lower, which is not declared below it"; fail=1 ;;
		esac
	done
	seen="$seen$layer "
	flags=
	for d in $dirs; do
		flags="$flags -I$d"
	done
	for folder in $(cut -d: -f1 "$table"); do
		for h in "$src/$folder"/*.h; do
			[ -e "$h" ] || continue
			name=$(basename "$h")
			printf '#define _GNU_SOURCE\n#include "%s"\n' "$name" >"$tmp/planted.c"
			case " $layer $on " in
			*" $folder "*)
				allowed=$((allowed + 1))
				# shellcheck disable=SC2086
				if ! "$cc" -std=gnu11 -fsyntax-only $flags "$tmp/planted.c" 2>"$tmp/err"; then
					echo "FAIL: layer $layer cannot include $folder/$name, its own or a lower layer's:"
					head -3 "$tmp/err"
					fail=1
				fi
				;;
			*)
				planted=$((planted + 1))
				# shellcheck disable=SC2086
				if "$cc" -std=gnu11 -M $flags "$tmp/planted.c" >"$tmp/deps" 2>"$tmp/err"; then
					if grep -q "$src/$folder/$name" "$tmp/deps"; then
						echo "FAIL: layer $layer can include $folder/$name, a layer it does not stand on"
						fail=1
					fi
				elif ! grep -q "$name: No such file" "$tmp/err"; then
					echo "FAIL: layer $layer including $folder/$name failed, but not for want of the file:"
					head -3 "$tmp/err"
					fail=1
				fi
				;;
			esac
		done
	done
done <"$table"

echo "layers: $planted planted includes of headers out of reach checked," \
	"$allowed headers within reach compiled"
[ "$planted" -gt 0 ] && [ "$allowed" -gt 0 ] || { echo "FAIL: nothing was checked"; exit 1; }
exit $fail
