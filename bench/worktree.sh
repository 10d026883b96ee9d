#!/usr/bin/env bash
# A worktree of this repository at commit REV in DIR, kept between calls: created the first
# time, checked out afresh (local edits discarded) after. For experiment builds beside build/:
# the trace build (bench/trace-build.sh) and a session's variants (bench/results/*/stage.sh).
#   bench/worktree.sh REV DIR
set -euo pipefail
rev=${1:?usage: bench/worktree.sh REV DIR}
dir=${2:?usage: bench/worktree.sh REV DIR}
cd "$(dirname "$0")/.."
if [ -d "$dir" ]; then
    git -C "$dir" checkout -q -f --detach "$rev"
else
    git worktree prune
    git worktree add -q --detach "$dir" "$rev"
fi
