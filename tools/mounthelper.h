/*
 * mounthelper.h - keratin as mount(8)'s helper for fuse.keratin (mounthelper.c).
 */
#ifndef KR_TOOLS_MOUNTHELPER_H
#define KR_TOOLS_MOUNTHELPER_H

#include <stdbool.h>

/* True if the program was run under the helper's name (argv[0] ends in mount.fuse.keratin). */
bool mount_helper_called(const char *argv0);
/* mount(8)'s call: POOL DIR [-sfnv] [-N NS] [-o OPTIONS] [-t fuse.keratin]; the exit status. */
int mount_helper(int argc, char **argv);

#endif
