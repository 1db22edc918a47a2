/*
 * regioncmd.c - `keratin region status|check|repair|scrub FILE`: protected regions (lazy
 * redundancy for files written with plain stores) from the command line.
 *
 * status reads the sidecar without attaching, so it works while a program has the region
 * attached; check, repair and scrub attach offline (no tracking) and refuse while another
 * process holds the region, because judging pages someone is writing proves nothing.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keratin.h"
#include "regioncmd.h"
#include "util.h"

/* The verbs, one list for the synopsis and for what the parser accepts. */
#define REGION_VERBS "protect|status|check|repair|scrub"
const char region_synopsis[] = REGION_VERBS " FILE [--sidecar PATH] [--rate MIB]";

/* Whether verb is one of REGION_VERBS. */
static bool region_verb(const char *verb)
{
	static const char verbs[] = REGION_VERBS;
	size_t n = strlen(verb);
	for (const char *p = verbs; n && (p = strstr(p, verb)); p += n)
		if ((p == verbs || p[-1] == '|') && (p[n] == '|' || p[n] == '\0'))
			return true;
	return false;
}
const char region_details[] =
	"Protected regions: any file an application maps and writes with plain stores,\n"
	"covered by page checksums and stripe parity kept in a sidecar file (FILE.krs) by\n"
	"the library's background thread (kr_region_open / kr_region_attach).\n"
	"\n"
	"  protect  create the sidecar of FILE now (every checksum and parity page\n"
	"           computed), so that a program's first attach finds it clean\n"
	"  status   the sidecar's state: clean or active (attached now, or the program died\n"
	"           attached), geometry, coverage (pages whose redundancy is trusted), hot\n"
	"           segments (whose pages may be in the window), the last pass; works while\n"
	"           a program has the region attached\n"
	"  check    verify every page against its checksum and every stripe against its\n"
	"           parity, changing nothing; pages in segments that were hot at a crash\n"
	"           cannot be judged and are counted as unverifiable\n"
	"  repair   recover after a crash (rebuild hot segments, verify cold ones), rebuild\n"
	"           damaged pages from their stripes and damaged parity from sound data,\n"
	"           and leave the sidecar clean\n"
	"  scrub    repair, reporting the verification speed; --rate MIB limits it to MIB\n"
	"           MiB/s (0, the default: no limit)\n"
	"\n"
	"  --sidecar PATH   the sidecar (default: FILE.krs)\n"
	"\n"
	"Exit status: 0 sound (or status shown), 1 damage remains or a library error,\n"
	"2 bad command line.\n";

static int region_status(const char *path, const char *sidecar)
{
	struct kr_region_info in;
	int rc = kr_region_info(path, sidecar, &in);
	if (rc)
		return util_lib_error("keratin", path, rc);
	char b1[32];
	util_field("file", "%s (%s, %" PRIu64 " pages)", path, util_human(in.data_size, b1), in.npages);
	if (in.state == 2)
		util_field("state", "active: %s", in.attached ? "attached now" : "NOT attached: the "
			   "program died attached; the next attach (or repair) recovers it");
	else
		util_field("state", "clean (closed properly: every page covered)");
	if (in.attached || in.state == 2)
		util_field("process", "%d", in.pid);
	util_field("geometry", "stripes of %u+1 pages (%" PRIu64 "), segments of %u pages (%" PRIu64
		   "), batches of %u", in.stripe_pages, in.nstripes, in.segment_pages, in.nsegments,
		   in.batch_pages);
	util_field("crash level", "%s", in.sealed ? "2 (cold segments sealed, verifiable after a crash)"
						  : "1 (no sealing: all rebuilt after a crash)");
	util_field("covered", "%" PRIu64 " of %" PRIu64 " pages (%.1f%%)", in.covered_pages, in.npages,
		   in.npages ? 100.0 * (double)in.covered_pages / (double)in.npages : 0.0);
	util_field("hot segments", "%" PRIu64 " (%" PRIu64 " pages whose redundancy may lag)",
		   in.hot_segments, in.npages - in.covered_pages);
	if (in.passes) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		double ago = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec - (double)in.last_pass_end_ns) / 1e9;
		util_field("last pass", "%.1f s ago, took %.2f ms, %" PRIu64 " pages recomputed "
			   "(pass %" PRIu64 ", period %u ms)", ago, (double)in.last_pass_ns / 1e6,
			   in.last_dirty_pages, in.passes, in.period_ms);
	}
	util_field("sessions", "%" PRIu64, in.epoch);
	return 0;
}

static int region_verify(const char *verb, const char *path, const char *sidecar, uint64_t rate_mib)
{
	bool repair = strcmp(verb, "check") != 0, protect = strcmp(verb, "protect") == 0;
	struct util_progress bar;
	util_progress_init(&bar, protect ? "computing" : repair ? "recovering" : "opening");
	struct kr_region_opts o = KR_REGION_OPTS_INIT;
	o.sidecar = sidecar;
	o.flags = KR_REGION_OFFLINE | (protect ? 0 : KR_REGION_NO_CREATE) | (repair ? 0 : KR_REGION_READONLY);
	o.progress = util_progress_cb;
	o.progress_ctx = &bar;
	kr_region *r;
	int rc = kr_region_open(path, &o, &r, NULL, NULL);
	util_progress_end(&bar);
	if (rc && rc != KR_E_CORRUPT_REGION)
		return util_lib_error("keratin", path, rc);
	struct kr_region_stats st;
	kr_region_stats(r, &st);
	/* The open verified the cold segments of a crashed session: what it repaired the check
	 * will not see again; what it could not (read-only) the check counts itself. */
	uint64_t repaired_at_open = st.repaired_pages;
	util_progress_init(&bar, repair ? "repairing" : "checking");
	struct kr_region_report rep = {0};
	unsigned flags = KR_REGION_CHECK_PARITY | (repair ? KR_REGION_CHECK_REPAIR : 0);
	uint64_t t0 = util_now_ns();
	if (rate_mib == 0) {
		rc = kr_region_check(r, 0, 0, flags, &rep);
	} else { /* in slices of 1 MiB, sleeping to keep the rate */
		rc = KR_OK;
		for (uint64_t at = 0; at < st.npages && (rc == KR_OK || rc == KR_E_CORRUPT_REGION);) {
			uint64_t n = st.npages - at < 256 ? st.npages - at : 256;
			struct kr_region_report part;
			int prc = kr_region_check(r, at, n, flags, &part);
			if (prc && prc != KR_E_CORRUPT_REGION) {
				rc = prc;
				break;
			}
			if (part.pages_bad > part.pages_repaired && rep.pages_bad == rep.pages_repaired)
				rep.first_bad_page = part.first_bad_page;
			if (rep.first_bad_kind == KR_REGION_BAD_NONE) {
				rep.first_bad_kind = part.first_bad_kind;
				rep.first_bad_index = part.first_bad_index;
				rep.first_bad_off = part.first_bad_off;
			}
			rep.pages_checked += part.pages_checked;
			rep.pages_bad += part.pages_bad;
			rep.pages_repaired += part.pages_repaired;
			rep.pages_unverifiable += part.pages_unverifiable;
			rep.stripes_checked += part.stripes_checked;
			rep.parity_rebuilt += part.parity_rebuilt;
			rep.parity_bad += part.parity_bad;
			rep.crc_pages_bad += part.crc_pages_bad;
			rep.crcs_rebuilt += part.crcs_rebuilt;
			at += n;
			util_progress_cb(&bar, at, st.npages);
			double due = (double)at * 4096 / ((double)rate_mib * 1048576.0) * 1e9;
			double spent = (double)(util_now_ns() - t0);
			if (due > spent) {
				struct timespec ts = {0, (long)(due - spent)};
				while (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				nanosleep(&ts, NULL);
			}
			rc = rep.first_bad_kind != KR_REGION_BAD_NONE ? KR_E_CORRUPT_REGION : KR_OK;
		}
	}
	double secs = (double)(util_now_ns() - t0) / 1e9;
	util_progress_end(&bar);
	kr_region_stats(r, &st); /* now with what the check found and repaired */
	if (rc && rc != KR_E_CORRUPT_REGION) {
		util_lib_error("keratin", path, rc);
		kr_region_close(r);
		return 1;
	}
	uint64_t unverifiable = rep.pages_unverifiable;
	char b1[32];
	util_field("file", "%s (%s)", path, util_human(st.npages * 4096, b1));
	if (protect && st.recovered_pages)
		util_field("protected", "%" PRIu64 " pages, %" PRIu64 " stripes, sidecar %s%s",
			   st.npages, st.nstripes, sidecar ? sidecar : path, sidecar ? "" : ".krs");
	else if (st.recovered_pages)
		util_field("recovered", "%" PRIu64 " pages of segments hot at a crash rebuilt, "
			   "unverified (%" PRIu64 " had changed since their last checksum)",
			   st.recovered_pages, st.stale_at_recovery);
	util_field("pages checked", "%" PRIu64, rep.pages_checked);
	util_field("unverifiable", "%" PRIu64 "%s", unverifiable,
		   unverifiable ? " (in segments hot at a crash: no trusted checksum)" : "");
	util_field("stripes checked", "%" PRIu64, rep.stripes_checked);
	util_field("damaged pages", "%" PRIu64, rep.pages_bad + repaired_at_open);
	util_field("damaged parity", "%" PRIu64 " page%s", rep.parity_bad, rep.parity_bad == 1 ? "" : "s");
	util_field("damaged checksums", "%" PRIu64 " page%s of the checksum array", rep.crc_pages_bad,
		   rep.crc_pages_bad == 1 ? "" : "s");
	if (repair) {
		util_field("pages rebuilt", "%" PRIu64, st.repaired_pages);
		util_field("parity rebuilt", "%" PRIu64, rep.parity_rebuilt);
		util_field("checksums rebuilt", "%" PRIu64, rep.crcs_rebuilt);
	}
	if (strcmp(verb, "scrub") == 0)
		util_field("speed", "%.2f GB/s (%.3f s)", secs > 0 ? (double)rep.pages_checked * 4096 / secs / 1e9 : 0.0, secs);
	bool damaged = rc == KR_E_CORRUPT_REGION;
	if (damaged && rep.first_bad_kind == KR_REGION_BAD_PARITY)
		util_field("result", "DAMAGED, first bad: parity page of stripe %" PRIu64
			   " (sidecar offset 0x%" PRIx64 ")",
			   rep.first_bad_index, rep.first_bad_off);
	else if (damaged && rep.first_bad_kind == KR_REGION_BAD_CRCS)
		util_field("result", "DAMAGED, first bad: checksum page %" PRIu64
			   " (sidecar offset 0x%" PRIx64 ")",
			   rep.first_bad_index, rep.first_bad_off);
	else if (damaged)
		util_field("result", "DAMAGED, first bad: data page %" PRIu64 " (offset 0x%" PRIx64 ")",
			   rep.first_bad_index, rep.first_bad_off);
	else
		util_field("result", "%s", st.repaired_pages || rep.parity_rebuilt || rep.crcs_rebuilt
						   ? "sound after repairs" : "sound");
	fflush(stdout);
	int crc = kr_region_close(r);
	if (crc)
		return util_lib_error("keratin", path, crc);
	return damaged ? 1 : 0;
}

int region_command(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"sidecar", required_argument, NULL, 's'},
		{"rate", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *prog = "keratin region", *sidecar = NULL;
	uint64_t rate = 0;
	int c;
	while ((c = util_getopt(prog, argc, argv, longopts)) != -1) {
		switch (c) {
		case 's': sidecar = optarg; break;
		case 'r':
			if (util_parse_uint(optarg, 0, 1u << 20, &rate))
				return util_usage_error(prog, "invalid --rate '%s' (MiB/s, 0 = no limit)", optarg);
			break;
		case 'h': printf("usage: keratin region %s\n\n%s", region_synopsis, region_details); return 0;
		default: return UTIL_EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return util_usage_error(prog, "missing the subcommand (%s)", REGION_VERBS);
	const char *verb = argv[optind];
	if (!region_verb(verb))
		return util_usage_error(prog, "unknown subcommand '%s' (%s)", verb, REGION_VERBS);
	if (optind + 1 >= argc)
		return util_usage_error(prog, "missing FILE");
	if (optind + 2 < argc)
		return util_usage_error(prog, "unexpected argument '%s'", argv[optind + 2]);
	if (rate && strcmp(verb, "scrub") != 0)
		return util_usage_error(prog, "--rate is for scrub");
	const char *path = argv[optind + 1];
	if (!strcmp(verb, "status"))
		return region_status(path, sidecar);
	return region_verify(verb, path, sidecar, rate);
}
