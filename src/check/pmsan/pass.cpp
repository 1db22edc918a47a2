/*
 * pass.cpp - the pmsan LLVM pass (new pass manager plugin, LLVM 14): instruments a C
 * program so that the pmsan runtime (rt_*.c) sees every operation that can touch
 * persistent memory, and checks the persistence rules while the program runs.
 *
 * What it inserts, before each instruction concerned:
 *   - plain, atomic and non-temporal stores, atomic read-modify-writes and compare-and-
 *     swaps, memset/memcpy/memmove (intrinsics or calls): __pmsan_store(addr, size, value,
 *     loc, flags), behind an inline range check against __pmsan_lo/__pmsan_hi, the bounds
 *     of every persistent mapping, so that a store to DRAM costs two compares;
 *   - loads, and the source of memcpy/memmove: __pmsan_load(addr, size, loc), behind the
 *     same check and the runtime's flag __pmsan_watch_loads (they matter for use after
 *     free only, so not before anything was freed);
 *   - clflush, clflushopt, clwb (intrinsics or inline assembly): __pmsan_flush_line;
 *     sfence, mfence, and sequentially consistent fences: __pmsan_fence;
 *   - calls into libpmem, libpmemobj, keratin and a few libc writers (hooks.def): the
 *     __pmsan_pre_/__pmsan_post_ hooks, with the call's arguments and result.
 *
 * Stores and loads whose address is plainly a local variable or a global are left alone:
 * those cannot be persistent memory. Every hook gets a pointer to a constant pmsan_loc
 * (file, function, line, column) built from the debug location, so reports name the
 * source line.
 *
 * Statement pieces: optimisation splits one statement's store (a struct copy, a memcpy
 * from a local) into several stores. A store that repeats the debug location of the
 * previous instrumented store in the same basic block, with no call between, carries
 * PMSAN_F_CONT, and the runtime treats the pieces as one modified range (rule 1b needs
 * that to tell a short flush of one statement's range from a loop's unflushed iterations).
 */
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

#include <map>
#include <tuple>

using namespace llvm;

namespace {

/* Flags of __pmsan_store; the runtime's pmsan.h has the same values. */
enum : unsigned {
	PMSAN_F_CONT = 1,      /* another piece of the previous store's statement */
	PMSAN_F_NT = 2,        /* non-temporal: bypasses the cache, needs no flush */
	PMSAN_F_ATOMIC = 4,    /* atomic read-modify-write or compare-and-swap */
	PMSAN_F_HASVAL = 8,    /* value is the 8 bytes stored (volatile-pointer check) */
};

struct CallHook {
	bool pre, post;
};

const StringMap<CallHook> &callHooks()
{
	static const StringMap<CallHook> hooks = [] {
		StringMap<CallHook> m;
#define PMSAN_CALL(name, pre, post) m[#name] = CallHook{pre != 0, post != 0};
#include "hooks.def"
#undef PMSAN_CALL
		return m;
	}();
	return hooks;
}

class Instrumenter {
	Module &M;
	LLVMContext &C;
	const DataLayout &DL;
	Type *VoidTy, *I8PtrTy, *I32Ty, *I64Ty, *IntPtrTy;
	StructType *LocTy;
	GlobalVariable *Lo, *Hi, *Watch;
	FunctionCallee StoreFn, LoadFn, FlushLineFn, FenceFn;
	std::map<std::tuple<std::string, std::string, unsigned, unsigned>, Constant *> Locs;
	StringMap<Constant *> Strings;

public:
	explicit Instrumenter(Module &Mod)
	    : M(Mod), C(Mod.getContext()), DL(Mod.getDataLayout())
	{
		VoidTy = Type::getVoidTy(C);
		I8PtrTy = Type::getInt8PtrTy(C);
		I32Ty = Type::getInt32Ty(C);
		I64Ty = Type::getInt64Ty(C);
		IntPtrTy = DL.getIntPtrType(C);
		LocTy = StructType::get(C, {I8PtrTy, I8PtrTy, I32Ty, I32Ty});
		Lo = bound("__pmsan_lo", IntPtrTy);
		Hi = bound("__pmsan_hi", IntPtrTy);
		Watch = bound("__pmsan_watch_loads", I32Ty);
		Type *LocPtr = LocTy->getPointerTo();
		StoreFn = M.getOrInsertFunction("__pmsan_store", VoidTy, I8PtrTy, I64Ty, I64Ty, LocPtr,
						I32Ty);
		LoadFn = M.getOrInsertFunction("__pmsan_load", VoidTy, I8PtrTy, I64Ty, LocPtr);
		FlushLineFn = M.getOrInsertFunction("__pmsan_flush_line", VoidTy, I8PtrTy, LocPtr);
		FenceFn = M.getOrInsertFunction("__pmsan_fence", VoidTy, LocPtr);
	}

	bool run()
	{
		bool changed = false;
		for (Function &F : M) {
			if (F.isDeclaration() || F.getName().startswith("__pmsan"))
				continue;
			changed |= runOn(F);
		}
		return changed;
	}

private:
	GlobalVariable *bound(StringRef name, Type *T)
	{
		return cast<GlobalVariable>(M.getOrInsertGlobal(name, T));
	}

	Constant *str(StringRef s)
	{
		auto it = Strings.find(s);
		if (it != Strings.end())
			return it->second;
		Constant *init = ConstantDataArray::getString(C, s);
		auto *G = new GlobalVariable(M, init->getType(), true, GlobalValue::PrivateLinkage,
					     init, "__pmsan_str");
		G->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
		G->setAlignment(Align(1));
		Constant *p = ConstantExpr::getPointerCast(G, I8PtrTy);
		Strings[s] = p;
		return p;
	}

	/* The constant pmsan_loc of an instruction: its innermost source position. */
	Constant *loc(Instruction *I)
	{
		std::string file, func = I->getFunction()->getName().str();
		unsigned line = 0, col = 0;
		if (const DILocation *D = I->getDebugLoc().get()) {
			file = D->getFilename().str();
			line = D->getLine();
			col = D->getColumn();
			if (const DISubprogram *SP = D->getScope()->getSubprogram())
				func = SP->getName().str();
		}
		auto key = std::make_tuple(file, func, line, col);
		auto it = Locs.find(key);
		if (it != Locs.end())
			return it->second;
		Constant *init = ConstantStruct::get(
		    LocTy, {str(file), str(func), ConstantInt::get(I32Ty, line),
			    ConstantInt::get(I32Ty, col)});
		auto *G = new GlobalVariable(M, LocTy, true, GlobalValue::PrivateLinkage, init,
					     "__pmsan_loc");
		Locs[key] = G;
		return G;
	}

	/* Whether ptr plainly points into a local variable or a global (never persistent). */
	static bool plainlyVolatile(Value *Ptr)
	{
		const Value *U = getUnderlyingObject(Ptr);
		return isa<AllocaInst>(U) || isa<GlobalVariable>(U);
	}

	/* Splits before I on the range check `addr < hi && addr + size > lo` (and, for
	 * loads, the runtime's flag that anything was freed) and returns a builder positioned
	 * in the taken branch, which is marked unlikely. */
	IRBuilder<> guarded(Instruction *I, Value *Ptr, Value *Size, GlobalVariable *Flag = nullptr)
	{
		IRBuilder<> B(I);
		Value *A = B.CreatePtrToInt(Ptr, IntPtrTy);
		Value *End = B.CreateAdd(A, B.CreateZExtOrTrunc(Size, IntPtrTy));
		Value *HiV = B.CreateLoad(IntPtrTy, Hi);
		Value *LoV = B.CreateLoad(IntPtrTy, Lo);
		Value *In = B.CreateAnd(B.CreateICmpULT(A, HiV), B.CreateICmpUGT(End, LoV));
		if (Flag)
			In = B.CreateAnd(In, B.CreateICmpNE(B.CreateLoad(I32Ty, Flag),
							    ConstantInt::get(I32Ty, 0)));
		MDNode *Unlikely = MDBuilder(C).createBranchWeights(1, 1000);
		Instruction *Then = SplitBlockAndInsertIfThen(In, I, false, Unlikely);
		return IRBuilder<>(Then);
	}

	void storeHook(Instruction *I, Value *Ptr, Value *Size, Value *Val, unsigned flags)
	{
		Constant *L = loc(I);
		IRBuilder<> B = guarded(I, Ptr, Size);
		Value *V = ConstantInt::get(I64Ty, 0);
		if (Val) {
			V = Val->getType()->isPointerTy() ? B.CreatePtrToInt(Val, I64Ty)
							  : B.CreateZExtOrBitCast(Val, I64Ty);
			flags |= PMSAN_F_HASVAL;
		}
		B.CreateCall(StoreFn, {B.CreatePointerCast(Ptr, I8PtrTy),
				       B.CreateZExtOrTrunc(Size, I64Ty), V, L,
				       ConstantInt::get(I32Ty, flags)});
	}

	void loadHook(Instruction *I, Value *Ptr, Value *Size)
	{
		Constant *L = loc(I);
		IRBuilder<> B = guarded(I, Ptr, Size, Watch);
		B.CreateCall(LoadFn, {B.CreatePointerCast(Ptr, I8PtrTy),
				      B.CreateZExtOrTrunc(Size, I64Ty), L});
	}

	Value *sizeOf(Type *T) { return ConstantInt::get(I64Ty, DL.getTypeStoreSize(T)); }

	/* The value of an 8-byte pointer or integer store, for the volatile-pointer check. */
	Value *checkedValue(Value *V)
	{
		Type *T = V->getType();
		if (T->isPointerTy() || T->isIntegerTy(64))
			return V;
		return nullptr;
	}

	void callHook(CallBase *CI, StringRef name, const CallHook &h)
	{
		Constant *L = loc(CI);
		FunctionType *FT = CI->getFunctionType();
		unsigned nfixed = FT->getNumParams();
		SmallVector<Value *, 8> args;
		SmallVector<Type *, 8> types;
		for (unsigned i = 0; i < nfixed && i < CI->arg_size(); i++) {
			args.push_back(CI->getArgOperand(i));
			types.push_back(FT->getParamType(i));
		}
		if (h.pre) {
			SmallVector<Value *, 8> a(args);
			SmallVector<Type *, 8> t(types);
			a.push_back(L);
			t.push_back(L->getType());
			FunctionCallee F = M.getOrInsertFunction(("__pmsan_pre_" + name).str(),
								 FunctionType::get(VoidTy, t, false));
			IRBuilder<>(CI).CreateCall(F, a);
		}
		if (h.post) {
			/* After an invoke means on its normal edge, in a block of its own so that
			 * no other path into the destination runs the hook. */
			Instruction *after = CI->getNextNode();
			if (auto *II = dyn_cast<InvokeInst>(CI))
				after = &*SplitEdge(II->getParent(), II->getNormalDest())->getFirstInsertionPt();
			IRBuilder<> B(after);
			SmallVector<Value *, 8> a;
			SmallVector<Type *, 8> t;
			Type *RT = CI->getType();
			if (auto *ST = dyn_cast<StructType>(RT)) {
				for (unsigned i = 0; i < ST->getNumElements(); i++) {
					a.push_back(B.CreateExtractValue(CI, i));
					t.push_back(ST->getElementType(i));
				}
			} else if (!RT->isVoidTy()) {
				a.push_back(CI);
				t.push_back(RT);
			}
			a.append(args.begin(), args.end());
			t.append(types.begin(), types.end());
			a.push_back(L);
			t.push_back(L->getType());
			FunctionCallee F = M.getOrInsertFunction(("__pmsan_post_" + name).str(),
								 FunctionType::get(VoidTy, t, false));
			B.CreateCall(F, a);
		}
	}

	/* Inline assembly that flushes or fences (keratin's own pmem.c style, or hand-written).
	 * clwb may come as its bytes: 0x66 before xsaveopt, which libpmem and others emitted
	 * for assemblers that did not know clwb (clflushopt's 0x66 + clflush needs no case). */
	bool asmHook(CallInst *CI, const InlineAsm *IA)
	{
		StringRef s = IA->getAsmString();
		bool clwbBytes = s.contains("xsaveopt") && s.contains("0x66");
		if (s.contains("clflush") || s.contains("clwb") || clwbBytes) {
			for (Value *A : CI->args()) {
				if (A->getType()->isPointerTy()) {
					IRBuilder<> B(CI);
					B.CreateCall(FlushLineFn,
						     {B.CreatePointerCast(A, I8PtrTy), loc(CI)});
					return true;
				}
			}
		}
		if (s.contains("sfence") || s.contains("mfence")) {
			IRBuilder<>(CI).CreateCall(FenceFn, {loc(CI)});
			return true;
		}
		return false;
	}

	enum Kind { NONE, STORE, LOAD, MEMSET, MEMXFER, RMW, FLUSH, FENCE, CALL, ASM };

	static Kind classify(Instruction &I)
	{
		if (isa<StoreInst>(I))
			return STORE;
		if (isa<LoadInst>(I))
			return LOAD;
		if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I))
			return RMW;
		if (auto *FI = dyn_cast<FenceInst>(&I))
			return FI->getOrdering() == AtomicOrdering::SequentiallyConsistent &&
					   FI->getSyncScopeID() != SyncScope::SingleThread
				   ? FENCE
				   : NONE;
		if (isa<MemSetInst>(I))
			return MEMSET;
		if (isa<MemTransferInst>(I))
			return MEMXFER;
		if (auto *II = dyn_cast<IntrinsicInst>(&I)) {
			switch (II->getIntrinsicID()) {
			case Intrinsic::x86_sse2_clflush:
			case Intrinsic::x86_clflushopt:
			case Intrinsic::x86_clwb:
				return FLUSH;
			case Intrinsic::x86_sse_sfence:
			case Intrinsic::x86_sse2_mfence:
				return FENCE;
			default:
				return NONE;
			}
		}
		/* An invoke too: C++ calls a C function that way inside a scope with cleanups. */
		if (auto *CB = dyn_cast<CallBase>(&I)) {
			if (CB->isInlineAsm())
				return isa<CallInst>(CB) ? ASM : NONE;
			return CALL;
		}
		return NONE;
	}

	bool runOn(Function &F)
	{
		/* Collect first: instrumenting splits blocks. cont[i] marks statement pieces. */
		SmallVector<std::pair<Instruction *, Kind>, 64> work;
		SmallVector<bool, 64> cont;
		for (BasicBlock &BB : F) {
			const DILocation *prev = nullptr;
			for (Instruction &I : BB) {
				Kind k = classify(I);
				if (k == NONE)
					continue;
				if (k == CALL || k == ASM || k == FLUSH || k == FENCE) {
					if (!isa<DbgInfoIntrinsic>(I))
						prev = nullptr;
				}
				if (k == CALL) {
					auto *CB = cast<CallBase>(&I);
					Function *callee = CB->getCalledFunction();
					if (!callee)
						continue;
					StringRef n = callee->getName();
					if (n == "memcpy" || n == "memmove" || n == "memset") {
						work.push_back({&I, n == "memset" ? MEMSET : MEMXFER});
						cont.push_back(false);
						continue;
					}
					if (!callHooks().count(n))
						continue;
				}
				bool piece = false;
				if (k == STORE || k == MEMSET || k == MEMXFER || k == RMW) {
					const DILocation *d = I.getDebugLoc().get();
					piece = d && d == prev;
					prev = d;
				}
				work.push_back({&I, k});
				cont.push_back(piece);
			}
		}
		for (size_t i = 0; i < work.size(); i++)
			instrument(work[i].first, work[i].second, cont[i]);
		return !work.empty();
	}

	void instrument(Instruction *I, Kind k, bool piece)
	{
		unsigned flags = piece ? unsigned(PMSAN_F_CONT) : 0u;
		switch (k) {
		case STORE: {
			auto *SI = cast<StoreInst>(I);
			Value *P = SI->getPointerOperand();
			if (plainlyVolatile(P))
				return;
			if (SI->getMetadata(LLVMContext::MD_nontemporal))
				flags |= PMSAN_F_NT;
			Value *V = SI->getValueOperand();
			storeHook(I, P, sizeOf(V->getType()), checkedValue(V), flags);
			return;
		}
		case LOAD: {
			auto *LI = cast<LoadInst>(I);
			if (plainlyVolatile(LI->getPointerOperand()))
				return;
			loadHook(I, LI->getPointerOperand(), sizeOf(LI->getType()));
			return;
		}
		case RMW: {
			Value *P, *V;
			if (auto *RI = dyn_cast<AtomicRMWInst>(I)) {
				P = RI->getPointerOperand();
				V = RI->getValOperand();
			} else {
				auto *XI = cast<AtomicCmpXchgInst>(I);
				P = XI->getPointerOperand();
				V = XI->getNewValOperand();
			}
			if (plainlyVolatile(P))
				return;
			storeHook(I, P, sizeOf(V->getType()), nullptr, flags | PMSAN_F_ATOMIC);
			return;
		}
		case MEMSET:
		case MEMXFER: {
			auto *CB = cast<CallBase>(I);
			Value *Dst = CB->getArgOperand(0), *Len = CB->getArgOperand(2);
			if (k == MEMXFER && !plainlyVolatile(CB->getArgOperand(1)))
				loadHook(I, CB->getArgOperand(1), Len);
			if (!plainlyVolatile(Dst))
				storeHook(I, Dst, Len, nullptr, flags);
			return;
		}
		case FLUSH: {
			auto *CI = cast<CallInst>(I);
			IRBuilder<> B(CI);
			B.CreateCall(FlushLineFn,
				     {B.CreatePointerCast(CI->getArgOperand(0), I8PtrTy), loc(CI)});
			return;
		}
		case FENCE:
			IRBuilder<>(I).CreateCall(FenceFn, {loc(I)});
			return;
		case ASM: {
			auto *CI = cast<CallInst>(I);
			asmHook(CI, cast<InlineAsm>(CI->getCalledOperand()));
			return;
		}
		case CALL: {
			auto *CB = cast<CallBase>(I);
			StringRef n = CB->getCalledFunction()->getName();
			callHook(CB, n, callHooks().find(n)->second);
			return;
		}
		case NONE:
			return;
		}
	}
};

struct PmsanPass : PassInfoMixin<PmsanPass> {
	PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
	{
		return Instrumenter(M).run() ? PreservedAnalyses::none()
					     : PreservedAnalyses::all();
	}
	static bool isRequired() { return true; }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
	return {LLVM_PLUGIN_API_VERSION, "pmsan", "0.1", [](PassBuilder &PB) {
			PB.registerOptimizerLastEPCallback(
			    [](ModulePassManager &MPM, OptimizationLevel) {
				    MPM.addPass(PmsanPass());
			    });
			PB.registerPipelineParsingCallback(
			    [](StringRef name, ModulePassManager &MPM,
			       ArrayRef<PassBuilder::PipelineElement>) {
				    if (name != "pmsan")
					    return false;
				    MPM.addPass(PmsanPass());
				    return true;
			    });
		}};
}
