#!/bin/sh
# check-standalone-docs.sh SRCDIR - the repository's text stands alone: nothing in the
# README, docs, sources, headers, tools, benchmarks or examples points at files outside the
# repository (a "shared" directory next to it) or at tracker numbers.
set -u
cd "$1" || exit 1
outside='\.\./shared|shared/(DESIGN|STYLE|seeds|reference)'
tracker='(issue|ticket|bug) #?[0-9]+'
hits=$(grep -rnIE "$outside|$tracker" README.md docs src include tools bench examples maps)
if [ -n "$hits" ]; then
	echo "FAIL: references outside the repository:"
	echo "$hits"
	exit 1
fi
echo "PASS: no references outside the repository"
