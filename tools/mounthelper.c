/*
 * mounthelper.c - `keratin` run as mount.fuse.keratin: mount(8)'s helper for keratin-fs, so
 * that `mount -t fuse.keratin POOL DIR` and an fstab line mount a pool.
 *
 * mount(8) runs /sbin/mount.TYPE SPEC DIR [-sfnv] [-N NAMESPACE] [-o OPTIONS] [-t TYPE]
 * (util-linux's helper convention); `make install` links mount.fuse.keratin to keratin.
 * The options are those of `keratin fs mount -o`, minus the ones that only tell mount(8)
 * or the boot what to do with an fstab line (they never reach the file system), plus
 * force_pmem, the helper's spelling of --force-pmem. The mount itself is fs_mount's, so it
 * behaves exactly as `keratin fs mount POOL DIR -o OPTIONS` does: it returns once the mount
 * is ready, and a plain umount(8) of DIR closes the pool cleanly.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsmount.h"
#include "keratin_common.h"
#include "mounthelper.h"
#include "util.h"

static const char helper[] = "mount.fuse.keratin";

/* Options for mount(8), systemd or the boot, not for the file system (mount(8) passes
 * what fstab says, some of them included). */
static bool for_mount_only(const char *opt)
{
	static const char *const names[] = {"defaults", "auto", "noauto", "nofail", "_netdev",
					    "user", "users", "nouser", "owner", "group"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(opt, names[i]))
			return true;
	/* With a value: user=NAME (a user mount's owner), uhelper=NAME (who unmounts it). */
	return !strncmp(opt, "x-", 2) || !strncmp(opt, "comment=", 8) || !strncmp(opt, "user=", 5) ||
	       !strncmp(opt, "uhelper=", 8);
}

/* Appends the file system's options of opts to out (comma-separated); force_pmem sets
 * *flags instead. */
static int filter_options(const char *opts, char *out, size_t cap, unsigned *flags)
{
	char *copy = strdup(opts);
	if (!copy)
		return util_usage_error(helper, "out of memory");
	size_t used = strlen(out);
	int rc = 0;
	for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (for_mount_only(tok))
			continue;
		if (!strcmp(tok, "force_pmem")) {
			*flags |= KR_OPEN_FORCE_PMEM;
			continue;
		}
		int n = snprintf(out + used, cap - used, "%s%s", used ? "," : "", tok);
		if (n < 0 || (size_t)n >= cap - used) {
			rc = util_usage_error(helper, "options too long");
			break;
		}
		used += (size_t)n;
	}
	free(copy);
	return rc;
}

bool mount_helper_called(const char *argv0)
{
	const char *base = strrchr(argv0, '/');
	return strcmp(base ? base + 1 : argv0, helper) == 0;
}

int mount_helper(int argc, char **argv)
{
	char opts[FS_MOUNT_OPTS_MAX] = "";
	unsigned flags = 0;
	bool fake = false, verbose = false;
	const char *spec = NULL, *dir = NULL;
	/* Options may come before, between or after the two operands. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help")) {
			printf("usage: %s POOL DIR [-sfnv] [-o OPTIONS] [-t fuse.keratin]\n\n"
			       "mount(8)'s helper for keratin-fs: mount -t fuse.keratin POOL DIR, or an fstab\n"
			       "line of type fuse.keratin. OPTIONS are keratin fs mount's, and force_pmem\n"
			       "(--force-pmem); fstab's noauto, nofail, user, x-* and the like are left to\n"
			       "mount(8). -f: only say what would be done (with -v), -v: say it, -s, -n:\n"
			       "accepted, no effect. See keratin-fs(1).\n",
			       helper);
			return 0;
		}
		if (a[0] != '-' || !a[1]) {
			if (!spec)
				spec = a;
			else if (!dir)
				dir = a;
			else
				return util_usage_error(helper, "unexpected operand '%s'", a);
			continue;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "-t") || !strcmp(a, "-N")) {
			if (i + 1 >= argc)
				return util_usage_error(helper, "%s needs a value", a);
			const char *v = argv[++i];
			if (a[1] == 'o' && filter_options(v, opts, sizeof(opts), &flags))
				return UTIL_EXIT_USAGE;
			if (a[1] == 't' && strcmp(v, "fuse.keratin") != 0)
				return util_usage_error(helper, "type '%s': this helper mounts fuse.keratin", v);
			if (a[1] == 'N')
				return util_usage_error(helper, "-N (another mount namespace) is not supported");
			continue;
		}
		/* -s (sloppy), -n (no mtab: there is none to write) and their combinations. */
		for (const char *c = a + 1; *c; c++) {
			if (*c == 'f')
				fake = true;
			else if (*c == 'v')
				verbose = true;
			else if (*c != 's' && *c != 'n')
				return util_usage_error(helper, "unknown option '-%c'", *c);
		}
	}
	if (!spec || !dir)
		return util_usage_error(helper, "missing POOL and DIR");
	if (verbose)
		fprintf(stderr, "%s: keratin fs mount%s %s %s%s%s\n", helper,
			(flags & KR_OPEN_FORCE_PMEM) ? " --force-pmem" : "", spec, dir,
			opts[0] ? " -o " : "", opts);
	if (fake)
		return 0;
	return fs_mount(spec, dir, false, opts[0] ? opts : NULL, flags);
}
