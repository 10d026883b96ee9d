"""Refit the wgmma kernel's and the matvec's time models (src/perf/wgmma.c, src/plan_device.c)
to bench ops CSVs; prints the constants for src/tune/sm90.c and the residuals (bench/NOTES.md row
59). The schedule below mirrors src/plan_sm90.c and the model src/perf/wgmma.c for the H200's
tuning rows; tests/test_perf_fit.c checks the C side against the same cells.

  python3 bench/fit_model.py [wgmma ops.csv] [matvec M=1 ops.csv] [matvec M=8 ops.csv]

Without arguments the wgmma cells are the final sixth-session build's (bench/NOTES.md row 66):
r7-final's, but M = 64 from r4-icache (the final build's 64-token kernels are r4's).

Needs numpy. Least squares of the relative error; the max() of the two k-block regimes is
resolved by iterating (fit, reassign each cell to its larger branch).
"""
import sys

import numpy as np

from csvmeta import read_csv_with_meta

SMS = 132
ROWS = [(8, 1, 3), (16, 1, 3), (32, 1, 2), (64, 2, 1), (128, 2, 1), (64, 1, 1)]  # tn, wg, bps
R = "bench/results/2026-12-01-"
DEFAULTS = [R + "session6/r7-final/ops.csv", R + "session5/r10-final-e2e/ops.csv",
            R + "session5/r11-sanitize/ops.csv"]
# the final build's M = 64 cells (64-token kernels) were measured in r4-icache
M64 = R + "session6/r4-icache/ops.csv"


def cdiv(a, b):
    return -(-a // b)


# resident CTAs in clusters of s (src/tune/sm90.c sm90_cluster_ctas, the H200's occupancy API)
CLUSTER_CTAS = [[0, 0, 396, 372, 368, 345, 372, 329, 360], [0, 0, 396, 372, 368, 345, 372, 329, 360],
                [0, 0, 264, 237, 248, 235, 234, 224, 240], [0, 0, 132, 117, 120, 110, 102, 105, 120],
                [0, 0, 132, 117, 120, 110, 102, 105, 120], [0, 0, 132, 117, 120, 110, 102, 105, 120]]


def plan(m, n, k, path, split, config):
    """The schedule a cell ran (bench ops' path, split and config columns) -> (tn, wg, bps,
    tiles, groups, ctas, split; split 0 = stream-K), as src/plan_sm90.c makes it."""
    g = k // 128
    tn, wg, bps = ROWS[config]
    tiles = cdiv(m, tn) * cdiv(n, 64 * wg)
    if path == "streamk":
        return tn, wg, bps, tiles, g, max(1, min(tiles * g // 4, SMS * bps)), 0
    return tn, wg, bps, tiles, g, tiles * split, split


def fix_batch(tn, bps):
    if bps > 1:
        return 4 if tn <= 8 else 2 if tn <= 16 else 1
    return 8 if tn <= 16 else 4 if tn <= 32 else 2 if tn <= 64 else 1


def features(m, n, k, path, split, config):
    """Rows of the design matrix for the two branches (latency, shared-SM throughput)."""
    tn, wg, bps, tiles, g, ctas, split = plan(m, n, k, path, split, config)
    waves, segs, peers, npart = 1, 1, 0, 0
    clustered = 2 <= split <= 8
    if split == 0:
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
        s = cdiv(g, split)
        waves = cdiv(ctas, CLUSTER_CTAS[config][split] if clustered else SMS * bps)
        if split > 1 and not clustered:
            peers, npart = split, ctas
    f = 2 * 64 * wg * tn * 128 / 1e6
    # k-blocks on the busiest SM: a clustered launch spreads a wave over its `slots` CTAs
    w = (cdiv(ctas, CLUSTER_CTAS[config][split]) * CLUSTER_CTAS[config][split] / SMS * s) if clustered \
        else cdiv(ctas, SMS) * s
    base = [1, (4096 * wg + 256 * tn + 128 * wg * tn) / 1e3, 0, 0, 0, 0, 0, 0, 0]
    if npart:
        base[5] = segs + cdiv(peers, fix_batch(tn, bps))
        base[6] = 2 * (256 * wg * tn / 1e3) * npart / 1e3
    if clustered:
        base[7], base[8] = waves, waves * 256 * wg * tn / 1e3
    lat, thr = list(base), list(base)
    lat[2], lat[3] = waves * s, waves * s * f
    thr[4], thr[3] = w * wg, w * f
    return np.array(lat), np.array(thr)


NAMES = ["fixed_us", "fill_us_per_kb", "stage_us", "us_per_mflop", "issue_us", "round_trip_us",
         "partial_us_per_mb", "cluster_us", "cluster_us_per_kb"]
FORCED = ("wgmma_s1", "streamk", "cluster")  # the schedules bench ops forces (auto repeats one)


def nonneg_lstsq(a, b):
    """Least squares with every constant >= 0 (the C side rejects negative ones): a constant
    that comes out negative is held at 0 and the rest refit."""
    free = np.ones(a.shape[1], bool)
    while True:
        th = np.zeros(a.shape[1])
        th[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (th >= 0).all():
            return th
        free &= th > 0


def fit_wgmma(path, m64=None):
    cells = []
    rows = read_csv_with_meta(path)[1]
    if m64:
        rows = [r for r in rows if int(r["m"]) != 64] + \
               [r for r in read_csv_with_meta(m64)[1] if int(r["m"]) == 64]
    for r in rows:
        if r["path"] in ("wgmma", "streamk") and r["contender"] in FORCED and r["status"] == "pass":
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            x = features(m, n, k, r["path"], int(r["split"]), int(r["config"]))
            cells.append((r["proj"], m, r["contender"] + (r["split"] if r["contender"] == "cluster" else ""),
                          x, float(r["graph_med_us"])))
    th = np.array([1, 0.03, 0.37, 0.1, 0.25, 0.5, 0.2, 0.8, 0.012])
    for _ in range(20):
        rows = np.array([max(x, key=lambda v: v @ th) / t for _, _, _, x, t in cells])
        th = nonneg_lstsq(rows, np.ones(len(rows)))
    print("wgmma model (%d cells of %s%s):" % (len(cells), path, " and M = 64 of " + m64 if m64 else ""))
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
    fit_wgmma(a[0], M64 if len(sys.argv) < 2 else None)
    fit_matvec([(a[1], 1), (a[2], 8)])
