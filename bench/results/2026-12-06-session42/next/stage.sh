#!/usr/bin/env bash
# Build the next call's archive (devbin/l43.tar.xz) from a Ninja build of this session's last
# commit (BUILD, e.g. build) and a qmm of a9ef3e5 (BASE_QMM: before row 213), then run cmds.txt:
#   bench/results/2026-12-06-session42/next/stage.sh BUILD BASE_QMM
#   QMM_BIN_ARCHIVE=devbin/l43.tar.xz QMM_CMDS=bench/results/2026-12-06-session42/next/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=540 bash bench/device.sh /tmp/r cmds
# p64/ is row 208's paired row planned on every sm90 GPU (paired_all.patch), pre/ row 216 (every
# first stage's weights before the wait where a launch has one CTA a SM, preall.patch): each patch
# applied to the tree for its compile only (bench/variant.sh over BUILD's objects; the tree is
# restored). cmds.txt runs on an H200 only; cmds_any.txt (row 216) on any sm90 GPU.
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD BASE_QMM}" && pwd)
base=${2:?usage: stage.sh BUILD BASE_QMM}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variant() { # NAME PATCH DEFINE SRC: a variant.sh build of the tree with PATCH applied
    git -C "$root" apply "$here/$2"
    (cd "$root" && BUILD=$(realpath --relative-to="$root" "$build") TESTS="gpu_sm90" \
        bash bench/variant.sh "$1" "$3" "$4") || true
    git -C "$root" apply -R "$here/$2"
    [ -x "/tmp/var/$1/qmm" ] || { echo "stage.sh: variant $1 failed" >&2; exit 1; }
}
variant s42p64 paired_all.patch -DQMM_EXP_PAIRED_ALL tune/sm90.c
variant s42pre preall.patch -DQMM_EXP_PREALL cuda/gemm_sm90.cu
mkdir -p "$tmp/l43/base" "$tmp/l43/p64" "$tmp/l43/pre"
cp "$build"/{qmm,gpu_sm90,gpu_kernels,test_ops} "$tmp/l43/"
cp "$base" "$tmp/l43/base/qmm"
cp /tmp/var/s42p64/{qmm,gpu_sm90} "$tmp/l43/p64/"
cp /tmp/var/s42pre/{qmm,gpu_sm90} "$tmp/l43/pre/"
bash "$root/bench/carry-libs.sh" "$tmp/l43"
(cd "$tmp" && tar -cf - l43 | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/l43.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/l43.tar.xz" "$here/cmds.txt"
bash "$root/bench/check-cmds.sh" "$root/devbin/l43.tar.xz" "$here/cmds_any.txt"
