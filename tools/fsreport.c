/*
 * fsreport.c - what `keratin fs info`, `scrub` and `snapshot list` print, on any stream:
 * the command prints to its standard output, a mount's daemon into the text it returns
 * for `keratin fs info|scrub|snapshot list DIR` (fsmount.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsreport.h"
#include "util.h"

int fs_print_info(FILE *out, kr_fs *fs, const char *pool)
{
	struct kr_fs_statfs st;
	int rc = kr_fs_statfs(fs, &st);
	if (rc) {
		fprintf(out, "%s: %s\n", pool, strerror(-rc));
		return 1;
	}
	char a[UTIL_HUMAN_LEN], b[UTIL_HUMAN_LEN], c[UTIL_HUMAN_LEN];
	util_field_to(out, "pool", "%s", pool);
	util_field_to(out, "data space", "%s in %" PRIu64 " pages, %s free", util_human(st.blocks * st.bsize, a), st.blocks,
		   util_human(st.bfree * st.bsize, b));
	util_field_to(out, "inodes", "%" PRIu64 " (%" PRIu64 " free)", st.files, st.ffree);
	util_field_to(out, "inode logs", "%" PRIu64 " pages of %s, %" PRIu64 " free", st.log_pages, util_human(st.bsize, c),
		   st.log_pages_free);
	uint32_t redundancy = st.unprotect & ~KR_FS_RELAXED;
	util_field_to(out, "protection", "%s",
		      redundancy == 0 ? "full"
		      : redundancy == (KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY) ? "metadata"
		      : redundancy == (KR_FS_NO_META_REPLICA | KR_FS_NO_DATA_CSUM | KR_FS_NO_DATA_PARITY) ? "none"
											     : "custom");
	util_field_to(out, "writes", "%s", st.unprotect & KR_FS_RELAXED
		      ? "relaxed: sub-page overwrites in place (not atomic)"
		      : "copy-on-write (atomic)");
	util_field_to(out, "metadata", "%s", st.unprotect & KR_FS_NO_META_REPLICA
		      ? "one copy, CRC-32C (damage detected, not repaired)"
		      : "primary and replica, CRC-32C (repaired from the good copy)");
	char zone[96];
	uint32_t columns;
	int layout = kr_fs_parity_layout(fs, &columns);
	snprintf(zone, sizeof(zone), ", zone parity: 1 parity page per row of %u pages", columns);
	util_field_to(out, "data", "%s%s", st.unprotect & KR_FS_NO_DATA_CSUM ? "no strip checksums"
		      : "2 CRC-32C copies per 512 B strip",
		      st.unprotect & KR_FS_NO_DATA_PARITY ? ", no parity"
		      : layout == KR_FS_PARITY_ZONE      ? zone
							 : ", page parity: 1 parity strip per 4 KiB page");
	int nsnap = kr_fs_snapshot_list(fs, NULL, 0);
	util_field_to(out, "snapshots", "%d%s", nsnap < 0 ? 0 : nsnap, nsnap > 0 ? " (keratin fs snapshot list)" : "");
	/* The copies are kept apart so that one scribble or lost range cannot hit both; the
	 * space between them holds file data like the rest, so it is named as a distance. */
	util_field_to(out, "metadata copies", "at least %s apart (file data lies between them)",
		      util_human(st.dead_zone, a));
	util_field_to(out, "last session", "%s (mount %" PRIu64 ")", st.was_clean ? "unmounted cleanly" : "did not unmount (crash)",
		   st.mount_count);
	util_field_to(out, "repairs", "%" PRIu64 " since mount (by the mount, reads and scrubs)", st.repairs);
	return 0;
}

int fs_print_snapshots(FILE *out, kr_fs *fs)
{
	struct kr_fs_snapshot_attr *s = malloc(KR_FS_SNAPSHOTS_MAX * sizeof(*s));
	int n = s ? kr_fs_snapshot_list(fs, s, KR_FS_SNAPSHOTS_MAX) : -ENOMEM;
	if (n < 0) {
		fprintf(out, "snapshots: %s\n", strerror(-n));
		free(s);
		return 1;
	}
	for (int i = 0; i < n && i < (int)KR_FS_SNAPSHOTS_MAX; i++) {
		time_t t = (time_t)(s[i].time_ns / 1000000000);
		char when[64];
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
		fprintf(out, "%-24s id %-6" PRIu64 " made %s\n", s[i].name, s[i].id, when);
	}
	free(s);
	return 0;
}

int fs_print_scrub(FILE *out, kr_fs *fs, const char *pool)
{
	struct kr_fs_scrub_report rep;
	int rc = kr_fs_scrub(fs, out, &rep);
	fprintf(out, "scrub: %" PRIu64 " metadata items and %" PRIu64 " data pages verified, %" PRIu64
		" repaired, %" PRIu64 " unrepairable\n",
		rep.meta_items, rep.data_pages, rep.repaired, rep.unrepairable);
	if (rc != KR_OK && rc != KR_E_CORRUPT) {
		fprintf(out, "%s: %s\n", pool, kr_errmsg());
		return 1;
	}
	return rc == KR_OK ? 0 : 1;
}
