#!/usr/bin/env bash
# Installs every system package kplan builds and tests with, on a fresh Debian 12 machine (clang-16
# with its compiler-rt, libFuzzer included: the sanitizer and fuzz build, tools/sanitize_tests.sh).
# Idempotent: does nothing when all packages are present. Needs root (or sudo).
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev googletest libflatbuffers-dev flatbuffers-compiler
          llvm-16-dev llvm-16-tools nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev
          python3 pkg-config binutils clang-16 libclang-rt-16-dev llvm-16 libcpp-httplib-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
echo "install_deps: installing ${missing[*]}"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! ls /usr/local/cuda/lib64/libnvrtc.so >/dev/null 2>&1; then
  echo "install_deps: the CUDA 13 toolkit is expected at /usr/local/cuda (NVRTC, cuBLAS, driver stub)" >&2
  exit 1
fi
