/*
 * regioncmd.h - the `keratin region` command (regioncmd.c).
 */
#ifndef KR_REGIONCMD_H
#define KR_REGIONCMD_H

extern const char region_synopsis[];
extern const char region_details[];
/* argv[0] is "region"; returns the exit status. */
int region_command(int argc, char **argv);

#endif
