/*
 * cxx_pmemobj.bug.cpp - a C++ program on libpmemobj's C API: a counter class whose
 * methods change a persistent record. One method persists only part of what it stored
 * (rule 1), another changes a field in a transaction without adding it (rule 2). The
 * persists are invokes in the compiled code (a std::string lives across them), which the
 * checker must follow as it follows calls.
 */
#include "case.h"
#include <string>

struct record {
	uint64_t key;
	uint64_t value;
	uint64_t updates;
	char by[40];
};

class counter {
public:
	counter(PMEMobjpool *pop, record *r) : pop_(pop), r_(r) {}

	/* label's destructor must run if a call throws, so the C calls below are invokes
	 * in the compiled code, not plain calls. */
	void set(uint64_t key, uint64_t value, const std::string &who)
	{
		std::string label = "set by " + who;
		snprintf(r_->by, sizeof(r_->by), "%s", label.c_str());
		pmemobj_persist(pop_, r_->by, sizeof(r_->by));
		r_->key = key;
		r_->value = value; /* expect: 1 missing-flush */
		pmemobj_persist(pop_, &r_->key, sizeof(r_->key));
	}

	void bump()
	{
		TX_BEGIN(pop_) {
			pmemobj_tx_add_range_direct(&r_->value, sizeof(r_->value));
			r_->value += 1;
			r_->updates += 1; /* expect: 2 unlogged-write */
		} TX_END
	}

private:
	PMEMobjpool *pop_;
	record *r_;
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return case_usage(argv[0]);
	PMEMobjpool *pop = case_create(argv[1]);
	auto *r = static_cast<record *>(pmemobj_direct(pmemobj_root(pop, sizeof(record))));
	if (r == nullptr)
		case_die("pmemobj_root");
	counter c(pop, r);
	c.set(1, 10, "main");
	c.bump();
	pmemobj_close(pop);
	return 0;
}
