#!/usr/bin/env bash
# deps.sh - install the Debian packages keratin needs to build, test and demo, if missing.
# Idempotent and quiet when everything is present; needs root (or sudo) only to install.
set -euo pipefail

# build + tests: compiler toolchain, CMake, ISA-L (CRC-32C, XOR), cmocka, pkg-config;
# clang + its runtime for the libFuzzer target and the sanitizer builds; libpmemobj-dev
# (the baseline, whose example maps the benchmark builds from its documentation) and
# python3 (the benchmark harness), which `make check` smoke-runs; clang-14's development
# files for keratin-pmscan, the static persistence checker (a plugin of clang's analyzer).
pkgs=(build-essential cmake pkg-config libisal-dev libcmocka-dev clang libclang-rt-14-dev
	libpmemobj-dev python3 clang-14 libclang-14-dev llvm-14-dev)
if [ "${1:-}" = "--bench" ]; then
	pkgs+=(gnuplot-nox) # the report's plots
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
