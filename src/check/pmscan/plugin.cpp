// plugin.cpp - how clang loads keratin-pmscan: the checker "keratin.PmScan" and its one
// option, Strict (byte-exact flush and undo-log coverage instead of PmemConjurer's "any
// part of the object").
#include "clang/StaticAnalyzer/Core/CheckerManager.h"
#include "clang/StaticAnalyzer/Frontend/CheckerRegistry.h"

namespace pmscan {
void registerPmScan(clang::ento::CheckerManager &Mgr);
bool shouldRegisterPmScan(const clang::ento::CheckerManager &Mgr);
} // namespace pmscan

extern "C" void clang_registerCheckers(clang::ento::CheckerRegistry &Registry)
{
	Registry.addChecker(pmscan::registerPmScan, pmscan::shouldRegisterPmScan, "keratin.PmScan",
			    "persistent-memory bugs: missing/misdirected/short flushes, unlogged "
			    "writes, uninitialized transactional allocations, use after free",
			    "", false);
	Registry.addCheckerOption("bool", "keratin.PmScan", "Strict", "false",
				  "require flushes and undo-log adds to cover every stored byte",
				  "released");
}

extern "C" const char clang_analyzerAPIVersionString[] = CLANG_ANALYZER_API_VERSION_STRING;
