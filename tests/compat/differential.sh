#!/bin/bash
# differential.sh BUILD_DIR OUT_DIR - keratin-pmemobj against libpmemobj on PMDK's own
# examples. Every example program libpmemobj-dev installs is compiled, unmodified, from where
# the package puts them (/usr/share/doc/libpmemobj-dev/examples, or $PMEMOBJ_EXAMPLES;
# objects go to OUT_DIR) twice: against keratin-pmemobj's headers and library
# (BUILD_DIR/compat, found through an rpath) and against Debian's libpmemobj. Both run the
# same scripted workloads (check/pmdk_workloads.sh: the ones pmsan's check/pmdk_examples.sh
# runs, and more) on pools in /dev/shm; outputs and exit statuses must be the same, and
# after each keratin step the pool must pass `keratin check` (compare_common.sh has the
# rules, and what is normalised and why).
#
# Prints one line per case (ok, FAIL with a short diff, SKIP with the reason), then
# "N passed, M failed, K skipped". Exits 1 if a case failed, 77 if the examples are missing.
#
# What cannot run, or runs only in part (check/pmdk_workloads.sh's header says more):
#   manpage.c, setjmp.c  their pool is at the fixed path /pmem-fs/myfile: built and started
#                        only, both must fail to create it alike (SKIP if /pmem-fs exists)
#   examine_arttree      built only: it reads libpmemobj's on-media layout, calls no function
#   mapcli ctree         one key only: libpmemobj itself crashes on a second (an example bug)
#   kv_server            a TCP server: driven by a bash /dev/tcp client, stopped by KILL
#   pminvaders 1, 2      need a terminal: run on a pseudo-terminal (script), killed, then
#                        restarted and quit with q; their frames depend on timing, so what
#                        is compared is whether each drew its landmarks, and exit statuses
#   pmemobjfs            mkfs.pmemobjfs runs everywhere; the mount case needs FUSE (SKIP
#                        where libpmemobj's own build cannot mount)
#   kv_server needs libuv1-dev, pminvaders libncurses-dev, pmemobjfs libfuse-dev (FUSE 2):
#   SKIP without them.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/compat/compare_common.sh
. "$here/compare_common.sh"
cmp_setup "$@"

# The flags of each side (cmp_compile reads the arrays by name).
# shellcheck disable=SC2034,SC2054
{
	kp_cflags=(-I"$repo/include/keratin-pmemobj")
	kp_libs=(-L"$build/compat" -lkeratin-pmemobj -Wl,-rpath,"$build/compat")
	sys_cflags=()
	sys_libs=(-lpmemobj -lpmem)
}

wl_prog() { echo "$out/$side/$1"; }

# needed PROG: the shared libraries PROG names (DT_NEEDED), one a line.
needed() {
	readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

# wl_build NAME ARG...: NAME against each library. Where the libpmemobj build needs
# libpmemobj.so.1 (examine_arttree, which calls none of it, does not), the keratin one must
# need libkeratin-pmemobj.so.1 and not libpmemobj.so.1.
wl_build() {
	local name=$1 n
	cmp_selected "$1" || return 1
	shift
	if ! cmp_compile "$out/libpmemobj/$name" sys_cflags sys_libs "$@"; then
		cmp_build_failed "$name (libpmemobj)" "$out/libpmemobj/$name"
		return 1
	fi
	if ! cmp_compile "$out/keratin/$name" kp_cflags kp_libs "$@"; then
		cmp_build_failed "$name (keratin-pmemobj)" "$out/keratin/$name"
		return 1
	fi
	needed "$out/libpmemobj/$name" | grep -qx 'libpmemobj.so.1' || return 0
	n=$(needed "$out/keratin/$name")
	if ! grep -qx 'libkeratin-pmemobj.so.1' <<<"$n" || grep -qx 'libpmemobj.so.1' <<<"$n"; then
		cmp_fail "build $name (keratin-pmemobj)" "it needs $(tr '\n' ' ' <<<"$n")"
		return 1
	fi
}

side_env() { :; }
side_verify() { :; }

cmp_run
