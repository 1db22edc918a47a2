/*
 * fsreport.h - the reports of `keratin fs` (fsreport.c), shared by the command and the
 * mount's daemon.
 */
#ifndef KR_TOOLS_FSREPORT_H
#define KR_TOOLS_FSREPORT_H

#include <stdio.h>

#include "keratin_fs.h"

/* Each prints on out and returns 0, or 1 if something failed or damage remains (said on
 * out). */
int fs_print_info(FILE *out, kr_fs *fs, const char *pool);
int fs_print_scrub(FILE *out, kr_fs *fs, const char *pool);
int fs_print_snapshots(FILE *out, kr_fs *fs);

#endif
