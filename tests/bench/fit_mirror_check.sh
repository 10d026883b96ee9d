#!/usr/bin/env bash
# bench/fit_model.py mirrors the planner and the wgmma model in Python (to refit the constants);
# tests/test_perf_fit.c checks the C side on the same committed H200 runs. Both must count the
# same cells: forced contenders within 15 %, auto cells within 15 %, plans within 5 % of the
# best, on both passes of session 25's final run (M = 32 and 64 left out: their tiles or plans
# changed since, tests/test_perf_fit.c's fit_run), and auto cells and plans on session 43's H200
# run (its h200_run: q, k, o, gate, down, gate and down at 49-64 from the paired row's build), and
# on session 42's H100 run with session 46's at 128-512 tokens over it and at 144 and 200 beside
# it (its h100_run). A mirror that drifts from the C code (or stops running, as it did for the
# default refit from session 25 to 28) fails here.
# The interpreter is $PYTHON (.ci/run's venv has numpy) or python3; without numpy the test skips
# (77), in CI (CI=true) it fails.
# Usage: fit_mirror_check.sh <test_perf_fit binary>
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
if ! "$py" -c 'import numpy' 2>/dev/null; then
    msg="fit_mirror: $py lacks numpy (bash .ci/run installs it)"
    if [ "${CI:-}" = true ]; then echo "FAIL: $msg"; exit 1; fi
    echo "SKIP: $msg"; exit 77
fi
run=bench/results/2026-12-04-session25/r2-final
c_out=$("$1")
py_out=$(cd "$src" && "$py" bench/fit_model.py --shipped "$run/ops_final.csv~32,64" "$run/ops_new2.csv~32,64")
h200=bench/results/2026-12-06-session43/h200
py_h200=$(cd "$src" && "$py" bench/fit_model.py --shipped "$h200/ops_full.csv^$h200/ops_p1.csv@q,k,o,gate,down")
# tests/test_perf_fit.c's h100_run: an H100's plans (the other height from 32 tokens, tiles aside
# from the 128-token tile; '|' joins the run of 144 and 200 tokens, quoted)
h100='bench/results/2026-12-06-session42/landed/ops_full.csv^bench/results/2026-12-06-session46/r1/opsr_r1.csv|bench/results/2026-12-06-session46/r4/o_n1.csv'
py_h100=$(cd "$src" && "$py" bench/fit_model.py --shipped "$h100")

# "X of N" counts, in order: forced, auto, plans (first pass), then the same (second pass)
c_counts=$(printf '%s\n' "$c_out" | sed -nE \
    -e 's/^ *wgmma_s1, streamk, cluster cells within 15 %: ([0-9]+ of [0-9]+).*/forced \1/p' \
    -e 's/^ *auto cells within 15 %: ([0-9]+ of [0-9]+).*/auto \1/p' \
    -e 's/^ *plans within 5 % of the best measured: ([0-9]+ of [0-9]+).*/plans \1/p' \
    -e 's/^ *second pass: auto cells within 15 %: ([0-9]+ of [0-9]+); forced ([0-9]+ of [0-9]+); plans within 5 %: ([0-9]+ of [0-9]+).*/forced \2\nauto \1\nplans \3/p')
py_counts=$(printf '%s\n' "$py_out" | sed -nE \
    -e 's/.*wgmma_s1, streamk, cluster cells within 15 %: ([0-9]+ of [0-9]+).*/forced \1/p' \
    -e 's/^ *auto cells within 15 %: ([0-9]+ of [0-9]+); plans within 5 % of the best: ([0-9]+ of [0-9]+).*/auto \1\nplans \2/p')
# the C test prints the first pass's forced line after its auto line: compare sorted per pass
first() { printf '%s\n' "$1" | head -3 | sort; }
second() { printf '%s\n' "$1" | tail -3 | sort; }
echo "C:      $(printf '%s\n' "$c_counts" | paste -sd ';')"
echo "Python: $(printf '%s\n' "$py_counts" | paste -sd ';')"
if [ "$(printf '%s\n' "$c_counts" | wc -l)" -ne 6 ] || [ "$(printf '%s\n' "$py_counts" | wc -l)" -ne 6 ]; then
    echo "FAIL: expected six counts from each side"; exit 1
fi
if [ "$(first "$c_counts")" != "$(first "$py_counts")" ] ||
   [ "$(second "$c_counts")" != "$(second "$py_counts")" ]; then
    echo "FAIL: bench/fit_model.py and tests/test_perf_fit.c count different cells"; exit 1
fi
c_h200=$(printf '%s\n' "$c_out" | sed -nE 's/^ *H200: auto cells within 15 %: ([0-9]+ of [0-9]+); plans within 5 %: ([0-9]+ of [0-9]+).*/auto \1; plans \2/p')
py_h200=$(printf '%s\n' "$py_h200" | sed -nE 's/^ *auto cells within 15 %: ([0-9]+ of [0-9]+); plans within 5 % of the best: ([0-9]+ of [0-9]+).*/auto \1; plans \2/p')
echo "H200 run: C $c_h200; Python $py_h200"
if [ -z "$c_h200" ] || [ "$c_h200" != "$py_h200" ]; then
    echo "FAIL: the H200 run's counts differ (or one side printed none)"; exit 1
fi
c_h100=$(printf '%s\n' "$c_out" | sed -nE 's/^ *H100: auto cells within 15 %: ([0-9]+ of [0-9]+); plans within 5 %: ([0-9]+ of [0-9]+).*/auto \1; plans \2/p')
py_h100=$(printf '%s\n' "$py_h100" | sed -nE 's/^ *auto cells within 15 %: ([0-9]+ of [0-9]+); plans within 5 % of the best: ([0-9]+ of [0-9]+).*/auto \1; plans \2/p')
echo "H100 run: C $c_h100; Python $py_h100"
if [ -z "$c_h100" ] || [ "$c_h100" != "$py_h100" ]; then
    echo "FAIL: the H100 run's counts differ (or one side printed none)"; exit 1
fi
echo "ok: the mirror counts the cells the C test counts"
