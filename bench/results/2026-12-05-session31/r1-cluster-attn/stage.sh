#!/usr/bin/env bash
# Builds and packs what NOTES row 177's device calls need (the cluster-merged decode attention,
# on only with QMM_DECODE_ATTN=cluster), for `bench/device.sh ... cmds` with cmds_a.txt, then
# cmds_b.txt here:
#   c/          this checkout's HEAD: qmm, the decode tests and test_ops
#   c/tr/       HEAD with -DQMM_AD_TRACE (the last decode attention's phases, both kernels,
#               printed when the session ends)
#   c/tc/       HEAD with -DQMM_AD_TWO_CHAINS (NOTES row 178): qmm and gpu_llm_decode_ops
#   c/lib/      the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/c.tar.xz (xz -9: its 64 MB window sees the binaries' common code, ~7 MB for
# four 25 MB binaries where xz -6 took ~6 MB each). Run from the repository root (~4 min):
#   bash bench/results/2026-12-05-session31/r1-cluster-attn/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
tmp=${TMPDIR:-/tmp}/qmm-s31
stage=$tmp/stage/c
export PATH=$PATH:/usr/local/cuda/bin

head=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || rm -rf "$tmp/src"
mkdir -p "$tmp"
git -C "$root" worktree add -f --detach "$tmp/src" "$head" >/dev/null
echo "stage: HEAD ($head)"
cmake -S "$tmp/src" -B "$tmp/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 ||
    { tail -20 "$tmp/cmake.log"; exit 1; }
tests="gpu_llm_decode_ops gpu_llm_decode_steps gpu_llm test_ops"
ninja -C "$tmp/src/build" qmm $tests >"$tmp/ninja.log" 2>&1 || { tail -20 "$tmp/ninja.log"; exit 1; }
rm -rf "$tmp/stage"
mkdir -p "$stage/tr"
for t in qmm $tests; do cp "$tmp/src/build/$t" "$stage/"; done
echo "stage: variant tr (-DQMM_AD_TRACE)"
bash "$tmp/src/bench/variant.sh" s31-tr "-DQMM_AD_TRACE" llm/cuda/attention_decode.cu \
    llm/cuda/attention_decode_cluster.cu llm/cuda/session.cu >"$tmp/variant-tr.log" 2>&1 ||
    { tail -20 "$tmp/variant-tr.log"; exit 1; }
cp /tmp/var/s31-tr/qmm "$stage/tr/"
echo "stage: variant tc (-DQMM_AD_TWO_CHAINS)"
TESTS=gpu_llm_decode_ops bash "$tmp/src/bench/variant.sh" s31-tc "-DQMM_AD_TWO_CHAINS" \
    llm/cuda/attention_decode.cu llm/cuda/attention_decode_cluster.cu llm/cuda/decode_persistent.cu \
    >"$tmp/variant-tc.log" 2>&1 || { tail -20 "$tmp/variant-tc.log"; exit 1; }
mkdir -p "$stage/tc"
cp /tmp/var/s31-tc/qmm /tmp/var/s31-tc/gpu_llm_decode_ops "$stage/tc/"
bash "$root/bench/carry-libs.sh" "$stage" >/dev/null
mkdir -p "$root/devbin"
tar -C "$tmp/stage" -cf - c | xz -9 -T4 >"$root/devbin/c.tar.xz"
ls -la "$root/devbin/c.tar.xz"
git -C "$root" worktree remove --force "$tmp/src"
