# keratin - top-level entry points. Every target installs what it needs (scripts/deps.sh).
#
#   make demo     build, then run the crash-and-recover demo
#   make check    all tests: normal build, ASan+UBSan build, TSan build (the CI job)
#   make bench    benchmarks (prints tables)
#   make fuzz     a longer libFuzzer run of the pool opener
#   make deps     install missing Debian packages

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo check check-fast check-asan check-tsan bench fuzz clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

demo: build
	@build/examples/keratin-demo

check-fast: build
	@cd build && ctest --output-on-failure -j $(JOBS)

check-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKR_SANITIZE=address >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ctest --output-on-failure -j $(JOBS)

check-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DKR_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@cd build-tsan && ctest --output-on-failure -j $(JOBS) -L threads

check: check-fast check-asan check-tsan

bench: build
	@build/bench/keratin-bench

fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DKR_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_open
	@build-fuzz/fuzz/fuzz_open -max_total_time=$${FUZZ_SECONDS:-600} build-fuzz/fuzz/corpus

clean:
	rm -rf build build-asan build-tsan build-fuzz
