// linear.cpp - offsets and sizes as linear forms over the analyzer's symbols, and the few
// proofs the checker needs about them.
//
// The analyzer's own constraint manager keeps ranges for single symbols and remembers
// comparisons between two expressions, but it does not simplify `4*i + 4 <= 4*n`. The
// checker asks questions of exactly that shape (is this store inside that flush?), so it
// brings both sides to K + sum(c*s), divides by the common factor of the coefficients, and
// only then asks the constraint manager, which can answer for one symbol against a
// constant (`i <= 2`) or one symbol against another (`i + 1 <= n`, as a loop's condition
// left it). Everything else is "not proven", which the callers treat as the cautious answer.
#include "pmscan.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/RecordLayout.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/MemRegion.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/SymbolManager.h"

#include <algorithm>
#include <functional>
#include <numeric>

using namespace clang;
using namespace clang::ento;

namespace pmscan {

Lin Lin::constant(int64_t V)
{
	Lin L;
	L.Known = true;
	L.K = V;
	return L;
}

Lin Lin::symbol(SymbolRef S)
{
	Lin L;
	L.Known = true;
	L.Terms.push_back({S, 1});
	return L;
}

static bool symLess(const std::pair<SymbolRef, int64_t> &A, const std::pair<SymbolRef, int64_t> &B)
{
	return std::less<const void *>()(A.first, B.first); // any fixed order makes == exact
}

Lin Lin::plus(const Lin &O) const
{
	if (!Known || !O.Known)
		return unknown();
	Lin R;
	R.Known = true;
	if (__builtin_add_overflow(K, O.K, &R.K))
		return unknown();
	R.Terms = Terms;
	for (const auto &T : O.Terms) {
		auto It = std::find_if(R.Terms.begin(), R.Terms.end(),
				       [&](const auto &X) { return X.first == T.first; });
		if (It == R.Terms.end()) {
			R.Terms.push_back(T);
			continue;
		}
		if (__builtin_add_overflow(It->second, T.second, &It->second))
			return unknown();
		if (It->second == 0)
			R.Terms.erase(It);
	}
	std::sort(R.Terms.begin(), R.Terms.end(), symLess);
	return R;
}

Lin Lin::times(int64_t F) const
{
	if (!Known)
		return unknown();
	Lin R;
	R.Known = true;
	if (F == 0)
		return R;
	if (__builtin_mul_overflow(K, F, &R.K))
		return unknown();
	for (const auto &T : Terms) {
		int64_t C;
		if (__builtin_mul_overflow(T.second, F, &C))
			return unknown();
		R.Terms.push_back({T.first, C});
	}
	return R;
}

Lin Lin::minus(const Lin &O) const { return plus(O.times(-1)); }

void Lin::Profile(llvm::FoldingSetNodeID &ID) const
{
	ID.AddBoolean(Known);
	ID.AddInteger(K);
	for (const auto &T : Terms) {
		ID.AddPointer(T.first);
		ID.AddInteger(T.second);
	}
}

bool Lin::operator==(const Lin &O) const
{
	return Known == O.Known && K == O.K && Terms == O.Terms;
}

// Values wider than 64 bits are not offsets; a 64-bit unsigned value with its top bit set
// is read modulo 2^64 (the analyzer writes `i - 1` on size_t either way).
static bool toInt64(const llvm::APSInt &V, int64_t &Out)
{
	if (V.isSigned()) {
		if (V.getMinSignedBits() > 64)
			return false;
		Out = V.getExtValue();
		return true;
	}
	if (V.getActiveBits() > 64)
		return false;
	Out = (int64_t)V.getZExtValue();
	return true;
}

static Lin linOfSym(SymbolRef S, unsigned Depth);

static Lin linOfSymOrAtom(SymbolRef S, unsigned Depth)
{
	Lin L = linOfSym(S, Depth);
	return L.Known ? L : Lin::symbol(S);
}

// Expressions the analyzer builds from + - * and integer casts become linear forms;
// anything else is one opaque symbol (an "atom").
static Lin linOfSym(SymbolRef S, unsigned Depth)
{
	if (Depth > 8)
		return Lin::symbol(S);
	if (const auto *SI = dyn_cast<SymIntExpr>(S)) {
		int64_t C;
		if (!toInt64(SI->getRHS(), C))
			return Lin::unknown();
		Lin L = linOfSymOrAtom(SI->getLHS(), Depth + 1);
		switch (SI->getOpcode()) {
		case BO_Add:
			return L.plus(Lin::constant(C));
		case BO_Sub:
			return L.minus(Lin::constant(C));
		case BO_Mul:
			return L.times(C);
		case BO_Shl:
			return C >= 0 && C < 32 ? L.times((int64_t)1 << C) : Lin::unknown();
		default:
			return Lin::symbol(S);
		}
	}
	if (const auto *IS = dyn_cast<IntSymExpr>(S)) {
		int64_t C;
		if (!toInt64(IS->getLHS(), C))
			return Lin::unknown();
		Lin R = linOfSymOrAtom(IS->getRHS(), Depth + 1);
		switch (IS->getOpcode()) {
		case BO_Add:
			return Lin::constant(C).plus(R);
		case BO_Sub:
			return Lin::constant(C).minus(R);
		case BO_Mul:
			return R.times(C);
		default:
			return Lin::symbol(S);
		}
	}
	if (const auto *SS = dyn_cast<SymSymExpr>(S)) {
		Lin A = linOfSymOrAtom(SS->getLHS(), Depth + 1);
		Lin B = linOfSymOrAtom(SS->getRHS(), Depth + 1);
		switch (SS->getOpcode()) {
		case BO_Add:
			return A.plus(B);
		case BO_Sub:
			return A.minus(B);
		default:
			return Lin::symbol(S);
		}
	}
	if (const auto *SC = dyn_cast<SymbolCast>(S)) {
		QualType From = SC->getOperand()->getType(), To = SC->getType();
		if (From->isIntegralOrEnumerationType() && To->isIntegralOrEnumerationType())
			return linOfSymOrAtom(SC->getOperand(), Depth + 1);
		return Lin::symbol(S);
	}
	return Lin::symbol(S);
}

Lin linOf(SVal V)
{
	if (auto CI = V.getAs<nonloc::ConcreteInt>()) {
		int64_t C;
		return toInt64(CI->getValue(), C) ? Lin::constant(C) : Lin::unknown();
	}
	if (auto LC = V.getAs<loc::ConcreteInt>()) {
		int64_t C;
		return toInt64(LC->getValue(), C) ? Lin::constant(C) : Lin::unknown();
	}
	if (SymbolRef S = V.getAsSymbol())
		return linOfSymOrAtom(S, 0);
	return Lin::unknown();
}

static int64_t sizeOf(ASTContext &Ctx, QualType T)
{
	if (T.isNull() || T->isVoidType())
		return 1; // arithmetic on void * counts bytes
	if (T->isIncompleteType() || T->isDependentType() || !T->isConstantSizeType())
		return -1;
	return Ctx.getTypeSizeInChars(T).getQuantity();
}

Place placeOf(const MemRegion *R, ASTContext &Ctx)
{
	Place P;
	Lin Off = Lin::constant(0);
	while (R) {
		if (const auto *SR = dyn_cast<SymbolicRegion>(R)) {
			P.Base = SR->getSymbol();
			P.Off = Off;
			return P;
		}
		if (const auto *ER = dyn_cast<ElementRegion>(R)) {
			int64_t Size = sizeOf(Ctx, ER->getElementType());
			if (Size < 0)
				return Place();
			Off = Off.plus(linOf(ER->getIndex()).times(Size));
			R = ER->getSuperRegion();
			continue;
		}
		if (const auto *FR = dyn_cast<FieldRegion>(R)) {
			const FieldDecl *FD = FR->getDecl();
			const RecordDecl *RD = FD->getParent();
			if (!RD->isCompleteDefinition())
				return Place();
			const ASTRecordLayout &L = Ctx.getASTRecordLayout(RD);
			uint64_t Bits = L.getFieldOffset(FD->getFieldIndex());
			Off = Off.plus(Lin::constant((int64_t)(Bits / Ctx.getCharWidth())));
			R = FR->getSuperRegion();
			continue;
		}
		return Place();
	}
	return Place();
}

// Is S <op> Bound impossible on this path? (S's own type gives the comparison's type.)
static bool impossible(ProgramStateRef St, SValBuilder &SVB, SymbolRef S, BinaryOperatorKind Op,
		       int64_t Bound)
{
	QualType T = S->getType();
	if (!T->isIntegralOrEnumerationType())
		return false;
	bool Unsigned = T->isUnsignedIntegerOrEnumerationType();
	// An unsigned symbol is never below 0 (and `< negative` is never true).
	if (Unsigned && Op == BO_LT && Bound <= 0)
		return true;
	if (Unsigned && Op == BO_GT && Bound < 0)
		return false;
	llvm::APSInt B = SVB.getBasicValueFactory().getValue(Bound, T);
	SVal Cond = SVB.evalBinOpNN(St, Op, nonloc::SymbolVal(S), nonloc::ConcreteInt(B),
				    SVB.getConditionType());
	auto D = Cond.getAs<DefinedOrUnknownSVal>();
	if (!D || D->isUnknown())
		return false;
	return !St->assume(*D, true);
}

bool provablyNonNegative(const Lin &D0, ProgramStateRef St, SValBuilder &SVB)
{
	if (!D0.Known)
		return false;
	if (D0.Terms.empty())
		return D0.K >= 0;
	// Divide by the coefficients' common factor: 4*s - 8 >= 0 iff s - 2 >= 0, and a
	// constant that does not divide rounds down (4*s - 7 >= 0 iff s - 2 >= 0 too).
	int64_t G = 0;
	for (const auto &T : D0.Terms)
		G = std::gcd(G, T.second < 0 ? -T.second : T.second);
	Lin D = D0;
	if (G > 1) {
		for (auto &T : D.Terms)
			T.second /= G;
		int64_t Q = D.K / G;
		if (D.K % G != 0 && D.K < 0)
			Q -= 1;
		D.K = Q;
	}
	if (D.Terms.size() == 1) {
		SymbolRef S = D.Terms[0].first;
		int64_t C = D.Terms[0].second;
		if (C == 1) // s + K >= 0 iff s >= -K
			return impossible(St, SVB, S, BO_LT, -D.K);
		if (C == -1) // K - s >= 0 iff s <= K
			return impossible(St, SVB, S, BO_GT, D.K);
		return false;
	}
	if (D.Terms.size() == 2 && D.Terms[0].second == -D.Terms[1].second &&
	    (D.Terms[0].second == 1 || D.Terms[0].second == -1)) {
		// P - Q + K >= 0 iff Q - K <= P: ask whether Q - K > P is possible, built the way
		// a loop condition `q + 1 < p` leaves it, so that the constraint manager can use
		// what it remembers about that comparison.
		SymbolRef P = D.Terms[0].second == 1 ? D.Terms[0].first : D.Terms[1].first;
		SymbolRef Q = D.Terms[0].second == 1 ? D.Terms[1].first : D.Terms[0].first;
		QualType QT = Q->getType();
		if (!QT->isIntegralOrEnumerationType() || !P->getType()->isIntegralOrEnumerationType())
			return false;
		SVal Left = nonloc::SymbolVal(Q);
		if (D.K != 0) {
			llvm::APSInt K = SVB.getBasicValueFactory().getValue(D.K < 0 ? -D.K : D.K, QT);
			Left = SVB.evalBinOpNN(St, D.K < 0 ? BO_Add : BO_Sub, Left.castAs<NonLoc>(),
					       nonloc::ConcreteInt(K), QT);
		}
		auto LeftNL = Left.getAs<NonLoc>();
		if (!LeftNL)
			return false;
		SVal Cond = SVB.evalBinOpNN(St, BO_GT, *LeftNL, nonloc::SymbolVal(P),
					    SVB.getConditionType());
		auto DC = Cond.getAs<DefinedOrUnknownSVal>();
		if (!DC || DC->isUnknown())
			return false;
		return !St->assume(*DC, true);
	}
	return false;
}

bool provablyInside(const Lin &AOff, const Lin &ALen, const Lin &BOff, const Lin &BLen,
		    ProgramStateRef St, SValBuilder &SVB)
{
	if (!AOff.Known || !ALen.Known || !BOff.Known || !BLen.Known)
		return false;
	return provablyNonNegative(BOff.minus(AOff), St, SVB) &&
	       provablyNonNegative(AOff.plus(ALen).minus(BOff.plus(BLen)), St, SVB);
}

void Rec::Profile(llvm::FoldingSetNodeID &ID) const
{
	Off.Profile(ID);
	Len.Profile(ID);
	ID.AddPointer(S);
	ID.AddPointer(LC);
}

void ObjState::Profile(llvm::FoldingSetNodeID &ID) const
{
	ID.AddInteger((unsigned)K);
	ID.AddBoolean(Freed);
	ID.AddBoolean(Initialized);
	ID.AddBoolean(Opaque);
	ID.AddBoolean(AnyLogged);
	ID.AddBoolean(NonNull);
	ID.AddBoolean(Keratin);
	ID.AddPointer(Site);
	ID.AddPointer(SiteLC);
	ID.AddPointer(Unfenced);
	ID.AddPointer(UnfencedLC);
	ID.AddPointer(Actions);
	ID.AddInteger(ActionIndex);
	ID.AddPointer(Use);
	ID.AddPointer(UseLC);
	ID.AddBoolean(UseWrites);
	ID.AddInteger(LinkedAt.size());
	for (const MemRegion *R : LinkedAt)
		ID.AddPointer(R);
	Size.Profile(ID);
	ID.AddInteger(Modified.size());
	for (const Rec &R : Modified)
		R.Profile(ID);
	ID.AddInteger(Logged.size());
	for (const Rec &R : Logged)
		R.Profile(ID);
}

} // namespace pmscan
