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
for page in "$mandir"/*.1 "$mandir"/*.7; do
	warnings=$(groff -t -man -ww -z "$page" 2>&1)
	if [ -n "$warnings" ]; then
		echo "FAIL: $page: $warnings"
		status=1
	fi
done
[ $status -eq 0 ] && echo "PASS: $(echo $cmds | wc -w) commands, each in a manual page; pages format cleanly"
exit $status
