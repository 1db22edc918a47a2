/*
 * regioncmd.h - the `keratin region` command (regioncmd.c).
 */
#ifndef KR_REGIONCMD_H
#define KR_REGIONCMD_H

extern const char region_synopsis[];
extern const char region_details[];
/* argv[0] is "region"; returns the exit status. */
int region_command(int argc, char **argv);
/* `keratin region check FILE` (default sidecar): every page against its checksum, every
 * stripe against its parity, read-only; returns the exit status. */
int region_check_file(const char *path);

#endif
