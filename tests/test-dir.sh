#!/bin/sh
# test-dir.sh mount|umount DIR - the directory of the C tests' pools and crash images
# (KR_TEST_DIR; tests/testutil.h), set up and taken down around a ctest run as a fixture.
#
# As root, DIR becomes a tmpfs of its own with transparent huge pages (huge=within_size):
# a pool of a few MiB then takes a handful of page faults instead of thousands, and in a
# virtual machine a first-touch fault of a 4 KiB tmpfs page was measured at 15-50 us
# (16 MiB touched page by page: 60-190 ms on /dev/shm, 0.5-5 ms on a huge-page tmpfs).
# The crash tests recover and check thousands of fresh images, so this is most of their
# time. The code under test is the same either way (persistent memory is usually mapped
# with huge pages too). Elsewhere (not root, no huge pages), DIR is a link to /dev/shm.
set -u
cmd=${1:-} dir=${2:-}
[ -n "$dir" ] || { echo "usage: test-dir.sh mount|umount DIR" >&2; exit 2; }
case $cmd in
mount)
	if mountpoint -q "$dir" 2>/dev/null; then
		echo "test pools in $dir (a tmpfs left mounted by an earlier run: reused)"
		exit 0
	fi
	[ -L "$dir" ] && rm -f "$dir"
	mkdir -p "$dir" || exit 1
	if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o huge=within_size,mode=1777 keratin-tests "$dir" 2>/dev/null; then
		echo "test pools in $dir: a tmpfs with huge pages"
	else
		rmdir "$dir" && ln -s /dev/shm "$dir" || exit 1
		echo "test pools in /dev/shm (through $dir): no huge-page tmpfs could be mounted here"
	fi
	;;
umount)
	if mountpoint -q "$dir" 2>/dev/null; then
		umount "$dir" || umount -l "$dir" || exit 1
		rmdir "$dir"
	elif [ -L "$dir" ]; then
		rm -f "$dir"
	fi
	echo "test pools' directory $dir removed"
	;;
*)
	echo "usage: test-dir.sh mount|umount DIR" >&2
	exit 2
	;;
esac
