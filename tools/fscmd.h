/*
 * fscmd.h - the `keratin fs` command (fscmd.c).
 */
#ifndef KR_FSCMD_H
#define KR_FSCMD_H

extern const char fs_synopsis[];
extern const char fs_details[];
/* argv[0] is "fs"; returns the exit status. */
int fs_command(int argc, char **argv);

#endif
