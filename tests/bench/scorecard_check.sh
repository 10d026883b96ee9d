#!/usr/bin/env bash
# bench/scorecard.py (issues 11 and 12's asks beside a run) on committed runs: session 43's H200
# operator table (its cells as the README quotes them: q at 16 tokens 1.49x cuBLAS, three of five
# projections at 2 048 tokens at their ask, 67 of its 70 auto plans (v and up counted once with
# k and gate) within 5 % of the cell's fastest qmm contender, k's matvec at one token 1.00x
# `read`) and an H100 e2e JSON; a file that is not a bench CSV, or a missing one, exits 2.
# Usage: scorecard_check.sh   (python3, no packages)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
sc="$src/bench/scorecard.py"
h200="$src/bench/results/2026-12-06-session43/h200"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
want() { # want LABEL PATTERN FILE
    if grep -qE -- "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 (no line matching '$2')"; fail=1; fi
}
zcat "$src/bench/results/2026-12-06-session43/r4/e2e.json.gz" >"$work/e2e.json"
"$py" "$sc" "$h200/ops_full.csv" "$work/e2e.json" >"$work/out.md"
want "the run's card and commit" "^NVIDIA H200, commit 8f893c9" "$work/out.md"
want "q at 16 tokens: 1.49x cuBLAS, under its ask" "^\| q \| 1\.49 ✗, 28 %, wgmma/5 16x64 \|" "$work/out.md"
want "at 2 048 tokens three of five at their ask" "M = 2048 3 of 5" "$work/out.md"
want "auto within 5 % of the cell's fastest qmm contender: 67 of 70, k at 64 beyond" \
    "^Auto within 5 % of the fastest qmm contender of its cell \(M ≥ 9, the table's projections\): 67 of 70 \(96 %.*k M = 64 4\.87 µs against cluster6 4\.60" "$work/out.md"
want "k's matvec at one token 1.00x read" "^\| k \| 1\.00 ✓ \| 1\.27 ✓ \|" "$work/out.md"
want "decode after 32 tokens under 1 200" "^\| 32 \| 15680 \(≥ 12000 ✓\) \| 915\.9 \(≥ 1200 ✗\) \|" "$work/out.md"
for bad in "$h200/e2e_n.md" "$work/missing.csv"; do
    set +e
    "$py" "$sc" "$bad" >/dev/null 2>"$work/err"
    rc=$?
    set -e
    if [ "$rc" = 2 ]; then echo "ok: $(basename "$bad") refused (exit 2)"; else echo "FAIL: $(basename "$bad"): exit $rc"; fail=1; fi
done
exit $fail
