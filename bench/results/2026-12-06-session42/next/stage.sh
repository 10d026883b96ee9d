#!/usr/bin/env bash
# Build the next call's archive (devbin/l43.tar.xz) from a Ninja build of this session's last
# commit (BUILD, e.g. build) and a qmm of a9ef3e5 (BASE_QMM: before row 213), then run cmds.txt:
#   bench/results/2026-12-06-session42/next/stage.sh BUILD BASE_QMM
#   QMM_BIN_ARCHIVE=devbin/l43.tar.xz QMM_CMDS=bench/results/2026-12-06-session42/next/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=540 bash bench/device.sh /tmp/r cmds
# p64/ is row 208's paired row planned on every sm90 GPU (paired_all.patch, applied to the tree for
# its compile only: bench/variant.sh over BUILD's objects; the tree is restored).
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD BASE_QMM}" && pwd)
base=${2:?usage: stage.sh BUILD BASE_QMM}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" apply "$here/paired_all.patch"
(cd "$root" && BUILD=$(realpath --relative-to="$root" "$build") TESTS="gpu_sm90" \
    bash bench/variant.sh s42p64 -DQMM_EXP_PAIRED_ALL tune/sm90.c) || true
git -C "$root" apply -R "$here/paired_all.patch"
[ -x /tmp/var/s42p64/qmm ] || { echo "stage.sh: variant s42p64 failed" >&2; exit 1; }
mkdir -p "$tmp/l43/base" "$tmp/l43/p64"
cp "$build"/{qmm,gpu_sm90,gpu_kernels,test_ops} "$tmp/l43/"
cp "$base" "$tmp/l43/base/qmm"
cp /tmp/var/s42p64/{qmm,gpu_sm90} "$tmp/l43/p64/"
bash "$root/bench/carry-libs.sh" "$tmp/l43"
(cd "$tmp" && tar -cf - l43 | xz -7 -T1 --lzma2=preset=7,dict=128MiB) >"$root/devbin/l43.tar.xz"
bash "$root/bench/check-cmds.sh" "$root/devbin/l43.tar.xz" "$here/cmds.txt"
