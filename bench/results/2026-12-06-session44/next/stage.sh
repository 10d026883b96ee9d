#!/usr/bin/env bash
# Build the staged call's archive (devbin/s45.tar.xz) on a tree where rest.patch applies (session
# 44's last commit): BUILD is a Ninja build of that tree (qmm, gpu_sm90, sm90_trace).
#   git apply bench/results/2026-12-06-session44/next/rest.patch
#   ninja -C build qmm gpu_sm90 sm90_trace
#   TESTS="sm90_trace gpu_sm90" bash bench/variant.sh rest "-DQMM_EXP_REST" cuda/gemm_sm90.cu
#   git apply -R bench/results/2026-12-06-session44/next/rest.patch   # (the default build is
#   #   unchanged by it but for a host-side lambda: build/ may keep it)
#   bench/results/2026-12-06-session44/next/stage.sh build /tmp/var/rest
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD REST}" && pwd)
rest=${2:?usage: stage.sh BUILD REST}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s45/rest"
cp "$build"/{qmm,gpu_sm90,sm90_trace} "$tmp/s45/"
cp "$rest"/{qmm,gpu_sm90,sm90_trace} "$tmp/s45/rest/"
bash "$root/bench/carry-libs.sh" "$tmp/s45"
(cd "$tmp" && tar -cf - s45 | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/s45.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/s45.tar.xz" "$here/cmds.txt"
