#!/usr/bin/env bash
# bench/fuse-bench.sh [--build DIR] [--out DIR] - keratin-fs mounted with FUSE against tmpfs,
# ext4 and libfuse's passthrough_ll, in one run, through the programs people use on files.
#
# Peers, each on a fresh file system in every round:
#   keratin-full, keratin-metadata, keratin-none   `keratin fs mkfs --protect LEVEL` on a
#        pool in /dev/shm, `keratin fs mount --force-pmem` with default options
#   keratin-full+wb, keratin-full+splice   full protection mounted with -o writeback (the
#        kernel's writeback cache) or -o splice (requests and replies moved by splice)
#   keratin-full+poll   full protection mounted with -o poll=50 (adaptive polling of
#        /dev/fuse for up to 50 us; only when named in PEERS)
#   keratin-full+uring  full protection mounted with -o uring (requests over io_uring, each
#        served on its caller's CPU; only when named in PEERS: it needs Linux 6.14, and
#        the script turns the fuse module's enable_uring on for the run, as root, and back)
#   keratin-full+mw128k, keratin-full+clone_fd, keratin-full+1thread, keratin-full+nocache
#                  FUSE's other speed features turned the other way (only when named in
#                  PEERS): writes of at most 128 KiB instead of 1 MiB; a /dev/fuse clone per
#                  daemon thread; one daemon thread instead of 8; no attribute or entry caching
#                  in the kernel (timeouts 0 instead of 1 s)
#   tmpfs          a directory in /dev/shm, no FUSE
#   ext4           mkfs.ext4 on a loop device over a file in /dev/shm (skipped, with a note
#                  in the table, where loop devices cannot be set up)
#   passthrough_ll libfuse's example low-level file system over a tmpfs directory, compiled
#                  here from /usr/share/doc/libfuse3-dev/examples into the scratch directory
#                  (bench/passthrough.sh, shared with bench/gluster-bench.sh)
#   passthrough_ll+xattr   the same with its -o xattr: extended attributes passed through, as
#                  keratin-fs keeps them. Without them passthrough_ll answers getxattr with
#                  ENOSYS and the kernel stops asking; with them it is asked, as keratin-fs
#                  is, for security.capability at a new file's first write and at chown
# Workloads, the same for every peer:
#   fio            --ioengine=psync --direct=0: sequential read and write in 128 KiB blocks
#                  (MB/s), random read and write in 4 KiB blocks (IOPS), 1 and 2 jobs
#   files          bench/files-bench: create + write 4 KiB + close N files, then unlink them
#   sqlite         N single-insert transactions (sqlite3's defaults: rollback journal, fsync)
#   tar x          this repository's src/, tarred into the scratch directory first, extracted
#                  several times (seconds)
# Every round runs every peer, in an order that rotates from round to round; the table shows
# medians over the rounds. The script re-executes itself under `taskset -c CPUS` (default:
# the CPUs it may run on), so every workload and every daemon shares one CPU set.
#
# Environment: QUICK=1 (tiny sizes, one round: the ctest case bench.fuse_smoke), ROUNDS=N
# (default 3), CPUS=LIST (taskset list), PEERS="P1 P2 ..." (only these peers, by the names
# above; the default is every peer but those marked "only when named in PEERS"). Writes
# OUT/fuse.csv (one row per measurement) and
# OUT/fuse.md (the tables, also printed); OUT defaults to BUILD/fuse-bench. Exits 77 with
# SKIP where FUSE cannot mount, 1 on a failure or an incomplete table, 2 on bad arguments.
# Everything it mounts, attaches or starts is undone on exit, also after a failure.
set -u
export LC_ALL=C

BUILD=build
OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=${2:?}; shift 2 ;;
	--out) OUT=${2:?}; shift 2 ;;
	*) echo "usage: fuse-bench.sh [--build DIR] [--out DIR]" >&2; exit 2 ;;
	esac
done
OUT=${OUT:-$BUILD/fuse-bench}
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)

# One CPU set for all: re-run under taskset, so that every child inherits it.
if [ -z "${FUSE_BENCH_PINNED:-}" ]; then
	CPUS=${CPUS:-$(taskset -pc $$ | sed 's/.*: //')}
	FUSE_BENCH_PINNED=$CPUS exec taskset -c "$CPUS" bash "$0" --build "$BUILD" --out "$OUT"
fi
CPUS=$FUSE_BENCH_PINNED

QUICK=${QUICK:-0}
ROUNDS_SET=${ROUNDS:+1}
PEERS_SET=${PEERS:+1}
if [ "$QUICK" = 1 ]; then
	ROUNDS=${ROUNDS:-1} FIO_SIZE=2M FIO_TIME='' NFILES=100 NSQL=50 TAR_COPIES=1 POOL_SIZE=256M
else
	ROUNDS=${ROUNDS:-3} FIO_SIZE=64M FIO_TIME=2 NFILES=2000 NSQL=2000 TAR_COPIES=10 POOL_SIZE=1G
fi
EXT4_SIZE=1G

KR=$BUILD/tools/keratin
FILES=$BUILD/bench/files-bench
die() { echo "fuse-bench: $*" >&2; exit 1; }
[ -x "$KR" ] || die "$KR is not built"
[ -x "$FILES" ] || die "$FILES is not built"
for t in fio sqlite3 python3 tar; do
	command -v $t >/dev/null || die "$t is missing (scripts/deps.sh installs it)"
done
. "$SRCDIR/bench/passthrough.sh"

SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=${TMPDIR:-/tmp}
WORK=$(mktemp -d "$SHM/keratin-fuse-bench.XXXXXX") || die "no scratch directory"
MNT=$WORK/mnt
POOL=$WORK/fs.pool
mkdir -p "$MNT" "$OUT"
LOOP=
PT_PID=
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_OLD=

# Undoes whatever is mounted, attached or running, in that order; safe to call twice.
cleanup() {
	if grep -q " $MNT " /proc/self/mounts 2>/dev/null; then
		if grep -q " $MNT fuse.keratin " /proc/self/mounts; then
			"$KR" fs umount "$MNT" >/dev/null 2>&1
		elif grep -q " $MNT fuse" /proc/self/mounts; then
			fusermount3 -u "$MNT" 2>/dev/null
		else
			umount "$MNT" 2>/dev/null
		fi
		grep -q " $MNT " /proc/self/mounts && umount -l "$MNT" 2>/dev/null
	fi
	if [ -n "$PT_PID" ]; then
		kill "$PT_PID" 2>/dev/null
		wait "$PT_PID" 2>/dev/null
		PT_PID=
	fi
	if [ -n "$LOOP" ]; then
		losetup -d "$LOOP" 2>/dev/null
		LOOP=
	fi
	if [ -n "$URING_OLD" ]; then
		echo "$URING_OLD" >"$URING_PARAM"
		URING_OLD=
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---- what every peer needs, made once --------------------------------------------------
if [ ! -c /dev/fuse ]; then
	echo "SKIP: /dev/fuse is missing"
	exit 77
fi
"$KR" fs mkfs "$POOL" --size 8M --force-pmem >/dev/null || die "keratin fs mkfs failed"
if ! "$KR" fs mount "$POOL" "$MNT" --force-pmem 2>"$WORK/probe.err"; then
	echo "SKIP: FUSE cannot mount here: $(cat "$WORK/probe.err")"
	exit 77
fi
"$KR" fs umount "$MNT" || die "umount of the probe failed"
rm -f "$POOL"

pt_build "$WORK/pt" || die "$PT_WHY (scripts/deps.sh installs what it needs)"

EXT4_NOTE=
if ! command -v mkfs.ext4 >/dev/null || ! command -v losetup >/dev/null; then
	EXT4_NOTE="mkfs.ext4 or losetup missing"
elif [ "$(id -u)" != 0 ]; then
	EXT4_NOTE="not root: no loop devices"
else
	truncate -s 16M "$WORK/probe.img"
	if LOOP=$(losetup -f --show "$WORK/probe.img" 2>"$WORK/probe.err"); then
		losetup -d "$LOOP"
	else
		EXT4_NOTE="losetup: $(head -1 "$WORK/probe.err")"
	fi
	LOOP=
	rm -f "$WORK/probe.img"
fi
[ -z "$EXT4_NOTE" ] || echo "fuse-bench: ext4 skipped ($EXT4_NOTE)" >&2

tar -C "$SRCDIR" -cf "$WORK/src.tar" src || die "tar of src/ failed"
{
	echo "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
	for ((i = 0; i < NSQL; i++)); do
		echo "INSERT INTO t(v) VALUES ('row $i of the keratin FUSE benchmark');"
	done
} >"$WORK/inserts.sql"

ALL_PEERS=(keratin-full keratin-metadata keratin-none keratin-full+wb keratin-full+splice
	keratin-full+poll keratin-full+uring keratin-full+mw128k keratin-full+clone_fd keratin-full+1thread
	keratin-full+nocache tmpfs ext4 passthrough_ll passthrough_ll+xattr)
if [ -n "${PEERS:-}" ]; then
	read -ra PEERS <<<"$PEERS"
	for p in "${PEERS[@]}"; do
		[[ " ${ALL_PEERS[*]} " == *" $p "* ]] || { echo "fuse-bench: unknown peer $p" >&2; exit 2; }
	done
else
	PEERS=(keratin-full keratin-metadata keratin-none keratin-full+wb keratin-full+splice tmpfs ext4
		passthrough_ll passthrough_ll+xattr)
fi
# -o uring needs the kernel's switch, the whole system's: on for the run, back on exit.
if [[ " ${PEERS[*]} " == *" keratin-full+uring "* ]]; then
	[ -w "$URING_PARAM" ] || die "keratin-full+uring: cannot set $URING_PARAM (Linux 6.14+ and root)"
	URING_OLD=$(cat "$URING_PARAM")
	echo Y >"$URING_PARAM" || die "keratin-full+uring: cannot set $URING_PARAM"
fi

# ---- peers ------------------------------------------------------------------------------
# Makes peer $1's file system and sets DIR to the directory the workloads use.
setup_peer() {
	local protect=full opts=
	case $1 in
	keratin-*)
		case $1 in
		keratin-metadata) protect=metadata ;;
		keratin-none) protect=none ;;
		keratin-full+wb) opts=writeback ;;
		keratin-full+splice) opts=splice ;;
		keratin-full+poll) opts=poll=50 ;;
		keratin-full+uring) opts=uring ;;
		keratin-full+mw128k) opts=max_write=131072 ;;
		keratin-full+clone_fd) opts=clone_fd ;;
		keratin-full+1thread) opts=threads=1 ;;
		keratin-full+nocache) opts=attr_timeout=0,entry_timeout=0 ;;
		esac
		"$KR" fs mkfs "$POOL" --size $POOL_SIZE --protect $protect --force-pmem >/dev/null ||
			die "mkfs --protect $protect failed"
		"$KR" fs mount "$POOL" "$MNT" --force-pmem ${opts:+-o $opts} || die "mount of $1 failed"
		DIR=$MNT
		;;
	tmpfs)
		DIR=$WORK/tmpfs
		mkdir -p "$DIR"
		;;
	ext4)
		truncate -s $EXT4_SIZE "$WORK/ext4.img"
		LOOP=$(losetup -f --show "$WORK/ext4.img") || die "losetup failed"
		mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP" || die "mkfs.ext4 failed"
		mount "$LOOP" "$MNT" || die "mount of ext4 failed"
		DIR=$MNT
		;;
	passthrough_ll*)
		mkdir -p "$WORK/ptsrc"
		local ptopts=
		[ "$1" = passthrough_ll+xattr ] && ptopts=xattr
		pt_mount "$WORK/ptsrc" "$MNT" "$ptopts" "$WORK/pt/daemon.err" || die "$PT_WHY"
		DIR=$MNT
		;;
	esac
}

teardown_peer() {
	case $1 in
	keratin-*)
		"$KR" fs umount "$MNT" || die "umount of $1 failed"
		rm -f "$POOL"
		;;
	tmpfs) rm -rf "$WORK/tmpfs" ;;
	ext4)
		umount "$MNT" || die "umount of ext4 failed"
		losetup -d "$LOOP"
		LOOP=
		rm -f "$WORK/ext4.img"
		;;
	passthrough_ll*)
		pt_umount "$MNT" "$PT_PID" || die "umount of $1 failed"
		PT_PID=
		rm -rf "$WORK/ptsrc"
		;;
	esac
}

# ---- workloads --------------------------------------------------------------------------
record() { echo "$ROUND,$PEER,$1,$2" >>"$CSV"; }

seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }'; }

# fio JOB RW BS NUMJOBS: MB/s for 128 KiB blocks, IOPS for 4 KiB blocks.
run_fio() {
	local job=$1 rw=$2 bs=$3 nj=$4
	fio --name="$job" --directory="$DIR" --rw="$rw" --bs="$bs" --size=$FIO_SIZE \
		--numjobs="$nj" --group_reporting --ioengine=psync --direct=0 --fallocate=none \
		${FIO_TIME:+--time_based --runtime=$FIO_TIME} \
		--output-format=json --output="$WORK/fio.json" >/dev/null 2>"$WORK/fio.err" ||
		die "fio $job on $PEER failed: $(head -3 "$WORK/fio.err")"
	local v
	v=$(python3 - "$WORK/fio.json" "$rw" "$bs" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
side = "read" if "read" in sys.argv[2] else "write"
r = doc["jobs"][0][side]
print("%.1f" % (r["bw_bytes"] / 1e6 if sys.argv[3] == "128k" else r["iops"]))
EOF
	) || die "fio $job on $PEER printed no result"
	record "$job ${nj}j" "$v"
	rm -f "$DIR/$job".*
}

run_workloads() {
	local nj
	for nj in 1 2; do
		run_fio seqread read 128k $nj
		run_fio seqwrite write 128k $nj
		run_fio randread randread 4k $nj
		run_fio randwrite randwrite 4k $nj
	done
	local v
	v=$("$FILES" "$DIR" $NFILES 4096) || die "files-bench on $PEER failed"
	record "create" "${v%,*}"
	record "unlink" "${v#*,}"

	local t0=$EPOCHREALTIME
	sqlite3 "$DIR/bench.db" <"$WORK/inserts.sql" || die "sqlite3 on $PEER failed"
	record "sqlite" "$(seconds_since "$t0")"
	rm -f "$DIR/bench.db"

	t0=$EPOCHREALTIME
	for ((i = 0; i < TAR_COPIES; i++)); do
		mkdir "$DIR/tar$i" && tar -xf "$WORK/src.tar" -C "$DIR/tar$i" || die "tar x on $PEER failed"
	done
	record "tar x" "$(seconds_since "$t0")"
	rm -rf "$DIR"/tar*
}

# ---- the rounds ----------------------------------------------------------------------------
CSV=$OUT/fuse.csv
echo "round,peer,job,value" >"$CSV"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
for ((ROUND = 0; ROUND < ROUNDS; ROUND++)); do
	n=${#PEERS[@]}
	k=$((ROUND % n))
	for PEER in "${PEERS[@]:k}" "${PEERS[@]:0:k}"; do
		[ "$PEER" = ext4 ] && [ -n "$EXT4_NOTE" ] && continue
		echo "fuse-bench: round $((ROUND + 1))/$ROUNDS: $PEER" >&2
		setup_peer "$PEER"
		run_workloads
		teardown_peer "$PEER"
	done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the tables ---------------------------------------------------------------------------
CMDLINE="bench/fuse-bench.sh --build $BUILD --out $OUT"
[ -n "${ROUNDS_SET:-}" ] && CMDLINE="ROUNDS=$ROUNDS $CMDLINE"
[ -n "${PEERS_SET:-}" ] && CMDLINE="PEERS='${PEERS[*]}' $CMDLINE"
[ "$QUICK" = 1 ] && CMDLINE="QUICK=1 $CMDLINE"
python3 - "$CSV" "$OUT/fuse.md" "$EXT4_NOTE" <<EOF
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ext4_note = sys.argv[3]
peers = "${PEERS[*]}".split()
jobs = ["seqread 1j", "seqwrite 1j", "randread 1j", "randwrite 1j",
        "seqread 2j", "seqwrite 2j", "randread 2j", "randwrite 2j",
        "create", "unlink", "sqlite", "tar x"]
unit = {"create": "files/s", "unlink": "files/s", "sqlite": "s", "tar x": "s"}
for j in jobs:
    unit.setdefault(j, "MB/s" if j.startswith("seq") else "IOPS")
vals = {}
for r in rows:
    vals.setdefault((r["peer"], r["job"]), []).append(float(r["value"]))
med = {k: statistics.median(v) for k, v in vals.items()}

def cost(a, b, j):
    """Time per unit of work of peer a over peer b: above 1, a is slower."""
    x, y = med.get((a, j)), med.get((b, j))
    if x is None or y is None or x == 0 or y == 0:
        return None
    return x / y if unit[j] == "s" else y / x

def fmt(v):
    return "-" if v is None else ("%.3f" % v if v < 10 else "%.0f" % v)

def fmt_ratio(v):
    return "-" if v is None else "%.2f" % v

missing = [(p, j) for p in peers for j in jobs
           if (p, j) not in med and not (p == "ext4" and ext4_note)]
label = {"sqlite": "sqlite ${NSQL} inserts", "tar x": "tar x src/ ×${TAR_COPIES}",
         "create": "create ${NFILES} × 4 KiB", "unlink": "unlink ${NFILES}"}
out = []
w = out.append
w("FUSE benchmark, %s: \`%s\`, %d round(s), CPUs %s, load average %s at the start and %s at the end."
  % ("$START", "$CMDLINE", $ROUNDS, "$CPUS", "$LOAD0", "$LOAD1"))
w("fio: psync, --direct=0, %s per job%s. Medians over the rounds." %
  ("$FIO_SIZE", ", time-based ${FIO_TIME} s" if "$FIO_TIME" else ""))
if ext4_note:
    w("ext4 skipped: %s." % ext4_note)
w("")
w("| job | unit | " + " | ".join(peers) + " |")
w("|---|---|" + "---:|" * len(peers))
for j in jobs:
    w("| %s | %s | " % (label.get(j, j), unit[j]) +
      " | ".join("skipped" if p == "ext4" and ext4_note else fmt(med.get((p, j))) for p in peers) + " |")
w("")
w("Ratios of time per unit of work (above 1: the first is slower; 1.12 = 12 % more time):")
w("")
pairs = [("keratin-full", "passthrough_ll"), ("keratin-full", "passthrough_ll+xattr"),
         ("keratin-full", "keratin-none"),
         ("keratin-metadata", "keratin-none"), ("keratin-full+wb", "keratin-full"),
         ("keratin-full+splice", "keratin-full"), ("keratin-full", "tmpfs"),
         ("keratin-full+poll", "passthrough_ll"), ("keratin-full+uring", "passthrough_ll"),
         ("keratin-full+uring", "keratin-full"), ("keratin-full+mw128k", "keratin-full"),
         ("keratin-full+clone_fd", "keratin-full"), ("keratin-full+1thread", "keratin-full"),
         ("keratin-full+nocache", "keratin-full")]
if not ext4_note:
    pairs.append(("keratin-full", "ext4"))
pairs = [(a, b) for a, b in pairs if a in peers and b in peers]
w("| job | " + " | ".join("%s / %s" % p for p in pairs) + " |")
w("|---|" + "---:|" * len(pairs))
for j in jobs:
    w("| %s | " % label.get(j, j) + " | ".join(fmt_ratio(cost(a, b, j)) for a, b in pairs) + " |")
w("")
spreads = [((max(v) - min(v)) / statistics.median(v), k) for k, v in vals.items()
           if len(v) > 1 and statistics.median(v) > 0]
if spreads:
    s, (p, j) = max(spreads)
    w("Largest spread of a cell over the rounds, (max - min) / median: %.0f %% (%s, %s)." %
      (s * 100, p, j))
# A plot, where gnuplot is at hand: each peer's time per unit of work over passthrough_ll's,
# the median of the rounds' ratios (rounds pair the peers) with their min-max as error bars.
import os, shutil, subprocess
plotted = [p for p in ("keratin-full", "keratin-metadata", "keratin-none", "tmpfs", "ext4")
           if p in peers and p != "passthrough_ll" and not (p == "ext4" and ext4_note)]
if shutil.which("gnuplot") and "passthrough_ll" in peers and plotted:
    def round_ratios(a, j):
        by = {}
        for r in rows:
            if r["job"] == j and r["peer"] in (a, "passthrough_ll"):
                by.setdefault(r["round"], {})[r["peer"]] = float(r["value"])
        out_ = []
        for v in by.values():
            x, y = v.get(a), v.get("passthrough_ll")
            if x and y:
                out_.append(x / y if unit[j] == "s" else y / x)
        return out_
    base = os.path.splitext(sys.argv[2])[0] + "-ratio"
    with open(base + ".dat", "w") as f:
        f.write("# job " + " ".join('"%s" min max' % p for p in plotted) + "\n")
        for j in jobs:
            cells = []
            for p in plotted:
                rs = round_ratios(p, j)
                cells += ["%.3f %.3f %.3f" % (statistics.median(rs), min(rs), max(rs))] if rs else ["NaN NaN NaN"]
            f.write('"%s" %s\n' % (j, " ".join(cells)))
    cols = ", ".join("'%s.dat' using %d:%d:%d%s title '%s'" % (base, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i,
                     ":xtic(1)" if i == 0 else "", p) for i, p in enumerate(plotted))
    subprocess.run(["gnuplot", "-e",
                    "set terminal png size 1100,500; set output '%s.png'; "
                    "set style data histograms; set style histogram errorbars gap 1 lw 1; "
                    "set termoption noenhanced; set style fill solid 0.7 border -1; set logscale y; "
                    "set ylabel 'time per unit of work / passthrough_ll'; set grid ytics; "
                    "set xtics rotate by -30; set key top left; "
                    "set title 'Against passthrough_ll (below 1: faster); bars: min-max of the rounds'; "
                    "plot %s, 1 notitle lc rgb 'black' dt 2" % (base, cols)], check=True)
    w("")
    w("![%s.png](%s.png)" % (os.path.basename(base), os.path.basename(base)))
text = "\n".join(out) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
if missing:
    sys.exit("fuse-bench: incomplete table, no result for " +
             ", ".join("%s %s" % m for m in missing))
EOF
