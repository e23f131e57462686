#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing.
# Usage: scripts/deps.sh [extra-package ...]
set -euo pipefail
# hipcc + libamdhip64-dev: the HIP compiler for AMD (Debian's ROCm 5.2.3 on clang-15), so the build
# compiles every HIP kernel for AMD (hip_compile_check) even without a GPU (about 63 MiB to
# download, 340 MiB installed, on Debian 12).
# g++: the HIP kernels are also compiled as C++ for the CPU execution layer (hip_kernels/cpu), so
# the HIP backend's tests and the corpus with backend=hip run in every make test.
# help2man: the man pages of mdc and of each of its commands, made from their --help at build time.
# libdw-dev: elfutils, which names the functions and file:line of a crashing case's stack (mdc replay).
# libclang-14-dev: libclang's C API for md_mutagen, the generator of `mdc mutate` (docs/mutate.md).
# python3: the corpus generator and its lint (conformance/traces/gen/, standard library only), run by CTest.
pkgs=(cmake make gcc g++ pkg-config python3 help2man libcriterion-dev libsqlite3-dev libjansson-dev libsodium-dev libxml2-dev libdw-dev hipcc libamdhip64-dev libclang-14-dev "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
