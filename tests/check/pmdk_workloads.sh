# shellcheck shell=bash disable=SC2154,SC2034
# (wl_ex, wl_scratch, wl_env and wl_limit are the sourcing script's, wl_incs is for it.)
# pmdk_workloads.sh - the scripted workloads on PMDK's libpmemobj examples, kept in this one
# place for every script that runs them: check/pmdk_examples.sh (pmsan's false-positive
# run), compat/differential.sh and compat/dropin.sh (keratin-pmemobj against libpmemobj).
# Sourced, never run. The examples are compiled where libpmemobj-dev installs them
# ($wl_ex), never copied into this repository.
#
# The sourcing script sets wl_ex, wl_scratch (a directory the helper steps may write in),
# wl_env (an array of VAR=value given to every example run; may be empty) and optionally
# wl_limit (seconds after which a run is killed), then defines:
#   wl_build NAME ARG...     build program NAME; an ARG is a source under $wl_ex, an
#                            absolute path, or a flag passed on (-l..., -Wl,...); the -I flags
#                            the examples need are in wl_incs. Returns nonzero if it failed
#                            (and says so).
#   wl_prog NAME             print the path of program NAME.
#   wl_case LABEL INPUT STEP...
#                            one verdict on the steps, run in order on one fresh pool, each
#                            with wl_step; INPUT (printf %b escapes) is the first step's stdin,
#                            the others read /dev/null.
#   wl_skip LABEL WHY        a case that cannot run here.
# and calls pmdk_workloads (the cases every script runs) or pmdk_workloads more (also the
# examples that need a terminal, a TCP client, a FUSE mount or a fixed path).
#
# A STEP is one string of blank-separated words: a program NAME made by wl_build, or one of
# the wl_ helpers below, and its arguments; @ stands for the pool's path. A helper step that
# cannot do its job here for want of something outside the library (a FUSE mount) prints
# "SKIP: why" and exits 77.
#
# What no workload does, or does only in part, and why:
#   mapcli ctree    one key only (with "more"): ctree_map.c calls pmemobj_type_num on the
#                   OID_NULL values mapcli inserts, which crashes libpmemobj itself on the
#                   second insert (data_store and kv_server give ctree real values)
#   data_store rtree  data_store has no rtree (mapcli and kv_server cover it)
#   examine_arttree built only: it mmaps the pool file and reads libpmemobj's on-media layout
#                   (no libpmemobj call), an interactive examiner
#   manpage.c, setjmp.c  the man page's snippets: a pool at a fixed path (/pmem-fs/myfile),
#                   only started (with /pmem-fs absent, every library must fail alike; SKIP
#                   if it exists); setjmp.c would then free garbage pointers on purpose
#   kv_server       a TCP server: driven by a client of bash's /dev/tcp on a free local port,
#                   stopped by its KILL message; the hash maps lack the REMOVE it exits on
#   pminvaders 1, 2 ncurses games: on a pseudo-terminal (script), killed, then restarted and
#                   quit with q; their frames depend on timing, so what is compared is
#                   whether each drew its landmarks (score line, menu) and the exit statuses
#   pmemobjfs       FUSE 2: mkfs.pmemobjfs runs everywhere; mounting needs /dev/fuse and the
#                   right to mount (a step exits 77 where the mount cannot be made)

wl_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# check/ex_common.h stands in for PMDK's src/examples/ex_common.h, which the package lacks.
wl_incs=(-I"$wl_here" -I"$wl_ex" -I"$wl_ex/map" -I"$wl_ex/tree_map" -I"$wl_ex/hashmap"
	-I"$wl_ex/list_map" -I"$wl_ex/linkedlist")

# wl_step POOL STEP: run one step with the caller's stdin, stdout and stderr.
wl_step() {
	local -a w
	read -ra w <<<"$2"
	w=("${w[@]//@/$1}")
	if [[ ${w[0]} == wl_* ]]; then
		"${w[@]}"
	else
		wl_exec "${w[@]}"
	fi
}

# wl_exec NAME ARGS...: run program NAME with wl_env; SIGKILLed after wl_limit seconds if
# the sourcing script set wl_limit.
wl_exec() {
	# shellcheck disable=SC2086
	env "${wl_env[@]}" ${wl_limit:+timeout -s KILL $wl_limit} "$(wl_prog "$1")" "${@:2}"
}

# ---------------------------------------------------------------- helper steps

# wl_pty_kill SECONDS MARKS NAME ARGS...: NAME on a pseudo-terminal, SIGKILLed after SECONDS.
# wl_pty_keys KEYS MARKS NAME ARGS...: NAME on a pseudo-terminal, sent the keys KEYS (printf
# %b escapes) one a second, starting after a second; SIGKILLed if still running 10 s later.
# A game's screen depends on timing (frames drawn, where the aliens are), so what both print
# is, for each of the comma-separated MARKS, whether the program drew it (escape sequences
# removed; a mark without doubled letters, which a terminal may draw as one letter and a
# repeat count), and the exit status.
wl_pty_kill() {
	wl_pty "" "$1" "${@:2}" </dev/null
}
wl_pty_keys() {
	local keys i
	keys=$(printf '%b' "$1")
	{
		for ((i = 0; i < ${#keys}; i++)); do
			sleep 1
			printf '%s' "${keys:i:1}"
		done
		sleep 1
	} | wl_pty "$keys" $((${#keys} + 10)) "${@:2}"
}
wl_pty() { # wl_pty KEYS SECONDS MARKS NAME ARGS...
	local cmd rc m marks
	cmd=$(printf '%q ' env TERM=xterm LINES=24 COLUMNS=80 "${wl_env[@]}" \
		timeout -s KILL "$2" "$(wl_prog "$4")" "${@:5}")
	script -qec "$cmd" /dev/null >"$wl_scratch/pty.out" 2>&1
	rc=$?
	sed 's/\x1b\[[0-9;?]*[A-Za-z@]//g; s/\x1b[()][0-9A-Za-z]//g; s/\x1b[=>78]//g' \
		"$wl_scratch/pty.out" >"$wl_scratch/pty.text"
	IFS=, read -ra marks <<<"$3"
	for m in "${marks[@]}"; do
		echo "drew $m: $(grep -qF -- "$m" "$wl_scratch/pty.text" && echo yes || echo no)"
	done
	echo "exit $rc"
	return $rc
}

# wl_sorted NAME ARGS...: program NAME's output, sorted (for output whose order is the
# threads' order).
wl_sorted() {
	local rc
	wl_exec "$@" >"$wl_scratch/sorted.out" 2>&1
	rc=$?
	sort "$wl_scratch/sorted.out"
	return $rc
}

# wl_kv_server MAP POOL SESSIONS: kv_server with MAP on POOL at a free local port, driven by
# the client sessions named (fill or reread), the last of which stops it (KILL). Prints
# each answer (NUL bytes of a value's padding as ^@), then the server's own output.
wl_kv_server() {
	local map=$1 pool=$2 port pid i rc s
	port=$(wl_free_port) || return 1
	timeout -s KILL 60 env "${wl_env[@]}" "$(wl_prog kv_server)" "$map" "$pool" "$port" \
		>"$wl_scratch/kv.out" 2>&1 &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		wl_listening "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if wl_listening "$port"; then
		# The hash maps have no remove_free: kv_server exits at a REMOVE.
		local remove='REMOVE foo\nGET foo\nREMOVE nope\n'
		[[ $map == hashmap* ]] && remove=
		case $3 in
		fill) s=('INSERT foo bar\nINSERT baz quux\nGET foo\nGET nope\nBYE\n'
			"GET foo\\n${remove}HELLO\\nGET baz\\nKILL\\n") ;;
		reread) s=('GET foo\nGET baz\nINSERT foo back\nGET foo\nKILL\n') ;;
		esac
		for i in "${s[@]}"; do
			echo "session:"
			wl_tcp_session "$port" "$i"
		done
	fi
	wait "$pid"
	rc=$?
	cat "$wl_scratch/kv.out"
	echo "kv_server exit $rc"
	return $rc
}
wl_listening() { # wl_listening PORT: something listens on it (/proc/net/tcp state 0A)
	grep -Eq "^ *[0-9]+: [0-9A-F]+:$(printf '%04X' "$1") [0-9A-F]+:0000 0A" \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}
wl_free_port() {
	local i p
	for ((i = 0; i < 50; i++)); do
		p=$((20000 + RANDOM % 30000))
		wl_listening "$p" || { echo "$p"; return 0; }
	done
	echo "no free TCP port" >&2
	return 1
}
wl_tcp_session() { # wl_tcp_session PORT MESSAGES: one write of them all, then the answers
	printf '%b' "$2" >"$wl_scratch/messages"
	(
		trap '' PIPE
		exec {fd}<>"/dev/tcp/127.0.0.1/$1" || exit 1
		cat "$wl_scratch/messages" >&"$fd"
		timeout 10 cat <&"$fd" | cat -v
	)
}

# wl_objfs_as NAME ARGS...: pmemobjfs under the name NAME (mkfs.pmemobjfs,
# pmemobjfs.tx_begin, ...): it chooses what to do by the name it was started with.
wl_objfs_as() {
	local d=$wl_scratch/objfs-as rc
	rm -rf "$d"
	mkdir "$d"
	ln -s "$(wl_prog pmemobjfs)" "$d/$1"
	env "${wl_env[@]}" "$d/$1" "${@:2}"
	rc=$?
	rm -rf "$d"
	return $rc
}

# wl_objfs_mount POOL OPS: mount POOL with pmemobjfs (FUSE 2, single-threaded, foreground),
# run wl_objfs_OPS on the mount point, unmount. hard_remove: no .fuse_hiddenN files for
# the files the tx_* commands unlink while open. Exits 77 if the mount cannot be made while
# the daemon still runs or reports a FUSE error.
wl_objfs_mount() {
	local pool=$1 mnt=$1.mnt pid i rc
	mkdir -p "$mnt"
	timeout -s KILL 60 env "${wl_env[@]}" "$(wl_prog pmemobjfs)" -f -s -o hard_remove "$pool" "$mnt" \
		>"$wl_scratch/objfs.out" 2>&1 &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		mountpoint -q "$mnt" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if ! mountpoint -q "$mnt"; then
		kill "$pid" 2>/dev/null
		wait "$pid"
		rc=$?
		rmdir "$mnt"
		if grep -q 'fuse' "$wl_scratch/objfs.out" || ((rc == 137 || rc == 143)); then
			echo "SKIP: FUSE cannot mount here: $(head -n 1 "$wl_scratch/objfs.out")"
			return 77
		fi
		cat "$wl_scratch/objfs.out"
		echo "pmemobjfs exit $rc (no mount)"
		return 1
	fi
	"wl_objfs_$2" "$mnt" 2>&1 | sed "s|$mnt|MNT|g"
	fusermount -u "$mnt" || fusermount -uz "$mnt"
	wait "$pid"
	rc=$?
	rmdir "$mnt"
	cat "$wl_scratch/objfs.out"
	echo "pmemobjfs exit $rc"
	return $rc
}
wl_objfs_list() { # names, kinds and sizes under $1, sorted (times are the clock's)
	(cd "$1" && find . -printf '%p %y %s\n' | sort)
}
wl_objfs_write() { # the README's session, and a file larger than a block
	local m=$1
	wl_objfs_list "$m"
	mkdir "$m/dir1"
	echo "The pmemobjfs filesystem" >"$m/dir1/file1"
	wl_objfs_as pmemobjfs.tx_begin "$m"
	rm "$m/dir1/file1"
	echo "in the transaction: $(ls "$m/dir1")"
	wl_objfs_as pmemobjfs.tx_abort "$m"
	echo "after its abort: $(ls "$m/dir1")"
	wl_objfs_as pmemobjfs.tx_begin "$m"
	echo "second line" >>"$m/dir1/file1"
	mkdir "$m/dir2"
	wl_objfs_as pmemobjfs.tx_commit "$m"
	seq 1 20000 >"$m/dir2/numbers"
	ln -s ../dir1/file1 "$m/dir2/link"
	mv "$m/dir2/numbers" "$m/numbers"
	truncate -s 1000 "$m/numbers"
	wl_objfs_read "$m"
}
wl_objfs_read() {
	wl_objfs_list "$1"
	cat "$1/dir2/link"
	md5sum <"$1/numbers"
}

# ---------------------------------------------------------------- the workloads

# The map programs' sources: every map of map/ and the structures under them.
wl_maps=(map/map.c map/map_ctree.c map/map_btree.c map/map_rbtree.c map/map_rtree.c
	map/map_skiplist.c map/map_hashmap_tx.c map/map_hashmap_atomic.c map/map_hashmap_rp.c
	tree_map/ctree_map.c tree_map/btree_map.c tree_map/rbtree_map.c tree_map/rtree_map.c
	list_map/skiplist_map.c hashmap/hashmap_tx.c hashmap/hashmap_atomic.c hashmap/hashmap_rp.c)

# pmdk_workloads [more]: the workloads every script runs; with "more", also the cases that
# need a terminal, a TCP client, a FUSE mount or a fixed path (pmsan's run has none of them).
pmdk_workloads() {
	local more=${1:-} m d l p

	if wl_build data_store map/data_store.c "${wl_maps[@]}"; then
		for m in ctree btree rbtree hashmap_atomic hashmap_tx hashmap_rp skiplist; do
			wl_case "data_store $m" "" "data_store $m @ 300"
		done
	fi

	if wl_build mapcli map/mapcli.c "${wl_maps[@]}"; then
		for m in btree rbtree rtree hashmap_atomic hashmap_tx hashmap_rp skiplist; do
			wl_case "mapcli $m" "$(wl_mapcli_script "$m")" "mapcli $m @ 7"
		done
		# ctree with a single key: see the header.
		[[ $more ]] && wl_case "mapcli ctree (one key)" 'i 5\nc 5\nc 17\np\nr 17\nr 5\np\nq\n' \
			"mapcli ctree @ 7"
		# Past 10240 keys hashmap_tx rebuilds its table in one transaction of 10240
		# snapshots, more than a log lane holds (keratin spills that undo into the heap).
		[[ $more ]] && wl_case "mapcli hashmap_tx (12000 keys)" 'n 12000\nc 17\np\nq\n' \
			"mapcli hashmap_tx @ 7"
	fi

	wl_build btree btree.c &&
		wl_case "btree" "" "btree @ i 1 one" "btree @ i 7 seven" "btree @ i 3 three" \
			"btree @ i 9 nine" "btree @ p" "btree @ f 7"
	wl_build lists lists.c &&
		wl_case "lists" "" "lists @ 0 foo 1" "lists @ 0 foo 2" "lists @ 1 bar 3" \
			"lists @ 0 foo print" "lists @ 1 bar print"
	wl_build queue queue/queue.c && wl_build mkpool "$wl_here/pmdk_mkpool.c" &&
		wl_case "queue" "" "mkpool @ queue" "queue @ new 4" "queue @ enqueue hello" \
			"queue @ enqueue world" "queue @ show" "queue @ dequeue" "queue @ enqueue again" \
			"queue @ dequeue" "queue @ dequeue" "queue @ show"
	# art.c and arttree.c both define arttree.h's art_node_names (upstream links them
	# through a shared library, where the first definition wins).
	wl_build arttree libart/arttree.c libart/art.c -Wl,--allow-multiple-definition &&
		wl_case "libart" 'apple\nred\napricot\norange\nbanana\nyellow\nband\nfour\n' \
			"arttree -m f -n 4 @" "arttree -m d @" &&
		# aa1 and aa2 under one inner node beside the leaf b: removing b leaves the root
		# with one child that is not a leaf, which remove_child4 merges into that child
		# (the path of its unlogged prefix write, a real bug; pmdk_examples.supp).
		wl_case "libart remove" 'aa1\nv1\naa2\nv2\nb\nv3\n' \
			"arttree -m f -n 3 @" "arttree -m s b @" "arttree -m r b @" "arttree -m d @"
	# pi's threads finish in any order, and its done list is in that order: sorted.
	wl_build pi pi.c && wl_case "pi" "" "pi @ calc 4 400" "pi @ print" "wl_sorted pi @ done"
	wl_build buffons buffons_needle_problem.c &&
		wl_case "buffons_needle_problem" "" "buffons @ 10000"
	wl_build fifo linkedlist/fifo.c &&
		wl_case "fifo" "" "fifo @ insert a" "fifo @ insert b" "fifo @ insert c" \
			"fifo @ remove" "fifo @ print"
	wl_build slab_allocator slab_allocator/main.c slab_allocator/slab_allocator.c &&
		wl_case "slab_allocator" "" "slab_allocator @"
	for d in string_store string_store_tx string_store_tx_type; do
		wl_build "$d-writer" "$d/writer.c" && wl_build "$d-reader" "$d/reader.c" &&
			wl_case "$d" 'hello\n' "$d-writer @" "$d-reader @"
	done
	for l in obj_pmemlog obj_pmemlog_simple obj_pmemlog_minimal obj_pmemlog_macros; do
		wl_build "$l" "pmemlog/$l.c" &&
			wl_case "$l" "" "$l c @ a:hello a:world" "$l o @ a:again r" "$l o @ w"
	done
	wl_build obj_pmemblk pmemblk/obj_pmemblk.c &&
		wl_case "obj_pmemblk" "" "obj_pmemblk c @ 512 w:0:hello w:5:world r:0 r:5" \
			"obj_pmemblk o @ 512 z:0 r:0 e:5 r:5"

	[[ $more ]] || return 0

	for p in manpage setjmp; do
		if [[ -e /pmem-fs ]]; then
			wl_skip "$p" "/pmem-fs exists: $p would make its pool at /pmem-fs/myfile"
		else
			wl_build "$p" "$p.c" &&
				wl_case "$p (fixed path /pmem-fs/myfile: started only)" "" "$p"
		fi
	done

	wl_build examine_arttree libart/arttree_structures.c libart/arttree_examine.c \
		libart/arttree_search.c &&
		wl_skip examine_arttree "built only: it reads the pool file as libpmemobj's on-media layout (mmap, no libpmemobj call), interactively"

	if ! pkg-config --exists libuv; then
		wl_skip kv_server "libuv1-dev not installed"
	elif wl_build kv_server map/kv_server.c "${wl_maps[@]}" -luv; then
		for m in ctree btree rtree rbtree skiplist hashmap_tx hashmap_atomic hashmap_rp; do
			wl_case "kv_server $m" "" "wl_kv_server $m @ fill" "wl_kv_server $m @ reread"
		done
	fi

	if ! pkg-config --exists ncurses; then
		wl_skip pminvaders "libncurses-dev not installed"
	else
		for p in pminvaders pminvaders2; do
			# started and killed (pminvaders2 on its intro screen); restarted on its pool
			# and quit with q (pminvaders2: after leaving the intro with space)
			local keys=q marks1=Score marks2=Score
			[[ $p == pminvaders2 ]] && keys='\x20q' marks1=resume,quit marks2=resume,Level,Score
			# shellcheck disable=SC2046
			wl_build "$p" "pminvaders/$p.c" $(pkg-config --libs ncurses) &&
				wl_case "$p" "" "wl_pty_kill 2 $marks1 $p @" "wl_pty_keys $keys $marks2 $p @"
		done
	fi

	if ! pkg-config --exists fuse; then
		wl_skip pmemobjfs "libfuse-dev (FUSE 2) not installed"
		return 0
	fi
	# shellcheck disable=SC2046
	wl_build pmemobjfs pmemobjfs/pmemobjfs.c map/map.c map/map_ctree.c tree_map/ctree_map.c \
		$(pkg-config --cflags --libs fuse) -DFUSE_USE_VERSION=28 -DUSE_CTREE || return 0
	# mkfs.pmemobjfs's own checks, then a file system with 1 KiB blocks
	wl_case "pmemobjfs mkfs" "" "wl_objfs_as mkfs.pmemobjfs -h" \
		"wl_objfs_as mkfs.pmemobjfs -s 4M @" "wl_objfs_as mkfs.pmemobjfs -s 16M -b 100 @" \
		"wl_objfs_as mkfs.pmemobjfs -s 16M -b 1024 @"
	wl_case "pmemobjfs mount" "" "wl_objfs_as mkfs.pmemobjfs -s 16M @" \
		"wl_objfs_mount @ write" "wl_objfs_mount @ read"
}

# wl_mapcli_script MAP: mapcli's commands (inserts, 200 random inserts from its seed,
# lookups, removes, print), a rebuild for the hash maps (the others have none), quit.
wl_mapcli_script() {
	local rebuild=
	[[ $1 == hashmap* ]] && rebuild='b 2\n'
	# shellcheck disable=SC2028 # (escapes for printf %b)
	echo 'i 5\ni 17\ni 42\ni 1000\nn 200\nc 17\nr 17\nr 5\np\nr 42\n'"${rebuild}"'q\n'
}
