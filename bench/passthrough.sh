# passthrough.sh - libfuse's passthrough_ll example as a benchmark peer: a FUSE file system
# that hands every request to a directory underneath and does nothing else, so that what it
# costs over that directory is FUSE's own cost. Sourced by bench/fuse-bench.sh and
# bench/gluster-bench.sh (the latter through gl_brick passthrough, tests/gluster/gluster-lib.sh).
#
# pt_build DIR compiles it once from /usr/share/doc/libfuse3-dev/examples (the build of the
# installed libfuse, options and all, not a copy of its source in this repository) and sets PT;
# pt_mount and pt_umount serve a directory with it and stop it again.

PT_EXAMPLES=/usr/share/doc/libfuse3-dev/examples

# pt_build DIR: compiles passthrough_ll into DIR and sets PT to it. Where it cannot (libfuse3-dev,
# cc, pkg-config or fusermount3 missing, or a compile error) it sets PT_WHY and returns 1, for the
# caller to skip the peer or fail with that reason.
pt_build() {
	local d=$1 t
	for t in cc pkg-config fusermount3; do
		command -v "$t" >/dev/null || { PT_WHY="$t is missing"; return 1; }
	done
	[ -f "$PT_EXAMPLES/passthrough_ll.c" ] || { PT_WHY="$PT_EXAMPLES/passthrough_ll.c is missing (libfuse3-dev)"; return 1; }
	mkdir -p "$d" && cp "$PT_EXAMPLES/passthrough_ll.c" "$PT_EXAMPLES/passthrough_helpers.h" "$d/" ||
		{ PT_WHY="cannot copy libfuse's examples to $d"; return 1; }
	# shellcheck disable=SC2046
	cc -O2 -o "$d/passthrough_ll" "$d/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) 2>"$d/cc.err" ||
		{ PT_WHY="passthrough_ll does not compile: $(head -3 "$d/cc.err")"; return 1; }
	PT=$d/passthrough_ll
}

# pt_mount SRC MNT OPTS LOG: passthrough_ll serving directory SRC on MNT with its options OPTS
# (comma-separated, may be empty; xattr passes extended attributes through), run in the
# foreground of a background job so that PT_PID is its pid and its errors go to LOG. Returns
# once MNT is mounted; where it is not, sets PT_WHY and returns 1.
pt_mount() {
	local _
	"$PT" -f -o "source=$1${3:+,$3}" "$2" 2>"$4" &
	PT_PID=$!
	for _ in $(seq 200); do
		grep -qF " $2 fuse" /proc/self/mounts && return 0
		kill -0 "$PT_PID" 2>/dev/null || { PT_WHY="passthrough_ll exited: $(head -1 "$4")"; return 1; }
		sleep 0.05
	done
	PT_WHY="passthrough_ll did not mount on $2"
	return 1
}

# pt_umount MNT PID: unmounts passthrough_ll's MNT and waits for its daemon PID to exit, so that
# the directory underneath is no longer in use when the caller removes it.
pt_umount() {
	fusermount3 -u "$1" || return 1
	wait "$2"
	return 0
}
