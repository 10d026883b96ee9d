#!/usr/bin/env bash
# Builds and packs what NOTES rows 167-168's device call needs (the decode attention's merge and
# tile stubs: `bench/research-decode-attention-2k.md` P2's and P4's first measurements), for
# `bench/device.sh ... cmds` with cmds.txt here:
#   b/          this checkout's HEAD: qmm
#   b/trb/      HEAD with -DQMM_AD_TRACE (the last attention launch's phases, printed at exit)
#   b/trh/ b/trz/  the same with -DQMM_AD_MERGE_STUB=1 (half the merge's partial loads) / =2 (none)
#   b/h/ b/z/   the two stubs without the trace (e2e timing; wrong tokens)
#   b/st33/ b/st17/ b/st11/  row 168: -DQMM_AD_TRACE -DQMM_AD_STUB_TILE (the tiles only land),
#               at the usual 33 splits and capped at 17 / 11 (-DQMM_AD_SPLITS_CAP: 17 splits
#               of two tiles, 11 of three at 2 049-2 176 positions)
#   b/p2/       HEAD with ../r2-p2/p2-bf16-partials.patch (NOTES row 169): qmm and the decode
#               tests; b/p2tr/ its -DQMM_AD_TRACE build (qmm)
#   b/lib/      the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/b.tar.xz. Run from the repository root on the development machine (~5 min):
#   bash bench/results/2026-12-04-session27/r1-merge-stubs/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
here=$root/bench/results/2026-12-04-session27/r1-merge-stubs
tmp=${TMPDIR:-/tmp}/qmm-s27
stage=$tmp/stage/b
export PATH=$PATH:/usr/local/cuda/bin

head=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || rm -rf "$tmp/src"
mkdir -p "$tmp"
git -C "$root" worktree add -f --detach "$tmp/src" "$head" >/dev/null
echo "stage: HEAD ($head)"
cmake -S "$tmp/src" -B "$tmp/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 ||
    { tail -20 "$tmp/cmake.log"; exit 1; }
ninja -C "$tmp/src/build" qmm >"$tmp/ninja.log" 2>&1 || { tail -20 "$tmp/ninja.log"; exit 1; }
rm -rf "$tmp/stage"
mkdir -p "$stage"
cp "$tmp/src/build/qmm" "$stage/"
for v in "trb -DQMM_AD_TRACE" "trh -DQMM_AD_TRACE -DQMM_AD_MERGE_STUB=1" \
    "trz -DQMM_AD_TRACE -DQMM_AD_MERGE_STUB=2" "h -DQMM_AD_MERGE_STUB=1" "z -DQMM_AD_MERGE_STUB=2" \
    "st33 -DQMM_AD_TRACE -DQMM_AD_STUB_TILE" "st17 -DQMM_AD_TRACE -DQMM_AD_STUB_TILE -DQMM_AD_SPLITS_CAP=17" \
    "st11 -DQMM_AD_TRACE -DQMM_AD_STUB_TILE -DQMM_AD_SPLITS_CAP=11"; do
    name=${v%% *}
    echo "stage: variant $name (${v#* })"
    bash "$tmp/src/bench/variant.sh" "s27-$name" "${v#* }" llm/cuda/attention_decode.cu \
        llm/cuda/session.cu >"$tmp/variant-$name.log" 2>&1 || { tail -20 "$tmp/variant-$name.log"; exit 1; }
    mkdir -p "$stage/$name"
    cp "/tmp/var/s27-$name/qmm" "$stage/$name/"
done
echo "stage: HEAD + p2-bf16-partials.patch"
git -C "$root" worktree remove --force "$tmp/p2" 2>/dev/null || rm -rf "$tmp/p2"
git -C "$root" worktree add -f --detach "$tmp/p2" "$head" >/dev/null
git -C "$tmp/p2" apply "$here/../r2-p2/p2-bf16-partials.patch"
cmake -S "$tmp/p2" -B "$tmp/p2/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake-p2.log" 2>&1 ||
    { tail -20 "$tmp/cmake-p2.log"; exit 1; }
p2_tests="gpu_llm_decode_ops gpu_llm gpu_llm_decode_steps gpu_llm_persistent"
ninja -C "$tmp/p2/build" qmm $p2_tests >"$tmp/ninja-p2.log" 2>&1 || { tail -20 "$tmp/ninja-p2.log"; exit 1; }
mkdir -p "$stage/p2" "$stage/p2tr"
for t in qmm $p2_tests; do cp "$tmp/p2/build/$t" "$stage/p2/"; done
bash "$tmp/p2/bench/variant.sh" s27-p2tr "-DQMM_AD_TRACE" llm/cuda/attention_decode.cu llm/cuda/session.cu \
    >"$tmp/variant-p2tr.log" 2>&1 || { tail -20 "$tmp/variant-p2tr.log"; exit 1; }
cp /tmp/var/s27-p2tr/qmm "$stage/p2tr/"
bash "$root/bench/carry-libs.sh" "$stage" >/dev/null
mkdir -p "$root/devbin"
XZ_OPT="-9 -T0" tar -cJf "$root/devbin/b.tar.xz" -C "$tmp/stage" b
echo "stage: devbin/b.tar.xz $(du -h "$root/devbin/b.tar.xz" | cut -f1) (head $head)"
for c in cmds cmds_p2; do
    echo "run: QMM_BIN_ARCHIVE=devbin/b.tar.xz QMM_CMDS=${here#$root/}/$c.txt" \
        "QMM_PACK=\$OUT/device.tar.gz QMM_COMMIT=$head BUDGET_S=560 bash bench/device.sh /tmp/dev cmds"
done
