#!/usr/bin/env bash
# Before a device call: check a `bench/device.sh ... cmds` file against the archive it will run
# on, here, so that a typo does not cost device minutes. For each `NAME LIMIT COMMAND` line: the
# line's form, a name used twice, every `$B/...` program present and executable in the archive,
# every `$B/<program> ... --filter X` of a test program matching one of its cases (`--list`,
# where the program lists without a GPU), and every line that runs the qmm tool (`[VAR=value
# ...] $B/.../qmm ...`) run here, where it stops at once for want of a GPU unless an option is
# wrong (its outputs go to a scratch L); the working tree and the archive against what the device
# tool carries; then the sum of the limits beside the budget.
#   bench/check-cmds.sh ARCHIVE CMDS [BUDGET_S]     e.g.
#   bench/check-cmds.sh devbin/d.tar.xz bench/results/2026-12-05-session33/r1-mv-rounds/cmds.txt
set -euo pipefail
archive=${1:?usage: bench/check-cmds.sh ARCHIVE CMDS [BUDGET_S]}
cmds=${2:?usage: bench/check-cmds.sh ARCHIVE CMDS [BUDGET_S]}
budget=${3:-540}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xf "$archive" -C "$work"
top=("$work"/*)
B=$work
[ ${#top[@]} = 1 ] && [ -d "${top[0]}" ] && B=${top[0]}
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bad=0 total=0 lines=0
gpu=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | head -n 1 || true)
[ -z "$gpu" ] || echo "check-cmds: a GPU is here ($gpu): the tool's options are not tried"
declare -A seen
note() { echo "check-cmds: $*"; bad=$((bad + 1)); }
while IFS= read -r line || [ -n "$line" ]; do
    case $line in '' | '#'*) continue ;; esac
    read -r name limit cmd <<<"$line"
    lines=$((lines + 1))
    if ! [[ $limit =~ ^[0-9]+$ ]] || [ -z "$cmd" ]; then note "not NAME LIMIT COMMAND: $line"; continue; fi
    [ -z "${seen[$name]:-}" ] || note "$name: the name is used twice (its logs would overwrite)"
    seen[$name]=1
    total=$((total + limit))
    for prog in $(grep -o '\$B/[A-Za-z0-9_./-]*' <<<"$cmd" | sort -u); do
        p=$B/${prog#\$B/}
        [ -x "$p" ] || note "$name: ${prog} is not in $archive"
    done
    # a test program's --filter: the cases it lists (GPU test programs list nothing without a GPU)
    while read -r prog filter; do
        p=$B/${prog#\$B/}
        [ -x "$p" ] || continue
        cases=$("$p" --list 2>&1 || true)
        grep -q '^SKIP' <<<"$cases" && continue
        [ -n "$cases" ] || continue
        grep -qF -- "$filter" <<<"$cases" || note "$name: no case of ${prog} matches --filter $filter"
    done < <(grep -oE '\$B/[A-Za-z0-9_./-]+ +--filter +[^ ;]+' <<<"$cmd" | sed -E 's/ +--filter +/ /')
    # the qmm tool's own option checks, which run before it looks for a GPU
    # (not where a GPU is: there the command would run for real)
    if [ -z "$gpu" ] &&
        [[ $cmd =~ ^([A-Za-z_][A-Za-z0-9_]*=[^ ]*[[:space:]]+)*\$B/([A-Za-z0-9_.-]+/)*qmm[[:space:]] ]]; then
        mkdir -p "$work/L"
        err=$(B=$B L=$work/L timeout 20 bash -c "$cmd" 2>&1 >/dev/null || true)
        if grep -qE 'unknown |bad |missing value|see --help|usage:' <<<"$err" &&
            ! grep -qE 'CUDA device|CUDA GPU' <<<"$err"; then
            note "$name: the tool refuses its options: $(head -n 1 <<<"$err")"
        fi
    fi
done <"$cmds"
# What the device tool carries: the working tree (tracked and untracked-not-ignored files) of the
# repository holding CMDS, and the archive. Its limit reads "64 MiB", but a tree and archive of
# 61.9 MiB (64.9 MB) were refused: counted here as 64 000 000 bytes.
root=$(git -C "$(dirname "$cmds")" rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$root" ]; then
    tree=$(cd "$root" && git ls-files -co --exclude-standard -z |
        { xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
    arch=$(stat -c %s "$archive")
    if [ $((tree + arch)) -gt 64000000 ]; then
        note "the working tree ($((tree / 1000000)) MB) and the archive ($((arch / 1000000)) MB) exceed the 64 MB the device tool carries"
    fi
fi
echo "check-cmds: $lines commands; their limits (caps, not durations) sum to ${total} s against a" \
    "budget of ${budget} s a call"
[ "$bad" = 0 ] && echo "check-cmds: ok" || { echo "check-cmds: $bad problem(s)"; exit 1; }
