// checker.cpp - keratin-pmscan's path-sensitive checker: the persistence state machine of
// PmemConjurer on the Clang Static Analyzer, and the rules it reports.
//
// Along every path the analyzer explores, the checker keeps:
//   ObjStates  region symbol -> ObjState   one entry per persistent object (or mapping)
//   OidToReg   oid symbol -> region symbol  which object an oid names
//   TxDepth, TxStage                        the libpmemobj transaction the path is in
//   Volatile                                symbols of pointers known not to be persistent
//   CallRets, SawFailure                    what the error-path pruning needs
//   LastVal, Widened                        what a loop widening (or an unfollowed call)
//                                           must not forget, and what it did
//
// Objects appear where a modeled function returns one (pmemobj_root, pmemobj_tx_alloc,
// pmem_map_file, kr_get ...) and where pmemobj_direct meets an oid it has not seen (an
// object that existed before). pmemobj_direct of the same oid always returns the same
// region symbol, so writes through any pointer to an object, and adds to the undo log by
// oid, meet in one state. An oid is recognized by the symbol of its `off` field; when that
// symbol was derived from a struct-valued symbol (the PMEMoid a call returned), the
// struct's symbol is the key, whichever variable the oid was copied into.
//
// Transitions (the thesis' Table 4.2, with byte ranges):
//   store to object        Existing in a transaction: rule 2 unless the bytes are logged
//                          NewAlloc in a transaction: Initialized
//                          otherwise: a Modified range (rule 4 first, if freed/invalid)
//   load from object       rule 4 if freed (in the running transaction) or invalid
//   flush                  rules 1a, 1b; removes the flushed Modified ranges (lenient: all
//                          of the object's)
//   barrier, top-level return
//                          rule 1 for every Modified range left (the return is skipped
//                          on an error path: a callee failed and the function fails);
//                          a barrier also clears the object's unfenced flush
//   main's return, exit, unmap, pmemobj_close
//                          rule 1c for an object flushed since the last barrier
//   tx begin / nested end  depth +1 / -1
//   outermost commit       rule 3 for NewAlloc objects never written; NewAlloc ->
//                          Existing, Freed -> Invalid, logs dropped; the path ends if a
//                          freed object is still named where it was read or stored
//                          (stillLinked), and a use of it held since (Use) is reported
//                          if not
//   call the analyzer cannot see, given a pointer to or the oid of an object
//                          the object becomes Opaque: it draws no more reports
//   call of a function of this file the analyzer did not follow
//                          what it may have written is forgotten (Widened): an oid read
//                          from it names an Opaque object
//   loop widened           the locals no loop of the function changes get back their
//                          values (LastVal, loops.cpp); a range read from what the
//                          widening forgot is judged as in the lenient mode (Widened)
#include "pmscan.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "clang/Analysis/CallGraph.h"
#include "clang/Lex/Lexer.h"
#include "clang/StaticAnalyzer/Core/BugReporter/BugReporter.h"
#include "clang/StaticAnalyzer/Core/BugReporter/BugType.h"
#include "clang/StaticAnalyzer/Core/Checker.h"
#include "clang/StaticAnalyzer/Core/CheckerManager.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/CallEvent.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/CheckerContext.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/ProgramStateTrait.h"
#include "llvm/ADT/DenseSet.h"

#include <memory>
#include <string>

using namespace clang;
using namespace clang::ento;
using namespace pmscan;

REGISTER_MAP_WITH_PROGRAMSTATE(ObjStates, SymbolRef, ObjState)
REGISTER_MAP_WITH_PROGRAMSTATE(OidToReg, SymbolRef, SymbolRef)
REGISTER_SET_WITH_PROGRAMSTATE(Volatile, SymbolRef)
REGISTER_SET_WITH_PROGRAMSTATE(CallRets, SymbolRef)
REGISTER_TRAIT_WITH_PROGRAMSTATE(SawFailure, bool)
REGISTER_TRAIT_WITH_PROGRAMSTATE(TxDepth, unsigned)
REGISTER_TRAIT_WITH_PROGRAMSTATE(TxStage, unsigned)
// The last value bound to each local variable or parameter that the loops of its function
// leave alone (loops.cpp): what a loop widening must not forget.
REGISTER_MAP_WITH_PROGRAMSTATE(LastVal, const MemRegion *, SVal)
// One symbol of each invalidation on the path that forgot memory the checker cannot
// follow (a loop widening, a call of this file the analyzer did not follow): what the
// memory reads as after it are symbols the analyzer conjured at the same statement and
// step, unrelated to what it held before. Kept while the path lasts, dead or not: a marker
// is compared, never read.
REGISTER_SET_WITH_PROGRAMSTATE(Widened, SymbolRef)

namespace {

// libpmemobj's enum pobj_tx_stage.
enum : unsigned { StageNone, StageWork, StageOnCommit, StageOnAbort, StageFinally };

const uint64_t FlagZero = 1;           // POBJ_XALLOC_ZERO
const uint64_t MemNoDrain = 1u << 0;   // PMEM_F_MEM_NODRAIN
const uint64_t MemNoFlush = 1u << 5;   // PMEM_F_MEM_NOFLUSH
const int64_t CacheLineSize = 64;

// An oid as the checker sees it: the key of the object it names, or null, or neither.
struct Oid {
	SymbolRef Key = nullptr;
	bool Null = false;
	SVal OffVal; // the `off` field (or the kr_oid itself), for null splits
};

class PmScanChecker
    : public Checker<check::PreCall, check::PostCall, eval::Call, check::Bind, check::Location,
		     check::EndFunction, check::PointerEscape, check::PostStmt<CastExpr>,
		     check::PostStmt<BinaryOperator>,
		     check::LiveSymbols, check::DeadSymbols, check::BeginFunction,
		     check::RegionChanges> {
public:
	bool Strict = false;

	void checkPreCall(const CallEvent &Call, CheckerContext &C) const;
	void checkPostCall(const CallEvent &Call, CheckerContext &C) const;
	bool evalCall(const CallEvent &Call, CheckerContext &C) const;
	void checkBind(SVal Loc, SVal Val, const Stmt *S, CheckerContext &C) const;
	void checkLocation(SVal Loc, bool IsLoad, const Stmt *S, CheckerContext &C) const;
	void checkEndFunction(const ReturnStmt *RS, CheckerContext &C) const;
	ProgramStateRef checkPointerEscape(ProgramStateRef St, const InvalidatedSymbols &Escaped,
					   const CallEvent *Call, PointerEscapeKind Kind) const;
	void checkPostStmt(const CastExpr *CE, CheckerContext &C) const;
	void checkPostStmt(const BinaryOperator *BO, CheckerContext &C) const;
	void checkLiveSymbols(ProgramStateRef St, SymbolReaper &SR) const;
	void checkDeadSymbols(SymbolReaper &SR, CheckerContext &C) const;
	void checkBeginFunction(CheckerContext &C) const;
	ProgramStateRef checkRegionChanges(ProgramStateRef St, const InvalidatedSymbols *Invalidated,
					   ArrayRef<const MemRegion *> Explicit,
					   ArrayRef<const MemRegion *> Regions,
					   const LocationContext *LC, const CallEvent *Call) const;

private:
	BugType MissingFlush{this, "rule 1 (missing-flush)", "Persistence"};
	BugType FlushNotPm{this, "rule 1a (flush-not-pm)", "Persistence"};
	BugType PartialFlush{this, "rule 1b (partial-flush)", "Persistence"};
	BugType MissingFence{this, "rule 1c (missing-fence)", "Persistence"};
	BugType UnloggedWrite{this, "rule 2 (unlogged-write)", "Persistence"};
	BugType UninitAlloc{this, "rule 3 (uninitialized-alloc)", "Persistence"};
	BugType UseAfterFree{this, "rule 4 (use-after-free)", "Persistence"};

	void reportBug(CheckerContext &C, const BugType &BT, const std::string &Detail, const Stmt *S,
		    const LocationContext *LC) const;

	Oid oidOf(SVal V, ProgramStateRef St, CheckerContext &C) const;
	SVal readThrough(CheckerContext &C, Store S, const SubRegion *R, int Depth) const;
	SymbolRef canonical(SymbolRef S, ProgramStateRef St) const;
	SymbolRef conjure(CheckerContext &C, const Expr *E, QualType T, const void *Tag) const;
	ProgramStateRef objectFor(ProgramStateRef St, CheckerContext &C, const Expr *E, const Oid &O,
				  SymbolRef &Reg) const;

	ProgramStateRef noteStore(ProgramStateRef St, CheckerContext &C, SymbolRef Reg, const Lin &Off,
			      const Lin &Len, const Stmt *S, const std::string &What) const;
	ProgramStateRef writeAt(ProgramStateRef St, CheckerContext &C, SVal Addr, const Lin &Len,
				const Stmt *S, const std::string &What) const;
	ProgramStateRef noteFlush(ProgramStateRef St, CheckerContext &C, const CallEvent &Call,
			      SVal Addr, const Lin &Len, bool CheckTarget) const;
	ProgramStateRef barrier(ProgramStateRef St, CheckerContext &C,
				const std::string &Where) const;
	ProgramStateRef noFenceFollows(ProgramStateRef St, CheckerContext &C, SymbolRef Only,
				       const std::string &Where) const;
	ProgramStateRef commit(ProgramStateRef St, CheckerContext &C) const;
	bool stillLinked(ProgramStateRef St, SymbolRef Reg, CheckerContext &C) const;
	ProgramStateRef useAfterFree(ProgramStateRef St, CheckerContext &C, SymbolRef Reg,
				     const Stmt *S, const LocationContext *LC, bool Writes) const;
	std::string useDetail(const ObjState &O, const Stmt *S, bool Writes, CheckerContext &C) const;
	ProgramStateRef opaque(ProgramStateRef St, SymbolRef Sym) const;
	ProgramStateRef freedAtomically(ProgramStateRef St, const Oid &O, const Expr *Site,
					const LocationContext *LC) const;
	bool errorPath(const ReturnStmt *RS, CheckerContext &C) const;
	void readCallGraph(ASTContext &Ctx) const;
	bool calledInUnit(const Decl *D, ASTContext &Ctx) const;
	bool allocatesInTx(const Decl *D, ASTContext &Ctx) const;
	static bool onlyReads(const CallEvent &Call);
	ProgramStateRef maybeNew(ProgramStateRef St, CheckerContext &C, const Expr *E,
				 SymbolRef Key) const;
	SymbolRef loadedFrom(SymbolRef Key) const;

	// Read from the translation unit's call graph once (readCallGraph). The functions some
	// other function of the unit calls (for the thesis' "top-level function": one with no
	// caller in the same file).
	mutable const ASTContext *CalleesOf = nullptr;
	mutable llvm::DenseSet<const Decl *> Callees;
	// The functions that allocate in a transaction, themselves or through a callee of the
	// same file (for the objects of calls the analyzer did not follow).
	mutable llvm::DenseSet<const Decl *> Allocators;
	bool failed(SVal V, ProgramStateRef St) const;

	// loopVarsOf for each function met, read once.
	mutable llvm::DenseMap<const Decl *, LoopVars> LoopVarsOf;
	const LoopVars &loopVars(const Decl *D) const;
	ProgramStateRef remember(ProgramStateRef St, const MemRegion *R, SVal V) const;
	static bool forgotten(const Lin &L, ProgramStateRef St);

	bool evalModel(const Model &M, const CallEvent &Call, CheckerContext &C) const;
};

bool inTx(ProgramStateRef St) { return St->get<TxDepth>() > 0 && St->get<TxStage>() == StageWork; }

const Model *modelOf(const CallEvent &Call)
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(Call.getDecl());
	if (!FD || !FD->getIdentifier())
		return nullptr;
	return findModel(FD->getName());
}

// " (line N)": where a statement is, for a report's detail.
static std::string lineOf(const Stmt *S, CheckerContext &C)
{
	return " (line " +
	       std::to_string(C.getSourceManager().getExpansionLineNumber(S->getBeginLoc())) + ")";
}

std::string sourceText(const Stmt *S, CheckerContext &C)
{
	if (!S)
		return "?";
	const SourceManager &SM = C.getSourceManager();
	CharSourceRange R = CharSourceRange::getTokenRange(S->getSourceRange());
	if (R.getBegin().isMacroID() || R.getEnd().isMacroID())
		R = SM.getExpansionRange(R);
	std::string T = Lexer::getSourceText(R, SM, C.getLangOpts()).str();
	std::string Out;
	bool Space = false;
	for (char Ch : T) { // one line, single spaces
		if (Ch == '\n' || Ch == '\t' || Ch == ' ') {
			Space = !Out.empty();
			continue;
		}
		if (Space)
			Out += ' ';
		Space = false;
		Out += Ch;
	}
	if (Out.size() > 60)
		Out = Out.substr(0, 57) + "...";
	return Out.empty() ? "?" : Out;
}

// The lvalue a store writes, for the message: `p->x` of `p->x = 3`.
const Stmt *storedExpr(const Stmt *S)
{
	if (const auto *BO = dyn_cast_or_null<BinaryOperator>(S))
		return BO->getLHS();
	if (const auto *UO = dyn_cast_or_null<UnaryOperator>(S))
		return UO->getSubExpr();
	return S;
}

std::string functionName(const LocationContext *LC)
{
	if (const auto *ND = dyn_cast_or_null<NamedDecl>(LC ? LC->getDecl() : nullptr))
		return ND->getNameAsString();
	return "?";
}

int64_t sizeOfType(ASTContext &Ctx, QualType T)
{
	if (T.isNull() || T->isVoidType() || T->isIncompleteType() || !T->isConstantSizeType())
		return -1;
	return Ctx.getTypeSizeInChars(T).getQuantity();
}

bool isOidRecord(QualType T);

const FieldDecl *fieldNamed(const RecordDecl *RD, StringRef Name)
{
	for (const FieldDecl *F : RD->fields())
		if (F->getName() == Name)
			return F;
	return nullptr;
}

// PMEMoid itself (struct pmemoid { pool_uuid_lo, off }).
bool isPmemOid(QualType T)
{
	const auto *RT = T.getCanonicalType()->getAs<RecordType>();
	if (!RT || !RT->getDecl()->isStruct())
		return false;
	const RecordDecl *RD = RT->getDecl();
	return fieldNamed(RD, "off") && fieldNamed(RD, "pool_uuid_lo");
}

// PMEMoid, or a TOID union (whose `oid` member is a PMEMoid).
bool isOidRecord(QualType T)
{
	if (isPmemOid(T))
		return true;
	const auto *RT = T.getCanonicalType()->getAs<RecordType>();
	if (!RT || !RT->getDecl()->isUnion())
		return false;
	const FieldDecl *F = fieldNamed(RT->getDecl(), "oid");
	return F && isPmemOid(F->getType());
}

int64_t concreteOr(SVal V, int64_t Dflt)
{
	Lin L = linOf(V);
	return L.isConst() ? L.K : Dflt;
}

// Whether symbol S may have one of the bits of Mask set: false only where its expression
// shows it cannot, as for flags built of a symbol shifted left past them (POBJ_CLASS_ID(id)
// is id << 48) and of constants, or'ed and and'ed, and cast.
bool symMayHaveBits(SymbolRef S, uint64_t Mask, ASTContext &Ctx)
{
	if (!Mask)
		return false;
	if (const auto *C = dyn_cast<SymbolCast>(S)) {
		// A cast keeps the operand's bits below the operand's width. The bits it adds above
		// are zero, or, when it widens a signed operand, copies of the operand's sign bit.
		SymbolRef Op = C->getOperand();
		QualType From = Op->getType();
		uint64_t Width = Ctx.getTypeSize(From);
		uint64_t Low = Width < 64 ? Mask & ((1ull << Width) - 1) : Mask;
		bool SignExtends = Ctx.getTypeSize(C->getType()) > Width &&
				   From->isSignedIntegerOrEnumerationType();
		return symMayHaveBits(Op, Low, Ctx) ||
		       (SignExtends && Low != Mask && symMayHaveBits(Op, 1ull << (Width - 1), Ctx));
	}
	if (const auto *E = dyn_cast<SymIntExpr>(S)) {
		uint64_t K = E->getRHS().getZExtValue();
		switch (E->getOpcode()) {
		case BO_Shl:
			return K < 64 && symMayHaveBits(E->getLHS(), Mask >> K, Ctx);
		case BO_Or:
			return (K & Mask) || symMayHaveBits(E->getLHS(), Mask, Ctx);
		case BO_And:
			return symMayHaveBits(E->getLHS(), Mask & K, Ctx);
		default:
			return true;
		}
	}
	if (const auto *E = dyn_cast<SymSymExpr>(S)) {
		if (E->getOpcode() == BO_Or)
			return symMayHaveBits(E->getLHS(), Mask, Ctx) ||
			       symMayHaveBits(E->getRHS(), Mask, Ctx);
		if (E->getOpcode() == BO_And)
			return symMayHaveBits(E->getLHS(), Mask, Ctx) &&
			       symMayHaveBits(E->getRHS(), Mask, Ctx);
	}
	return true;
}

// Whether the value V may have one of the bits of Mask set (an unknown value may).
bool mayHaveBits(SVal V, uint64_t Mask, ASTContext &Ctx)
{
	Lin L = linOf(V);
	if (L.isConst())
		return (uint64_t)L.K & Mask;
	SymbolRef S = V.getAsSymbol();
	return !S || symMayHaveBits(S, Mask, Ctx);
}

} // namespace

// A TOID union holding Oid, as a value: a temporary union (at E) whose `oid` member is bound
// to Oid. The analyzer leaves union values it makes itself unknown (a cast to a union, the
// result of a call it does not inline); the checker needs to see the oid inside.
static SVal unionHolding(CheckerContext &C, ProgramStateRef &St, const Expr *E, QualType UnionT,
			 SVal Oid)
{
	const auto *RT = UnionT.getCanonicalType()->getAs<RecordType>();
	const FieldDecl *F = fieldNamed(RT->getDecl(), "oid");
	const LocationContext *LC = C.getLocationContext();
	MemRegionManager &MRM = C.getStoreManager().getRegionManager();
	const CXXTempObjectRegion *TR = MRM.getCXXTempObjectRegion(E, LC);
	St = St->bindLoc(loc::MemRegionVal(MRM.getFieldRegion(F, TR)), Oid, LC);
	return C.getSValBuilder().makeLazyCompoundVal(
	    StoreRef(St->getStore(), St->getStateManager().getStoreManager()), TR);
}

static int RegTag, OidTag, RetTag; // kinds of symbols the checker conjures

// --- reports -------------------------------------------------------------------------------

void PmScanChecker::reportBug(CheckerContext &C, const BugType &BT, const std::string &Detail,
			   const Stmt *S, const LocationContext *LC) const
{
	if (!S || !LC)
		return;
	std::string Desc = BT.getDescription().str() + ": " + Detail + " [in " + functionName(LC) + "]";
	if (getenv("PMSCAN_DEBUG")) {
		llvm::errs() << "REPORT " << Desc << "\n  stack:";
		for (const LocationContext *L = C.getLocationContext(); L; L = L->getParent())
			if (const auto *SF = dyn_cast<StackFrameContext>(L))
				llvm::errs() << " " << functionName(SF) << "@" << (SF->getCallSite() ? C.getSourceManager().getExpansionLineNumber(SF->getCallSite()->getBeginLoc()) : 0);
		llvm::errs() << "\n";
	}
	auto Loc = PathDiagnosticLocation::createBegin(S, C.getSourceManager(), LC);
	auto R = std::make_unique<BasicBugReport>(BT, Desc, Loc);
	R->setDeclWithIssue(LC->getDecl());
	C.emitReport(std::move(R));
}

// --- oids and objects ----------------------------------------------------------------------

SymbolRef PmScanChecker::canonical(SymbolRef S, ProgramStateRef St) const
{
	for (int Guard = 0; S && Guard < 8; Guard++) {
		const auto *D = dyn_cast<SymbolDerived>(S);
		if (!D || !isOidRecord(D->getParentSymbol()->getType()))
			break;
		S = D->getParentSymbol();
	}
	return S;
}

// The other name of a TOID's field reached through a pointer: the analyzer spells *p both as
// the pointer's symbolic region and as element 0 of it, and keeps the union member bindings
// of the two apart (union members have no fixed offset in its store).
static const SubRegion *otherSpelling(CheckerContext &C, const SubRegion *R)
{
	const auto *Leaf = dyn_cast<FieldRegion>(R);
	const auto *Member = Leaf ? dyn_cast<FieldRegion>(Leaf->getSuperRegion()) : nullptr;
	if (!Member || !Member->getDecl()->getParent()->isUnion())
		return nullptr;
	MemRegionManager &MRM = C.getStoreManager().getRegionManager();
	const MemRegion *Holder = Member->getSuperRegion();
	const SubRegion *Other = nullptr;
	if (const auto *ER = dyn_cast<ElementRegion>(Holder)) {
		if (ER->getIndex().isZeroConstant() && isa<SymbolicRegion>(ER->getSuperRegion()))
			Other = cast<SubRegion>(ER->getSuperRegion());
	} else if (const auto *SR = dyn_cast<SymbolicRegion>(Holder)) {
		QualType U = C.getASTContext().getRecordType(Member->getDecl()->getParent());
		Other = MRM.getElementRegion(U, C.getSValBuilder().makeZeroArrayIndex(), SR,
					     C.getASTContext());
	}
	if (!Other)
		return nullptr;
	return MRM.getFieldRegion(Leaf->getDecl(), MRM.getFieldRegion(Member->getDecl(), Other));
}

// The value of R (a scalar inside an oid) in store S, following what the store itself does
// not: the other spelling of a TOID behind a pointer, and copies of such a TOID (a lazy
// value bound to an enclosing variable or parameter).
SVal PmScanChecker::readThrough(CheckerContext &C, Store S, const SubRegion *R, int Depth) const
{
	StoreManager &SM = C.getStoreManager();
	// (A lazy value for a scalar is the store giving up on a copy it would not follow.)
	auto resolved = [](SVal X) { return !X.isUnknown() && !X.getAs<nonloc::LazyCompoundVal>(); };
	SVal V = SM.getBinding(S, loc::MemRegionVal(R));
	if (resolved(V) || Depth > 6)
		return V;
	if (const SubRegion *Alt = otherSpelling(C, R)) {
		SVal A = SM.getBinding(S, loc::MemRegionVal(Alt));
		if (resolved(A))
			return A;
	}
	// A copy: the base region (a variable, a parameter) holds a lazy value; read the same
	// path below the region it copies. (The store keeps default bindings per base region.)
	llvm::SmallVector<const SubRegion *, 4> Path;
	const SubRegion *Base = R;
	while (isa<FieldRegion>(Base) || isa<ElementRegion>(Base)) {
		Path.push_back(Base);
		Base = dyn_cast<SubRegion>(Base->getSuperRegion());
		if (!Base)
			return V;
	}
	Optional<SVal> D = SM.getDefaultBinding(S, Base);
	if (!D || !D->getAs<nonloc::LazyCompoundVal>())
		return V;
	auto L = D->castAs<nonloc::LazyCompoundVal>();
	if (L.getRegion() == Base)
		return V;
	MemRegionManager &MRM = SM.getRegionManager();
	const SubRegion *Y = L.getRegion();
	for (auto It = Path.rbegin(); It != Path.rend(); ++It) {
		if (const auto *F = dyn_cast<FieldRegion>(*It))
			Y = MRM.getFieldRegionWithSuper(F, Y);
		else
			Y = MRM.getElementRegionWithSuper(cast<ElementRegion>(*It), Y);
	}
	return readThrough(C, L.getStore(), Y, Depth + 1);
}

Oid PmScanChecker::oidOf(SVal V, ProgramStateRef St, CheckerContext &C) const
{
	Oid O;
	SVal Off = UnknownVal();
	if (auto LCV = V.getAs<nonloc::LazyCompoundVal>()) {
		const TypedValueRegion *R = LCV->getRegion();
		QualType T = R->getValueType();
		MemRegionManager &MRM = C.getStoreManager().getRegionManager();
		const auto *RT = T.getCanonicalType()->getAs<RecordType>();
		if (RT && RT->getDecl()->isUnion()) {
			const FieldDecl *F = fieldNamed(RT->getDecl(), "oid");
			if (!F)
				return O;
			R = MRM.getFieldRegion(F, R);
			RT = F->getType().getCanonicalType()->getAs<RecordType>();
		}
		const FieldDecl *OffF = RT ? fieldNamed(RT->getDecl(), "off") : nullptr;
		if (!OffF)
			return O;
		Off = readThrough(C, LCV->getStore(), MRM.getFieldRegion(OffF, R), 0);
	} else if (SymbolRef S = V.getAsSymbol()) {
		if (isOidRecord(S->getType())) {
			O.Key = canonical(S, St);
			return O;
		}
		Off = V; // a kr_oid: the integer is the oid
	} else if (V.getAs<nonloc::ConcreteInt>()) {
		Off = V;
	} else if (auto CV = V.getAs<nonloc::CompoundVal>()) {
		// {pool_uuid_lo, off} written out, as in OID_NULL's compound literal
		auto It = CV->begin();
		if (It != CV->end() && ++It != CV->end())
			Off = *It;
	}
	O.OffVal = Off;
	if (Off.isZeroConstant())
		O.Null = true;
	else if (SymbolRef S = Off.getAsSymbol())
		O.Key = canonical(S, St);
	return O;
}

SymbolRef PmScanChecker::conjure(CheckerContext &C, const Expr *E, QualType T,
				 const void *Tag) const
{
	return C.getSymbolManager().conjureSymbol(E, C.getLocationContext(), T, C.blockCount(), Tag);
}


// The region symbol of the object O names, made (as an existing object) if the path has not
// met the oid before.
ProgramStateRef PmScanChecker::objectFor(ProgramStateRef St, CheckerContext &C, const Expr *E,
					 const Oid &O, SymbolRef &Reg) const
{
	if (O.Key)
		if (const SymbolRef *R = St->get<OidToReg>(O.Key)) {
			Reg = *R;
			return St;
		}
	if (O.Key && inTx(St))
		if (SymbolRef From = loadedFrom(O.Key))
			if (const ObjState *P = St->get<ObjStates>(From))
				if (P->K == ObjState::NewAlloc) {
					St = maybeNew(St, C, E, O.Key);
					Reg = *St->get<OidToReg>(O.Key);
					return St;
				}
	Reg = conjure(C, E, C.getASTContext().VoidPtrTy, &RegTag);
	// An oid whose value the store lost (Unknown: the analyzer gave up on an array written
	// at a symbolic index, say; or read from memory a loop widening forgot) cannot be
	// matched with the adds and stores made through the same oid elsewhere: each use would
	// be a new object, and every store to it rule 2. Such an object is opaque, as one passed
	// to a call the analyzer cannot see.
	ObjState N;
	N.Opaque = (!O.Key && O.OffVal.isUnknown()) || (O.Key && forgotten(Lin::symbol(O.Key), St));
	St = St->set<ObjStates>(Reg, N);
	if (O.Key)
		St = St->set<OidToReg>(O.Key, Reg);
	return St;
}

// pmemobj_free, or a list removal with its free flag: the object O names is gone when the
// call returns (Site: the call, for the report of a later use).
ProgramStateRef PmScanChecker::freedAtomically(ProgramStateRef St, const Oid &O, const Expr *Site,
					       const LocationContext *LC) const
{
	const SymbolRef *R = O.Key ? St->get<OidToReg>(O.Key) : nullptr;
	const ObjState *S = R ? St->get<ObjStates>(*R) : nullptr;
	if (!S)
		return St;
	ObjState N = *S;
	N.K = ObjState::Invalid;
	N.Site = Site;
	N.SiteLC = LC;
	return St->set<ObjStates>(*R, N);
}

ProgramStateRef PmScanChecker::opaque(ProgramStateRef St, SymbolRef Sym) const
{
	const ObjState *O = St->get<ObjStates>(Sym);
	if (!O || O->Opaque)
		return St;
	ObjState N = *O;
	N.Opaque = true;
	N.Modified.clear();
	return St->set<ObjStates>(Sym, N);
}

// --- stores, flushes, barriers, commits ----------------------------------------------------

// Byte ranges with constant ends: Whole minus Part, as zero, one or two pieces.
static llvm::SmallVector<Rec, 2> subtract(const Rec &Whole, const Lin &POff, const Lin &PLen)
{
	llvm::SmallVector<Rec, 2> Out;
	int64_t A = Whole.Off.K, B = A + Whole.Len.K, F = POff.K, G = F + PLen.K;
	if (F > A) {
		Rec L = Whole;
		L.Len = Lin::constant(std::min(B, F) - A);
		Out.push_back(L);
	}
	if (G < B) {
		Rec R = Whole;
		R.Off = Lin::constant(std::max(A, G));
		R.Len = Lin::constant(B - std::max(A, G));
		Out.push_back(R);
	}
	if (F >= B || G <= A) { // no overlap: the whole range stays
		Out.clear();
		Out.push_back(Whole);
	}
	return Out;
}

static bool allConst(const Lin &A, const Lin &B, const Lin &C, const Lin &D)
{
	return A.isConst() && B.isConst() && C.isConst() && D.isConst();
}

// Is [Off, Off+Len) covered by the union of the logged ranges?
static bool logged(const ObjState &O, const Lin &Off, const Lin &Len, ProgramStateRef St,
		   SValBuilder &SVB)
{
	llvm::SmallVector<Rec, 2> Left;
	Rec W;
	W.Off = Off;
	W.Len = Len;
	Left.push_back(W);
	for (const Rec &L : O.Logged) {
		llvm::SmallVector<Rec, 2> Next;
		for (const Rec &P : Left) {
			if (provablyInside(L.Off, L.Len, P.Off, P.Len, St, SVB))
				continue;
			if (allConst(P.Off, P.Len, L.Off, L.Len))
				for (const Rec &Q : subtract(P, L.Off, L.Len))
					Next.push_back(Q);
			else
				Next.push_back(P);
		}
		Left = Next;
		if (Left.empty())
			return true;
	}
	return Left.empty();
}

ProgramStateRef PmScanChecker::noteStore(ProgramStateRef St, CheckerContext &C, SymbolRef Reg,
				     const Lin &Off, const Lin &Len, const Stmt *S,
				     const std::string &What) const
{
	const ObjState *O = St->get<ObjStates>(Reg);
	if (!O || O->Opaque)
		return St;
	const LocationContext *LC = C.getLocationContext();
	if (O->K == ObjState::Invalid || O->Freed)
		return useAfterFree(St, C, Reg, S, LC, true);
	ObjState N = *O;
	if (O->Keratin) {
		// keratin's objects change only through a transaction's buffers (kr_tx_open,
		// kr_tx_add) or kr_update; kr_get's bytes are the committed ones, which a store
		// changes behind the checksum and the parity.
		reportBug(C, UnloggedWrite,
		       "'" + What + "' written through kr_get's pointer, outside every transaction's "
				    "buffers",
		       S, LC);
		return St;
	}
	if (inTx(St) && O->K == ObjState::Existing) {
		bool Ok = O->AnyLogged;
		// Strict: the logged ranges must cover the store, unless the widening forgot what
		// would tell (then judged as lenient).
		if (Strict && !logged(*O, Off, Len, St, C.getSValBuilder()) &&
		    !(Ok && (forgotten(Off, St) || forgotten(Len, St) ||
			     llvm::any_of(O->Logged, [&](const Rec &L) {
				     return forgotten(L.Off, St) || forgotten(L.Len, St);
			     }))))
			Ok = false;
		if (!Ok)
			reportBug(C, UnloggedWrite,
			       "'" + What + "' written in a transaction without being added to "
					    "the undo log first",
			       S, LC);
		return St;
	}
	if (inTx(St) && O->K == ObjState::NewAlloc) {
		if (O->Initialized)
			return St;
		N.Initialized = true;
		return St->set<ObjStates>(Reg, N);
	}
	Rec R;
	R.Off = Off;
	R.Len = Len;
	R.S = S;
	R.LC = LC;
	for (const Rec &M : N.Modified)
		if (M == R)
			return St;
	N.Modified.push_back(R);
	return St->set<ObjStates>(Reg, N);
}

ProgramStateRef PmScanChecker::writeAt(ProgramStateRef St, CheckerContext &C, SVal Addr,
				       const Lin &Len, const Stmt *S, const std::string &What) const
{
	const MemRegion *R = Addr.getAsRegion();
	if (!R)
		return St;
	Place P = placeOf(R, C.getASTContext());
	if (!P.Base || !St->get<ObjStates>(P.Base))
		return St;
	return noteStore(St, C, P.Base, P.Off, Len, S, What);
}

// Why a flush target is not persistent memory, or "" if it is (or might be).
static std::string notPersistent(const MemRegion *R, ProgramStateRef St)
{
	const MemRegion *Base = R->getBaseRegion();
	const MemSpaceRegion *Space = R->getMemorySpace();
	if (isa<StackSpaceRegion>(Space)) {
		if (const auto *VR = dyn_cast<VarRegion>(Base)) {
			std::string N = "the stack variable '" + VR->getDecl()->getNameAsString() + "'";
			SVal Held = St->getSVal(loc::MemRegionVal(VR));
			if (const MemRegion *HR = Held.getAsRegion())
				if (const auto *SR = dyn_cast<SymbolicRegion>(HR->getBaseRegion()))
					if (St->get<ObjStates>(SR->getSymbol()))
						N += ", which holds a pointer to persistent memory (pass " +
						     VR->getDecl()->getNameAsString() + ", not &" +
						     VR->getDecl()->getNameAsString() + ")";
			return N;
		}
		return "stack memory";
	}
	if (isa<HeapSpaceRegion>(Space))
		return "heap memory";
	if (isa<GlobalsSpaceRegion>(Space) && !isa<SymbolicRegion>(Base)) {
		if (const auto *VR = dyn_cast<VarRegion>(Base))
			return "the global variable '" + VR->getDecl()->getNameAsString() + "'";
		return "static memory";
	}
	if (const auto *SR = dyn_cast<SymbolicRegion>(Base))
		if (St->contains<Volatile>(SR->getSymbol()))
			return "volatile memory (from malloc or a keratin transaction buffer)";
	return "";
}

ProgramStateRef PmScanChecker::noteFlush(ProgramStateRef St, CheckerContext &C, const CallEvent &Call,
				     SVal Addr, const Lin &Len, bool CheckTarget) const
{
	const MemRegion *R = Addr.getAsRegion();
	if (!R)
		return St;
	const Expr *CE = Call.getOriginExpr();
	const LocationContext *LC = C.getLocationContext();
	std::string Callee = Call.getCalleeIdentifier() ? Call.getCalleeIdentifier()->getName().str()
							: "flush";
	if (CheckTarget) {
		std::string Why = notPersistent(R, St);
		if (!Why.empty()) {
			reportBug(C, FlushNotPm, Callee + " flushes " + Why + ", not persistent memory", CE,
			       LC);
			return St;
		}
	}
	Place P = placeOf(R, C.getASTContext());
	if (!P.Base)
		return St;
	const ObjState *O = St->get<ObjStates>(P.Base);
	if (!O || O->Opaque)
		return St;
	SValBuilder &SVB = C.getSValBuilder();
	ObjState N = *O;
	N.Unfenced = CE;
	N.UnfencedLC = LC;
	bool Partial = false;
	if (CheckTarget) {
		// Rule 1b, by type: fewer bytes than the pointer's target type.
		const Expr *A = Call.getArgExpr(findModel(Callee) ? findModel(Callee)->Addr : 0);
		A = A ? A->IgnoreParenImpCasts() : nullptr;
		while (const auto *Cast = dyn_cast_or_null<ExplicitCastExpr>(A)) {
			if (!Cast->getType()->isVoidPointerType())
				break;
			A = Cast->getSubExpr()->IgnoreParenImpCasts();
		}
		QualType PT = A ? A->getType() : QualType();
		int64_t Want = PT.isNull() || !PT->isPointerType()
				   ? -1
				   : sizeOfType(C.getASTContext(), PT->getPointeeType());
		// (A flush of nothing, as `(n - lo) * size` when no element is new, is harmless.)
		if (Want > 1 && provablyNonNegative(Lin::constant(Want - 1).minus(Len), St, SVB) &&
		    provablyNonNegative(Len.minus(Lin::constant(1)), St, SVB)) {
			reportBug(C, PartialFlush,
			       Callee + " flushes " +
				   (Len.isConst() ? std::to_string(Len.K) : std::string("fewer")) +
				   " bytes of '" + sourceText(A, C) + "', whose type has " +
				   std::to_string(Want),
			       CE, LC);
			Partial = true;
		}
		// Rule 1b, by what was written: a block stored at this very address by one
		// statement, and flushed short.
		for (const Rec &M : N.Modified) {
			if (Partial)
				break;
			Lin Gap = M.Off.minus(P.Off);
			if (!Gap.isConst() || Gap.K != 0 || !M.Len.Known)
				continue;
			if (!provablyNonNegative(M.Len.minus(Len).minus(Lin::constant(1)), St, SVB))
				continue;
			reportBug(C, PartialFlush,
			       Callee + " flushes " +
				   (Len.isConst() ? std::to_string(Len.K) : std::string("fewer")) +
				   " bytes of '" + sourceText(A, C) + "', where line " +
				   std::to_string(C.getSourceManager().getExpansionLineNumber(
				       M.S->getBeginLoc())) +
				   " stored " +
				   (M.Len.isConst() ? std::to_string(M.Len.K) : std::string("more")),
			       CE, LC);
			Partial = true;
		}
	}
	if (!Strict) {
		N.Modified.clear();
		return St->set<ObjStates>(P.Base, N);
	}
	bool FlushForgotten = forgotten(P.Off, St) || forgotten(Len, St);
	llvm::SmallVector<Rec, 2> Left;
	for (const Rec &M : N.Modified) {
		if (Partial && (M.Off.minus(P.Off).isConst() && M.Off.minus(P.Off).K == 0))
			continue; // reported as 1b: the rest of the block is that report's
		if (provablyInside(P.Off, Len, M.Off, M.Len, St, SVB))
			continue;
		if (FlushForgotten || forgotten(M.Off, St) || forgotten(M.Len, St))
			continue; // the widening forgot what would tell: judged as lenient
		if (allConst(M.Off, M.Len, P.Off, Len)) {
			for (const Rec &Q : subtract(M, P.Off, Len))
				Left.push_back(Q);
			continue;
		}
		Left.push_back(M);
	}
	N.Modified = Left;
	return St->set<ObjStates>(P.Base, N);
}

ProgramStateRef PmScanChecker::barrier(ProgramStateRef St, CheckerContext &C,
				       const std::string &Where) const
{
	for (const auto &E : St->get<ObjStates>()) {
		const ObjState &O = E.second;
		bool Unflushed = !O.Modified.empty() && !O.Opaque;
		if (!Unflushed && !O.Unfenced)
			continue;
		if (Unflushed)
			for (const Rec &M : O.Modified)
				reportBug(C, MissingFlush,
					  "'" + sourceText(storedExpr(M.S), C) +
					      "' stored here is not flushed " + Where,
					  M.S, M.LC);
		ObjState N = O;
		N.Unfenced = nullptr;
		N.UnfencedLC = nullptr;
		if (Unflushed)
			N.Modified.clear();
		St = St->set<ObjStates>(E.first, N);
	}
	return St;
}

// Rule 1c: a point after which no fence can come for what was flushed (the end of main,
// exit, an unmap or a pool's close). A flush of the object (Only, or every object) since
// the last barrier is reported there, at the flush; the barrier belongs after it.
ProgramStateRef PmScanChecker::noFenceFollows(ProgramStateRef St, CheckerContext &C,
					      SymbolRef Only, const std::string &Where) const
{
	for (const auto &E : St->get<ObjStates>()) {
		if (!E.second.Unfenced || (Only && E.first != Only))
			continue;
		if (!E.second.Opaque)
			reportBug(C, MissingFence,
				  "'" + sourceText(E.second.Unfenced, C).substr(0, 60) +
				      "' flushes here, and no barrier follows " + Where,
				  E.second.Unfenced, E.second.UnfencedLC);
		ObjState N = E.second;
		N.Unfenced = nullptr;
		N.UnfencedLC = nullptr;
		St = St->set<ObjStates>(E.first, N);
	}
	return St;
}

// Whether the object Reg is still named where its oid was read from or stored to: memory
// reached through a pointer (a field of an object that is not freed, say) holds one of its
// oids (the same symbol) now.
bool PmScanChecker::stillLinked(ProgramStateRef St, SymbolRef Reg, CheckerContext &C) const
{
	auto livesOn = [&](const MemRegion *R) {
		const auto *SR = dyn_cast<SymbolicRegion>(R->getBaseRegion());
		const ObjState *H = SR ? St->get<ObjStates>(SR->getSymbol()) : nullptr;
		return SR && !(H && (H->Freed || H->K == ObjState::Invalid));
	};
	if (const ObjState *O = St->get<ObjStates>(Reg))
		for (const MemRegion *R : O->LinkedAt)
			if (livesOn(R)) {
				Oid Now = oidOf(St->getSVal(R), St, C);
				const SymbolRef *Named = Now.Key ? St->get<OidToReg>(Now.Key) : nullptr;
				if (Named && *Named == Reg)
					return true;
			}
	for (const auto &E : St->get<OidToReg>()) {
		if (E.second != Reg)
			continue;
		const MemRegion *Place = nullptr;
		if (const auto *V = dyn_cast<SymbolRegionValue>(E.first))
			Place = V->getRegion();
		else if (const auto *D = dyn_cast<SymbolDerived>(E.first))
			Place = D->getRegion();
		SymbolRef From = loadedFrom(E.first); // memory reached through a pointer, not a variable
		const ObjState *Holder = From ? St->get<ObjStates>(From) : nullptr;
		if (!Place || !From || (Holder && (Holder->Freed || Holder->K == ObjState::Invalid)))
			continue;
		if (St->getSVal(Place).getAsSymbol() == E.first)
			return true;
	}
	return false;
}

// The outermost commit: rule 3, and the transaction's frees take effect. Null when the
// path commits a free that leaves the object named where the path found it (stillLinked): a
// dangling oid in persistent memory. A program whose transactions keep its structures whole
// never commits one; the analyzer does on paths the program's data rules out (a list's head
// taken to have a predecessor, unlinked through it and freed while the root still names
// it), and everything it would report further on such a path is about a structure no run
// builds. The caller ends the path.
ProgramStateRef PmScanChecker::commit(ProgramStateRef St, CheckerContext &C) const
{
	if (St->get<TxDepth>() != 1)
		return St; // a nested commit changes nothing until the outermost one
	for (const auto &E : St->get<ObjStates>())
		if (E.second.Freed && !E.second.Opaque && stillLinked(St, E.first, C))
			return nullptr;
	for (const auto &E : St->get<ObjStates>()) {
		const ObjState &O = E.second;
		if (O.K != ObjState::NewAlloc && !O.Freed && O.Logged.empty() && !O.AnyLogged)
			continue;
		ObjState N = O;
		if (O.K == ObjState::NewAlloc) {
			if (!O.Initialized && !O.Opaque && !O.Freed)
				reportBug(C, UninitAlloc,
				       "object allocated here by " + sourceText(O.Site, C).substr(0, 40) +
					   " is never written before the transaction commits",
				       O.Site, O.SiteLC);
			N.K = ObjState::Existing;
		}
		if (O.Freed) {
			if (O.Use) // held by useAfterFree: the object is unlinked by now
				reportBug(C, UseAfterFree, useDetail(O, O.Use, O.UseWrites, C), O.Use,
				       O.UseLC);
			N.K = ObjState::Invalid;
			N.Freed = false;
			N.Use = nullptr;
			N.UseLC = nullptr;
		}
		N.Logged.clear();
		N.AnyLogged = false;
		St = St->set<ObjStates>(E.first, N);
	}
	return St;
}

// --- calls ---------------------------------------------------------------------------------

void PmScanChecker::checkPreCall(const CallEvent &Call, CheckerContext &C) const
{
	// The calls after which no fence comes for anything flushed before them (rule 1c).
	if (const IdentifierInfo *II = Call.getCalleeIdentifier()) {
		StringRef Name = II->getName();
		if (Name == "pmemobj_close" || Name == "exit" || Name == "_exit" || Name == "_Exit") {
			ProgramStateRef St = C.getState();
			ProgramStateRef N = noFenceFollows(St, C, nullptr,
							   "before " + Name.str() +
							       lineOf(Call.getOriginExpr(), C));
			if (N != St)
				C.addTransition(N);
			return;
		}
	}
	const Model *M = modelOf(Call);
	if (!M || M->Kind != Fn::Write)
		return;
	if (M->Addr >= (int)Call.getNumArgs())
		return;
	Lin Len = M->Len >= 0 && M->Len < (int)Call.getNumArgs() ? linOf(Call.getArgSVal(M->Len))
								  : Lin::constant(1);
	ProgramStateRef St = C.getState();
	ProgramStateRef N = writeAt(St, C, Call.getArgSVal(M->Addr), Len, Call.getOriginExpr(),
				    Call.getCalleeIdentifier()->getName().str() + " to " +
					sourceText(Call.getArgExpr(M->Addr), C));
	if (N != St)
		C.addTransition(N);
}

void PmScanChecker::checkPostCall(const CallEvent &Call, CheckerContext &C) const
{
	ProgramStateRef St = C.getState();
	const Model *M = modelOf(Call);
	SVal Ret = Call.getReturnValue();
	if (M && M->Kind == Fn::Volatile) {
		if (SymbolRef S = Ret.getAsSymbol())
			C.addTransition(St->add<Volatile>(S));
		return;
	}
	if (M && M->Kind == Fn::ListRemove) {
		// POBJ_LIST_REMOVE_FREE: the element is freed before the call returns.
		SVal Free = M->Flags < (int)Call.getNumArgs() ? Call.getArgSVal(M->Flags) : UnknownVal();
		if (Free.isConstant() && !Free.isZeroConstant())
			St = freedAtomically(St, oidOf(Call.getArgSVal(M->Oid), St, C), Call.getOriginExpr(),
					     C.getLocationContext());
		C.addTransition(St);
		return;
	}
	if (M)
		return;
	// The error-path pruning needs to know which callees failed on the path.
	QualType RT = Call.getResultType();
	if (RT->isIntegerType() || RT->isPointerType()) {
		if (failed(Ret, St)) {
			if (!St->get<SawFailure>())
				C.addTransition(St->set<SawFailure>(true));
			return;
		}
		if (SymbolRef S = Ret.getAsSymbol())
			St = St->add<CallRets>(S);
	}
	// A TOID returned by code the analysis does not see: a fresh oid in it.
	if (!C.wasInlined && Ret.isUnknown() && isOidRecord(RT) && !isPmemOid(RT) &&
	    Call.getOriginExpr()) {
		const auto *UD = RT.getCanonicalType()->getAs<RecordType>()->getDecl();
		if (const FieldDecl *F = fieldNamed(UD, "oid")) {
			SymbolRef Fresh = conjure(C, Call.getOriginExpr(), F->getType(), &OidTag);
			SVal U = unionHolding(C, St, Call.getOriginExpr(), RT, nonloc::SymbolVal(Fresh));
			St = St->BindExpr(Call.getOriginExpr(), C.getLocationContext(), U);
			const Decl *D = Call.getDecl();
			if (inTx(St) && D && D->hasBody() && allocatesInTx(D, C.getASTContext()))
				St = maybeNew(St, C, Call.getOriginExpr(), Fresh);
		}
	}
	// An oid handed by value to code the analysis does not see.
	if (!C.wasInlined) {
		for (unsigned I = 0; I < Call.getNumArgs(); I++) {
			if (!isOidRecord(Call.getArgExpr(I) ? Call.getArgExpr(I)->getType() : QualType()))
				continue;
			Oid O = oidOf(Call.getArgSVal(I), St, C);
			if (!O.Key)
				continue;
			if (const SymbolRef *R = St->get<OidToReg>(O.Key))
				St = opaque(St, *R);
		}
	}
	C.addTransition(St);
}

bool PmScanChecker::failed(SVal V, ProgramStateRef St) const
{
	if (auto L = V.getAs<Loc>()) {
		if (L->isZeroConstant())
			return true;
		ConditionTruthVal Null = St->isNull(V);
		return Null.isConstrainedTrue();
	}
	auto NL = V.getAs<NonLoc>();
	if (!NL)
		return false;
	Lin L = linOf(V);
	if (L.isConst())
		return L.K < 0;
	SymbolRef S = V.getAsSymbol();
	if (!S || !S->getType()->isSignedIntegerType())
		return false;
	// provably below zero: "S >= 0" is impossible
	SValBuilder &SVB = St->getStateManager().getSValBuilder();
	SVal Cond = SVB.evalBinOpNN(St, BO_GE, *NL,
				    SVB.makeIntVal(0, S->getType()).castAs<NonLoc>(),
				    SVB.getConditionType());
	auto D = Cond.getAs<DefinedOrUnknownSVal>();
	return D && !D->isUnknown() && !St->assume(*D, true);
}

// What a library write to Dst of Len bytes (Len unknown: -1) may have changed: the field
// the destination lies in, when it lies in one and a known length does not run past it, or
// else the whole object. The analyzer's own evaluation of such a call forgets the whole
// object, and with it what the path knew of the other fields (a node's count just
// incremented), so that it then follows paths no run can take.
static ProgramStateRef forgetWritten(ProgramStateRef St, CheckerContext &C, SVal Dst, SVal Len)
{
	const MemRegion *R = Dst.getAsRegion();
	if (!R)
		return St;
	R = R->StripCasts();
	while (const auto *ER = dyn_cast<ElementRegion>(R))
		R = ER->getSuperRegion()->StripCasts();
	RegionAndSymbolInvalidationTraits Traits;
	if (const auto *FR = dyn_cast<FieldRegion>(R)) {
		const MemRegion *Raw = Dst.getAsRegion();
		RegionOffset At = Raw->getAsOffset(), Field = FR->getAsOffset();
		int64_t FieldSize = sizeOfType(C.getASTContext(), FR->getValueType());
		auto N = Len.getAs<nonloc::ConcreteInt>();
		bool Fits = !N;
		if (N && !At.hasSymbolicOffset() && !Field.hasSymbolicOffset() && FieldSize > 0)
			Fits = (At.getOffset() - Field.getOffset()) / 8 + (int64_t)N->getValue().getZExtValue() <=
			       FieldSize;
		if (Fits)
			Traits.setTrait(FR, RegionAndSymbolInvalidationTraits::TK_DoNotInvalidateSuperRegion);
		else
			R = FR->getBaseRegion();
	}
	return St->invalidateRegions({R}, nullptr, C.blockCount(), C.getLocationContext(), false,
				     nullptr, nullptr, &Traits);
}

bool PmScanChecker::evalCall(const CallEvent &Call, CheckerContext &C) const
{
	const Model *M = modelOf(Call);
	if (!M)
		return false;
	switch (M->Kind) {
	case Fn::Write: {
		// Into a persistent object: evaluated here, forgetting only what it wrote (the
		// store itself was noted before the call). Elsewhere: the analyzer's own way.
		const Expr *E = Call.getOriginExpr();
		SVal Dst = M->Addr < (int)Call.getNumArgs() ? Call.getArgSVal(M->Addr) : UnknownVal();
		const MemRegion *R = Dst.getAsRegion();
		ProgramStateRef St = C.getState();
		if (!E || !R || !St->get<ObjStates>(placeOf(R, C.getASTContext()).Base))
			return false;
		SVal Len = M->Len >= 0 && M->Len < (int)Call.getNumArgs() ? Call.getArgSVal(M->Len)
									: UnknownVal();
		St = forgetWritten(St, C, Dst, Len);
		QualType RT = Call.getResultType();
		if (RT->isPointerType())
			St = St->BindExpr(E, C.getLocationContext(), Dst);
		else if (!RT->isVoidType())
			St = St->BindExpr(E, C.getLocationContext(),
					  C.getSValBuilder().conjureSymbolVal(&RetTag, E, C.getLocationContext(),
									      RT, C.blockCount()));
		C.addTransition(St);
		return true;
	}
	case Fn::Volatile:
	case Fn::ListRemove:
		return false; // the analyzer's own evaluation; the checker watches around it
	default:
		break;
	}
	const auto *CE = dyn_cast_or_null<CallExpr>(Call.getOriginExpr());
	if (!CE)
		return false;
	return evalModel(*M, Call, C);
}

bool PmScanChecker::evalModel(const Model &M, const CallEvent &Call, CheckerContext &C) const
{
	ProgramStateRef St = C.getState();
	const auto *CE = cast<CallExpr>(Call.getOriginExpr());
	const LocationContext *LC = C.getLocationContext();
	SValBuilder &SVB = C.getSValBuilder();
	ASTContext &Ctx = C.getASTContext();
	QualType RT = CE->getType();
	auto arg = [&](int I) -> SVal {
		return I >= 0 && I < (int)Call.getNumArgs() ? Call.getArgSVal(I) : UnknownVal();
	};
	auto retConj = [&](ProgramStateRef S) {
		if (RT->isVoidType())
			return S;
		return S->BindExpr(CE, LC, SVB.conjureSymbolVal(&RetTag, CE, LC, RT, C.blockCount()));
	};
	auto retInt = [&](ProgramStateRef S, int64_t V) {
		if (RT->isVoidType())
			return S;
		return S->BindExpr(CE, LC, SVB.makeIntVal(V, RT));
	};
	auto regLoc = [&](SymbolRef R) { return loc::MemRegionVal(C.getStoreManager().getRegionManager().getSymbolicRegion(R)); };
	// A fresh oid (a PMEMoid-typed symbol, or a kr_oid integer) naming a fresh object.
	// A zeroed allocation (a zalloc, or flags that surely hold POBJ_XALLOC_ZERO) reads as
	// zero until written: a path on which a fresh node's counter is not 0 (so it is "full",
	// split and freed) is one no run takes, and what the checker would report on it (the
	// node used after that free) would be false.
	auto zeroed = [&]() {
		if (M.Zero)
			return true;
		if (M.Flags < 0)
			return false;
		auto F = arg(M.Flags).getAs<nonloc::ConcreteInt>();
		return F && (F->getValue().getZExtValue() & FlagZero);
	};
	// A fresh oid (a PMEMoid-typed symbol, or a kr_oid integer) naming a fresh object.
	auto newObject = [&](ProgramStateRef S, QualType OidT, ObjState O, SVal &OidV) {
		SymbolRef Key = conjure(C, CE, OidT, &OidTag);
		SymbolRef Reg = conjure(C, CE, Ctx.VoidPtrTy, &RegTag);
		OidV = nonloc::SymbolVal(Key);
		S = S->set<ObjStates>(Reg, O);
		if (zeroed())
			S = S->bindDefaultZero(regLoc(Reg), LC);
		return S->set<OidToReg>(Key, Reg);
	};
	// The action array a pointer into one belongs to (&act[i] and act meet in act's region),
	// and the element it points to: i when constant, 0 for a lone struct, else -1.
	auto actionArray = [&](SVal Act) -> const MemRegion * {
		const MemRegion *R = Act.getAsRegion();
		return R ? R->getBaseRegion() : nullptr;
	};
	auto actionIndex = [&](SVal Act) -> int64_t {
		const MemRegion *R = Act.getAsRegion();
		if (const auto *ER = dyn_cast_or_null<ElementRegion>(R)) {
			if (auto I = ER->getIndex().getAs<nonloc::ConcreteInt>())
				return ER->getSuperRegion() == ER->getBaseRegion() ? I->getValue().getExtValue() : -1;
			return -1;
		}
		return R && R == R->getBaseRegion() ? 0 : -1;
	};
	auto objectAt = [&](SVal Addr) -> SymbolRef {
		const MemRegion *R = Addr.getAsRegion();
		if (!R)
			return nullptr;
		Place P = placeOf(R, Ctx);
		return P.Base && St->get<ObjStates>(P.Base) ? P.Base : nullptr;
	};
	auto oidAt = [&](SVal OidP) -> Oid {
		const MemRegion *R = OidP.getAsRegion();
		if (!R)
			return Oid();
		return oidOf(St->getSVal(R), St, C);
	};
	auto setState = [&](ProgramStateRef S, SymbolRef Reg, auto Fn) {
		const ObjState *O = S->get<ObjStates>(Reg);
		if (!O)
			return S;
		ObjState N = *O;
		Fn(N);
		return S->set<ObjStates>(Reg, N);
	};

	switch (M.Kind) {
	case Fn::Direct:
	case Fn::KrGet: {
		Oid O = oidOf(arg(M.Oid), St, C);
		if (O.Null) {
			C.addTransition(St->BindExpr(CE, LC, SVB.makeNull()));
			return true;
		}
		const SymbolRef *Known = O.Key ? St->get<OidToReg>(O.Key) : nullptr;
		const ObjState *KnownObj = Known ? St->get<ObjStates>(*Known) : nullptr;
		if (auto Off = O.OffVal.getAs<DefinedOrUnknownSVal>()) {
			if (!Off->isUnknown() && !(KnownObj && KnownObj->NonNull)) {
				auto IsNull = SVB.evalEQ(St, *Off, SVB.makeZeroVal(Off->getType(Ctx)));
				ProgramStateRef Zero, NonZero;
				std::tie(Zero, NonZero) = St->assume(IsNull);
				if (Zero)
					C.addTransition(Zero->BindExpr(CE, LC, SVB.makeNull()));
				if (!NonZero)
					return true;
				St = NonZero;
			}
		}
		SymbolRef Reg;
		St = objectFor(St, C, CE, O, Reg);
		if (M.Kind == Fn::KrGet)
			St = setState(St, Reg, [](ObjState &N) { N.Keratin = true; });
		St = St->BindExpr(CE, LC, regLoc(Reg));
		St = St->assume(regLoc(Reg), true);
		if (St)
			C.addTransition(St);
		return true;
	}
	case Fn::OidOf: {
		SVal V;
		SymbolRef Reg = objectAt(arg(M.Addr));
		SymbolRef Key = conjure(C, CE, RT, &OidTag);
		if (Reg)
			St = St->set<OidToReg>(Key, Reg);
		C.addTransition(St->BindExpr(CE, LC, nonloc::SymbolVal(Key)));
		return true;
	}
	case Fn::Root:
	case Fn::Lookup:
	case Fn::Reserve: {
		ObjState O;
		O.Size = M.Len >= 0 ? linOf(arg(M.Len)) : Lin::unknown();
		O.NonNull = M.Kind == Fn::Root; // the root exists once the pool is open
		if (M.Kind == Fn::Reserve) {
			O.Actions = actionArray(arg(M.Addr));
			O.ActionIndex = actionIndex(arg(M.Addr));
		}
		SVal V;
		St = newObject(St, RT, O, V);
		C.addTransition(St->BindExpr(CE, LC, V));
		return true;
	}
	case Fn::Cancel:
	case Fn::Publish: {
		// The reservations made in actv[0..n): matched by element where both indices and n
		// are constants, else every one made in the array. A cancelled one is freed: its
		// stores need no flush, and a later use is a use after free.
		const MemRegion *A = actionArray(arg(M.Addr));
		int64_t First = actionIndex(arg(M.Addr)), N = -1;
		if (auto CN = arg(M.Len).getAs<nonloc::ConcreteInt>())
			N = CN->getValue().getExtValue();
		for (const auto &E : St->get<ObjStates>()) {
			if (!A || E.second.Actions != A)
				continue;
			int64_t I = E.second.ActionIndex;
			if (First >= 0 && N >= 0 && I >= 0 && (I < First || I >= First + N))
				continue;
			ObjState O = E.second;
			O.Actions = nullptr;
			O.ActionIndex = -1;
			if (M.Kind == Fn::Cancel) {
				O.K = ObjState::Invalid;
				O.Site = CE;
				O.SiteLC = LC;
				O.Modified.clear();
				O.Unfenced = nullptr;
				O.UnfencedLC = nullptr;
			}
			St = St->set<ObjStates>(E.first, O);
		}
		C.addTransition(retConj(St));
		return true;
	}
	case Fn::TxAlloc:
	case Fn::TxRealloc: {
		ObjState O;
		O.K = ObjState::NewAlloc;
		O.NonNull = true; // a failed allocation aborts the transaction
		O.Initialized = M.Zero || (M.Flags >= 0 && mayHaveBits(arg(M.Flags), FlagZero, Ctx));
		O.Site = CE;
		O.SiteLC = LC;
		O.Size = M.Len >= 0 ? linOf(arg(M.Len)) : Lin::unknown();
		if (M.Kind == Fn::TxRealloc) {
			Oid Old = oidOf(arg(M.Oid), St, C);
			if (Old.Key)
				if (const SymbolRef *R = St->get<OidToReg>(Old.Key))
					St = setState(St, *R, [&](ObjState &N) {
						N.Freed = true;
						N.Site = CE;
						N.SiteLC = LC;
					});
		}
		SVal V;
		St = newObject(St, RT, O, V);
		C.addTransition(St->BindExpr(CE, LC, V));
		return true;
	}
	case Fn::AtomicAlloc:
	case Fn::AtomicRealloc:
	case Fn::KrRoot:
	case Fn::KrTxAlloc: {
		// Success: a new object's oid in *oidp, 0 returned. Failure: -1 (or an error
		// code), *oidp untouched. Both paths are followed.
		const MemRegion *OidR = arg(M.Addr).getAsRegion();
		C.addTransition(retInt(St, -1));
		if (M.Kind == Fn::AtomicRealloc) {
			Oid Old = oidAt(arg(M.Addr));
			if (Old.Key)
				if (const SymbolRef *R = St->get<OidToReg>(Old.Key))
					St = setState(St, *R, [&](ObjState &N) {
						N.K = ObjState::Invalid;
						N.Site = CE;
						N.SiteLC = LC;
					});
		}
		ObjState O;
		O.Size = linOf(arg(M.Len));
		O.NonNull = true;
		if (M.Kind == Fn::KrTxAlloc) {
			O.K = ObjState::NewAlloc;
			O.Initialized = true;
			O.Site = CE;
			O.SiteLC = LC;
		}
		if (OidR) {
			QualType OidT = OidR->getAs<TypedValueRegion>()
					    ? OidR->getAs<TypedValueRegion>()->getValueType()
					    : QualType();
			if (OidT.isNull())
				if (const auto *PT = Call.getArgExpr(M.Addr)->getType()->getAs<PointerType>())
					OidT = PT->getPointeeType();
			SVal V;
			St = newObject(St, OidT, O, V);
			St = St->bindLoc(loc::MemRegionVal(OidR), V, LC);
		}
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::AtomicFree: {
		St = freedAtomically(St, oidAt(arg(M.Addr)), CE, LC);
		if (const MemRegion *OidR = arg(M.Addr).getAsRegion())
			if (const auto *TR = OidR->getAs<TypedValueRegion>())
				St = St->bindLoc(loc::MemRegionVal(OidR), SVB.makeZeroVal(TR->getValueType()),
						 LC);
		C.addTransition(retConj(St));
		return true;
	}
	case Fn::TxFree:
	case Fn::KrTxFree: {
		Oid O = oidOf(arg(M.Oid), St, C);
		if (!O.Null) {
			SymbolRef Reg;
			St = objectFor(St, C, CE, O, Reg);
			St = setState(St, Reg, [&](ObjState &N) {
				N.Freed = true;
				N.Site = CE;
				N.SiteLC = LC;
			});
		}
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::TxAdd: {
		Oid O = oidOf(arg(M.Oid), St, C);
		if (getenv("PMSCAN_DEBUG")) { llvm::errs() << "txadd@" << C.getSourceManager().getExpansionLineNumber(CE->getBeginLoc()) << " "; arg(M.Oid).dump(); llvm::errs() << " key "; if (O.Key) O.Key->dump(); llvm::errs() << "\n"; }
		if (!O.Null) {
			SymbolRef Reg;
			St = objectFor(St, C, CE, O, Reg);
			Rec L;
			L.Off = linOf(arg(M.Off));
			L.Len = linOf(arg(M.Len));
			L.S = CE;
			L.LC = LC;
			St = setState(St, Reg, [&](ObjState &N) {
				N.AnyLogged = true;
				N.Logged.push_back(L);
			});
		}
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::TxAddDirect: {
		if (const MemRegion *R = arg(M.Addr).getAsRegion()) {
			Place P = placeOf(R, Ctx);
			if (getenv("PMSCAN_DEBUG")) { llvm::errs() << "adddirect "; R->dump(); llvm::errs() << " base " << (P.Base ? "yes" : "no") << " tracked " << (P.Base && St->get<ObjStates>(P.Base)) << "\n"; }
			if (P.Base && St->get<ObjStates>(P.Base)) {
				Rec L;
				L.Off = P.Off;
				L.Len = linOf(arg(M.Len));
				L.S = CE;
				L.LC = LC;
				St = setState(St, P.Base, [&](ObjState &N) {
					N.AnyLogged = true;
					N.Logged.push_back(L);
				});
			}
		}
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::TxBegin:
	case Fn::KrTxBegin: {
		St = St->set<TxDepth>(St->get<TxDepth>() + 1)->set<TxStage>(StageWork);
		if (M.Kind == Fn::KrTxBegin)
			if (const MemRegion *TxP = arg(1).getAsRegion())
				if (const auto *TR = TxP->getAs<TypedValueRegion>())
					St = St->bindLoc(loc::MemRegionVal(TxP),
							 SVB.conjureSymbolVal(&RetTag, CE, LC,
									      TR->getValueType(),
									      C.blockCount()),
							 LC);
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::TxStage:
		C.addTransition(retInt(St, St->get<TxStage>()));
		return true;
	case Fn::TxProcess:
	case Fn::TxCommit: {
		unsigned Stage = St->get<TxStage>();
		if (Stage == StageWork) {
			ProgramStateRef Committed = commit(St, C);
			if (!Committed) {
				C.generateSink(St, C.getPredecessor());
				return true;
			}
			St = Committed;
			Stage = StageOnCommit;
		} else if (M.Kind == Fn::TxProcess) {
			Stage = Stage == StageOnCommit || Stage == StageOnAbort ? StageFinally
										: StageNone;
		}
		C.addTransition(retConj(St->set<TxStage>(Stage)));
		return true;
	}
	case Fn::TxEnd: {
		unsigned D = St->get<TxDepth>();
		if (D > 0)
			D--;
		St = St->set<TxDepth>(D)->set<TxStage>(D > 0 ? StageWork : StageNone);
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::KrTxCommit: {
		if (Call.getCalleeIdentifier()->getName() == "kr_tx_abort") {
			C.generateSink(St, C.getPredecessor());
			return true;
		}
		ProgramStateRef Committed = commit(St, C);
		if (!Committed) {
			C.generateSink(St, C.getPredecessor());
			return true;
		}
		St = Committed;
		unsigned D = St->get<TxDepth>();
		St = St->set<TxDepth>(D > 0 ? D - 1 : 0)->set<TxStage>(D > 1 ? StageWork : StageNone);
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::TxAbort:
		C.generateSink(St, C.getPredecessor());
		return true;
	case Fn::SetJmp:
		C.addTransition(retInt(St, 0));
		return true;
	case Fn::MapFile:
	case Fn::KrPoolBase: {
		SymbolRef Reg = conjure(C, CE, Ctx.VoidPtrTy, &RegTag);
		ObjState O;
		O.K = ObjState::Map;
		O.Size = M.Kind == Fn::MapFile ? linOf(arg(1)) : Lin::unknown();
		if (M.Kind == Fn::MapFile) {
			C.addTransition(St->BindExpr(CE, LC, SVB.makeNull()));
			for (int Out : {4, 5})
				if (const MemRegion *R = arg(Out).getAsRegion())
					if (const auto *TR = R->getAs<TypedValueRegion>())
						St = St->bindLoc(loc::MemRegionVal(R),
								 SVB.conjureSymbolVal(&RetTag, CE, LC,
										      TR->getValueType(),
										      C.blockCount() + Out),
								 LC);
		}
		St = St->set<ObjStates>(Reg, O)->BindExpr(CE, LC, regLoc(Reg));
		if ((St = St->assume(regLoc(Reg), true)))
			C.addTransition(St);
		return true;
	}
	case Fn::KrRegionOpen: {
		C.addTransition(retInt(St, -1));
		if (const MemRegion *R = arg(M.Out).getAsRegion()) {
			SymbolRef Reg = conjure(C, CE, Ctx.VoidPtrTy, &RegTag);
			ObjState O;
			O.K = ObjState::Map;
			St = St->set<ObjStates>(Reg, O)->bindLoc(loc::MemRegionVal(R), regLoc(Reg), LC);
		}
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::Unmap: {
		if (SymbolRef Reg = objectAt(arg(M.Addr)))
			St = setState(noFenceFollows(St, C, Reg, "before the unmap" + lineOf(CE, C)),
				      Reg, [&](ObjState &N) {
				N.K = ObjState::Invalid;
				N.Site = CE;
				N.SiteLC = LC;
			});
		C.addTransition(retInt(St, 0));
		return true;
	}
	case Fn::Flush:
	case Fn::Persist:
	case Fn::CacheLine: {
		Lin Len = M.Kind == Fn::CacheLine ? Lin::constant(CacheLineSize) : linOf(arg(M.Len));
		St = noteFlush(St, C, Call, arg(M.Addr), Len, M.Kind != Fn::CacheLine);
		if (M.Kind == Fn::Persist)
			St = barrier(St, C, "before the barrier in " +
					       Call.getCalleeIdentifier()->getName().str() + lineOf(CE, C));
		C.addTransition(retConj(St));
		return true;
	}
	case Fn::Barrier:
		St = barrier(St, C, "before the barrier in " +
				       Call.getCalleeIdentifier()->getName().str() + lineOf(CE, C));
		C.addTransition(retConj(St));
		return true;
	case Fn::CopyPersist: {
		uint64_t Flags = M.Flags >= 0 ? (uint64_t)concreteOr(arg(M.Flags), 0) : 0;
		SVal Dst = arg(M.Addr);
		Lin Len = linOf(arg(M.Len));
		std::string Name = Call.getCalleeIdentifier()->getName().str();
		St = writeAt(St, C, Dst, Len, CE, Name + " to " + sourceText(Call.getArgExpr(M.Addr), C));
		St = forgetWritten(St, C, Dst, arg(M.Len));
		if (!(Flags & MemNoFlush))
			St = noteFlush(St, C, Call, Dst, Len, false);
		if (M.Fence && !(Flags & (MemNoDrain | MemNoFlush)))
			St = barrier(St, C, "before the barrier in " + Name + lineOf(CE, C));
		if (RT->isPointerType())
			St = St->BindExpr(CE, LC, Dst);
		else
			St = retConj(St);
		C.addTransition(St);
		return true;
	}
	case Fn::NoEffect:
		C.addTransition(retConj(St));
		return true;
	case Fn::Write:
	case Fn::Volatile:
	case Fn::ListRemove:
		return false;
	}
	return false;
}

// --- memory accesses -----------------------------------------------------------------------

// `*p = oid` through a pointer the analyzer has no type for (a parameter, say): the store
// binds the whole value to the untyped region, and a later read of (*p).off does not see
// it (a read under a region with a whole-value binding is unknown). Bind the oid's two
// fields instead (readThrough finds them under the other spelling of *p too).
static ProgramStateRef bindOidFields(ProgramStateRef St, CheckerContext &C,
				     const SymbolicRegion *R, SVal Val, QualType T)
{
	MemRegionManager &MRM = C.getStoreManager().getRegionManager();
	const RecordDecl *RD = T.getCanonicalType()->getAs<RecordType>()->getDecl();
	const FieldDecl *OidF = RD->isUnion() ? fieldNamed(RD, "oid") : nullptr;
	const RecordDecl *OidRD =
	    OidF ? OidF->getType().getCanonicalType()->getAs<RecordType>()->getDecl() : RD;
	auto oidIn = [&](const SubRegion *Base) -> const SubRegion * {
		return OidF ? MRM.getFieldRegion(OidF, Base) : Base;
	};
	SymbolRef Whole = OidF ? nullptr : Val.getAsSymbol(); // a PMEMoid a call returned
	auto LCV = Val.getAs<nonloc::LazyCompoundVal>();
	if (!LCV && !Whole)
		return St;
	for (const FieldDecl *F : OidRD->fields()) {
		SVal V = Whole ? C.getSValBuilder().makeSymbolVal(C.getSymbolManager().getDerivedSymbol(
				     Whole, MRM.getFieldRegion(F, oidIn(R))))
			       : C.getStoreManager().getBinding(
				     LCV->getStore(),
				     loc::MemRegionVal(MRM.getFieldRegion(F, oidIn(LCV->getRegion()))));
		St = St->bindLoc(loc::MemRegionVal(MRM.getFieldRegion(F, oidIn(R))), V,
				 C.getLocationContext());
	}
	return St;
}

void PmScanChecker::checkPostStmt(const BinaryOperator *BO, CheckerContext &C) const
{
	if (BO->getOpcode() != BO_Assign || !isOidRecord(BO->getType()))
		return;
	ProgramStateRef St = C.getState();
	const auto *SR = dyn_cast_or_null<SymbolicRegion>(C.getSVal(BO->getLHS()).getAsRegion());
	if (!SR)
		return;
	ProgramStateRef N = bindOidFields(St, C, SR, C.getSVal(BO->getRHS()), BO->getType());
	if (N != St)
		C.addTransition(N);
}

void PmScanChecker::checkBind(SVal Loc, SVal Val, const Stmt *S, CheckerContext &C) const
{
	const MemRegion *R = Loc.getAsRegion();
	if (!R)
		return;
	ProgramStateRef St = C.getState();
	if (ProgramStateRef N = remember(St, R, Val); N != St) {
		C.addTransition(N);
		return; // a variable, not persistent memory
	}
	// An oid stored through a pointer: where the object is named (stillLinked).
	if (const auto *TR = dyn_cast<TypedValueRegion>(R))
		if (isOidRecord(TR->getValueType()) && isa<SymbolicRegion>(R->getBaseRegion())) {
			Oid O = oidOf(Val, St, C);
			const SymbolRef *Reg = O.Key ? St->get<OidToReg>(O.Key) : nullptr;
			const ObjState *OS = Reg ? St->get<ObjStates>(*Reg) : nullptr;
			if (OS && OS->LinkedAt.size() < 4 && !llvm::is_contained(OS->LinkedAt, R)) {
				ObjState N = *OS;
				N.LinkedAt.push_back(R);
				St = St->set<ObjStates>(*Reg, N);
			}
		}
	Place P = placeOf(R, C.getASTContext());
	if (isa<DeclStmt>(S) || !P.Base || !St->get<ObjStates>(P.Base)) {
		if (St != C.getState())
			C.addTransition(St);
		return;
	}
	int64_t Size = -1;
	if (const auto *TR = dyn_cast<TypedValueRegion>(R))
		Size = sizeOfType(C.getASTContext(), TR->getValueType());
	if (Size < 0)
		if (const auto *E = dyn_cast<Expr>(storedExpr(S)))
			Size = sizeOfType(C.getASTContext(), E->getType());
	ProgramStateRef N = noteStore(St, C, P.Base, P.Off, Size < 0 ? Lin::constant(1) : Lin::constant(Size),
				  S, sourceText(storedExpr(S), C));
	if (N != C.getState())
		C.addTransition(N);
}

void PmScanChecker::checkLocation(SVal Loc, bool IsLoad, const Stmt *S, CheckerContext &C) const
{
	if (!IsLoad)
		return;
	const MemRegion *R = Loc.getAsRegion();
	if (!R)
		return;
	ProgramStateRef St = C.getState();
	Place P = placeOf(R, C.getASTContext());
	if (!P.Base)
		return;
	const ObjState *O = St->get<ObjStates>(P.Base);
	if (!O || O->Opaque || !(O->K == ObjState::Invalid || O->Freed))
		return;
	ProgramStateRef N = useAfterFree(St, C, P.Base, S, C.getLocationContext(), false);
	if (N != St)
		C.addTransition(N);
}

// What a rule 4 report says of a use of object O at S.
std::string PmScanChecker::useDetail(const ObjState &O, const Stmt *S, bool Writes,
				     CheckerContext &C) const
{
	std::string What;
	if (!Writes)
		What = sourceText(S, C);
	else if (const auto *CE = dyn_cast<CallExpr>(S)) {
		// a library write (memcpy, pmemobj_memcpy_persist...): named by its destination,
		// the argument its model says it writes
		StringRef Name = CE->getDirectCallee() ? CE->getDirectCallee()->getName() : "call";
		const Model *M = findModel(Name);
		unsigned A = M && M->Addr >= 0 ? (unsigned)M->Addr : 0;
		What = Name.str() + " to " + (A < CE->getNumArgs() ? sourceText(CE->getArg(A), C) : "");
	}
	else
		What = sourceText(storedExpr(S), C);
	return "'" + What + "' " + (Writes ? "written" : "read") + " after its object was " +
	       (O.K == ObjState::Invalid && !O.Freed ? "freed or unmapped" : "freed") + " (line " +
	       std::to_string(C.getSourceManager().getExpansionLineNumber(
		       O.Site ? O.Site->getBeginLoc() : SourceLocation())) +
	       ")";
}

// Rule 4 for a use of the freed or invalid object Reg at S. A use of an object freed by the
// running transaction and still named where its oid was read from is held until the
// commit (commit()): a path that keeps it named to the end is one the program's data rule
// out, and ends there without a report.
ProgramStateRef PmScanChecker::useAfterFree(ProgramStateRef St, CheckerContext &C, SymbolRef Reg,
					    const Stmt *S, const LocationContext *LC,
					    bool Writes) const
{
	const ObjState *O = St->get<ObjStates>(Reg);
	if (O->Freed && stillLinked(St, Reg, C)) {
		if (O->Use)
			return St;
		ObjState N = *O;
		N.Use = S;
		N.UseLC = LC;
		N.UseWrites = Writes;
		return St->set<ObjStates>(Reg, N);
	}
	reportBug(C, UseAfterFree, useDetail(*O, S, Writes, C), S, LC);
	return St;
}

// TOID(T) casts: `(TOID(T))pmemobj_tx_alloc(...)`, a GNU cast of a PMEMoid to a union.
void PmScanChecker::checkPostStmt(const CastExpr *CE, CheckerContext &C) const
{
	if (CE->getCastKind() != CK_ToUnion || !isOidRecord(CE->getType()) ||
	    !isPmemOid(CE->getSubExpr()->getType()))
		return;
	ProgramStateRef St = C.getState();
	SVal U = unionHolding(C, St, CE, CE->getType(), C.getSVal(CE->getSubExpr()));
	C.addTransition(St->BindExpr(CE, C.getLocationContext(), U));
}

// --- ends of paths -------------------------------------------------------------------------

bool PmScanChecker::errorPath(const ReturnStmt *RS, CheckerContext &C) const
{
	ProgramStateRef St = C.getState();
	bool CalleeFailed = St->get<SawFailure>();
	for (SymbolRef S : St->get<CallRets>())
		if (!CalleeFailed && failed(C.getSValBuilder().makeSymbolVal(S), St))
			CalleeFailed = true;
	if (!CalleeFailed || !RS || !RS->getRetValue())
		return false;
	SVal V = C.getSVal(RS->getRetValue());
	QualType T = RS->getRetValue()->getType();
	if (T->isPointerType())
		return failed(V, St);
	if (!T->isIntegerType())
		return false;
	// an int that is provably not 0 (PMDK's examples return -1 or 1 on error)
	Lin L = linOf(V);
	if (L.isConst())
		return L.K != 0;
	auto D = V.getAs<DefinedOrUnknownSVal>();
	if (!D || D->isUnknown())
		return false;
	return !St->assume(C.getSValBuilder().evalEQ(St, *D, C.getSValBuilder().makeZeroVal(T)),
			   true);
}

void PmScanChecker::readCallGraph(ASTContext &Ctx) const
{
	if (CalleesOf == &Ctx)
		return;
	CallGraph CG;
	CG.addToCallGraph(Ctx.getTranslationUnitDecl());
	Callees.clear();
	Allocators.clear();
	for (const auto &N : CG) {
		if (!N.first)
			continue; // the graph's root, which "calls" every function
		for (const CallGraphNode *Callee : N.second->callees()) {
			const Decl *D = Callee->getDecl()->getCanonicalDecl();
			if (D != N.first->getCanonicalDecl())
				Callees.insert(D);
			const auto *FD = dyn_cast<FunctionDecl>(D);
			const Model *M = FD && FD->getIdentifier() ? findModel(FD->getName()) : nullptr;
			if (M && (M->Kind == Fn::TxAlloc || M->Kind == Fn::TxRealloc))
				Allocators.insert(N.first->getCanonicalDecl());
		}
	}
	// Callers of allocators allocate too, up to a fixed point.
	for (bool Grew = true; Grew;) {
		Grew = false;
		for (const auto &N : CG) {
			if (!N.first || Allocators.count(N.first->getCanonicalDecl()))
				continue;
			for (const CallGraphNode *Callee : N.second->callees())
				if (Allocators.count(Callee->getDecl()->getCanonicalDecl())) {
					Allocators.insert(N.first->getCanonicalDecl());
					Grew = true;
					break;
				}
		}
	}
	CalleesOf = &Ctx;
}

bool PmScanChecker::calledInUnit(const Decl *D, ASTContext &Ctx) const
{
	readCallGraph(Ctx);
	return Callees.count(D->getCanonicalDecl());
}

bool PmScanChecker::allocatesInTx(const Decl *D, ASTContext &Ctx) const
{
	readCallGraph(Ctx);
	return Allocators.count(D->getCanonicalDecl());
}

// The object whose memory an oid was read from: the region symbol at the base of the
// region its `off` field (or the whole oid) was loaded from, or null.
SymbolRef PmScanChecker::loadedFrom(SymbolRef Key) const
{
	const MemRegion *R = nullptr;
	if (const auto *V = dyn_cast_or_null<SymbolRegionValue>(Key))
		R = V->getRegion();
	else if (const auto *D = dyn_cast_or_null<SymbolDerived>(Key))
		R = D->getRegion();
	const auto *SR = R ? dyn_cast<SymbolicRegion>(R->getBaseRegion()) : nullptr;
	return SR ? SR->getSymbol() : nullptr;
}

// An object the running transaction may have allocated in code the analyzer did not
// follow: returned by a call of this file it did not inline (its budget ran out), or named
// by an oid read out of such an object or of one the transaction allocated (the store of
// that oid was not seen either). It is taken as new and written: no rule 2 or 3 for it.
// Taking it for an object that existed before made every store into it a rule 2 report.
ProgramStateRef PmScanChecker::maybeNew(ProgramStateRef St, CheckerContext &C, const Expr *E,
				       SymbolRef Key) const
{
	SymbolRef Reg = conjure(C, E, C.getASTContext().VoidPtrTy, &RegTag);
	ObjState O;
	O.K = ObjState::NewAlloc;
	O.Initialized = true;
	return St->set<ObjStates>(Reg, O)->set<OidToReg>(Key, Reg);
}

// Rule 1 at the return of a top-level function. The analyzer also starts from functions it
// could not inline into their callers; those are not top-level (their caller flushes, or
// runs them in a transaction), so their returns check nothing.
void PmScanChecker::checkEndFunction(const ReturnStmt *RS, CheckerContext &C) const
{
	if (!C.inTopFrame())
		return;
	if (calledInUnit(C.getLocationContext()->getDecl(), C.getASTContext()))
		return;
	if (errorPath(RS, C))
		return;
	ProgramStateRef St = C.getState();
	const auto *ND = dyn_cast_or_null<NamedDecl>(C.getLocationContext()->getDecl());
	std::string Returns =
	    "before " + (ND ? ND->getNameAsString() : std::string("the function")) + " returns";
	// Only main's return ends the program; another top-level function may leave the
	// fence to its caller (the flush-now, fence-later idiom).
	ProgramStateRef N = ND && ND->getNameAsString() == "main" ? noFenceFollows(St, C, nullptr, Returns)
								  : St;
	N = barrier(N, C, Returns);
	if (N != St)
		C.addTransition(N);
}

ProgramStateRef PmScanChecker::checkPointerEscape(ProgramStateRef St,
						  const InvalidatedSymbols &Escaped,
						  const CallEvent *Call, PointerEscapeKind Kind) const
{
	if (Kind != PSK_DirectEscapeOnCall && Kind != PSK_IndirectEscapeOnCall)
		return St;
	// The calls the checker models but leaves to the analyzer's evaluation: what they do to
	// objects is known, so the objects they are handed stay visible. A list removal would
	// otherwise make the element opaque (its oid stored in the head's object escapes with
	// the head) just as checkPostCall marks it freed, and hide every later use.
	if (Call)
		if (const Model *M = modelOf(*Call))
			if (M->Kind == Fn::Write || M->Kind == Fn::Volatile ||
			    M->Kind == Fn::ListRemove)
				return St;
	if (Call && onlyReads(*Call))
		return St;
	for (SymbolRef S : Escaped) {
		St = opaque(St, S);
		if (const SymbolRef *R = St->get<OidToReg>(canonical(S, St)))
			St = opaque(St, *R);
	}
	return St;
}

// A call that only reads what its pointers reach and cannot flush, fence or free persistent
// memory: a C library function (declared in a system header, not a persistent-memory
// library's) whose pointer parameters all point to const, with variadic arguments only
// when it takes a printf format. A pointer into an object handed to it (a printf of a
// field) leaves the object as it was: its unflushed stores are still unflushed.
bool PmScanChecker::onlyReads(const CallEvent &Call)
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(Call.getDecl());
	if (!FD || !FD->getIdentifier() || !Call.isInSystemHeader())
		return false;
	StringRef Name = FD->getName();
	if (Name.startswith("pmem") || Name.startswith("kr_"))
		return false;
	for (const ParmVarDecl *P : FD->parameters()) {
		QualType T = P->getType();
		if (T->isPointerType() && !T->getPointeeType().isConstQualified())
			return false;
	}
	if (FD->isVariadic()) {
		const auto *F = FD->getAttr<FormatAttr>();
		if (!F || F->getType()->getName() != "printf")
			return false;
	}
	return true;
}

// The checker's maps keep their symbols alive: an object's region symbol and its oid stay
// meaningful (and the path's constraints on them stay) while no variable holds them, since
// pmemobj_direct of the same oid brings the same object back.
void PmScanChecker::checkLiveSymbols(ProgramStateRef St, SymbolReaper &SR) const
{
	for (const auto &E : St->get<ObjStates>())
		SR.markLive(E.first);
	for (const auto &E : St->get<OidToReg>()) {
		SR.markLive(E.first);
		SR.markLive(E.second);
	}
}

void PmScanChecker::checkDeadSymbols(SymbolReaper &SR, CheckerContext &C) const
{
	ProgramStateRef St = C.getState();
	bool Failed = St->get<SawFailure>();
	for (SymbolRef S : St->get<CallRets>()) {
		if (SR.isLive(S))
			continue;
		if (!Failed && failed(C.getSValBuilder().makeSymbolVal(S), St))
			Failed = true;
		St = St->remove<CallRets>(S);
	}
	for (SymbolRef S : St->get<Volatile>())
		if (!SR.isLive(S))
			St = St->remove<Volatile>(S);
	// Variables of frames that have returned.
	const StackFrameContext *Now = C.getLocationContext()->getStackFrame();
	for (const auto &E : St->get<LastVal>()) {
		const StackFrameContext *Of = cast<VarRegion>(E.first)->getStackFrame();
		if (Of != Now && !Of->isParentOf(Now))
			St = St->remove<LastVal>(E.first);
	}
	St = St->set<SawFailure>(Failed);
	C.addTransition(St);
}

// --- loop widening -------------------------------------------------------------------------

const LoopVars &PmScanChecker::loopVars(const Decl *D) const
{
	auto It = LoopVarsOf.find(D);
	if (It == LoopVarsOf.end())
		It = LoopVarsOf.insert({D, loopVarsOf(D)}).first;
	return It->second;
}

// Keeps V as variable R's last value if R is a local or a parameter that the loops of its
// function leave alone.
ProgramStateRef PmScanChecker::remember(ProgramStateRef St, const MemRegion *R, SVal V) const
{
	const auto *VR = dyn_cast<VarRegion>(R);
	if (!VR || !VR->getStackFrame())
		return St;
	if (!loopVars(VR->getStackFrame()->getDecl()).unchanged(VR->getDecl()))
		return St;
	return St->set<LastVal>(R, V);
}

// Whether L is read from what a widening or an unfollowed call forgot: a term conjured by
// such an invalidation of the path (at its statement and step), or derived from one.
bool PmScanChecker::forgotten(const Lin &L, ProgramStateRef St)
{
	if (St->get<Widened>().isEmpty())
		return false;
	for (const auto &T : L.Terms) {
		SymbolRef S = T.first;
		while (const auto *D = dyn_cast<SymbolDerived>(S))
			S = D->getParentSymbol();
		const auto *C = dyn_cast<SymbolConjured>(S);
		if (!C)
			continue;
		for (SymbolRef W : St->get<Widened>()) {
			const auto *WC = cast<SymbolConjured>(W);
			if (WC->getStmt() == C->getStmt() && WC->getCount() == C->getCount())
				return true;
		}
	}
	return false;
}

// A parameter's value is bound when its frame is entered, without a bind the checker sees.
void PmScanChecker::checkBeginFunction(CheckerContext &C) const
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(C.getLocationContext()->getDecl());
	if (!FD)
		return;
	ProgramStateRef St = C.getState();
	MemRegionManager &MRM = C.getStoreManager().getRegionManager();
	for (const ParmVarDecl *P : FD->parameters()) {
		const MemRegion *R = MRM.getVarRegion(P, C.getLocationContext());
		St = remember(St, R, St->getSVal(R));
	}
	C.addTransition(St);
}

// The analyzer widens a loop by forgetting the whole frame's locals, parameters and
// globals (an invalidation with no call, of the stack's memory spaces). Put back what the
// function's loops cannot have changed.
ProgramStateRef PmScanChecker::checkRegionChanges(ProgramStateRef St,
						  const InvalidatedSymbols *Invalidated,
						  ArrayRef<const MemRegion *> Explicit,
						  ArrayRef<const MemRegion *> Regions,
						  const LocationContext *LC, const CallEvent *Call) const
{
	StoreManager &SM = St->getStateManager().getStoreManager();
	auto mark = [&](SVal V) {
		SymbolRef S = V.getAsSymbol();
		while (const auto *D = dyn_cast_or_null<SymbolDerived>(S))
			S = D->getParentSymbol();
		if (isa_and_nonnull<SymbolConjured>(S))
			St = St->add<Widened>(S);
	};
	// The objects whose contents were forgotten: what the path stored in them is still in
	// ObjStates, but ranges read from their new contents can no longer be compared with it,
	// nor an oid read from them matched with the objects the path knows. One symbol of the
	// invalidation marks them all (forgotten()).
	auto markObjects = [&]() {
		for (const MemRegion *R : Regions)
			if (R == R->getBaseRegion() && isa<SymbolicRegion>(R))
				if (Optional<SVal> D = SM.getDefaultBinding(St->getStore(), R))
					mark(*D);
	};
	if (Call) {
		// A function of this file that the analyzer evaluated without following it (its
		// budget ran out; pminvaders2's remove_aliens): what it may have written is as
		// forgotten as after a widening. A function without a body here is another
		// matter: what it does is unseen, and its objects become opaque where they are
		// handed to it (checkPointerEscape), not where they are reached again.
		const Decl *D = Call->getDecl();
		if (D && D->hasBody() && !modelOf(*Call))
			markObjects();
		return St;
	}
	if (!LC || llvm::none_of(Explicit, [](const MemRegion *R) {
		    return isa<StackLocalsSpaceRegion>(R);
	    }))
		return St;
	const StackFrameContext *SF = LC->getStackFrame();
	const LoopVars &L = loopVars(SF->getDecl());
	markObjects();
	if (L.Scalar)
		mark(St->getSVal(SM.getRegionManager().getVarRegion(L.Scalar, SF)));
	for (const auto &E : St->get<LastVal>()) {
		const auto *VR = cast<VarRegion>(E.first);
		if (VR->getStackFrame() != SF || !L.unchanged(VR->getDecl()))
			continue;
		mark(St->getSVal(VR));
		St = St->bindLoc(loc::MemRegionVal(VR), E.second, LC, false);
	}
	return St;
}

// --- registration --------------------------------------------------------------------------

namespace pmscan {

void registerPmScan(CheckerManager &Mgr)
{
	PmScanChecker *Chk = Mgr.registerChecker<PmScanChecker>();
	Chk->Strict = Mgr.getAnalyzerOptions().getCheckerBooleanOption(Chk, "Strict");
}

bool shouldRegisterPmScan(const CheckerManager &) { return true; }

} // namespace pmscan
