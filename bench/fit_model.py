"""Refit the wgmma kernel's and the matvec's time models (src/perf/wgmma.c, src/plan_device.c)
to bench ops CSVs; prints the constants for src/tune/sm90.c and the residuals (bench/NOTES.md row
59). The schedule below mirrors src/plan_sm90.c and the model src/perf/wgmma.c for the H200's
tuning rows; tests/test_perf_fit.c checks the C side against the same cells.

  python3 bench/fit_model.py [wgmma ops.csv] [matvec M=1 ops.csv] [matvec M=8 ops.csv]

Needs numpy. Least squares of the relative error; the max() of the two k-block regimes is
resolved by iterating (fit, reassign each cell to its larger branch).
"""
import sys

import numpy as np

from csvmeta import read_csv_with_meta

SMS = 132
ROWS = [(8, 1, 3), (16, 1, 3), (32, 1, 2), (64, 2, 1), (128, 2, 1), (64, 1, 1)]  # tn, wg, bps
R = "bench/results/2026-12-01-"
DEFAULTS = [R + "session4/final/ops.csv", R + "session5/r10-final-e2e/ops.csv",
            R + "session5/r11-sanitize/ops.csv"]


def cdiv(a, b):
    return -(-a // b)


def plan(m, n, k, req):
    """qmm_plan_sm90: req 'auto', 'split1' or 'streamk' -> (tn, wg, bps, tiles, groups, ctas, sk)."""
    g = k // 128
    tn = next((t for t in (8, 16, 32, 64, 128) if m <= t), 128)
    wg = 1 if tn <= 32 else 2
    tiles = cdiv(m, tn) * cdiv(n, 64 * wg)
    if tn == 64 and tiles * 2 <= SMS:
        wg, tiles = 1, cdiv(m, tn) * cdiv(n, 64)
    bps = next(r[2] for r in ROWS if r[:2] == (tn, wg))
    fills = tiles >= SMS and (tiles % SMS == 0 or tiles / (cdiv(tiles, SMS) * SMS) >= 0.85)
    sk = req == "streamk" or (req == "auto" and g > 1 and not fills)
    ctas = max(1, min(tiles * g // 4, SMS * bps)) if sk else tiles
    return tn, wg, bps, tiles, g, ctas, sk


def fix_batch(tn, bps):
    if bps > 1:
        return 4 if tn <= 8 else 2 if tn <= 16 else 1
    return 8 if tn <= 16 else 4 if tn <= 32 else 2 if tn <= 64 else 1


def features(m, n, k, req):
    """Rows of the design matrix for the two branches (latency, shared-SM throughput)."""
    tn, wg, bps, tiles, g, ctas, sk = plan(m, n, k, req)
    waves, segs, peers, npart = 1, 1, 0, 0
    if sk:
        it = tiles * g
        q, r = divmod(it, ctas)
        s = q + (r > 0)
        start = lambda p: it if p >= ctas else p * q + min(p, r)
        edge = r * (q + 1)
        cta_of = lambda i: i // (q + 1) if i < edge else r + (i - edge) // q
        segs = max((start(p + 1) - 1) // g - start(p) // g + 1 for p in range(ctas))
        for t in range(tiles):
            pa, pb = cta_of(t * g), cta_of(t * g + g - 1)
            if pb > pa:
                npart += pb - pa + 1
                peers = max(peers, pb - pa + 1)
    else:
        s, waves = g, cdiv(ctas, SMS * bps)
    f = 2 * 64 * wg * tn * 128 / 1e6
    w = cdiv(ctas, SMS) * s
    base = [1, (4096 * wg + 256 * tn + 128 * wg * tn) / 1e3, 0, 0, 0, 0, 0]
    if npart:
        base[5] = segs + cdiv(peers, fix_batch(tn, bps))
        base[6] = 2 * (256 * wg * tn / 1e3) * npart / 1e3
    lat, thr = list(base), list(base)
    lat[2], lat[3] = waves * s, waves * s * f
    thr[4], thr[3] = w * wg, w * f
    return np.array(lat), np.array(thr)


NAMES = ["fixed_us", "fill_us_per_kb", "stage_us", "us_per_mflop", "issue_us", "round_trip_us",
         "partial_us_per_mb"]
REQ = {"wgmma_s1": "split1", "wgmma": "auto", "streamk": "streamk", "auto": "auto"}


def fit_wgmma(path):
    cells = []
    for r in read_csv_with_meta(path)[1]:
        if r["path"] in ("wgmma", "streamk") and r["contender"] != "wgmma" and r["status"] == "pass":
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            cells.append((r["proj"], m, r["contender"], features(m, n, k, REQ[r["contender"]]),
                          float(r["graph_med_us"])))
    th = np.array([1, 0.03, 0.37, 0.1, 0.25, 0.5, 0.2])
    for _ in range(20):
        rows = [max(x, key=lambda v: v @ th) / t for _, _, _, x, t in cells]
        th = np.linalg.lstsq(np.array(rows), np.ones(len(rows)), rcond=None)[0]
    print("wgmma model (%d cells of %s):" % (len(cells), path))
    for name, v in zip(NAMES, th):
        print("  .%s = %.4g," % (name, v))
    for proj, m, ct, x, t in cells:
        p = max(v @ th for v in x)
        print("  %-5s M=%-5d %-9s measured %7.2f predicted %7.2f %+6.1f %%" % (proj, m, ct, t, p,
                                                                              100 * (p / t - 1)))


def fit_matvec(paths_ms):
    cells = []
    for path, m_keep in paths_ms:
        for r in read_csv_with_meta(path)[1]:
            if r["contender"] == "auto" and int(r["m"]) == m_keep:
                m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
                x = np.array([1, n * k * 0.53125 / 1e6, (m - 1) * n / 1e3])  # us, us/MB, us/(1000 rows)
                cells.append((r["proj"], m, x, float(r["graph_med_us"])))
    th = np.linalg.lstsq(np.array([x / t for *_, x, t in cells]), np.ones(len(cells)), rcond=None)[0]
    print("matvec: fixed_us %.3g, tbs %.3g, row_token_ns %.3g" % (th[0], 1 / th[1], th[2]))
    for proj, m, x, t in cells:
        print("  %-5s M=%d measured %6.2f predicted %6.2f %+5.1f %%" % (proj, m, t, x @ th,
                                                                       100 * (x @ th / t - 1)))


if __name__ == "__main__":
    a = sys.argv[1:] + DEFAULTS[len(sys.argv) - 1:]
    fit_wgmma(a[0])
    fit_matvec([(a[1], 1), (a[2], 8)])
