#!/usr/bin/env bash
# Builds and packs what the rerun of rows 163-164 needs, for one device call through
# `bench/device.sh ... cmds` with next.txt:
#   a/          the patch (rs-offset.patch on this checkout's HEAD): qmm, gpu_sm90, test_ops
#   a/base/     HEAD without it (qmm)
#   a/lockstep/ the patch with -DQMM_SM90_LOCKSTEP (row 163 alone): qmm, gpu_sm90
#   a/nors/     the patch with -DQMM_SM90_NO_RS (row 164 alone): qmm
#   a/wide/     the patch with -DQMM_EXP_WIDE_KNOB (QMM_WIDE_MIN_M): qmm
#   a/b0/       b0fce18, issue 11's no-regression reference: qmm
#   a/lib/      the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/a.tar.xz. Run from the repository root on the development machine (~5 min):
#   bash bench/results/2026-12-04-session26/r1-lost/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
here=$root/bench/results/2026-12-04-session26/r1-lost
tmp=${TMPDIR:-/tmp}/qmm-r1
stage=$tmp/stage/a
export PATH=$PATH:/usr/local/cuda/bin

build() { # build SRC_DIR TARGETS...: a Release build in SRC_DIR/build
    local dir=$1
    shift
    cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 ||
        { tail -20 "$tmp/cmake.log"; exit 1; }
    ninja -C "$dir/build" "$@" >"$tmp/ninja.log" 2>&1 || { tail -20 "$tmp/ninja.log"; exit 1; }
}
worktree() { # worktree DIR COMMIT
    git -C "$root" worktree remove --force "$1" 2>/dev/null || rm -rf "$1"
    git -C "$root" worktree add -f --detach "$1" "$2" >/dev/null
}

rm -rf "$tmp/stage"
mkdir -p "$stage"/{base,lockstep,nors,wide,b0}
head=$(git -C "$root" rev-parse --short HEAD)

echo "stage: base ($head)"
worktree "$tmp/base" "$head"
build "$tmp/base" qmm
cp "$tmp/base/build/qmm" "$stage/base/"

echo "stage: the patch on $head"
worktree "$tmp/new" "$head"
git -C "$tmp/new" apply "$here/rs-offset.patch"
build "$tmp/new" qmm gpu_sm90 test_ops
cp "$tmp/new/build/"{qmm,gpu_sm90,test_ops} "$stage/"
for v in "lockstep -DQMM_SM90_LOCKSTEP cuda/gemm_sm90.cu" "nors -DQMM_SM90_NO_RS cuda/gemm_sm90.cu" \
    "wide -DQMM_EXP_WIDE_KNOB tune/sm90.c"; do
    set -- $v
    echo "stage: variant $1 ($2)"
    TESTS=gpu_sm90 bash "$tmp/new/bench/variant.sh" "r1-$1" "$2" "$3" >"$tmp/variant-$1.log" 2>&1 ||
        { tail -20 "$tmp/variant-$1.log"; exit 1; }
    cp "/tmp/var/r1-$1/qmm" "$stage/$1/"
    [ "$1" = lockstep ] && cp "/tmp/var/r1-$1/gpu_sm90" "$stage/$1/"
done

echo "stage: b0fce18"
worktree "$tmp/b0" b0fce18
build "$tmp/b0" qmm
cp "$tmp/b0/build/qmm" "$stage/b0/"

bash "$root/bench/carry-libs.sh" "$stage" >/dev/null
mkdir -p "$root/devbin"
XZ_OPT="-9 -T0" tar -cJf "$root/devbin/a.tar.xz" -C "$tmp/stage" a
echo "stage: devbin/a.tar.xz $(du -h "$root/devbin/a.tar.xz" | cut -f1) (head $head + the patch)"
echo "run: QMM_BIN_ARCHIVE=devbin/a.tar.xz QMM_CMDS=${here#$root/}/next.txt" \
    "QMM_PACK=\$OUT/device.tar.gz QMM_COMMIT=$head+rs-offset BUDGET_S=560 bash bench/device.sh /tmp/dev cmds"
