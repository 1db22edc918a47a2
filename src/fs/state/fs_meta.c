/*
 * fs_meta.c - tick-tock metadata: the primary and replica of every metadata structure,
 * self-checking words, and inode slots.
 *
 * Invariants
 *   1. The meta zone (journals, inode table, log pages) has a byte-identical replica at
 *      twin(x) = x + delta, beyond the dead zone; every write here goes to both copies.
 *   2. Each copy carries its own check (CRC-32C or a self-checking word), so a reader can
 *      tell a good copy from a bad one without the other.
 *   3. Reading a structure reads both copies: one bad copy is rewritten from the good one;
 *      two good copies that differ mean a crash between tick and tock, and the primary
 *      (written first) wins; two bad copies are reported (-EUCLEAN, then -EIO above).
 *   4. A structure updated in place after it was written uses a self-checking 8-byte word
 *      (48-bit value, 16-bit check over value and owner), stored with one atomic store, so a
 *      crash never tears it and a scribble is recognised.
 */
#include <stdio.h>
#include <string.h>

#include "csum.h"
#include "fs.h"
#include "invariant.h"

uint64_t krfs_word_make(uint64_t value, uint64_t owner)
{
	KR_INVARIANT("fs_meta.c", 4, value <= KRFS_WORD_VALUE_MASK); /* 48 bits, never cut */
	uint64_t v[2] = {value & KRFS_WORD_VALUE_MASK, owner};
	uint64_t check = (kr_crc32c(v, sizeof(v)) ^ KRFS_WORD_CHECK_XOR) & 0xffffu;
	return v[0] | check << KRFS_WORD_VALUE_BITS;
}

uint64_t krfs_word_value(uint64_t word, uint64_t owner)
{
	uint64_t value = word & KRFS_WORD_VALUE_MASK;
	return krfs_word_make(value, owner) == word ? value : 0;
}

uint64_t krfs_inode_off(const struct kr_fs *fs, uint64_t ino)
{
	return fs->sb.itab_off + ino * KRFS_INODE_SIZE;
}

static uint32_t pinode_csum(const struct krfs_pinode *pi)
{
	return kr_crc32c((const char *)pi + 8, offsetof(struct krfs_pinode, csum) - 8);
}

void krfs_pinode_seal(struct krfs_pinode *pi) { pi->csum = pinode_csum(pi); }

bool krfs_pinode_ok(const struct krfs_pinode *pi, uint64_t ino)
{
	if (pi->csum != pinode_csum(pi) || pi->ino != ino)
		return false;
	for (size_t i = 0; i < sizeof(pi->reserved); i++)
		if (pi->reserved[i])
			return false;
	return pi->state == KRFS_INODE_FREE || pi->state == KRFS_INODE_LIVE;
}

void krfs_meta_write(struct kr_fs *fs, uint64_t off, const void *src, size_t n)
{
	kr_pm_copy(&fs->pm, krfs_ptr(fs, off), src, n);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, off), n);
	if (!fs->replica)
		return;
	kr_pm_copy(&fs->pm, krfs_ptr(fs, krfs_twin(fs, off)), src, n);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, krfs_twin(fs, off)), n);
}

void krfs_word_write(struct kr_fs *fs, uint64_t off, uint64_t word)
{
	KR_INVARIANT("fs_meta.c", 4, off % 8 == 0); /* one atomic store, never torn */
	kr_pm_store64(&fs->pm, krfs_ptr(fs, off), word);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, off), 8);
	if (!fs->replica)
		return;
	kr_pm_store64(&fs->pm, krfs_ptr(fs, krfs_twin(fs, off)), word);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, krfs_twin(fs, off)), 8);
}

const void *krfs_replica(const struct kr_fs *fs, uint64_t off)
{
	return krfs_ptr(fs, krfs_copy_b(fs, off));
}

void krfs_note_repair(struct kr_fs *fs, const char *what, uint64_t off)
{
	fs->repairs++;
	if (fs->nnotes < KRFS_NOTES) {
		bool replica = off >= fs->sb.replica_off && off < fs->sb.replica_off + fs->sb.meta_zone_size;
		snprintf(fs->notes[fs->nnotes++], sizeof(fs->notes[0]), "%s at pool offset %#llx%s", what,
			 (unsigned long long)off, replica ? " (replica)" : "");
	}
}

/* Both repairs run under repair_lock: the mount scan's threads repair different structures,
 * but share the fence, the error state and the notes. */
void krfs_meta_repair(struct kr_fs *fs, const char *what, uint64_t dst, uint64_t src, size_t n)
{
	pthread_mutex_lock(&fs->repair_lock);
	kr_pm_copy(&fs->pm, krfs_ptr(fs, dst), krfs_ptr(fs, src), n);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, dst), n);
	krfs_fence(fs);
	krfs_note_repair(fs, what, dst);
	pthread_mutex_unlock(&fs->repair_lock);
}

void krfs_word_repair(struct kr_fs *fs, const char *what, uint64_t off, uint64_t word)
{
	pthread_mutex_lock(&fs->repair_lock);
	kr_pm_store64(&fs->pm, krfs_ptr(fs, off), word);
	kr_pm_flush(&fs->pm, krfs_ptr(fs, off), 8);
	krfs_fence(fs);
	krfs_note_repair(fs, what, off);
	pthread_mutex_unlock(&fs->repair_lock);
}

void krfs_inode_write(struct kr_fs *fs, uint64_t ino, const struct krfs_pinode *pi)
{
	krfs_meta_write(fs, krfs_inode_off(fs, ino), pi, sizeof(*pi));
}

int krfs_inode_read(struct kr_fs *fs, uint64_t ino, struct krfs_pinode *out)
{
	uint64_t pa = krfs_inode_off(fs, ino), pb = krfs_copy_b(fs, pa);
	struct krfs_pinode a, b;
	memcpy(&a, krfs_ptr(fs, pa), sizeof(a));
	memcpy(&b, krfs_ptr(fs, pb), sizeof(b));
	bool a_ok = krfs_pinode_ok(&a, ino), b_ok = krfs_pinode_ok(&b, ino);
	if (!a_ok && !b_ok) {
		kr_err_set(KR_E_CORRUPT_META, "inode %llu: both copies fail their checks (pool offsets %#llx, %#llx)",
			   (unsigned long long)ino, (unsigned long long)pa, (unsigned long long)pb);
		return -EUCLEAN;
	}
	/* The static part: the good copy, the primary if both are good (roll forward). */
	const size_t stat = sizeof(a) - 8;
	if (a_ok && (!b_ok || memcmp((char *)&a + 8, (char *)&b + 8, stat) != 0)) {
		krfs_meta_repair(fs, "inode slot", pb + 8, pa + 8, stat);
		memcpy((char *)&b + 8, (char *)&a + 8, stat);
	} else if (!a_ok) {
		krfs_meta_repair(fs, "inode slot", pa + 8, pb + 8, stat);
		memcpy((char *)&a + 8, (char *)&b + 8, stat);
	}
	/* The tail: the primary's if it checks, else the replica's. */
	if (a.state == KRFS_INODE_LIVE) {
		bool ta = krfs_word_value(a.tail, ino) != 0, tb = krfs_word_value(b.tail, ino) != 0;
		if (!ta && !tb) {
			kr_err_set(KR_E_CORRUPT_META, "inode %llu: log tail fails its check in both copies",
				   (unsigned long long)ino);
			return -EUCLEAN;
		}
		a.tail = ta ? a.tail : b.tail;
		if (a.tail != *(uint64_t *)krfs_ptr(fs, pa))
			krfs_word_repair(fs, "inode log tail", pa, a.tail);
		if (a.tail != *(uint64_t *)krfs_ptr(fs, pb))
			krfs_word_repair(fs, "inode log tail", pb, a.tail);
	} else if (a.tail != b.tail) {
		/* A free slot's tail means nothing, but its copies stay equal like every byte of
		 * the meta zone: the copy that checked wins. */
		krfs_word_repair(fs, "inode log tail", a_ok ? pb : pa, a_ok ? a.tail : b.tail);
	}
	*out = a;
	return 0;
}
