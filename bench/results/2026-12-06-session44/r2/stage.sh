#!/usr/bin/env bash
# Build r2's archive (devbin/s44a.tar.xz): BUILD (a Ninja build of row 223's tree: qmm, gpu_sm90,
# sm90_trace), AL (bench/variant.sh's folder of the same tree with -DQMM_SM90_ASIDE_LAST: TESTS=
# "gpu_sm90"), BASE (a build of 6c09b05: qmm, sm90_trace).
#   stage.sh build /tmp/var/al /tmp/base/build
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD AL BASE}" && pwd)
al=${2:?usage: stage.sh BUILD AL BASE}
base=${3:?usage: stage.sh BUILD AL BASE}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s44a/base" "$tmp/s44a/al"
cp "$build"/{qmm,gpu_sm90,sm90_trace} "$tmp/s44a/"
cp "$al/gpu_sm90" "$tmp/s44a/al/"
cp "$base"/{qmm,sm90_trace} "$tmp/s44a/base/"
bash "$root/bench/carry-libs.sh" "$tmp/s44a"
(cd "$tmp" && tar -cf - s44a | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/s44a.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/s44a.tar.xz" "$here/cmds.txt"
