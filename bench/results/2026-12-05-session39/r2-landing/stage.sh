#!/usr/bin/env bash
# Rebuild this call's archive (devbin/t39b.tar.xz) from a Ninja build of the landing commit and
# a qmm built at the base (480c18a), then run it as cmds.txt says:
#   bench/results/2026-12-05-session39/r2-landing/stage.sh BUILD BASE_QMM
#   QMM_BIN_ARCHIVE=devbin/t39b.tar.xz QMM_CMDS=bench/results/2026-12-05-session39/r2-landing/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<landing commit> BUDGET_S=480 bash bench/device.sh /tmp/r2 cmds
set -euo pipefail
build=${1:?usage: stage.sh BUILD BASE_QMM}
base=${2:?usage: stage.sh BUILD BASE_QMM}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
tmp=$(mktemp -d)
mkdir -p "$tmp/t39b/base"
cp "$build"/{qmm,gpu_sm90,sm90_trace,test_ops} "$tmp/t39b/"
cp "$base" "$tmp/t39b/base/qmm"
bash "$root/bench/carry-libs.sh" "$tmp/t39b"
(cd "$tmp" && tar -cf - t39b | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/t39b.tar.xz"
rm -rf "$tmp"
bash "$root/bench/check-cmds.sh" "$root/devbin/t39b.tar.xz" "$(dirname "$0")/cmds.txt"
