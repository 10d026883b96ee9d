#!/usr/bin/env bash
# Build the next call's archive (devbin/t41a.tar.xz) from a Ninja build of this session's last
# commit (BUILD, e.g. build) and a qmm of 908e023 (BASE_QMM: before row 207), then run cmds.txt:
#   bench/results/2026-12-06-session40/r3-next/stage.sh BUILD BASE_QMM
#   QMM_BIN_ARCHIVE=devbin/t41a.tar.xz QMM_CMDS=bench/results/2026-12-06-session40/r3-next/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=540 bash bench/device.sh /tmp/r3 cmds
# The experiment builds come from the patches here (alt32: ../r1's, rebased; paired_all: row 208's
# row planned on every sm90 GPU), applied to the tree for their compile only (bench/variant.sh
# over BUILD's objects; the tree is restored).
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD BASE_QMM}" && pwd)
base=${2:?usage: stage.sh BUILD BASE_QMM}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variant() { # NAME PATCH DEFINE TESTS SRC...: a variant.sh build of the tree with PATCH applied
    local name=$1 patch=$2 def=$3 tests=$4
    shift 4
    git -C "$root" apply "$here/$patch"
    (cd "$root" && BUILD=$(realpath --relative-to="$root" "$build") TESTS="$tests" \
        bash bench/variant.sh "$name" "$def" "$@") || true
    git -C "$root" apply -R "$here/$patch"
    [ -x "/tmp/var/$name/qmm" ] || { echo "stage.sh: variant $name failed" >&2; exit 1; }
}
variant s40alt alt32.patch -DQMM_EXP_ALT32 "" tune/sm90.c
variant s40p64 paired_all.patch -DQMM_EXP_PAIRED_ALL "sm90_trace gpu_sm90" tune/sm90.c
mkdir -p "$tmp/t41a/base" "$tmp/t41a/alt" "$tmp/t41a/p64"
cp "$build"/{qmm,gpu_sm90,gpu_kernels,sm90_trace,test_ops} "$tmp/t41a/"
cp "$base" "$tmp/t41a/base/qmm"
cp /tmp/var/s40alt/qmm "$tmp/t41a/alt/"
cp /tmp/var/s40p64/{qmm,sm90_trace,gpu_sm90} "$tmp/t41a/p64/"
bash "$root/bench/carry-libs.sh" "$tmp/t41a"
(cd "$tmp" && tar -cf - t41a | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/t41a.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/t41a.tar.xz" "$here/cmds.txt"
