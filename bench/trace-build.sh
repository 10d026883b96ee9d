#!/usr/bin/env bash
# The wgmma kernel's trace build (-DQMM_SM90_TRACE: per-CTA phase clocks for bench/probe/sm90_trace)
# of commit REV, in a worktree of its own (default /tmp/s81-tr, kept between calls): checks it out
# at REV, configures it once, builds sm90_trace, prints the worktree's path.
#   bench/trace-build.sh REV [DIR]
set -euo pipefail
rev=${1:?usage: bench/trace-build.sh REV [DIR]}
tr=${2:-/tmp/s81-tr}
cd "$(dirname "$0")/.."
bash bench/worktree.sh "$rev" "$tr"
[ -f "$tr/build/build.ninja" ] ||
    cmake -S "$tr" -B "$tr/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DQMM_SM90_TRACE \
        -DCMAKE_CXX_FLAGS=-DQMM_SM90_TRACE >/dev/null
ninja -C "$tr/build" sm90_trace >&2
echo "$tr"
