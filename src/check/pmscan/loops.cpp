// loops.cpp - which local variables a function's loops may change: what the checker needs
// to undo the worst of the analyzer's loop widening.
//
// The analyzer follows a loop a few times and then, with widen-loops, forgets every local
// variable, parameter and global of the frame, and goes once more through the body and on
// past the loop. Forgotten with them are the values no step of the loop changes: the
// pointer to the object the loop fills, the bound it runs to. A widened path that has lost
// the object's pointer checks nothing after the loop. So the checker asks here, once per
// function, which variables a loop of the function may change (assigned, incremented or
// declared inside a loop, or with their address taken anywhere: a pointer could change
// them anywhere); after a widening it puts the others back.
#include "pmscan.h"

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/AST/Stmt.h"

namespace pmscan {

using namespace clang;

namespace {

// The variable an lvalue names, looking through members and array elements of it
// (`v.oid.off = 0` and `v[i] = 0` change v), or null.
const VarDecl *varOf(const Expr *E)
{
	while (E) {
		E = E->IgnoreParenImpCasts();
		if (const auto *D = dyn_cast<DeclRefExpr>(E))
			return dyn_cast<VarDecl>(D->getDecl());
		if (const auto *M = dyn_cast<MemberExpr>(E)) {
			if (M->isArrow())
				return nullptr; // changes what the variable points to, not the variable
			E = M->getBase();
		} else if (const auto *A = dyn_cast<ArraySubscriptExpr>(E)) {
			if (!A->getBase()->IgnoreParenImpCasts()->getType()->isArrayType())
				return nullptr; // p[i] through a pointer
			E = A->getBase();
		} else {
			return nullptr;
		}
	}
	return nullptr;
}

// One function's variables that a loop changes (Changed) or whose address is taken
// (Escaped), and a local of scalar type (Scalar).
class Scan : public RecursiveASTVisitor<Scan> {
public:
	llvm::DenseSet<const VarDecl *> Changed;
	llvm::DenseSet<const VarDecl *> Escaped;
	const VarDecl *Scalar = nullptr;
	unsigned Depth = 0; // loops around the statement being visited

	void changed(const VarDecl *V)
	{
		if (V && Depth)
			Changed.insert(V);
	}

	bool TraverseForStmt(ForStmt *S)
	{
		// The init runs once, before the loop; the rest runs in it.
		if (!TraverseStmt(S->getInit()))
			return false;
		Depth++;
		bool Ok = TraverseStmt(S->getCond()) && TraverseStmt(S->getInc()) &&
			  TraverseStmt(S->getBody());
		Depth--;
		return Ok;
	}
	bool TraverseWhileStmt(WhileStmt *S)
	{
		Depth++;
		bool Ok = RecursiveASTVisitor::TraverseWhileStmt(S);
		Depth--;
		return Ok;
	}
	bool TraverseDoStmt(DoStmt *S)
	{
		Depth++;
		bool Ok = RecursiveASTVisitor::TraverseDoStmt(S);
		Depth--;
		return Ok;
	}

	bool VisitDeclStmt(DeclStmt *S)
	{
		for (const Decl *D : S->decls()) {
			const auto *V = dyn_cast<VarDecl>(D);
			changed(V); // a new value each time round
			if (V && !Scalar && V->hasLocalStorage() && V->getType()->isScalarType())
				Scalar = V;
		}
		return true;
	}
	bool VisitUnaryOperator(UnaryOperator *U)
	{
		const VarDecl *V = varOf(U->getSubExpr());
		if (U->getOpcode() == UO_AddrOf && V)
			Escaped.insert(V);
		else if (U->isIncrementDecrementOp())
			changed(V);
		return true;
	}
	bool VisitBinaryOperator(BinaryOperator *B)
	{
		if (B->isAssignmentOp())
			changed(varOf(B->getLHS()));
		return true;
	}
	// An array decays to a pointer to its first element: the array's address is taken.
	bool VisitImplicitCastExpr(ImplicitCastExpr *C)
	{
		if (C->getCastKind() == CK_ArrayToPointerDecay)
			if (const VarDecl *V = varOf(C->getSubExpr()))
				Escaped.insert(V);
		return true;
	}
};

} // namespace

LoopVars loopVarsOf(const Decl *D)
{
	LoopVars L;
	const Stmt *Body = D ? D->getBody() : nullptr;
	if (!Body)
		return L;
	Scan S;
	S.TraverseStmt(const_cast<Stmt *>(Body));
	L.Changed = std::move(S.Changed);
	L.Changed.insert(S.Escaped.begin(), S.Escaped.end());
	L.Scalar = S.Scalar;
	if (const auto *F = dyn_cast<FunctionDecl>(D))
		for (const ParmVarDecl *P : F->parameters())
			if (!L.Scalar && P->getType()->isScalarType())
				L.Scalar = P;
	return L;
}

} // namespace pmscan
