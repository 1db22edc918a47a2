/*
 * kr_cxx.fixed.cpp - the twin of kr_cxx.bug.cpp: touch() changes the note in a
 * transaction's buffer, and remove() reads the text before the free.
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
		kr_tx *tx;
		char *p;
		if (kr_tx_begin(pool_, &tx) || (p = static_cast<char *>(kr_tx_open(tx, oid))) == nullptr)
			die("kr_tx_open");
		p[0] = '*';
		if (kr_tx_commit(tx))
			die("kr_tx_commit");
	}

	std::string remove(kr_oid oid)
	{
		const char *p = static_cast<const char *>(kr_get(pool_, oid));
		std::string first(1, p[0]);
		kr_tx *tx;
		if (kr_tx_begin(pool_, &tx) || kr_tx_free(tx, oid) || kr_tx_commit(tx))
			die("kr_tx_free");
		return first;
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
