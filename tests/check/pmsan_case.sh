#!/bin/sh
# pmsan_case.sh BIN SRC - runs one checker test program (tests/check/cases, built with
# keratin-pmsan-cc) and compares pmsan's reports with the `expect:` markers of its source.
#
# A NAME.bug program must draw exactly the marked reports (rule, name, file and line; no
# other report of any rule) and exit with pmsan's exit code 66; a NAME.fixed program must
# draw none and exit 0. The ordering case r6_missing_barrier runs three times: without a
# check command, where no report may appear (every store is flushed before the fence, so
# no per-statement rule sees the bug), then with its own --check mode as the check command
# under reorder=single and reorder=accumulative, where the bug program must draw its mark.
set -u
bin=$1
src=$2
base=$(basename "$src")
# A case that needs CPU instructions names them in a "needs-cpu:" line (flags of
# /proc/cpuinfo); on a CPU without one, it cannot run here: SKIP (exit 77).
for flag in $(sed -n 's/.*needs-cpu: *\([a-z0-9 _]*\).*/\1/p' "$src"); do
	grep -qw "$flag" /proc/cpuinfo || { echo "SKIP $base: this CPU lacks $flag"; exit 77; }
done
tmp=$(mktemp -d /dev/shm/pmsan-case-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pool=$tmp/pool
export PMEM_IS_PMEM_FORCE=1
fail=0

expected() {
	awk -v f="$base" '{
		if (match($0, /\/\* expect: [0-9a-z]+ [a-z-]+ \*\//)) {
			split(substr($0, RSTART, RLENGTH), w, " ")
			print w[3], w[4], f ":" NR
		}
	}' "$src" | sort -u
}

# "RULE NAME FILE:LINE" for every report line, the file reduced to its base name.
reported() {
	sed -n 's/^pmsan: rule \([0-9a-z]*\) (\([a-z-]*\)): .* at \(.*\):\([0-9]*\) ([^)]*)$/\1 \2 \3 \4/p' "$1" |
		awk '{ n = split($3, p, "/"); print $1, $2, p[n] ":" $4 }' | sort -u
}

# run LABEL OPTIONS WANT: WANT is "marks" (the source's markers) or "none".
run() {
	label=$1
	PMSAN_OPTIONS=$2 "$bin" "$pool" >"$tmp/out" 2>&1
	rc=$?
	if [ "$3" = marks ]; then
		expected >"$tmp/want"
	else
		: >"$tmp/want"
	fi
	reported "$tmp/out" >"$tmp/got"
	want_rc=0
	[ -s "$tmp/want" ] && want_rc=66
	if ! cmp -s "$tmp/want" "$tmp/got" || [ $rc -ne $want_rc ]; then
		echo "FAIL $base ($label): exit $rc (want $want_rc)"
		echo "  expected:"
		sed 's/^/    /' "$tmp/want"
		echo "  reported:"
		sed 's/^/    /' "$tmp/got"
		echo "  output:"
		sed 's/^/    /' "$tmp/out"
		fail=1
	else
		echo "ok   $base ($label): $(wc -l <"$tmp/got") report(s) as marked, exit $rc"
	fi
}

case $base in
r6_*)
	run "no check command" "" none
	for s in single accumulative; do
		run "reorder=$s" "check='$bin --check':reorder=$s" marks
	done
	;;
*)
	run default "" marks
	;;
esac
exit $fail
