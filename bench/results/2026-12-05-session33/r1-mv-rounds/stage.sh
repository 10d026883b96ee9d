#!/usr/bin/env bash
# Builds and packs what NOTES row 182's device call needs (the matvec's activations staged in
# rounds at 2-16 tokens, on only with QMM_MV_ROUNDS=1 or the op table's cuda_mv_rounds* rows),
# for `bench/device.sh ... cmds` with cmds.txt here:
#   d/          this checkout's HEAD: qmm, test_ops, gpu_matvec_args, mv_shapes
#   d/tm/       mv_shapes with -DQMM_MV_TRACE (matvec.cu and the probe): per-CTA phase clocks of
#               one cold launch (the activations staged, the first group, the loop done, the end)
#   d/lib/      the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/d.tar.xz. Run from the repository root (~4 min here):
#   bash bench/results/2026-12-05-session33/r1-mv-rounds/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
tmp=${TMPDIR:-/tmp}/qmm-s33
stage=$tmp/stage/d
export PATH=$PATH:/usr/local/cuda/bin

head=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || rm -rf "$tmp/src"
mkdir -p "$tmp"
git -C "$root" worktree add -f --detach "$tmp/src" "$head" >/dev/null
echo "stage: HEAD ($head)"
cmake -S "$tmp/src" -B "$tmp/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 ||
    { tail -20 "$tmp/cmake.log"; exit 1; }
progs="qmm test_ops gpu_matvec_args mv_shapes"
ninja -C "$tmp/src/build" $progs >"$tmp/ninja.log" 2>&1 || { tail -20 "$tmp/ninja.log"; exit 1; }
rm -rf "$tmp/stage"
mkdir -p "$stage/tm"
for t in $progs; do cp "$tmp/src/build/$t" "$stage/"; done

echo "stage: variant tm (-DQMM_MV_TRACE: matvec.cu and the probe)"
bash "$tmp/src/bench/variant.sh" s33-tm "-DQMM_MV_TRACE" cuda/matvec.cu >"$tmp/variant-tm.log" 2>&1 ||
    { tail -20 "$tmp/variant-tm.log"; exit 1; }
(
    cd "$tmp/src/build"
    o=CMakeFiles/mv_shapes.dir/bench/probe/mv_shapes.cu.o
    c=$(ninja -t commands mv_shapes | grep -- "-o $o" | head -1)
    c="${c//-o $o/-o /tmp/var/s33-tm/mv_shapes.o}"
    eval "${c/ -c / -DQMM_MV_TRACE -c }"
    l=$(ninja -t commands mv_shapes | tail -1)
    l="${l// libqmm.a/ /tmp/var/s33-tm/libqmm.a}"
    l="${l// $o / /tmp/var/s33-tm/mv_shapes.o }"
    eval "${l/ -o mv_shapes / -o /tmp/var/s33-tm/mv_shapes }"
) >>"$tmp/variant-tm.log" 2>&1 || { tail -20 "$tmp/variant-tm.log"; exit 1; }
cp /tmp/var/s33-tm/mv_shapes "$stage/tm/"
bash "$root/bench/carry-libs.sh" "$stage" >/dev/null
mkdir -p "$root/devbin"
tar -C "$tmp/stage" -cf - d | xz -9 -T4 >"$root/devbin/d.tar.xz"
ls -la "$root/devbin/d.tar.xz"
git -C "$root" worktree remove --force "$tmp/src"
