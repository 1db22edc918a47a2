# keratin - top-level entry points. Every target installs what it needs (scripts/deps.sh).
#
#   make demo     build, then run the crash-and-recover demo, the file-system demo and a
#                 libpmemobj program on keratin surviving a media error and a scribble
#   make check    all tests: normal build, ASan+UBSan build, TSan build, fuzz run (CI)
#   make bench    keratin vs libpmemobj (plain, replicated), regions: docs/BENCHMARKS.md;
#                 keratin-pmemobj vs libpmemobj on the same program (bench/compat-bench.py);
#                 keratin-fs (bench/fs-bench): docs/BENCHMARKS-FS.md
#                 then the persistence checkers' costs: pmsan's slowdown on the map
#                 benchmarks, keratin-pmscan's analysis time per PMDK example file
#                 then keratin-fs under FUSE vs tmpfs, ext4, passthrough_ll (bench-fuse)
#   make bench-fuse  only the FUSE benchmark: docs/bench/fuse.md, docs/BENCHMARKS-FS.md
#   make bench-gluster  a GlusterFS replica-3 volume on keratin-fs bricks vs passthrough_ll,
#                 tmpfs and ext4 bricks, one machine: docs/bench/gluster.md (not part of make bench)
#   make fuzz     a longer libFuzzer run of the pool opener
#   make torture  the full single-page fault sweep; the crash sweeps at full size (2 x 2000
#                 transactions, the map's two writers, keratin-fs in three modes); the
#                 maps' and the write tracker's tests whole; 24 fault trials per libpmemobj
#                 map, every libpmemobj example as a binary drop-in; a mounted directory
#                 of 100,000 entries;
#                 100,000 fsx operations; 30 SIGKILLs of the FUSE daemon; the GlusterFS
#                 cluster with 1500 files per kill round, three rounds, a directory of
#                 30,000 entries; the benchmark harnesses' smoke runs (ctest -L torture)
#   make install  build, then install under PREFIX (default /usr/local; DESTDIR stages):
#                 libkeratin, libkeratin-map, headers, the keratin command, manual pages,
#                 pkg-config files and the CMake package (find_package(keratin))
#   make deps     install missing Debian packages

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo check check-fast check-asan check-tsan check-fuzz bench bench-checkers bench-fuse bench-files bench-gluster fuzz torture install clean

all: build

deps:
	@scripts/deps.sh

# Builds quietly; on failure the compiler's output is shown. $(3): targets (default all).
define cmake_build
	@echo "building $(1) $(3)..."
	@cmake -S . -B $(1) $(2) $(CMAKE_FLAGS) >$(1).log 2>&1 || { cat $(1).log; exit 1; }
	@cmake --build $(1) -j $(JOBS) $(if $(3),--target $(3)) >>$(1).log 2>&1 || { cat $(1).log; exit 1; }
endef

build: deps
	$(call cmake_build,build,-DCMAKE_BUILD_TYPE=RelWithDebInfo)

demo: build
	@build/examples/keratin-demo
	@bash examples/fs-demo.sh build/tools/keratin $(CURDIR) || [ $$? -eq 77 ]
	@bash examples/pmemobj-demo.sh build || [ $$? -eq 77 ]

# ctest in build directory $(1), more arguments $(2), JOBS tests at once.
define ctest_run
	@cd $(1) && ctest --output-on-failure -j $(JOBS) $(2)
endef

# Label "torture": the benchmark harnesses' smoke runs, which make torture runs instead.
check-fast: build
	$(call ctest_run,build,-LE torture)

check-asan: deps
	$(call cmake_build,build-asan,-DCMAKE_BUILD_TYPE=Debug -DKR_SANITIZE=address -DKR_DEBUG_INVARIANTS=ON)
	$(call ctest_run,build-asan)

check-tsan: deps
	$(call cmake_build,build-tsan,-DCMAKE_BUILD_TYPE=Debug -DKR_SANITIZE=thread,threads-tests)
	$(call ctest_run,build-tsan,-L threads)

# A short, bounded libFuzzer run of the pool opener (make fuzz runs a long one).
check-fuzz: deps
	@fuzz/run.sh $${FUZZ_SECONDS:-30} >fuzz-check.log 2>&1; rc=$$?; \
		grep -E '^Done|ERROR|SUMMARY' fuzz-check.log; \
		[ $$rc -eq 0 ] || { tail -n 40 fuzz-check.log; exit $$rc; }

check: check-fast check-asan check-tsan check-fuzz

# BENCH_ARGS, e.g. "--runs 3 --keys 100000", for a shorter run.
bench: build
	@scripts/deps.sh --bench
	@bench/pmdk-build.sh build/pmdk
	@python3 bench/run.py --build build $(BENCH_ARGS)
	@python3 bench/compat-bench.py --build build $(COMPAT_BENCH_ARGS)
	@$(MAKE) --no-print-directory bench-checkers
	@$(MAKE) --no-print-directory bench-fuse
	@$(MAKE) --no-print-directory bench-files

# The checkers' costs alone (each says SKIP where its checker is not built).
# PMSAN_BENCH_ARGS, e.g. "--keys 20000 --rounds 1", for a shorter run.
bench-checkers: build
	@if [ -x build/bin/keratin-pmsan-cc ]; then bench/pmsan-bench.sh $(PMSAN_BENCH_ARGS) --out docs/bench build; \
		else echo "SKIP: pmsan is not built (needs LLVM 14 and clang-14)"; fi
	@python3 tests/check/static/pmdk_examples.py build/tools/keratin-pmscan --bench || [ $$? -eq 77 ]

# Durable key-value commits on an ordinary file system (/var/tmp, or KV_DIR): keratin's
# page-cache mode against LMDB and SQLite in WAL mode (docs/BENCHMARKS.md, ordinary files).
bench-files: build
	@python3 bench/kv-files.py --build build --dir $(or $(KV_DIR),/var/tmp) || [ $$? -eq 77 ]

# keratin-fs mounted with FUSE against tmpfs, ext4 and passthrough_ll (QUICK=1: a smoke run).
bench-fuse: build
	@scripts/deps.sh --bench
	@bash bench/fuse-bench.sh --build build --out docs/bench || [ $$? -eq 77 ]

# GlusterFS replica-3 on keratin-fs bricks against passthrough_ll, tmpfs and ext4 bricks
# (QUICK=1: a smoke run; SKIP where a cluster cannot run: root, glusterfs-server, namespaces).
bench-gluster: build
	@scripts/deps.sh --bench
	@bash bench/gluster-bench.sh --build build --out docs/bench || [ $$? -eq 77 ]

# The long sweeps (see the top of this file), then the tests labelled "torture".
torture: build
	@build/tests/test_sweep full
	@KR_TEST_SEED=20240601 build/tests/test_crash && KR_TEST_SEED=20261128 build/tests/test_crash
	@build/tests/test_hmap crashthreads && build/tests/test_fs_crash
	@KR_TEST_FS_PROTECTION=none build/tests/test_fs_crash
	@KR_TEST_FS_PROTECTION=relaxed build/tests/test_fs_crash
	@build/tests/test_maps && build/tests/test_track
	@bash tests/compat/faults.sh build build/tests/pmemobj-faults 24 || [ $$? -eq 77 ]
	@bash tests/compat/dropin.sh build build/tests/compat-dropin-all || [ $$? -eq 77 ]
	@FUSE_BIGDIR=100000 bash tests/fuse/fuse-tests.sh build/tools/keratin build/tests posix $(CURDIR)
	@FSX_OPS=100000 bash tests/fuse/fuse-tests.sh build/tools/keratin build/tests fsx $(CURDIR)
	@KILLS=30 bash tests/fuse/fuse-tests.sh build/tools/keratin build/tests kill $(CURDIR)
	@bash tests/gluster/cluster.sh build/tools/keratin build/tests $(CURDIR) torture || [ $$? -eq 77 ]
	$(call ctest_run,build,-L torture)

PREFIX ?= /usr/local
# DESTDIR, from the environment or the command line, stages the files (cmake --install reads it).
install: build
	@DESTDIR=$(DESTDIR) cmake --install build --prefix $(PREFIX)

fuzz: deps
	@fuzz/run.sh $${FUZZ_SECONDS:-600}

clean:
	rm -rf build build-asan build-tsan build-fuzz build*.log
