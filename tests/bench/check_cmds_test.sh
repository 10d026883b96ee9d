#!/usr/bin/env bash
# bench/check-cmds.sh on a made-up archive (a stub test program that lists two cases, a stub
# GPU test that says SKIP, a qmm stub): a clean file passes; a misspelt filter, a program not in
# the archive, a name used twice and a malformed line each fail it, with their messages.
set -euo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/bench/check-cmds.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a/tm"
cat >"$work/a/test_ops" <<'STUB'
#!/usr/bin/env bash
[ "${1:-}" = --list ] && printf 'op_matmul\nop_matvec_fused\n'
exit 0
STUB
printf '#!/usr/bin/env bash\necho "SKIP: no CUDA device"\nexit 77\n' >"$work/a/gpu_llm"
cat >"$work/a/qmm" <<'STUB'
#!/usr/bin/env bash
case " $* " in *" --bad "*) echo "qmm bench ops: unknown option '--bad' (see --help)" >&2; exit 2 ;; esac
echo "qmm bench ops: no usable CUDA device 0 (0 found)" >&2
exit 2
STUB
printf '#!/usr/bin/env bash\nexit 0\n' >"$work/a/tm/mv_shapes"
chmod +x "$work/a/test_ops" "$work/a/gpu_llm" "$work/a/qmm" "$work/a/tm/mv_shapes"
tar -C "$work" -cf "$work/a.tar" a
fails=0
expect() { # expect WHAT RC PATTERN OUTPUT_FILE
    local rc
    rc=$(cat "$work/rc")
    if [ "$rc" != "$2" ] || ! grep -qE "$3" "$4"; then
        echo "FAIL: $1 (rc $rc, want $2; want /$3/ in:)"; cat "$4"; fails=$((fails + 1))
    else echo "ok   $1"; fi
}
cat >"$work/good.txt" <<'EOF2'
# comments and blank lines are skipped

t_mv 150 $B/test_ops --filter matvec_fused
t_llm 60 QMM_X=1 $B/gpu_llm --filter anything
tr 40 for p in q k; do MV_PROJ=$p $B/tm/mv_shapes 8; done
ops 60 QMM_X=1 $B/qmm bench ops --m 2 --csv $L/ops.csv
EOF2
{ bash "$check" "$work/a.tar" "$work/good.txt" >"$work/out" 2>&1; echo $? >"$work/rc"; } || true
expect "a clean file passes" 0 '^check-cmds: ok$' "$work/out"
expect "  ... and sums the limits" 0 '4 commands; their limits .* sum to 310 s' "$work/out"
cat >"$work/bad.txt" <<'EOF2'
t_mv 150 $B/test_ops --filter matvec_fusd
t_x 10 $B/nope/qmm bench ops
t_mv 10 $B/qmm info
broken-line
ops 60 QMM_X=1 $B/qmm bench ops --bad --csv $L/ops.csv
EOF2
{ bash "$check" "$work/a.tar" "$work/bad.txt" >"$work/out" 2>&1; echo $? >"$work/rc"; } || true
expect "a misspelt filter fails" 1 'no case of \$B/test_ops matches --filter matvec_fusd' "$work/out"
expect "a missing program fails" 1 '\$B/nope/qmm is not in' "$work/out"
expect "a name used twice fails" 1 't_mv: the name is used twice' "$work/out"
expect "a malformed line fails" 1 'not NAME LIMIT COMMAND: broken-line' "$work/out"
expect "a refused option fails" 1 "ops: the tool refuses its options: .*unknown option '--bad'" "$work/out"
expect "  ... five problems counted" 1 '^check-cmds: 5 problem' "$work/out"
# the working tree that travels with the archive (a git repository holding the cmds file)
if command -v git >/dev/null; then
    git init -q "$work/repo" && cp "$work/good.txt" "$work/repo/cmds.txt"
    truncate -s 64M "$work/repo/big" # sparse: 67 108 864 bytes
    { bash "$check" "$work/a.tar" "$work/repo/cmds.txt" >"$work/out" 2>&1; echo $? >"$work/rc"; } || true
    expect "a working tree over 64 MB fails" 1 'the working tree \(67 MB\) and the archive \(0 MB\) exceed' "$work/out"
    echo big >>"$work/repo/.gitignore" # ignored files do not travel
    { bash "$check" "$work/a.tar" "$work/repo/cmds.txt" >"$work/out" 2>&1; echo $? >"$work/rc"; } || true
    expect "  ... and passes once it is ignored" 0 '^check-cmds: ok$' "$work/out"
else
    echo "skip the working tree's size: no git here"
fi
[ "$fails" = 0 ] || exit 1
