/*
 * kr_cxx.bug.cpp - a C++ program on keratin's API: a small store of named notes, one
 * object each. remove() reads the note's text after the commit that freed it (rule 4),
 * and touch() writes straight into the object through its kr_get pointer instead of a
 * transaction's buffer (rule 2: keratin objects change only through kr_tx_open/kr_tx_add
 * or kr_update).
 */
#include <keratin.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

class notes {
public:
	explicit notes(const char *path)
	{
		kr_create_opts o = KR_CREATE_OPTS_INIT;
		o.size = 16u << 20;
		o.flags = KR_OPEN_FORCE_PMEM;
		unlink(path);
		if (kr_pool_create(path, &o, &pool_))
			die("kr_pool_create");
	}
	~notes() { kr_pool_close(pool_); }

	kr_oid add(const std::string &text)
	{
		kr_tx *tx;
		kr_oid oid;
		if (kr_tx_begin(pool_, &tx) || kr_tx_alloc(tx, text.size() + 1, 1, &oid))
			die("kr_tx_alloc");
		std::memcpy(kr_tx_open(tx, oid), text.c_str(), text.size() + 1);
		if (kr_tx_commit(tx))
			die("kr_tx_commit");
		return oid;
	}

	void touch(kr_oid oid)
	{
		char *p = const_cast<char *>(static_cast<const char *>(kr_get(pool_, oid)));
		p[0] = '*'; /* expect: 2 unlogged-write */
	}

	std::string remove(kr_oid oid)
	{
		const char *p = static_cast<const char *>(kr_get(pool_, oid));
		kr_tx *tx;
		if (kr_tx_begin(pool_, &tx) || kr_tx_free(tx, oid) || kr_tx_commit(tx))
			die("kr_tx_free");
		return std::string(1, p[0]); /* expect: 4 use-after-free */
	}

private:
	static void die(const char *what)
	{
		std::fprintf(stderr, "case: %s failed: %s\n", what, kr_errmsg());
		std::exit(2);
	}
	kr_pool *pool_;
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		std::fprintf(stderr, "usage: %s POOLFILE\n", argv[0]);
		return 2;
	}
	notes n(argv[1]);
	kr_oid a = n.add("a first note, of a few words");
	n.touch(a);
	std::string gone = n.remove(a);
	std::printf("removed a note starting with %s\n", gone.c_str());
	return 0;
}
