// model.cpp - the library functions keratin-pmscan knows, and which arguments matter.
//
// One table for libpmem, libpmemobj, keratin's API, the C library's memory functions and
// the cache-line builtins. A function that is not here is either inlined by the analyzer
// (its body is in the translation unit) or evaluated conservatively, and then every
// persistent object it can reach is treated as handled by code the analysis cannot see.
#include "pmscan.h"

#include "llvm/ADT/StringMap.h"

namespace pmscan {

namespace {

Model m(Fn K) { return Model{K}; }

Model addrLen(Fn K, int Addr, int Len)
{
	Model M{K};
	M.Addr = (signed char)Addr;
	M.Len = (signed char)Len;
	return M;
}

Model oidArg(Fn K, int Oid)
{
	Model M{K};
	M.Oid = (signed char)Oid;
	return M;
}

Model alloc(Fn K, int Len, bool Zero, int Flags = -1)
{
	Model M{K};
	M.Len = (signed char)Len;
	M.Zero = Zero;
	M.Flags = (signed char)Flags;
	return M;
}

Model atomicAlloc(int OidP, int Len)
{
	Model M{Fn::AtomicAlloc};
	M.Addr = (signed char)OidP;
	M.Len = (signed char)Len;
	return M;
}

// A copy or fill that is flushed (and, unless Fence is false or the flags say NODRAIN,
// followed by a barrier). Len -1: the length is strlen of the source, not modeled.
Model copyPersist(int Addr, int Len, bool Fence, int Flags = -1)
{
	Model M = addrLen(Fn::CopyPersist, Addr, Len);
	M.Fence = Fence;
	M.Flags = (signed char)Flags;
	return M;
}

llvm::StringMap<Model> buildTable()
{
	llvm::StringMap<Model> T;
	// Pointers to objects.
	T["pmemobj_direct"] = oidArg(Fn::Direct, 0);
	T["pmemobj_direct_inline"] = oidArg(Fn::Direct, 0);
	T["pmemobj_oid"] = addrLen(Fn::OidOf, 0, -1);
	T["kr_get"] = oidArg(Fn::KrGet, 1);
	T["kr_tx_get"] = oidArg(Fn::KrGet, 1);

	// Objects that already exist.
	T["pmemobj_root"] = alloc(Fn::Root, 1, false);
	T["pmemobj_root_construct"] = alloc(Fn::Root, 1, false);
	T["pmemobj_first"] = m(Fn::Lookup);
	T["pmemobj_next"] = m(Fn::Lookup);
	// Reservations: an object from the call on, whose fate its action array decides.
	T["pmemobj_reserve"] = addrLen(Fn::Reserve, 1, 2);
	T["pmemobj_xreserve"] = addrLen(Fn::Reserve, 1, 2);
	T["pmemobj_cancel"] = addrLen(Fn::Cancel, 1, 2);
	T["pmemobj_publish"] = addrLen(Fn::Publish, 1, 2);
	T["pmemobj_tx_publish"] = addrLen(Fn::Publish, 0, 1);

	// Allocation and free inside a transaction.
	T["pmemobj_tx_alloc"] = alloc(Fn::TxAlloc, 0, false);
	T["pmemobj_tx_zalloc"] = alloc(Fn::TxAlloc, 0, true);
	T["pmemobj_tx_xalloc"] = alloc(Fn::TxAlloc, 0, false, 2);
	T["pmemobj_tx_strdup"] = alloc(Fn::TxAlloc, -1, true);
	T["pmemobj_tx_xstrdup"] = alloc(Fn::TxAlloc, -1, true);
	T["pmemobj_tx_wcsdup"] = alloc(Fn::TxAlloc, -1, true);
	T["pmemobj_tx_xwcsdup"] = alloc(Fn::TxAlloc, -1, true);
	{
		Model R = alloc(Fn::TxRealloc, 1, true); // the old bytes are copied
		R.Oid = 0;
		T["pmemobj_tx_realloc"] = R;
		T["pmemobj_tx_zrealloc"] = R;
	}
	T["pmemobj_tx_free"] = oidArg(Fn::TxFree, 0);
	T["pmemobj_tx_xfree"] = oidArg(Fn::TxFree, 0);

	// Atomic (non-transactional) allocation: the library persists object and oid.
	T["pmemobj_alloc"] = atomicAlloc(1, 2);
	{
		Model Z = atomicAlloc(1, 2);
		Z.Zero = true;
		T["pmemobj_zalloc"] = Z;
	}
	{
		Model X = atomicAlloc(1, 2);
		X.Flags = 4; // pmemobj_xalloc(pop, oidp, size, type_num, flags, ...)
		T["pmemobj_xalloc"] = X;
	}
	T["pmemobj_strdup"] = atomicAlloc(1, -1);
	T["pmemobj_wcsdup"] = atomicAlloc(1, -1);
	T["pmemobj_realloc"] = addrLen(Fn::AtomicRealloc, 1, 2);
	T["pmemobj_zrealloc"] = addrLen(Fn::AtomicRealloc, 1, 2);
	T["pmemobj_free"] = addrLen(Fn::AtomicFree, 0, -1);
	{
		// The atomic lists write and persist the neighbours' links themselves; the
		// analyzer's own evaluation of the call forgets what they held.
		Model L = oidArg(Fn::ListRemove, 3);
		L.Flags = 4;
		T["pmemobj_list_remove"] = L;
	}

	// The undo log.
	{
		Model A = oidArg(Fn::TxAdd, 0);
		A.Off = 1;
		A.Len = 2;
		T["pmemobj_tx_add_range"] = A;
		T["pmemobj_tx_xadd_range"] = A;
	}
	T["pmemobj_tx_add_range_direct"] = addrLen(Fn::TxAddDirect, 0, 1);
	T["pmemobj_tx_xadd_range_direct"] = addrLen(Fn::TxAddDirect, 0, 1);

	// The transaction's life (the calls TX_BEGIN ... TX_END expand to).
	T["pmemobj_tx_begin"] = m(Fn::TxBegin);
	T["pmemobj_tx_stage"] = m(Fn::TxStage);
	T["pmemobj_tx_process"] = m(Fn::TxProcess);
	T["pmemobj_tx_commit"] = m(Fn::TxCommit);
	T["pmemobj_tx_end"] = m(Fn::TxEnd);
	T["pmemobj_tx_abort"] = m(Fn::TxAbort);
	T["setjmp"] = m(Fn::SetJmp);
	T["_setjmp"] = m(Fn::SetJmp);
	T["__sigsetjmp"] = m(Fn::SetJmp);

	// Mappings.
	T["pmem_map_file"] = m(Fn::MapFile);
	T["pmem_unmap"] = addrLen(Fn::Unmap, 0, 1);

	// Flushes and barriers.
	T["pmem_flush"] = addrLen(Fn::Flush, 0, 1);
	T["pmem_deep_flush"] = addrLen(Fn::Flush, 0, 1);
	T["pmemobj_flush"] = addrLen(Fn::Flush, 1, 2);
	T["pmemobj_xflush"] = addrLen(Fn::Flush, 1, 2);
	T["pmem_persist"] = addrLen(Fn::Persist, 0, 1);
	T["pmem_deep_persist"] = addrLen(Fn::Persist, 0, 1);
	T["pmem_msync"] = addrLen(Fn::Persist, 0, 1);
	T["pmemobj_persist"] = addrLen(Fn::Persist, 1, 2);
	T["pmemobj_xpersist"] = addrLen(Fn::Persist, 1, 2);
	T["pmem_drain"] = m(Fn::Barrier);
	T["pmem_deep_drain"] = m(Fn::Barrier);
	T["pmemobj_drain"] = m(Fn::Barrier);
	T["__builtin_ia32_sfence"] = m(Fn::Barrier);
	T["__builtin_ia32_mfence"] = m(Fn::Barrier);
	T["_mm_sfence"] = m(Fn::Barrier);
	T["_mm_mfence"] = m(Fn::Barrier);
	T["__builtin_ia32_clflush"] = addrLen(Fn::CacheLine, 0, -1);
	T["__builtin_ia32_clflushopt"] = addrLen(Fn::CacheLine, 0, -1);
	T["__builtin_ia32_clwb"] = addrLen(Fn::CacheLine, 0, -1);
	T["_mm_clflush"] = addrLen(Fn::CacheLine, 0, -1);
	T["_mm_clflushopt"] = addrLen(Fn::CacheLine, 0, -1);
	T["_mm_clwb"] = addrLen(Fn::CacheLine, 0, -1);

	// Copies that flush.
	T["pmem_memcpy_persist"] = copyPersist(0, 2, true);
	T["pmem_memmove_persist"] = copyPersist(0, 2, true);
	T["pmem_memset_persist"] = copyPersist(0, 2, true);
	T["pmem_memcpy_nodrain"] = copyPersist(0, 2, false);
	T["pmem_memmove_nodrain"] = copyPersist(0, 2, false);
	T["pmem_memset_nodrain"] = copyPersist(0, 2, false);
	T["pmem_memcpy"] = copyPersist(0, 2, true, 3);
	T["pmem_memmove"] = copyPersist(0, 2, true, 3);
	T["pmem_memset"] = copyPersist(0, 2, true, 3);
	T["pmemobj_memcpy_persist"] = copyPersist(1, 3, true);
	T["pmemobj_memset_persist"] = copyPersist(1, 3, true);
	T["pmemobj_memcpy"] = copyPersist(1, 3, true, 4);
	T["pmemobj_memmove"] = copyPersist(1, 3, true, 4);
	T["pmemobj_memset"] = copyPersist(1, 3, true, 4);

	// Plain stores done by the C library.
	for (const char *N : {"memcpy", "memmove", "memset", "__builtin_memcpy", "__builtin_memmove",
			      "__builtin_memset", "__memcpy_chk", "__memmove_chk", "__memset_chk",
			      "__builtin___memcpy_chk", "__builtin___memmove_chk",
			      "__builtin___memset_chk", "strncpy", "__builtin_strncpy",
			      "__strncpy_chk", "__builtin___strncpy_chk"})
		T[N] = addrLen(Fn::Write, 0, 2);
	for (const char *N : {"snprintf", "vsnprintf", "__builtin_snprintf", "__snprintf_chk",
			      "__builtin___snprintf_chk"})
		T[N] = addrLen(Fn::Write, 0, 1);
	for (const char *N : {"strcpy", "__builtin_strcpy", "__strcpy_chk", "__builtin___strcpy_chk",
			      "strcat", "__strcat_chk", "__builtin___strcat_chk", "sprintf",
			      "__sprintf_chk", "__builtin___sprintf_chk", "strncat"})
		T[N] = addrLen(Fn::Write, 0, -1);

	// Memory that is not persistent (pmemobj_volatile's lies in the pool, but libpmemobj
	// documents it as transient: no rule applies to it).
	for (const char *N : {"malloc", "calloc", "realloc", "strdup", "strndup", "aligned_alloc",
			      "reallocarray", "kr_tx_add", "kr_tx_open", "pmemobj_volatile"})
		T[N] = m(Fn::Volatile);

	// Calls with no effect on the persistence state (deferred actions take effect in
	// pmemobj_publish, which persists them; locks live in the pool but are reset on open).
	for (const char *N :
	     {"pmemobj_set_value", "pmemobj_defer_free", "pmemobj_type_num", "pmemobj_alloc_usable_size",
	      "pmemobj_pool_by_oid", "pmemobj_pool_by_ptr", "pmemobj_errormsg", "pmemobj_tx_errno",
	      "pmemobj_mutex_lock", "pmemobj_mutex_unlock", "pmemobj_mutex_trylock",
	      "pmemobj_mutex_timedlock", "pmemobj_mutex_zero", "pmemobj_rwlock_rdlock",
	      "pmemobj_rwlock_wrlock", "pmemobj_rwlock_unlock", "pmemobj_rwlock_tryrdlock",
	      "pmemobj_rwlock_trywrlock", "pmemobj_rwlock_timedrdlock", "pmemobj_rwlock_timedwrlock",
	      "pmemobj_rwlock_zero", "pmemobj_cond_wait", "pmemobj_cond_signal",
	      "pmemobj_cond_broadcast", "pmemobj_cond_timedwait", "pmemobj_cond_zero",
	      "pmem_is_pmem", "kr_size", "kr_type"})
		T[N] = m(Fn::NoEffect);

	// keratin: transactions write through DRAM micro-buffers; kr_get is the committed bytes.
	{
		Model R = atomicAlloc(2, 1);
		R.Kind = Fn::KrRoot;
		T["kr_root"] = R;
		Model A = atomicAlloc(3, 1);
		A.Kind = Fn::KrTxAlloc;
		A.Zero = true;
		T["kr_tx_alloc"] = A;
	}
	T["kr_tx_begin"] = m(Fn::KrTxBegin);
	T["kr_tx_free"] = oidArg(Fn::KrTxFree, 1);
	T["kr_tx_commit"] = m(Fn::KrTxCommit);
	T["kr_tx_abort"] = m(Fn::KrTxCommit);
	T["kr_pool_base"] = m(Fn::KrPoolBase);
	{
		Model R = m(Fn::KrRegionOpen);
		R.Out = 3;
		T["kr_region_open"] = R;
	}
	return T;
}

} // namespace

const Model *findModel(llvm::StringRef Name)
{
	static const llvm::StringMap<Model> Table = buildTable();
	auto It = Table.find(Name);
	return It == Table.end() ? nullptr : &It->second;
}

} // namespace pmscan
