#!/usr/bin/env python3
"""The auto contender of two `qmm bench ops` CSVs, cell by cell (projection, M): new / base time
and the plans, the cells over a tolerance, the worst. Issue 11 asks that no cell be more than 2 %
slower than the auto path of commit b0fce18; both CSVs should come from one device call
(alternating builds), since calls differ by a few percent.

  python3 bench/compare_auto.py BASE.csv NEW.csv [--tol 0.02] [BASE2.csv NEW2.csv ...]

With several pairs, a cell's ratio is the median of its pairs' ratios (the times shown are the
first pair's). Exit status 1 when a cell is over the tolerance, 2 on bad input."""
import csv
import statistics
import sys

from csvmeta import open_csv


def auto_cells(path):
    """(proj, m) -> (graph_med_us, 'path/split tile_mxtile_n') of the auto rows."""
    try:
        with open_csv(path) as f:
            rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
    except OSError as e:
        sys.exit(f"compare_auto: {e}")
    need = {"proj", "m", "contender", "graph_med_us", "path", "split", "tile_m", "tile_n"}
    if not rows or not need <= set(rows[0]):
        print(f"compare_auto: {path}: not a bench ops CSV (needs {', '.join(sorted(need))})",
              file=sys.stderr)
        sys.exit(2)
    cells = {}
    for r in rows:
        if r["contender"] != "auto":
            continue
        try:
            t = float(r["graph_med_us"])
        except ValueError:
            continue
        aside = r.get("plan_rest_tiles") or "0"  # the tiles aside, from session 46's CSVs on
        aside = f"+{aside}r{r.get('plan_rest_split')}" if aside != "0" else ""
        cells[(r["proj"], int(r["m"]))] = (t, f"{r['path']}/{r['split']}{aside} {r['tile_m']}x{r['tile_n']}")
    return cells


def main(argv):
    tol = 0.02
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--tol" and i + 1 < len(argv):
            tol = float(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 2 or len(args) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    pairs = [(auto_cells(args[j]), auto_cells(args[j + 1])) for j in range(0, len(args), 2)]
    keys = sorted(set.intersection(*[set(b) & set(n) for b, n in pairs]), key=lambda k: (k[1], k[0]))
    if not keys:
        print("compare_auto: no (projection, M) cell in every CSV", file=sys.stderr)
        return 2
    over = []
    ratio = {k: statistics.median([n[k][0] / b[k][0] for b, n in pairs]) for k in keys}
    print(f"{'proj':6} {'M':>5} {'base us':>9} {'new us':>9} {'new/base':>9}  plans (base -> new)")
    for k in keys:
        r = ratio[k]
        b, n = pairs[0][0][k], pairs[0][1][k]
        flag = " OVER" if r > 1 + tol else ""
        print(f"{k[0]:6} {k[1]:5d} {b[0]:9.2f} {n[0]:9.2f} {r:9.3f}  {b[1]} -> {n[1]}{flag}")
        if flag:
            over.append((r, k))
    worst = max((r, k) for k, r in ratio.items())
    print(f"{len(keys)} cells, {len(pairs)} pair(s); worst new/base {worst[0]:.3f} ({worst[1][0]} M={worst[1][1]});"
          f" {len(over)} over {1 + tol:.2f}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
