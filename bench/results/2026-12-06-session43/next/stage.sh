#!/usr/bin/env bash
# Build the next call's archive (devbin/l44n.tar.xz) from a Ninja build of this session's last
# commit (BUILD, e.g. build) and a qmm of 8f893c9 (BASE_QMM: before rows 217 and 219), then:
#   bench/results/2026-12-06-session43/next/stage.sh BUILD BASE_QMM
#   QMM_BIN_ARCHIVE=devbin/l44n.tar.xz QMM_CMDS=bench/results/2026-12-06-session43/next/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=540 bash bench/device.sh /tmp/r cmds
# cmds.txt runs on an H200 only (h200only.sh: exit 77 elsewhere).
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD BASE_QMM}" && pwd)
base=${2:?usage: stage.sh BUILD BASE_QMM}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/l44n/base"
cp "$build"/{qmm,gpu_sm90,gpu_kernels,test_ops} "$tmp/l44n/"
cp "$base" "$tmp/l44n/base/qmm"
bash "$root/bench/carry-libs.sh" "$tmp/l44n"
(cd "$tmp" && tar -cf - l44n | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/l44n.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/l44n.tar.xz" "$here/cmds.txt"
