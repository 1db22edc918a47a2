/*
 * fscmd.h - the `keratin fs` command (fscmd.c).
 */
#ifndef KR_FSCMD_H
#define KR_FSCMD_H

extern const char fs_synopsis[];
extern const char fs_details[];
/* argv[0] is "fs"; returns the exit status. */
int fs_command(int argc, char **argv);

#include <stdbool.h>
#include <stdio.h>

#include "keratin_fs.h"

/* What `info` and `scrub` print, on out: 0, or 1 if something failed (said on out). The
 * mount's daemon calls them for `keratin fs info|scrub DIR` (fsmount.c). */
int fs_print_info(FILE *out, kr_fs *fs, const char *pool);
int fs_print_scrub(FILE *out, kr_fs *fs, const char *pool);

/* fsmount.c: mount POOL on DIR (a daemon unless foreground), unmount DIR and wait for the
 * pool to be closed, run a control command in the daemon of the mount at DIR. Each returns
 * the exit status. */
int fs_mount(const char *pool, const char *dir, bool foreground, const char *opts, unsigned open_flags);
int fs_umount(const char *dir);
int fs_control(const char *dir, const char *cmd);
/* A control command with an argument (snapshot-create, snapshot-delete): exit status. */
int fs_control_set(const char *dir, const char *cmd, const char *arg);
/* The snapshot list, on out: 0. */
int fs_print_snapshots(FILE *out, kr_fs *fs);

#endif
