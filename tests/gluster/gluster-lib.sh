# gluster-lib.sh - a GlusterFS cluster on one machine, for the cluster test and the
# benchmark (sourced by tests/gluster/cluster.sh and bench/gluster-bench.sh).
#
# Everything runs in namespaces of its own, so that nothing of the machine's is touched and
# nothing outlives a run, even one that fails or is killed:
#   - a mount namespace: the bricks, the client mount, and Gluster's state directories
#     (/var/lib/glusterd, /var/log/glusterfs) bind-mounted from the run's work directory,
#     and a /run of its own (glusterd's socket and /run/gluster);
#   - a network namespace: glusterd listens on its usual port 24007 and the bricks on
#     49900-49990 of an address of their own (GL_ADDR on the namespace's loopback), so a
#     glusterd the machine runs is neither seen nor disturbed;
#   - a pid namespace: when the script inside ends, the kernel kills every daemon it
#     started (glusterd, the bricks, the self-heal daemon, the client, keratin's daemons),
#     and the mount namespace, with every mount in it, goes away with them.
#
# The caller sets KR (the keratin binary), then calls gl_isolate "$@" first thing: it makes
# the work directory GW (removed when the run ends), the script runs again inside the
# namespaces, and gl_isolate returns there (GL_INSIDE=1). Bricks are made by
# gl_brick KIND N: keratin (a keratin-fs pool in /dev/shm, full protection, mounted with
# FUSE; GL_KERATIN_OPTS, when set, is passed to its mount as -o), tmpfs, ext4 (on a loop
# device over a file in /dev/shm), or passthrough (libfuse's passthrough_ll over a tmpfs
# mount: the caller sources bench/passthrough.sh and runs pt_build first); gl_volume makes
# the volume over them, and gl_teardown removes both, for a run that compares brick kinds.
#
# Requirements, checked by gl_probe (which prints SKIP and exits 77 when one is missing):
# root, glusterd and the FUSE client (glusterfs-server, glusterfs-client), unshare(1) with
# mount, network and pid namespaces, ip(8), /dev/fuse.

GL_ADDR=10.77.0.1
GL_VOL=kv

# Prints SKIP: REASON and exits 77 unless a cluster can run here. Outside the namespaces.
gl_probe() {
	local t
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: the cluster needs root (mounts, namespaces)"; exit 77; }
	for t in glusterd gluster glusterfs unshare ip setfattr; do
		command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (glusterfs-server, glusterfs-client, util-linux, iproute2, attr)"; exit 77; }
	done
	[ -c /dev/fuse ] || { echo "SKIP: /dev/fuse is missing"; exit 77; }
	if ! unshare -mnp --fork --mount-proc --propagation private true 2>"$GW/probe.err"; then
		echo "SKIP: no mount, network and pid namespaces here: $(head -1 "$GW/probe.err")"
		exit 77
	fi
}

# Makes the run's work directory GW (in /dev/shm, else TMPDIR), removed when the calling
# script exits; runs that script again inside new namespaces and exits with its status.
# Returns at once when already inside.
gl_isolate() {
	[ "${GL_INSIDE:-}" = 1 ] && return 0
	local shm=/dev/shm
	[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
	GW=$(mktemp -d "$shm/keratin-$(basename "$0" .sh).XXXXXX") || { echo "FAIL: no work directory"; exit 1; }
	export GW
	trap 'rm -rf "$GW"' EXIT
	gl_probe
	GL_INSIDE=1 unshare -mnp --fork --mount-proc --propagation private "$BASH" "$0" "$@"
	exit $?
}

# Inside, first: the namespace began as a copy of the machine's mounts, and a copy of
# another program's FUSE mount keeps that file system's connection open until this
# namespace ends, so its daemon would not see its own unmount (`keratin fs umount` of a test
# running beside this one waited 60 s and failed); a copy of a loop-backed mount keeps its
# loop device busy. They are dropped here, in this namespace only.
gl_drop_foreign_mounts() {
	local m
	awk '$3 ~ /^fuse/ || $1 ~ /^\/dev\/loop/ { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$(printf '%b' "$m")" 2>/dev/null; done
}

# Inside: the loopback with GL_ADDR, Gluster's directories private to the run, glusterd.
gl_start() {
	gl_drop_foreign_mounts
	ip link set lo up && ip addr add "$GL_ADDR/32" dev lo || { echo "FAIL: cannot give the loopback $GL_ADDR"; exit 1; }
	# /run holds glusterd's command socket (/run/glusterd.socket) beside its own directory.
	mount -t tmpfs -o mode=755 tmpfs /run || { echo "FAIL: cannot make /run private"; exit 1; }
	local d
	for d in /var/lib/glusterd /var/log/glusterfs /run/gluster; do
		mkdir -p "$d" "$GW/state$d" && mount --bind "$GW/state$d" "$d" ||
			{ echo "FAIL: cannot make $d private"; exit 1; }
	done
	cat >"$GW/glusterd.vol" <<-EOF
	volume management
	    type mgmt/glusterd
	    option working-directory /var/lib/glusterd
	    option transport-type socket
	    option transport.socket.listen-port 24007
	    option base-port 49900
	    option max-port 49990
	    option ping-timeout 0
	    option event-threads 1
	end-volume
	EOF
	glusterd -f "$GW/glusterd.vol" -p "$GW/glusterd.pid" || { echo "FAIL: glusterd did not start"; exit 1; }
	local _
	for _ in $(seq 100); do gl peer status >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "FAIL: glusterd does not answer: $(tail -3 /var/log/glusterfs/glusterd.log)"
	exit 1
}

gl() { gluster --mode=script "$@"; }

# gl_brick KIND N: makes brick N's file system of KIND, mounted on $GW/bN, and sets
# BRICK[N] to the brick directory inside it, KPID[N] to keratin's daemon (keratin) and
# PTPID[N] to passthrough_ll's (passthrough).
declare -a BRICK KPID POOL PTPID
gl_brick() {
	local kind=$1 n=$2 mnt=$GW/b$2
	mkdir -p "$mnt"
	case $kind in
	keratin)
		POOL[n]=$GW/pool$n.kfs
		"$KR" fs mkfs "${POOL[n]}" --size "${GL_BRICK_SIZE:-1G}" ${GL_INODES:+--inodes "$GL_INODES"} --force-pmem >/dev/null ||
			{ echo "FAIL: mkfs of brick $n"; exit 1; }
		gl_keratin_mount "$n"
		;;
	tmpfs)
		mount -t tmpfs -o size="${GL_BRICK_SIZE:-1G}" tmpfs "$mnt" || { echo "FAIL: tmpfs brick $n"; exit 1; }
		;;
	ext4)
		POOL[n]=$GW/ext4-$n.img
		truncate -s "${GL_BRICK_SIZE:-1G}" "${POOL[n]}" && mkfs.ext4 -q -F "${POOL[n]}" &&
			mount -o loop "${POOL[n]}" "$mnt" || { echo "FAIL: ext4 brick $n"; exit 1; }
		;;
	passthrough)
		# Over a tmpfs mount like the tmpfs brick's, so that FUSE is the only difference.
		# Gluster keeps its gfids in trusted.* extended attributes: -o xattr passes them on.
		mkdir -p "$GW/pt$n" && mount -t tmpfs -o size="${GL_BRICK_SIZE:-1G}" tmpfs "$GW/pt$n" &&
			pt_mount "$GW/pt$n" "$mnt" xattr "$GW/passthrough-$n.log" ||
			{ echo "FAIL: passthrough brick $n: ${PT_WHY:-tmpfs mount}"; exit 1; }
		PTPID[n]=$PT_PID
		;;
	esac
	mkdir -p "$mnt/brick"
	BRICK[n]=$mnt/brick
}

# Mounts brick N's keratin-fs pool (again), its daemon in the foreground of a background
# job so that KPID[N] is its pid; with the options of GL_KERATIN_OPTS, read at each mount so
# that a remount after a kill keeps them.
gl_keratin_mount() {
	local n=$1 mnt=$GW/b$1 _
	"$KR" fs mount "${POOL[n]}" "$mnt" --force-pmem ${GL_KERATIN_OPTS:+-o "$GL_KERATIN_OPTS"} -f 2>>"$GW/keratin-$n.log" &
	KPID[n]=$!
	# Up to 60 s: on a machine busy with other work a mount has taken more than the 3 s
	# this once allowed (a fresh-clone make check failed so, its daemon alive, no error).
	for _ in $(seq 6000); do
		grep -q " $mnt fuse.keratin " /proc/self/mounts && return 0
		kill -0 "${KPID[n]}" 2>/dev/null || break
		sleep 0.01
	done
	echo "FAIL: keratin-fs of brick $n did not mount: $(tail -2 "$GW/keratin-$n.log")"
	exit 1
}

gl_brick_addr() { echo "$GL_ADDR:${BRICK[$1]}"; }

# gl_volume N...: a replica volume over bricks N..., started and mounted on $GW/vol with
# Gluster's FUSE client. GL_VOLOPTS: "key value" lines set before the start.
gl_volume() {
	local n bricks=()
	for n in "$@"; do bricks+=("$(gl_brick_addr "$n")"); done
	gl volume create "$GL_VOL" replica $# "${bricks[@]}" force >/dev/null || { echo "FAIL: volume create"; exit 1; }
	local k v
	while read -r k v; do
		[ -n "$k" ] && { gl volume set "$GL_VOL" "$k" "$v" >/dev/null || { echo "FAIL: volume set $k $v"; exit 1; }; }
	done <<<"${GL_VOLOPTS:-}"
	gl volume start "$GL_VOL" >/dev/null || { echo "FAIL: volume start: $(tail -3 /var/log/glusterfs/glusterd.log)"; exit 1; }
	gl_client_mount
}

# The client mount returns before it has reached every brick; until then a read may fail,
# or go to another brick than the one a test names. So it waits until the replication
# layer sees every brick it knows as up (the client's own .meta/ view).
gl_client_mount() {
	mkdir -p "$GW/vol"
	mount -t glusterfs "$GL_ADDR:/$GL_VOL" "$GW/vol" || { echo "FAIL: the client mount"; exit 1; }
	local _ private=$GW/vol/.meta/graphs/active/$GL_VOL-replicate-0/private
	for _ in $(seq 300); do
		grep -q '^child_up\[[0-9]*\] = 1' "$private" 2>/dev/null &&
			! grep -q '^child_up\[[0-9]*\] = 0' "$private" && return 0
		sleep 0.1
	done
	echo "FAIL: the client did not reach every brick: $(grep '^child_up' "$private" 2>&1 | tr '\n' ' ')"
	exit 1
}

gl_client_remount() {
	umount "$GW/vol" && gl_client_mount
}

# gl_teardown N...: undoes gl_volume and gl_brick, so that a run can build the next volume
# on fresh bricks: the client unmounted, the volume stopped (its brick servers waited for,
# or they would hold the bricks busy) and deleted, bricks N... unmounted and their pools
# removed.
gl_teardown() {
	local n pids=() p _
	for n in "$@"; do pids+=($(gl_brick_pid "$n")); done
	umount "$GW/vol" || { echo "FAIL: umount of the volume"; exit 1; }
	gl volume stop "$GL_VOL" >/dev/null && gl volume delete "$GL_VOL" >/dev/null ||
		{ echo "FAIL: volume stop and delete"; exit 1; }
	for p in "${pids[@]}"; do
		for _ in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
	done
	for n in "$@"; do
		if [ -n "${KPID[n]:-}" ]; then
			"$KR" fs umount "$GW/b$n" >/dev/null && wait "${KPID[n]}"
		elif [ -n "${PTPID[n]:-}" ]; then
			pt_umount "$GW/b$n" "${PTPID[n]}" && umount "$GW/pt$n" && rmdir "$GW/pt$n"
		else
			umount "$GW/b$n"
		fi || { echo "FAIL: umount of brick $n"; exit 1; }
		[ -n "${POOL[n]:-}" ] && rm -f "${POOL[n]}"
		rmdir "$GW/b$n"
		unset 'BRICK[n]' 'KPID[n]' 'POOL[n]' 'PTPID[n]'
	done
}

# The volume's online bricks, one "PATH PID" line each, from the status in XML (the table
# wraps long paths).
gl_online() {
	gl volume status "$GL_VOL" --xml 2>/dev/null | awk -F'[<>]' '
		$2 == "path" { path = $3 } $2 == "status" { st = $3 } $2 == "pid" { pid = $3 }
		$2 == "/node" { if (st == 1 && path ~ /^\//) print path, pid; path = st = pid = "" }'
}

# The pid of brick N's server process (glusterfsd), or nothing when it is down.
gl_brick_pid() {
	gl_online | awk -v p="${BRICK[$1]}" '$1 == p { print $2 }'
}

# Stops brick N's server process and waits until it is gone (glusterd would otherwise take
# a later `volume start force` to mean the old process). SIGNAL: TERM, or KILL.
gl_brick_stop() { # N [SIGNAL]
	local pid _
	pid=$(gl_brick_pid "$1")
	[ -n "$pid" ] || return 0
	kill -"${2:-TERM}" "$pid"
	for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	echo "brick $1's server (pid $pid) did not stop"
	return 1
}

# Waits until bricks N... are online (after volume start force): one status query a round,
# as each query costs glusterd a fraction of a second.
gl_wait_online() {
	local n _ st ok
	for _ in $(seq 120); do
		st=$(gl_online)
		ok=1
		for n in "$@"; do
			echo "$st" | awk -v p="${BRICK[n]}" '$1 == p { f = 1 } END { exit !f }' || ok=0
		done
		[ $ok = 1 ] && return 0
		sleep 0.5
	done
	return 1
}

# Starts an index heal and waits (up to $1 seconds) until no brick lists an entry to heal.
gl_heal_wait() {
	local limit=$1 t=0 pending
	gl volume heal "$GL_VOL" >/dev/null 2>&1
	while :; do
		pending=$(gl volume heal "$GL_VOL" info 2>/dev/null | awk '
			/^Status:/ && $0 !~ /Connected/ { bad = 1 }
			/^Number of entries:/ { n += $NF; seen++ }
			END { print (bad || !seen) ? "down" : n }')
		[ "$pending" = 0 ] && return 0
		[ $t -ge "$limit" ] && { echo "heal: still $pending after ${limit}s"; return 1; }
		[ $((t % 10)) = 9 ] && gl volume heal "$GL_VOL" >/dev/null 2>&1
		sleep 1
		t=$((t + 1))
	done
}

# Prints the last errors and warnings of glusterd, the volume's client, the brick servers
# and the bricks' FUSE daemons (keratin, passthrough_ll): what says why a run failed, before
# its work directory goes away.
gl_logs() {
	local f
	for f in /var/log/glusterfs/glusterd.log /var/log/glusterfs/*vol.log /var/log/glusterfs/bricks/*.log; do
		[ -s "$f" ] && { echo "--- $f"; grep -E '\] (E|W) \[' "$f" | tail -8; }
	done
	for f in "$GW"/keratin-*.log "$GW"/passthrough-*.log; do
		[ -s "$f" ] && { echo "--- $f"; tail -8 "$f"; }
	done
}

# A brick's files as Gluster's clients see them: path, type, size, mode and content hash,
# without Gluster's own .glusterfs directory. Bricks whose manifests match are identical.
gl_manifest() {
	(cd "$1" && {
		find . -path ./.glusterfs -prune -o ! -name . -printf '%y %m %s %p\n'
		find . -path ./.glusterfs -prune -o -type f -print0 | xargs -0 -r md5sum | sed 's/^\([0-9a-f]*\)  /md5 \1 /'
	} | LC_ALL=C sort)
}
