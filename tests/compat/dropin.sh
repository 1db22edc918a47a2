#!/bin/bash
# dropin.sh BUILD_DIR OUT_DIR - keratin-pmemobj as a binary drop-in for libpmemobj.so.1.
# PMDK's example programs (data_store and mapcli with every map, and every other one that
# differential.sh builds) are compiled ONCE, from where libpmemobj-dev installs them, with
# the system's headers and linked with Debian's libpmemobj (-lpmemobj -lpmem; objects go to
# OUT_DIR). Each of check/pmdk_workloads.sh's workloads then runs that same binary twice:
# plainly, and with LD_LIBRARY_PATH=BUILD_DIR/compat/dropin, where libpmemobj.so.1 is
# keratin's library. Outputs and exit statuses must be the same (compare_common.sh has the
# rules, and what is normalised and why). Evidence that each run had the library it should:
#   - per program: `LD_LIBRARY_PATH=dropin ldd PROG` resolves libpmemobj.so.1 to the
#     drop-in (a case of its own, "ldd NAME");
#   - per keratin step: the loader's own log (LD_DEBUG=libs) shows it initialising the
#     drop-in's libpmemobj.so.1 and no other; the pool left passes `keratin check` and
#     `keratin info` reads it as a keratin pool;
#   - per plain step: `keratin info` refuses the pool (not a keratin pool): Debian's made it.
#
# Prints one line per case (ok, FAIL with a short diff, SKIP with the reason), then
# "N passed, M failed, K skipped". Exits 1 if a case failed, 77 if the examples
# (/usr/share/doc/libpmemobj-dev/examples, or $PMEMOBJ_EXAMPLES) are missing.
# What cannot run, or runs only in part, and why: as in differential.sh's header.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/compat/compare_common.sh
. "$here/compare_common.sh"
cmp_setup "$@"

dropin=$build/compat/dropin
if [[ ! -e $dropin/libpmemobj.so.1 ]]; then
	echo "FAIL: $dropin/libpmemobj.so.1 is missing: build the target keratin_pmemobj_shared"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
mkdir -p "$tmp/ld"
# shellcheck disable=SC2034 # (cmp_compile reads the arrays by name)
sys_cflags=() sys_libs=(-lpmemobj -lpmem)

wl_prog() { echo "$out/bin/$1"; }

# wl_build NAME ARG...: one build against the system's libpmemobj; if it needs
# libpmemobj.so.1, the loader must find the drop-in's under LD_LIBRARY_PATH.
wl_build() {
	local name=$1 prog=$out/bin/$1 line
	cmp_selected "$1" || return 1
	shift
	if ! cmp_compile "$prog" sys_cflags sys_libs "$@"; then
		cmp_build_failed "$name" "$prog"
		return 1
	fi
	readelf -d "$prog" | grep -q 'NEEDED.*\[libpmemobj\.so\.1\]' || return 0
	line=$(LD_LIBRARY_PATH=$dropin ldd "$prog" | grep 'libpmemobj\.so\.1')
	if [[ $line == *"=> $dropin/libpmemobj.so.1 "* ]]; then
		cmp_ok "ldd $name: libpmemobj.so.1 => $dropin/libpmemobj.so.1"
	else
		cmp_fail "ldd $name" "libpmemobj.so.1 resolves elsewhere: $line"
		return 1
	fi
}

side_env() {
	if [[ $side == keratin ]]; then
		wl_env+=(LD_LIBRARY_PATH="$dropin" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld/debug")
	fi
}

# side_verify POOL STEP: which library the step's processes initialised, and whose pool it is.
side_verify() {
	local pool=$1 step=$2 inits
	if [[ $side == keratin ]]; then
		inits=$(cat "$tmp"/ld/debug.* 2>/dev/null | sed -n 's/.*calling init: \(.*libpmemobj\.so\.1\)$/\1/p' | sort -u)
		rm -f "$tmp"/ld/debug.*
		[[ $inits == "$dropin/libpmemobj.so.1" ]] ||
			echo "step $step: the loader initialised libpmemobj.so.1 from '${inits:-nowhere}', not the drop-in"
		if [[ -e $pool ]] && ! "$keratin" info "$pool" 2>&1 | grep -q '^pool:'; then
			echo "step $step: keratin info does not read the pool as a keratin pool"
		fi
	elif [[ -e $pool ]] && "$keratin" info "$pool" >/dev/null 2>&1; then
		echo "step $step: the plain run made a keratin pool"
	fi
}

cmp_run
