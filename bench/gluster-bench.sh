#!/usr/bin/env bash
# bench/gluster-bench.sh [--build DIR] [--out DIR] - a GlusterFS replica-3 volume whose three
# bricks are keratin-fs, against the same volume on tmpfs, ext4 and libfuse passthrough_ll
# bricks, on one machine, through the volume's mount point.
#
# The cluster is tests/gluster/gluster-lib.sh's: private mount, network and pid namespaces
# (nothing of the machine's touched, nothing left behind), one glusterd, three bricks on this
# host, a replica-3 volume mounted with Gluster's FUSE client. Only the bricks' file system
# differs between the peers; the volume's layout and options, the client and the CPU set
# are the same:
#   keratin   `keratin fs mkfs` (full protection, the default) on a pool in /dev/shm,
#             mounted with FUSE (`keratin fs mount --force-pmem`, default options)
#   keratin+wb  the same, mounted with -o writeback: the kernel's writeback cache gathers
#             writes and the daemon gets them at writeback or fsync; fsync stays the
#             durability point, which is what Gluster's brick servers rely on
#   passthrough  libfuse's passthrough_ll (bench/passthrough.sh) with -o xattr over a tmpfs
#             mount: FUSE without any protection, the peer that tells FUSE's cost from
#             keratin's (skipped, with a note in the table, where it cannot be built)
#   tmpfs     a tmpfs mount
#   ext4      mkfs.ext4 on a loop device over a file in /dev/shm (skipped, with a note in
#             the table, where mkfs.ext4 or loop devices are missing)
# Workloads, the same for every peer, each through the volume's mount point:
#   fio       --ioengine=psync --direct=0, one job: sequential read and write in 128 KiB
#             blocks (MB/s), random read and write in 4 KiB blocks (IOPS)
#   files     bench/files-bench: create + write 4 KiB + close N files, then unlink them
#   tar x     this repository's src/, tarred into the work directory first, extracted
#             several times (seconds)
#   sqlite    N single-insert transactions (sqlite3's defaults: rollback journal, fsync)
# Every round builds, for each peer, the volume anew on fresh bricks (gl_brick, gl_volume),
# runs the workloads and tears it down (gl_teardown), the peers in an order that rotates
# from round to round; the table shows medians over the rounds and the time ratios
# keratin/tmpfs, keratin/passthrough and keratin+wb/tmpfs, each with the range of the
# rounds' own ratios. The goal: keratin-fs bricks within 1.3x of tmpfs bricks on every job
# (judged for keratin; the table also says whether keratin+wb meets it). Around every fio
# job the script reads the CPU time of every process in the run's pid namespace (a read
# job's file is laid out first, outside the reading), and a second table gives it per MiB
# or per I/O by part: fio, the Gluster client, the brick servers, the bricks' FUSE daemons
# and the rest. The script re-executes itself under `taskset -c CPUS` before entering the
# namespaces, so every workload, every Gluster daemon and every FUSE daemon shares one CPU
# set.
#
# Environment: QUICK=1 (tiny sizes, one round: the ctest case bench.gluster_smoke),
# ROUNDS=N (default 3), CPUS=LIST (taskset list; default: the CPUs it may run on),
# GL_VOLOPTS ("key value" lines of volume options, set for every peer; default none:
# Gluster's own defaults). Writes OUT/gluster.csv (one row per measurement) and
# OUT/gluster.md (the tables, also printed); OUT defaults to BUILD/gluster-bench. Exits 77
# with SKIP where a cluster cannot run (see gluster-lib.sh), 1 on a failure or an
# incomplete table, 2 on bad arguments. Everything it mounts or starts goes away with its
# namespaces on exit, also after a failure; its work directory is removed.
set -u
export LC_ALL=C

usage() { echo "usage: gluster-bench.sh [--build DIR] [--out DIR]" >&2; exit 2; }
BUILD=build
OUT=
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--build) BUILD=$2 ;;
	--out) OUT=$2 ;;
	*) usage ;;
	esac
	shift 2
done
OUT=${OUT:-$BUILD/gluster-bench}
ARGS=(--build "$BUILD" --out "$OUT")
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
KR=$BUILD/tools/keratin
FILES=$BUILD/bench/files-bench
die() { echo "gluster-bench: $*" >&2; exit 1; }

if [ "${GL_INSIDE:-}" != 1 ]; then
	# Pinned first: taskset's CPU set is inherited by the namespaces and all they start.
	if [ -z "${GLUSTER_BENCH_CPUS:-}" ]; then
		CPUS=${CPUS:-$(taskset -pc $$ | sed 's/.*: //')}
		GLUSTER_BENCH_CPUS=$CPUS exec taskset -c "$CPUS" bash "$0" "${ARGS[@]}"
	fi
	[ -x "$KR" ] || die "$KR is not built"
	[ -x "$FILES" ] || die "$FILES is not built"
	for t in fio sqlite3 python3 tar; do
		command -v $t >/dev/null || die "$t is missing (scripts/deps.sh --bench installs it)"
	done
	mkdir -p "$OUT" || die "cannot make $OUT"
fi
. "$SRCDIR/bench/passthrough.sh"
. "$SRCDIR/tests/gluster/gluster-lib.sh"
gl_isolate "${ARGS[@]}"

# ---- inside the namespaces ----------------------------------------------------------------
CPUS=$GLUSTER_BENCH_CPUS
QUICK=${QUICK:-0}
CMDLINE="bench/gluster-bench.sh ${ARGS[*]}"
[ -n "${ROUNDS:-}" ] && CMDLINE="ROUNDS=$ROUNDS $CMDLINE"
[ "$QUICK" = 1 ] && CMDLINE="QUICK=1 $CMDLINE"
if [ "$QUICK" = 1 ]; then
	ROUNDS=${ROUNDS:-1} FIO_SIZE=2M FIO_TIME='' NFILES=100 NSQL=50 TAR_COPIES=1
	export GL_BRICK_SIZE=256M
else
	ROUNDS=${ROUNDS:-3} FIO_SIZE=64M FIO_TIME=3 NFILES=2000 NSQL=500 TAR_COPIES=5
	export GL_BRICK_SIZE=1G
fi

EXT4_NOTE=
command -v mkfs.ext4 >/dev/null || EXT4_NOTE="mkfs.ext4 is missing"
[ -e /dev/loop-control ] || EXT4_NOTE="no loop devices (/dev/loop-control)"
PT_NOTE=
pt_build "$GW/pt" || PT_NOTE=$PT_WHY
PEERS=(keratin keratin+wb)
if [ -z "$PT_NOTE" ]; then PEERS+=(passthrough); else echo "gluster-bench: passthrough skipped ($PT_NOTE)" >&2; fi
PEERS+=(tmpfs)
if [ -z "$EXT4_NOTE" ]; then PEERS+=(ext4); else echo "gluster-bench: ext4 skipped ($EXT4_NOTE)" >&2; fi

# On a failure, the tail of Gluster's and keratin's logs says why.
status=1
trap '[ $status = 0 ] || gl_logs >&2' EXIT

tar -C "$SRCDIR" -cf "$GW/src.tar" src || die "tar of src/ failed"
{
	echo "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
	seq "$NSQL" | sed "s/.*/INSERT INTO t(v) VALUES ('row & of the keratin Gluster benchmark');/"
} >"$GW/inserts.sql"
gl_start

# ---- workloads ------------------------------------------------------------------------------
VOL=$GW/vol
CSV=$OUT/gluster.csv
record() { echo "$ROUND,$PEER,$1,$2" >>"$CSV"; }

# cpu_sample NAME: the CPU time so far (user + system, in clock ticks) of the processes in the
# run's pid namespace, by part, into the associative array NAME: fio (this script's reaped
# children, the workload), client (Gluster's FUSE client), server (the brick servers), brickfs
# (the bricks' FUSE daemons), other (glusterd, the self-heal daemon, this script). Processes
# are counted with their reaped children. Bash builtins only: a sample starts no process of
# its own that would count. Kernel threads (ext4's journal, the loop device) are outside.
cpu_sample() {
	local -n acc=$1
	local f line comm part args t
	acc=([fio]=0 [client]=0 [server]=0 [brickfs]=0 [other]=0)
	for f in /proc/[0-9]*/stat; do
		read -r line <"$f" 2>/dev/null || continue
		comm=${line#*\(} comm=${comm%\)*}
		# Fields 3 on, after the command's name: utime, stime, cutime, cstime are 11-14.
		read -ra t <<<"${line##*) }"
		case $comm in
		keratin | passthrough_ll) part=brickfs ;;
		glusterfsd) part=server ;;
		glusterfs)
			mapfile -d '' args <"${f%stat}cmdline" 2>/dev/null
			part=client
			[[ " ${args[*]} " == *glustershd* ]] && part=other
			;;
		*) part=other ;;
		esac
		if [ "${f#/proc/}" = "$$/stat" ]; then
			((acc[fio] += t[13] + t[14], acc[other] += t[11] + t[12]))
		else
			((acc[$part] += t[11] + t[12] + t[13] + t[14]))
		fi
	done
}
CLK_TCK=$(getconf CLK_TCK)
declare -A CPU0 CPU1

# fio JOB RW BS FIELD: one psync job on the volume; FIELD bw (MB/s) or iops. Records also the
# job's CPU time by part (cpu_sample): ms per MiB moved for bw, us per I/O for iops. A read
# job's file is laid out by a first fio run, so that its writing is neither timed nor counted.
fio_job() {
	local common=(--name="$1" --directory="$VOL" --bs="$3" --size="$FIO_SIZE" --numjobs=1
		--ioengine=psync --direct=0 --fallocate=none)
	if [[ $2 == *read ]]; then
		fio "${common[@]}" --rw=write --create_only=1 >/dev/null 2>"$GW/fio.err" ||
			die "fio's layout for $1 on $PEER bricks failed: $(head -2 "$GW/fio.err")"
	fi
	cpu_sample CPU0
	fio "${common[@]}" --rw="$2" ${FIO_TIME:+--time_based --runtime="$FIO_TIME"} \
		--output-format=json --output="$GW/fio.json" >/dev/null 2>"$GW/fio.err" ||
		die "fio $1 on $PEER bricks failed: $(head -2 "$GW/fio.err")"
	cpu_sample CPU1
	local side=write part ticks=() job value
	[[ $2 == *read ]] && side="read"
	for part in fio client server brickfs other; do ticks+=("$part=$((CPU1[$part] - CPU0[$part]))"); done
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
bw = sys.argv[3] == "bw"
print("%s\t%.1f" % (sys.argv[5], r["bw_bytes"] / 1e6 if bw else r["iops"]))
per = r["io_bytes"] / 2**20 if bw else r["total_ios"]  # ms per MiB, or us per I/O
tick = (1e3 if bw else 1e6) / int(sys.argv[4])  # a clock tick in ms, or in us
total = 0
for pt in sys.argv[6:]:
    part, ticks = pt.split("=")
    total += int(ticks)
    print("cpu %s %s\t%.3f" % (sys.argv[5], part, int(ticks) * tick / per if per else 0))
print("cpu %s total\t%.3f" % (sys.argv[5], total * tick / per if per else 0))' \
		"$GW/fio.json" "$side" "$4" "$CLK_TCK" "$1" "${ticks[@]}" >"$GW/fio.rec" ||
		die "fio $1 on $PEER bricks printed no result"
	while IFS=$'\t' read -r job value; do record "$job" "$value"; done <"$GW/fio.rec"
	rm -f "$VOL/$1".*
}

# timed JOB COMMAND...: records COMMAND's wall time in seconds as JOB.
timed() {
	local job=$1 t0=$EPOCHREALTIME
	shift
	"$@" || die "$job on $PEER bricks failed"
	record "$job" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')"
}
tar_x() {
	local i
	for ((i = 1; i <= TAR_COPIES; i++)); do
		mkdir "$VOL/tar$i" && tar -xf "$GW/src.tar" -C "$VOL/tar$i" || return 1
	done
}
sqlite_inserts() { sqlite3 "$VOL/bench.db" <"$GW/inserts.sql"; }

run_workloads() {
	fio_job seqread read 128k bw
	fio_job seqwrite write 128k bw
	fio_job randread randread 4k iops
	fio_job randwrite randwrite 4k iops
	local rates
	rates=$("$FILES" "$VOL" "$NFILES" 4096) || die "files-bench on $PEER bricks failed"
	record create "${rates%,*}"
	record unlink "${rates#*,}"
	timed "tar x" tar_x
	timed sqlite sqlite_inserts
}

# ---- the rounds -----------------------------------------------------------------------------
echo "round,peer,job,value" >"$CSV"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
for ((ROUND = 0; ROUND < ROUNDS; ROUND++)); do
	k=$((ROUND % ${#PEERS[@]}))
	for PEER in "${PEERS[@]:k}" "${PEERS[@]:0:k}"; do
		echo "gluster-bench: round $((ROUND + 1))/$ROUNDS: $PEER bricks" >&2
		GL_KERATIN_OPTS=
		[ "$PEER" = keratin+wb ] && GL_KERATIN_OPTS=writeback
		for n in 1 2 3; do gl_brick "${PEER%+wb}" $n; done
		gl_volume 1 2 3
		run_workloads
		gl_teardown 1 2 3
	done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the tables -----------------------------------------------------------------------------
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
GLUSTER_VERSION=$(glusterfs --version | head -1)
export CSV CMDLINE START ROUNDS CPUS CPU_MODEL LOAD0 LOAD1 GLUSTER_VERSION EXT4_NOTE PT_NOTE
export FIO_SIZE FIO_TIME NFILES NSQL TAR_COPIES GL_VOLOPTS="${GL_VOLOPTS:-}"
python3 - "$OUT/gluster.md" <<'EOF'
import csv, os, statistics, sys
e = os.environ
rows = list(csv.DictReader(open(e["CSV"])))
peers = [  # peer, column
    ("keratin", "keratin-fs"), ("keratin+wb", "keratin-fs -o writeback"),
    ("passthrough", "passthrough_ll"), ("tmpfs", "tmpfs"), ("ext4", "ext4")]
skipped = {p: note for p, note in (("ext4", e["EXT4_NOTE"]), ("passthrough", e["PT_NOTE"])) if note}
jobs = [  # job, label, unit; a unit of "s" is a time, any other a rate
    ("seqread", "fio seq read 128 KiB", "MB/s"),
    ("seqwrite", "fio seq write 128 KiB", "MB/s"),
    ("randread", "fio rand read 4 KiB", "IOPS"),
    ("randwrite", "fio rand write 4 KiB", "IOPS"),
    ("create", "create %s × 4 KiB" % e["NFILES"], "files/s"),
    ("unlink", "unlink %s" % e["NFILES"], "files/s"),
    ("tar x", "tar x src/ ×%s" % e["TAR_COPIES"], "s"),
    ("sqlite", "sqlite %s inserts" % e["NSQL"], "s"),
]
ratios = [("keratin", "tmpfs"), ("keratin", "passthrough"), ("keratin+wb", "tmpfs")]
ratios = [(a, b) for a, b in ratios if b not in skipped]
cell = {}
for r in rows:
    cell.setdefault((r["peer"], r["job"]), {})[r["round"]] = float(r["value"])

def med(p, j):
    v = cell.get((p, j))
    return statistics.median(v.values()) if v else None

def slower(x, y, unit):
    """Time per unit of work of x over y: above 1, x is slower."""
    if not x or not y:
        return None
    return x / y if unit == "s" else y / x

def ratio(a, b, j, unit):
    """Peer a's time over peer b's on job j, the medians' ratio and the rounds' own range."""
    r = slower(med(a, j), med(b, j), unit)
    theirs = cell.get((b, j), {})
    per = [slower(x, theirs.get(rd), unit) for rd, x in cell.get((a, j), {}).items()]
    per = [v for v in per if v is not None]
    return r, ("-" if r is None else "%.2f" % r + (" (%.2f-%.2f)" % (min(per), max(per)) if len(per) > 1 else ""))

def num(v):
    return "-" if v is None else ("%.3f" % v if v < 10 else "%.0f" % v)

lines = []
w = lines.append
w("GlusterFS replica-3 benchmark, %s: `%s`, %s round(s)." % (e["START"], e["CMDLINE"], e["ROUNDS"]))
w("CPU: %s; CPUs %s; load average %s at the start and %s at the end. %s." %
  (e["CPU_MODEL"], e["CPUS"], e["LOAD0"], e["LOAD1"], e["GLUSTER_VERSION"]))
w("One host: three bricks, one replica-3 volume (volume options: %s), Gluster's FUSE client;"
  " the bricks' file system is the only difference." %
  ("; ".join(l.strip() for l in e["GL_VOLOPTS"].splitlines() if l.strip()) or "Gluster's defaults"))
w("fio: psync, --direct=0, 1 job, %s file%s. Medians over the rounds." %
  (e["FIO_SIZE"], ", time-based %s s" % e["FIO_TIME"] if e["FIO_TIME"] else ""))
for p, note in skipped.items():
    w("%s skipped: %s." % (p, note))
w("")
w("| job | unit | " + " | ".join(c for _, c in peers) + " | " +
  " | ".join("%s / %s (time)" % r for r in ratios) + " |")
w("|---|---|" + "---:|" * (len(peers) + len(ratios)))
judged = {a: [] for a, _ in ratios}
for j, label, unit in jobs:
    vals = ["skipped" if p in skipped else num(med(p, j)) for p, _ in peers]
    shown = []
    for a, b in ratios:
        r, text = ratio(a, b, j, unit)
        shown.append(text)
        if b == "tmpfs" and r is not None:
            judged[a].append((r, label))
    w("| %s | %s | %s | %s |" % (label, unit, " | ".join(vals), " | ".join(shown)))
w("")

def verdict(who):
    got = judged.get(who, [])
    above = [(r, l) for r, l in got if r > 1.3]
    if not got:
        return "no result"
    if not above:
        return "met (worst %.2f, %s)" % max(got)
    return "not met on %d of %d jobs (%s)" % (len(above), len(jobs), ", ".join(
        "%s %.2f" % (l, r) for r, l in sorted(above, reverse=True)))

w("Goal: keratin-fs bricks within 1.3x of tmpfs bricks on every job: %s." % verdict("keratin"))
w("The same bound for keratin-fs mounted with -o writeback: %s." % verdict("keratin+wb"))
w("Ratios are time per unit of work, the first peer's bricks over the second's (above 1: the "
  "first slower); in parentheses the range of the rounds' own ratios.")
w("")
w("CPU time of the run's processes during each fio job (user + system, all threads, medians"
  " over the rounds): ms per MiB moved (seq), us per I/O (rand). fio: the workload; client:"
  " Gluster's FUSE client; brick servers: the three glusterfsd; brick FUSE daemons: the three"
  " keratin or passthrough_ll daemons; other: glusterd, the self-heal daemon, the script."
  " Kernel threads (ext4's journal, the loop device) are not counted.")
w("")
parts = [("fio", "fio"), ("client", "client"), ("server", "brick servers"),
         ("brickfs", "brick FUSE daemons"), ("other", "other"), ("total", "total")]
w("| fio job | part | unit | " + " | ".join(c for _, c in peers) + " |")
w("|---|---|---|" + "---:|" * len(peers))
for j, label, unit in jobs[:4]:
    for part, name in parts:
        vals = ["skipped" if p in skipped else num(med(p, "cpu %s %s" % (j, part))) for p, _ in peers]
        w("| %s | %s | %s | %s |" % (label, name, "ms/MiB" if unit == "MB/s" else "us/I/O", " | ".join(vals)))
text = "\n".join(lines) + "\n"
open(sys.argv[1], "w").write(text)
print(text)
missing = ["%s %s" % (p, j) for p, _ in peers if p not in skipped
           for j in [j for j, _, _ in jobs] + ["cpu %s total" % j for j, _, _ in jobs[:4]]
           if med(p, j) is None]
if missing:
    sys.exit("gluster-bench: incomplete table, no result for " + ", ".join(missing))
EOF
status=$?
exit $status
