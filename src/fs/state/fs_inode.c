/*
 * fs_inode.c - DRAM inodes: made and freed with their indexes and lists, the log pages of
 * their chain, and their attributes as the API reports them.
 *
 * What a DRAM inode holds is the fold of its committed log (fs_apply.c); nothing here reads
 * or writes the pool.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "grow.h"

struct krfs_inode *krfs_inode_new(uint64_t ino)
{
	struct krfs_inode *ip = kr_calloc(1, sizeof(*ip));
	if (ip) {
		ip->ino = ino;
		pthread_mutex_init(&ip->lock, NULL);
	}
	return ip;
}

void krfs_inode_free(struct krfs_inode *ip)
{
	if (!ip)
		return;
	krfs_radix_free(&ip->map);
	krfs_radix_free(&ip->src);
	krfs_dir_free(&ip->dir);
	krfs_xattr_free(ip);
	free(ip->pages);
	pthread_mutex_destroy(&ip->lock);
	free(ip);
}

int krfs_inode_push_page(struct krfs_inode *ip, uint64_t page)
{
	if (KR_GROW(ip->pages, ip->cap, ip->npages + 1u, 4))
		return -ENOMEM;
	ip->pages[ip->npages++] = page;
	return 0;
}

uint8_t krfs_dtype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return DT_REG;
	case S_IFDIR: return DT_DIR;
	case S_IFLNK: return DT_LNK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	}
	return DT_UNKNOWN;
}

void krfs_inode_attr(const struct kr_fs *fs, const struct krfs_inode *ip, struct kr_fs_attr *a)
{
	(void)fs;
	memset(a, 0, sizeof(*a));
	a->ino = ip->ino;
	a->generation = ip->generation;
	a->mode = ip->mode;
	a->nlink = ip->nlink;
	a->uid = ip->uid;
	a->gid = ip->gid;
	a->rdev = ip->rdev;
	a->size = ip->size;
	a->blocks = ip->nblocks * (P / 512);
	a->atime_ns = (int64_t)ip->atime;
	a->mtime_ns = (int64_t)ip->mtime;
	a->ctime_ns = (int64_t)ip->ctime;
}
