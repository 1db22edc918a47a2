/*
 * fsmount.h - the life of a keratin-fs mount (fsmount.c), for `keratin fs`.
 */
#ifndef KR_TOOLS_FSMOUNT_H
#define KR_TOOLS_FSMOUNT_H

#include <stdbool.h>

/* The longest option list, with its NUL, that `keratin fs mount -o` and mount(8)'s helper
 * take, and that libfuse gets from keratin-fs (with fsname=POOL and the subtype added). */
#define FS_MOUNT_OPTS_MAX 4096

/* Mounts POOL on DIR (a daemon unless foreground), unmounts DIR and waits for the pool to be
 * closed, runs a control command in the daemon of the mount at DIR (info, scrub,
 * snapshots), or one with an argument (snapshot-create, snapshot-delete). Each returns the
 * exit status. */
int fs_mount(const char *pool, const char *dir, bool foreground, const char *opts, unsigned open_flags);
int fs_umount(const char *dir);
int fs_control(const char *dir, const char *cmd);
int fs_control_set(const char *dir, const char *cmd, const char *arg);

#endif
