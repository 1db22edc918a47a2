// pmscan.h - what the parts of keratin-pmscan (the Clang Static Analyzer checker for
// persistence bugs) share: byte ranges whose ends are linear forms over symbols, the
// per-object persistence state the checker carries along each path, and the table of
// library functions it models.
//
// The checker follows the state machine of PmemConjurer: every persistent object (a
// pmemobj object, or a whole pmem_map_file mapping) gets one ObjState, keyed by the symbol
// of the pointer the checker hands out for it (the region symbol). Offsets and sizes inside
// an object are Lin values so that `a[i]` written in a loop can be compared with
// `persist(&a[lo], (n - lo) * sizeof *a)` without a solver.
#ifndef KERATIN_PMSCAN_H
#define KERATIN_PMSCAN_H

#include "clang/StaticAnalyzer/Core/PathSensitive/ProgramState.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/SValBuilder.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <utility>

namespace pmscan {

using clang::ento::MemRegion;
using clang::ento::ProgramStateRef;
using clang::ento::SVal;
using clang::ento::SValBuilder;
using clang::ento::SymbolRef;

// K + sum(coef * sym): a byte offset or size. Known is false when the value could not be
// put in this form (a product of two symbols, a division, an unknown value).
struct Lin {
	bool Known = false;
	int64_t K = 0;
	llvm::SmallVector<std::pair<SymbolRef, int64_t>, 2> Terms; // kept sorted, so == compares forms

	static Lin unknown() { return Lin(); }
	static Lin constant(int64_t V);
	static Lin symbol(SymbolRef S);

	bool isConst() const { return Known && Terms.empty(); }
	Lin plus(const Lin &O) const;
	Lin minus(const Lin &O) const;
	Lin times(int64_t F) const;

	void Profile(llvm::FoldingSetNodeID &ID) const;
	bool operator==(const Lin &O) const;
};

// The linear form of an integer value (a concrete int, a symbol, sums, differences and
// constant multiples of them; integer casts are looked through).
Lin linOf(SVal V);

// Where a memory region lies: the symbol of the pointer it was reached through and its
// byte offset from that pointer. Base is null when the region is not under a symbolic
// pointer (a variable, a string literal) or the offset cannot be written as a Lin.
struct Place {
	SymbolRef Base = nullptr;
	Lin Off;
};
Place placeOf(const MemRegion *R, clang::ASTContext &Ctx);

// The local variables and parameters a function's loops may change (loops.cpp): assigned,
// incremented or declared inside a loop, or with their address taken anywhere. Read once
// per function, for undoing the analyzer's loop widening.
struct LoopVars {
	llvm::DenseSet<const clang::VarDecl *> Changed;
	const clang::VarDecl *Scalar = nullptr; // a local or parameter of scalar type, if any:
						// read after a widening, it shows what it conjured
	bool unchanged(const clang::VarDecl *V) const { return !Changed.count(V); }
};
LoopVars loopVarsOf(const clang::Decl *D);

// True when D >= 0 on every path the state allows (a constant, or one or two symbols that
// the path's constraints bound).
bool provablyNonNegative(const Lin &D, ProgramStateRef St, SValBuilder &SVB);

// True when [BOff, BOff+BLen) lies inside [AOff, AOff+ALen) on every path of St.
bool provablyInside(const Lin &AOff, const Lin &ALen, const Lin &BOff, const Lin &BLen,
		    ProgramStateRef St, SValBuilder &SVB);

// A byte range of an object and the statement that made it (a store, an add to the undo
// log). LC is the frame the statement ran in, so a report can point into an inlined callee.
struct Rec {
	Lin Off, Len;
	const clang::Stmt *S = nullptr;
	const clang::LocationContext *LC = nullptr;
	bool operator==(const Rec &O) const
	{
		return Off == O.Off && Len == O.Len && S == O.S && LC == O.LC;
	}
	void Profile(llvm::FoldingSetNodeID &ID) const;
};

// The persistence state of one object on one path (the thesis' NVMMRegionState, with the
// modified and logged bits widened to byte ranges for the strict mode).
struct ObjState {
	enum Kind : uint8_t {
		Map,      // a whole pmem_map_file (or keratin region) mapping
		Existing, // an object that existed before: from a lookup, the root, an old alloc
		NewAlloc, // allocated by the running transaction
		Invalid,  // freed (at commit, or by an atomic free) or unmapped
	};
	Kind K = Existing;
	bool Freed = false;       // freed in the running transaction: invalid from here on
	bool Initialized = false; // written (or zero-filled) since a transaction allocated it
	bool Opaque = false;      // handed to code the analysis cannot see: no more reports
	bool AnyLogged = false;   // some range added to the running transaction's undo log
	bool NonNull = false;     // its oid is never OID_NULL (an allocation that succeeded)
	bool Keratin = false;     // reached through kr_get: committed bytes, never stored to
	const clang::Stmt *Site = nullptr; // allocation (rule 3) or free/unmap (rule 4)
	const clang::LocationContext *SiteLC = nullptr;
	// The last flush of the object since the path's last barrier (rule 1c), or null.
	const clang::Stmt *Unfenced = nullptr;
	const clang::LocationContext *UnfencedLC = nullptr;
	// A reservation not published yet: the action array it was made in (the base region of
	// pmemobj_reserve's act) and its element there (-1: not known). pmemobj_cancel of that
	// element drops it; publish makes it live.
	const clang::ento::MemRegion *Actions = nullptr;
	int64_t ActionIndex = -1;
	// The first use of a Freed object still named where its oid was read from: reported at
	// the commit if the transaction unlinks it by then (else the path ends there).
	// Memory (reached through a pointer) the path stored the object's oid into, for
	// stillLinked: a commit that leaves a freed object named there ends the path.
	llvm::SmallVector<const clang::ento::MemRegion *, 2> LinkedAt;
	const clang::Stmt *Use = nullptr;
	const clang::LocationContext *UseLC = nullptr;
	bool UseWrites = false;
	Lin Size; // the allocation's size, when known
	llvm::SmallVector<Rec, 2> Modified; // stored to and not yet flushed
	llvm::SmallVector<Rec, 1> Logged;   // added to the undo log in the running transaction

	bool operator==(const ObjState &O) const
	{
		return K == O.K && Freed == O.Freed && Initialized == O.Initialized &&
		       Opaque == O.Opaque && AnyLogged == O.AnyLogged && NonNull == O.NonNull &&
		       Keratin == O.Keratin &&
		       Site == O.Site && SiteLC == O.SiteLC && Unfenced == O.Unfenced &&
		       UnfencedLC == O.UnfencedLC && Actions == O.Actions &&
		       ActionIndex == O.ActionIndex && Use == O.Use && UseLC == O.UseLC &&
		       UseWrites == O.UseWrites && LinkedAt == O.LinkedAt && Size == O.Size &&
		       Modified == O.Modified &&
		       Logged == O.Logged;
	}
	void Profile(llvm::FoldingSetNodeID &ID) const;
};

// What a modeled function does. The checker evaluates every kind except Write, Volatile
// and Escape-free reads itself, so that the analyzer does not invalidate persistent memory
// behind a call whose effect is known.
enum class Fn : uint8_t {
	Direct,         // pmemobj_direct(oid) -> pointer to the object
	KrGet,          // kr_get(pool, oid), kr_tx_get(tx, oid) -> pointer to committed bytes
	OidOf,          // pmemobj_oid(addr) -> the oid of the object at addr
	Root,           // pmemobj_root(pop, size): an existing object
	Lookup,         // pmemobj_first/next: an existing object
	Reserve,        // pmemobj_(x)reserve(pop, act, size, ...): an object until its cancel
	Cancel,         // pmemobj_cancel(pop, actv, n): the reservations in actv[0..n) are dropped
	Publish,        // pmemobj_(tx_)publish([pop,] actv, n): those reservations are live
	TxAlloc,        // pmemobj_tx_(z|x)alloc, tx_strdup...: a new object of the transaction
	TxRealloc,      // pmemobj_tx_(z)realloc(oid, size, type): new object, old one freed
	AtomicAlloc,    // pmemobj_(z|x)alloc, pmemobj_strdup(pop, oidp, ...): oid into *oidp
	AtomicRealloc,  // pmemobj_(z)realloc(pop, oidp, size, type)
	AtomicFree,     // pmemobj_free(oidp)
	ListRemove,     // pmemobj_list_remove(pop, off, head, oid, free): frees oid if free != 0
	TxFree,         // pmemobj_tx_(x)free(oid)
	TxAdd,          // pmemobj_tx_(x)add_range(oid, off, size)
	TxAddDirect,    // pmemobj_tx_(x)add_range_direct(ptr, size)
	TxBegin,        // pmemobj_tx_begin
	TxStage,        // pmemobj_tx_stage
	TxProcess,      // pmemobj_tx_process
	TxCommit,       // pmemobj_tx_commit
	TxEnd,          // pmemobj_tx_end
	TxAbort,        // pmemobj_tx_abort: the path ends (undo log restores everything)
	SetJmp,         // setjmp of TX_BEGIN: only the direct return is followed
	MapFile,        // pmem_map_file(...) -> a mapping
	Unmap,          // pmem_unmap(addr, len)
	Flush,          // flush [Addr, Addr+Len)
	Persist,        // flush, then a barrier
	Barrier,        // pmem_drain, pmemobj_drain, sfence
	CacheLine,      // _mm_clflush/clflushopt/clwb builtins: flush one 64-byte line
	CopyPersist,    // memcpy/memset/memmove to Addr, flushed; barrier unless Flags say not
	Write,          // memcpy, memset, strcpy... : a store of Len bytes at Addr
	Volatile,       // malloc, calloc, kr_tx_add...: the result is not persistent
	NoEffect,       // locks, type queries, deferred actions: no memory effect to model
	KrRoot,         // kr_root(pool, size, oidp)
	KrTxBegin,      // kr_tx_begin(pool, txp)
	KrTxAlloc,      // kr_tx_alloc(tx, size, type, oidp)
	KrTxFree,       // kr_tx_free(tx, oid)
	KrTxCommit,     // kr_tx_commit(tx), kr_tx_abort(tx)
	KrPoolBase,     // kr_pool_base(pool) -> the pool's mapping
	KrRegionOpen,   // kr_region_open(path, opts, regionp, basep, lenp): *basep mapped
};

struct Model {
	Fn Kind;
	signed char Addr = -1;  // pointer argument: target of a flush or write, oidp, direct ptr
	signed char Len = -1;   // length argument
	signed char Oid = -1;   // oid argument
	signed char Off = -1;   // offset argument
	signed char Flags = -1; // flags argument
	bool Zero = false;      // the allocation is zero-filled
	bool Fence = true;      // CopyPersist: ends with a barrier (unless Flags say NODRAIN)
	signed char Out = -1;   // second out-pointer argument (kr_region_open's basep)
};

// The model of the C function called Name, or null.
const Model *findModel(llvm::StringRef Name);

} // namespace pmscan

#endif
