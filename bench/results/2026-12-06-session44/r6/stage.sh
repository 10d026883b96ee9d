#!/usr/bin/env bash
# Build r6's archive (devbin/s44d.tar.xz): BUILD (Ninja build of row 224's tree: qmm, gpu_sm90,
# sm90_trace), HW0 and HW12 (bench/variant.sh folders of it with -DSM90_HEAD_WAIT=0 / 12000,
# TESTS="sm90_trace"), BASE (a build of 6c09b05: qmm, sm90_trace).
#   stage.sh build /tmp/var/hw0 /tmp/var/hw12 /tmp/base/build
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD HW0 HW12 BASE}" && pwd)
hw0=${2:?} hw12=${3:?} base=${4:?}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s44d/base" "$tmp/s44d/hw0" "$tmp/s44d/hw12"
cp "$build"/{qmm,gpu_sm90,sm90_trace} "$tmp/s44d/"
cp "$hw0/sm90_trace" "$tmp/s44d/hw0/"
cp "$hw12/sm90_trace" "$tmp/s44d/hw12/"
cp "$base"/{qmm,sm90_trace} "$tmp/s44d/base/"
bash "$root/bench/carry-libs.sh" "$tmp/s44d"
(cd "$tmp" && tar -cf - s44d | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/s44d.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/s44d.tar.xz" "$here/cmds.txt"
