#!/bin/sh
# check-manpages.sh KERATIN MANDIR - every command that `keratin --help` lists has a manual
# page whose synopsis shows it, and every page (commands' and keratin-pmemobj(7)) formats
# without a groff warning.
set -eu
keratin=$1 mandir=$2
status=0
cmds=$("$keratin" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 && $1 != "Commands:" && $1 != "command" { print $1 }')
[ -n "$cmds" ] || { echo "FAIL: no commands in keratin --help"; exit 1; }
for c in $cmds; do
	[ "$c" = help ] && continue
	if ! grep -l "^\.B keratin $c\$" "$mandir"/*.1 >/dev/null; then
		echo "FAIL: no manual page shows 'keratin $c' in its synopsis"
		status=1
	fi
done
# The checkers' commands, installed beside keratin, have pages of their own.
for c in keratin-pmsan-cc keratin-pmsan-c++ keratin-pmscan; do
	if ! grep -l "^\.B $(echo "$c" | sed 's/-/\\\\-/g')\$" "$mandir"/*.1 >/dev/null; then
		echo "FAIL: no manual page shows '$c' in its synopsis"
		status=1
	fi
done
for page in "$mandir"/*.1 "$mandir"/*.7; do
	warnings=$(groff -t -man -ww -z "$page" 2>&1)
	if [ -n "$warnings" ]; then
		echo "FAIL: $page: $warnings"
		status=1
	fi
done
# keratin(1)'s table of commands has each command with what it accepts, as --help says.
"$keratin" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 && $1 != "Commands:" && $1 != "command"' |
	while read -r name rest; do
		accepts=$(echo "$rest" | sed 's/  .*//')
		if ! grep -q "^$name	$(echo "$accepts" | sed 's/-/\\\\-/g')	" "$mandir/keratin.1"; then
			echo "FAIL: keratin(1)'s table does not list '$name' as accepting '$accepts'"
			exit 1
		fi
	done || status=1
# Every page names the release that --version names ("keratin X.Y.Z" in its .TH line).
version=$("$keratin" --version | awk '{ print $2 }')
for page in "$mandir"/*.1 "$mandir"/*.7; do
	if ! grep -q "^\.TH .* \"keratin $version\"" "$page"; then
		echo "FAIL: $page does not name release $version in its .TH line"
		status=1
	fi
done
# Every KERATIN_* environment variable the sources read is documented in a page.
srcdir=$(dirname "$0")/..
vars=$(grep -rhoE 'getenv\("KERATIN_[A-Z0-9_]+"\)' "$srcdir/src" "$srcdir/tools" "$srcdir/compat" |
	sed 's/getenv("\(.*\)")/\1/' | sort -u)
[ -n "$vars" ] || { echo "FAIL: no KERATIN_ variable found in the sources"; exit 1; }
for v in $vars; do
	if ! grep -q "$(echo "$v" | sed 's/_/\\\\*_/g')" "$mandir"/*.1 "$mandir"/*.7; then
		echo "FAIL: $v is read by keratin but no manual page documents it"
		status=1
	fi
done
[ $status -eq 0 ] && echo "PASS: $(echo $cmds | wc -w) commands, each in a manual page; $(echo $vars | wc -w) environment variables documented; pages format cleanly"
exit $status
