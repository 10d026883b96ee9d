#!/usr/bin/env bash
# Builds and packs NOTES row 183's binaries for `bench/device.sh ... cmds` with cmds.txt here:
#   e/         this checkout's build (build/, Release): qmm, mv_shapes, test_ops
#   e/sN/      mv_shapes with -DQMM_MV_STUB=N (matvec.cu; timing only: 1 the loads alone, 2 the
#              mma on masked code words, 3 no Σa mma)
#   e/sa/      mv_shapes and test_ops with -DQMM_MV_SA_A (NOTES row 184: Σa by the activations as
#              the A operand, 4 mma a group instead of 8 at 2-16 tokens; the default from a65be02,
#              where the macro is gone: there e/sa/ builds the default)
#   e/lib/     the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/e.tar.xz. Run from the repository root after `ninja -C build` (~1 min):
#   bash bench/results/2026-12-05-session34/r2-mv-stubs-h100/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
export PATH=$PATH:/usr/local/cuda/bin
ninja -C "$root/build" qmm mv_shapes test_ops >/dev/null
stage=${TMPDIR:-/tmp}/qmm-s34-e
rm -rf "$stage" && mkdir -p "$stage/e"
cp "$root/build/qmm" "$root/build/mv_shapes" "$stage/e/"
for s in 1 2 3; do
    TESTS=mv_shapes bash "$root/bench/variant.sh" "s34-s$s" "-DQMM_MV_STUB=$s" cuda/matvec.cu >/dev/null
    mkdir -p "$stage/e/s$s" && cp "/tmp/var/s34-s$s/mv_shapes" "$stage/e/s$s/"
done
TESTS="mv_shapes test_ops" bash "$root/bench/variant.sh" s34-sa "-DQMM_MV_SA_A=1" cuda/matvec.cu >/dev/null
mkdir -p "$stage/e/sa" && cp /tmp/var/s34-sa/mv_shapes /tmp/var/s34-sa/test_ops "$stage/e/sa/"
cp "$root/build/test_ops" "$stage/e/"
bash "$root/bench/carry-libs.sh" "$stage/e" >/dev/null
mkdir -p "$root/devbin"
tar -C "$stage" -cf - e | xz -9 -T2 >"$root/devbin/e.tar.xz"
ls -la "$root/devbin/e.tar.xz"
