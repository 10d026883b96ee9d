"""Refit the wgmma kernel's and the matvec's time models (src/perf/wgmma.c, src/plan_device.c)
to bench ops CSVs; prints the constants for src/tune/sm90.c, the residuals, and what the plans
would be (bench/NOTES.md rows 59, 78). The schedule below mirrors src/plan_sm90.c and the wgmma
choice of src/plan_call.c, the model src/perf/wgmma.c, for the H200's tuning rows;
tests/test_perf_fit.c checks the C side against the same cells.

  python3 bench/fit_model.py [wgmma ops.csv [check ops.csv [matvec M=1 ops.csv [M=8 ops.csv]]]]
  python3 bench/fit_model.py --shipped [ops.csv ...]   the shipped constants (SHIPPED), no fit
  python3 bench/fit_model.py --wide ops.csv           the 256-token tile's wide_kblock_us alone
  python3 bench/fit_model.py --dense ops.csv ...      the dense path's constants (medians)
  python3 bench/fit_model.py --matvec ops.csv ...     the matvec's constants (medians, M <= 8)

Without arguments the wgmma cells are the seventeenth session's final run
(`2026-12-02-session17/r5-final/ops_final.csv`, the five Qwen3-4B projections) together with
the eighteenth session's other shapes (`2026-12-04-session18/r1-owner-stores/plans.csv`: the
stacked gate|up, Qwen3-0.6B's gate, 8B's gate and down, 14B's q at M = 9…128), checked on the
first run's second pass (`ops_new2.csv`, M = 9…512); the matvec's are the fifth session's (as
shipped). The shipped constants were fitted to those cells (NOTES.md row 119), but for
wide_kblock_us (the 256-token tile, whose plans start at 1 024 tokens), fitted alone with --wide
to the twenty-fifth session's `r2-final/ops_final.csv` (NOTES.md row 161); cells whose plan is a
cluster of the other block height, or one wave of clusters with tiles set aside (planned where the
run's GPU is a 132-SM H100, from the 128-token tile: NOTES.md row 230), are measured only by their
auto row (the latter where its plan_rest_tiles and plan_rest_split are the plan's).

For each CSV: the fit's error on the forced wgmma contenders (wgmma_s1, streamk, cluster S, and
from 1 024 tokens the 128-token tile's t128_s1, t128_sk),
the auto cells as the planner would plan them again (prediction against the auto row where it
ran that schedule, else the forced contender that ran it, as tests/test_perf_fit.c looks them
up; the matvec and dense predictions with the shipped constants), and the plan within 5 % of
qmm's best measured contender (issue 11: >= 80 % of the auto cells within 15 %, >= 95 % of
plans within 5 %).

Needs numpy. Least squares of the relative error, every constant >= 0 (the C side rejects
negative ones).
"""
import sys

import numpy as np

from csvmeta import read_csv_with_meta

SMS = 132
ROWS = [(8, 1, 3), (16, 1, 3), (32, 1, 3), (64, 2, 1), (128, 2, 1), (64, 1, 2), (128, 1, 1),
        (256, 2, 1), (32, 2, 2), (64, 2, 2), (24, 1, 3), (48, 1, 3)]  # tn, wg, bps
PAIRED_64 = 9  # the 64-token tile's 128-row blocks two CTAs a SM (its own request)
ALT_MIN_TILE = 64  # src/tune/sm90.c wgmma_alt_min_tile: the H200 table's (RUN: the run's GPU's)
WIDE_MIN_M = 1024  # src/tune/sm90.c: the 256-token tile from 1 024 tokens
# src/tune/sm90.c wgmma_rest_min_tile: one wave of clusters and the tiles left aside from this
# token tile (0: never, the H200 table's; RUN: the run's GPU's)
REST_MIN_TILE = 0
REST_MAX_WAYS = 8  # src/tune/sm90.h QMM_SM90_REST_MAX_WAYS: the rest's split
REST_MAX_TOKEN_TILES = 2  # src/tune/sm90.h QMM_SM90_REST_MAX_TOKEN_TILES: where AUTO weighs them
MAX_COUNTED_TILES = 65536  # src/tune/sm90.h QMM_SM90_MAX_COUNTED_TILES
NO_REST = (0, 0)  # a plan without tiles aside: (rest_tiles, rest_split)
# the run being read: runs before the 256-token tile existed have none; an H100's (132 SMs) plans
# weigh the other block height from 32 tokens and set tiles aside from 128 (qmm_tune_for_gpu)
RUN = dict(wide_min_m=WIDE_MIN_M, alt_min_tile=ALT_MIN_TILE, rest_min_tile=REST_MIN_TILE)
R = "bench/results/2026-12-01-"
R17 = "bench/results/2026-12-02-session17/r5-final/"
R18 = "bench/results/2026-12-04-session18/r1-owner-stores/"
# (their M = 32 ran the 32-token row two CTAs a SM, three since session 42; their M = 64 the
# 64-token tile one CTA a SM, two since session 37, and gate's stream-K, the paired row's clusters
# since session 43: left out)
DEFAULTS = [R17 + "ops_final.csv+" + R18 + "plans.csv~32,64", R17 + "ops_new2.csv~32,64",
            R + "session5/r10-final-e2e/ops.csv", R + "session5/r11-sanitize/ops.csv"]
NAMES = ["fixed_us", "fill_us_per_kb", "stage_us", "us_per_mflop", "issue_us", "round_trip_us",
         "partial_us_per_mb", "cluster_us", "cluster_us_per_kb", "wide_kblock_us"]
# src/tune/sm90.c: the wgmma model, the matvec (fixed µs, TB/s, ns a row-token), the dense path
SHIPPED = dict(fixed_us=0.0, fill_us_per_kb=0.007312, stage_us=0.2555, us_per_mflop=0.06651,
               issue_us=0.1569, round_trip_us=0.8027, partial_us_per_mb=0.08809, cluster_us=2.178,
               cluster_us_per_kb=0.0335, wide_kblock_us=0.228)
MATVEC = (2.15, 2.91, 0.038)
DENSE = (810.0, 4.9, 3.17)  # dense_tflops, dense_fixed_us, dense_dequant_tbs
BANDWIDTH_TBS = 3.9
# the schedules bench ops forces (auto repeats one); t128_*: the 128-token tile's unsplit and
# stream-K where the table takes 256-token tiles (from wide_min_m: NOTES.md row 179)
FORCED = ("wgmma_s1", "streamk", "cluster", "t128_s1", "t128_sk")
NOT_CONTENDERS = ("auto", "cublas", "read", "wgmma")  # not qmm's own forced schedules

# resident CTAs in clusters of s (src/tune/sm90.c sm90_cluster_ctas, the H200's occupancy API)
CLUSTER_CTAS = [[0, 0, 396, 372, 368, 345, 372, 329, 360], [0, 0, 396, 372, 368, 345, 372, 329, 360],
                [0, 0, 396, 372, 368, 345, 372, 329, 360], [0, 0, 132, 117, 120, 110, 102, 105, 120],
                [0, 0, 132, 117, 120, 110, 102, 105, 120], [0, 0, 264, 237, 248, 235, 234, 224, 240],
                [0, 0, 132, 117, 120, 110, 102, 105, 120], [0] * 9,  # TN 256: no clusters
                [0, 0, 264, 237, 248, 235, 234, 224, 240],
                [0, 0, 264, 237, 248, 235, 234, 224, 240],  # PAIRED_64: the 32-token 128-row row's
                [0, 0, 396, 372, 368, 345, 372, 329, 360], [0, 0, 396, 372, 368, 345, 372, 329, 360]]


def cdiv(a, b):
    return -(-a // b)


def schedule(m, n, k, req, split=1, narrow=False):
    """src/plan_sm90.c for req 'auto', 'streamk' or 'split' -> (config, tiles, groups, ctas,
    split; split 0 = stream-K); narrow: 128-token tiles at any M (wgmma_wide_min_m 0)."""
    g = k // 128
    wide = not narrow and RUN["wide_min_m"] and m >= RUN["wide_min_m"]
    tn = 256 if wide else next((t for t in (8, 16, 24, 32, 48, 64, 128) if m <= t), 128)
    wg = 1 if tn <= 48 else 2
    tiles = cdiv(m, tn) * cdiv(n, 64 * wg)
    if tn == 64 and tiles * 2 <= SMS:
        wg, tiles = 1, cdiv(m, tn) * cdiv(n, 64)
    if req == "paired":  # QMM_SM90_SPLIT_PAIRED: 64 tokens x 128 rows two CTAs a SM
        assert tn == 64
        tiles = cdiv(m, 64) * cdiv(n, 128)
        return PAIRED_64, tiles, g, tiles * split, split
    if req == "alt":  # QMM_SM90_SPLIT_ALT: the other block height (64 <-> 128 rows)
        if tn in (32, 64, 128):
            wg = 3 - wg
            tiles = cdiv(m, tn) * cdiv(n, 64 * wg)
        req = "split"
    config = next(i for i, r in enumerate(ROWS) if r[:2] == (tn, wg))
    fills = tiles >= SMS and (tiles % SMS == 0 or tiles / (cdiv(tiles, SMS) * SMS) >= 0.85)
    if req == "streamk" or (req == "auto" and g > 1 and not fills):
        return config, tiles, g, max(1, min(tiles * g // 4, SMS * ROWS[config][2])), 0
    split = 1 if req == "auto" else max(split, 1)
    return config, tiles, g, tiles * split, split


def plan_rest(sched):
    """src/plan_sm90.c qmm_sm90_plan_rest: a split in clusters beyond one wave -> its two
    launches' schedules (floor(slots / split) tiles in clusters, one wave; the rest stream-K
    over rest x ways CTAs on the SMs left), or None where it does not apply."""
    config, tiles, g, ctas, split = sched
    tn, _, bps = ROWS[config]
    slots = CLUSTER_CTAS[config][split] if 2 <= split <= 8 and tn <= 128 else 0
    if slots <= 0 or ctas < slots:  # not clustered, or one wave already
        return None
    first = slots // split
    rest = tiles - first
    ways = min((SMS * bps - first * split) // rest if rest > 0 else 0, REST_MAX_WAYS, g)
    if first < 1 or rest < 1 or ways < 2 or tiles > MAX_COUNTED_TILES:
        return None
    # src/plan_device.c prices each as its own launch: the model counts exactly those tiles
    return (config, first, g, first * split, split), (config, rest, g, rest * ways, 0)


def fix_batch(tn, bps):
    if bps > 1:
        return 4 if tn <= 8 else 2 if tn <= 16 else 1
    return 8 if tn <= 16 else 4 if tn <= 32 else 2 if tn <= 64 else 1


def features(sched):
    """The model's row of the design matrix (NAMES order): src/perf/wgmma.c."""
    config, tiles, g, ctas, split = sched
    tn, wg, bps = ROWS[config]
    waves, segs, peers, npart = 1, 1, 0, 0
    clustered = 2 <= split <= 8 and tn <= 128
    if split == 0:  # the 256-token tile: whole tiles for the full waves first (W a CTA)
        w_dp = tiles // ctas if tn >= 256 else 0
        sk_tiles = tiles - w_dp * ctas
        it = sk_tiles * g
        q, r = divmod(it, ctas)
        s = w_dp * g + q + (r > 0)
        start = lambda p: it if p >= ctas else p * q + min(p, r)
        edge = r * (q + 1)
        cta_of = lambda i: i // (q + 1) if i < edge else r + (i - edge) // q
        segs = max([(start(p + 1) - 1) // g - start(p) // g + 1 for p in range(ctas)
                    if start(p + 1) > start(p)] or [0])
        for t in range(sk_tiles):
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
    # k-blocks on the busiest SM; a clustered launch's spread over the SMs its clusters occupy
    w = ctas * s * bps / CLUSTER_CTAS[config][split] if clustered else cdiv(ctas, SMS) * s
    fill_kb = (4096 * wg + 256 * tn + 128 * wg * tn) / 1e3
    x = [1, fill_kb, waves * s, waves * s * f, w * wg, 0, 0, 0, 0, waves * s if tn >= 256 else 0]
    if npart:  # the 256-token tile's partial: two rounds staged through the ring (row 269)
        x[5] = segs + cdiv(peers, fix_batch(tn, bps)) * (2 if tn >= 256 else 1)
        x[6] = 2 * (256 * wg * tn / 1e3) * npart / 1e3
    if clustered:
        x[7], x[8] = waves, waves * 256 * wg * tn / 1e3
    return np.array(x, float)


def forced_schedule(m, n, k, contender, split):
    narrow = contender.startswith("t128")
    if contender in ("wgmma_s1", "t128_s1"):
        return schedule(m, n, k, "split", 1, narrow)
    if contender in ("streamk", "t128_sk"):
        return schedule(m, n, k, "streamk", narrow=narrow)
    return schedule(m, n, k, "split", split)


def auto_plan(m, n, k, th):
    """The plan qmm_plan_call makes on the run's GPU -> (contender that ran it, split,
    predicted µs, (tiles set aside, their split): the plan's rest_tiles / rest_split, (0, 0) but
    in clusters beyond one wave)."""
    if m <= 8:  # matvec_max_m
        mb = n * k * 0.53125 / 1e6
        return "matvec", 0, MATVEC[0] + mb / MATVEC[1] + (m - 1) * n * MATVEC[2] / 1e3, NO_REST
    # long_prompt (beyond wgmma_max_m = 512): the kernel's plan against the dense path; the runs
    # before the twenty-fifth session (no 256-token tile) ran the table's dense path from 513
    if not RUN["wide_min_m"] and m >= 513:
        return "dense", 0, dense_us(m, n, k, *DENSE), NO_REST
    best = kernel_plan(m, n, k, th)
    if RUN["wide_min_m"] and m >= RUN["wide_min_m"]:
        # the 128-token tile's one wave of clusters of 128-row blocks (plan_call.c
        # wide_or_clusters, NOTES.md row 251); its 64-row blocks ("alt") are not weighed there
        c = kernel_plan(m, n, k, th, narrow=True)
        if c[0] == "cluster" and c[3] == NO_REST and 0 < c[2] < best[2] * 0.999:
            best = ("t128", c[1], c[2], NO_REST)
    if m > 512 and best[2] > dense_us(m, n, k, *DENSE):  # the kernel on a tie
        return "dense", 0, dense_us(m, n, k, *DENSE), NO_REST
    return best


def kernel_plan(m, n, k, th, narrow=False):
    """plan_wgmma's AUTO plan (narrow: on 128-token tiles at any M) -> as auto_plan."""
    p = schedule(m, n, k, "auto", narrow=narrow)
    best = ("wgmma_s1" if p[4] == 1 else "streamk", 0, features(p) @ th, NO_REST)
    if p[4] == 0:  # stream-K: unsplit or split-K in clusters where predicted faster, one wave;
        # token tiles from ALT_MIN_TILE on: clusters also in the other block height ("alt")
        both = ROWS[p[0]][0] >= RUN["alt_min_tile"]
        paired = ROWS[p[0]][:2] == (64, 2)  # the rule's blocks 128 rows at 64 tokens (row 208)
        for req, s in [("split", s) for s in range(1, 9)] + [("alt", s) for s in range(2, 9)] + \
                [("paired", s) for s in range(2, 9)]:
            if s > k // 128 or (req == "alt" and not both) or (req == "paired" and not paired):
                continue
            q = schedule(m, n, k, req, s, narrow)
            cap = CLUSTER_CTAS[q[0]][s] if s >= 2 else 0  # clusters leave a slot free (row 207)
            if not cap and q[3] > SMS * ROWS[q[0]][2]:
                continue
            parts = (q,)
            if cap and q[3] >= cap:  # beyond one wave: the tiles aside, or not at all
                parts = rest_parts(q, req, m)
                if not parts:
                    continue
            t = max(features(x) @ th for x in parts)  # the slower launch (qmm_plan_predict_us)
            if 0 < t < best[2] * 0.999:
                rest = (parts[1][1], parts[1][3] // parts[1][1]) if len(parts) > 1 else NO_REST
                best = ({"split": "cluster"}.get(req, req), s, t, rest) if s >= 2 else \
                    ("wgmma_s1", 0, t, NO_REST)
    return best


def aside(rest):
    """A plan's tiles aside as the evaluation prints them ('' without)."""
    return " +%d aside in %d" % rest if rest[0] else ""


def rest_parts(q, req, m):
    """plan_wgmma's candidate in clusters beyond one wave: one wave of them and the tiles aside,
    in the rule's block height only (not "alt" nor "paired"), from the run's GPU's
    rest_min_tile token tile on, over at most REST_MAX_TOKEN_TILES token tiles; None: not a
    candidate."""
    tile, tn = RUN["rest_min_tile"], ROWS[q[0]][0]
    ok = req == "split" and tile and tn >= tile and cdiv(m, tn) <= REST_MAX_TOKEN_TILES
    return plan_rest(q) if ok else None


def read_cells(path):
    """{(proj, m): {'n', 'k', 't': {(contender, split): µs}, 'auto': (path, split)}}; path may
    join several CSVs with '+' (their cells together), then '^' and overlay CSVs ('^' between
    them), later runs of a changed kernel row whose (proj, m) pairs replace the base's in turn
    (only pairs the base has: tests/test_perf_fit.c's overlays), then '|' and addition CSVs
    whose (proj, m) pairs the cells lack so far join them (its additions); a last '~' and
    token counts (',' between them) leaves those M out (a kernel row changed since the run: the
    stale M of tests/test_perf_fit.c's datasets); before it, '@' and projections (',' between
    them) keeps only those (a dataset's projs)."""
    path, _, stale = path.partition("~")
    path, _, projs = path.partition("@")
    projs = set(projs.split(",")) if projs else None
    stale = {int(x) for x in stale.split(",") if x}
    path, *additions = path.split("|")
    path, *overlays = path.split("^")
    cells = {}
    runs = [read_csv_with_meta(p) for p in path.split("+")]
    rows = [r for _, rs in runs for r in rs]
    h100 = all("H100" in m.get("gpu", "") and m.get("sms") == str(SMS) for m, _ in runs)
    RUN["alt_min_tile"] = 32 if h100 else ALT_MIN_TILE
    RUN["rest_min_tile"] = 128 if h100 else REST_MIN_TILE
    for overlay in overlays:
        over = read_csv_with_meta(overlay)[1]
        base = {(r["proj"], r["m"]) for r in rows}
        pairs = {(r["proj"], r["m"]) for r in over} & base
        rows = [r for r in rows if (r["proj"], r["m"]) not in pairs] + \
               [r for r in over if (r["proj"], r["m"]) in pairs]
    for addition in additions:
        held = {(r["proj"], r["m"]) for r in rows}
        rows += [r for r in read_csv_with_meta(addition)[1] if (r["proj"], r["m"]) not in held]
    # the runs before the twenty-fifth session had no 256-token tile: the mirror plans them
    # without it (this and the following calls, until the next read_cells)
    RUN["wide_min_m"] = WIDE_MIN_M if any(r["tile_m"] == "256" for r in rows) else 0
    for r in rows:
        if r["status"] != "pass" or int(r["m"]) in stale or (projs and r["proj"] not in projs):
            continue
        c = cells.setdefault((r["proj"], int(r["m"])), dict(n=int(r["n"]), k=int(r["k"]), t={}))
        assert (c["n"], c["k"]) == (int(r["n"]), int(r["k"])), ("one name, two shapes", path, r["proj"])
        c["t"][(r["contender"], int(r["split"]) if r["contender"] == "cluster" else 0)] = \
            float(r["graph_med_us"])
        if r["contender"] == "auto":
            c["auto"] = (r["path"], int(r["split"]))
            c["auto_rows"] = int(r["tile_n"])
            c["auto_tile"] = (int(r["tile_m"]), int(r["tile_n"]))
            c["auto_config"] = int(r["config"]) if r.get("config", "").lstrip("-").isdigit() else None
            # its tiles aside and their split (none before session 46)
            c["auto_rest"] = (int(r.get("plan_rest_tiles") or 0), int(r.get("plan_rest_split") or 0))
        elif r["contender"] == "wgmma":  # the wgmma family's own plan: what it ran
            c["wgmma_ran"] = (r["path"], int(r["split"]), int(r["tile_n"]))
        elif r["contender"] == "t128":  # the family's plan on 128-token tiles (from wide_min_m)
            c["t128_ran"] = (r["path"], int(r["split"]), int(r["tile_m"]), int(r["tile_n"]))
        elif r["contender"] in FORCED:  # the mirror plans what the bench ran
            sched = forced_schedule(int(r["m"]), c["n"], c["k"], r["contender"], int(r["split"]))
            tn, wg, _ = ROWS[sched[0]]
            assert (tn, 64 * wg) == (int(r["tile_m"]), int(r["tile_n"])), r
    return cells


def forced_rows(cells):
    for (proj, m), c in sorted(cells.items(), key=lambda x: (x[0][1], x[0][0])):
        for (ct, s), t in sorted(c["t"].items()):
            if ct in FORCED:
                x = features(forced_schedule(m, c["n"], c["k"], ct, s))
                yield proj, m, ct + (str(s) if s else ""), x, t


def nonneg_lstsq(a, b):
    """Least squares with every constant >= 0: a constant that comes out negative is held at 0
    and the rest refit."""
    free = np.ones(a.shape[1], bool)
    while True:
        th = np.zeros(a.shape[1])
        th[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (th >= 0).all():
            return th
        free &= th > 0


def fit_wgmma(cells):
    rows = [(x, t) for *_, x, t in forced_rows(cells)]
    return nonneg_lstsq(np.array([x / t for x, t in rows]), np.ones(len(rows)))


def auto_ran(m, c, ct, s, rest=NO_REST):
    """Whether the cell's auto row ran the plan (ct, s, rest tiles aside) of auto_plan: path,
    split, tiles aside and, for the wgmma kernel, its tile (tests/test_perf_fit.c measured_plan)."""
    if "auto" not in c or c.get("auto_rest", NO_REST) != rest:
        return False
    if ct in ("matvec", "dense"):
        return c["auto"][0] == ct
    if ct in ("alt", "paired"):
        return False  # evaluate looks its row up by block height
    sched = schedule(m, c["n"], c["k"], "streamk") if ct == "streamk" else \
        schedule(m, c["n"], c["k"], "split", 1 if ct == "wgmma_s1" else s, ct == "t128")
    tn, wg, _ = ROWS[sched[0]]
    path, split = ("streamk", 1) if ct == "streamk" else ("wgmma", 1 if ct == "wgmma_s1" else s)
    if c.get("auto_config") == PAIRED_64 and sched[0] != PAIRED_64:
        return False  # the same tile two CTAs a SM: not this schedule
    return c["auto"] == (path, split) and c.get("auto_tile") == (tn, 64 * wg)


def evaluate(path, cells, th, residuals=False):
    """Prints the forced contenders' and the auto cells' errors and the plans against the best
    measured contender; returns (auto within 15 %, plans within 5 %, cells)."""
    forced = [(proj, m, ct, x @ th, t) for proj, m, ct, x, t in forced_rows(cells)]
    narrow = [f for f in forced if f[2].startswith("t128")]  # not in tests/test_perf_fit.c's count
    forced = [f for f in forced if not f[2].startswith("t128")]
    ok = sum(abs(p / t - 1) <= 0.15 for *_, p, t in forced)
    print("%s: wgmma_s1, streamk, cluster cells within 15 %%: %d of %d" % (path, ok, len(forced)))
    if narrow:
        print("%s: t128_s1, t128_sk cells within 15 %%: %d of %d"
              % (path, sum(abs(p / t - 1) <= 0.15 for *_, p, t in narrow), len(narrow)))
    forced += narrow
    if residuals:
        for proj, m, ct, p, t in forced:
            print("  %-5s M=%-5d %-9s measured %7.2f predicted %7.2f %+6.1f %%" % (proj, m, ct, t, p,
                                                                                  100 * (p / t - 1)))
    within15 = within5 = 0
    for (proj, m), c in sorted(cells.items(), key=lambda x: (x[0][1], x[0][0])):
        ct, s, p, rest = auto_plan(m, c["n"], c["k"], th)
        # no forced contender sets tiles aside, and the runs do not say whether "wgmma" did
        t = float("nan") if rest[0] else c["t"].get((ct, s), float("nan"))
        same_rest = c.get("auto_rest", NO_REST) == rest
        if auto_ran(m, c, ct, s, rest):  # the auto row itself, as tests/test_perf_fit.c takes it
            t = c["t"][("auto", 0)]
        elif ct == "t128":  # the "t128" contender, where it ran this schedule
            tn, wg, _ = ROWS[schedule(m, c["n"], c["k"], "split", s, True)[0]]
            ok = c.get("t128_ran") == ("wgmma", s, tn, 64 * wg)
            t = c["t"][("t128", 0)] if ok else float("nan")
        elif ct == "alt":  # no forced contender runs the other block height: the auto row, if it
            # did, else the "wgmma" contender (the wgmma family's own plan, this one)
            rows = 64 * (3 - ROWS[schedule(m, c["n"], c["k"], "split", s)[0]][1])
            if c["auto"] == ("wgmma", s) and c.get("auto_rows") == rows and same_rest:
                t = c["t"][("auto", 0)]
            elif c.get("wgmma_ran") == ("wgmma", s, rows):
                t = c["t"][("wgmma", 0)]
        elif ct == "paired" and c.get("auto") == ("wgmma", s) and c.get("auto_config") == PAIRED_64 \
                and same_rest:
            t = c["t"][("auto", 0)]  # no forced contender runs it: the auto row, if it did
        best, (bct, bs) = min((v, key) for key, v in c["t"].items() if key[0] not in NOT_CONTENDERS)
        e15, e5 = abs(p / t - 1) <= 0.15, t <= 1.05 * best
        within15, within5 = within15 + e15, within5 + e5
        ran = {"matvec": "matvec", "dense": "dense", "streamk": "streamk"}.get(ct, "wgmma")
        print("  %-5s M=%-5d plan %-8s %d%s predicted %7.2f measured %7.2f %+6.1f %%%s"
              " | best %s%s %7.2f%s%s"
              % (proj, m, ct, s, aside(rest), p, t, 100 * (p / t - 1), "" if e15 else " MISS", bct,
                 bs or "", best, "" if e5 else " MISS %+.1f %%" % (100 * (t / best - 1)),
                 "" if c["auto"] == (ran, max(s, 1)) and same_rest else
                 " (ran %s %d%s)" % (*c["auto"], aside(c.get("auto_rest", NO_REST)))))
    n = len(cells)
    print("  auto cells within 15 %%: %d of %d; plans within 5 %% of the best: %d of %d"
          % (within15, n, within5, n))
    return within15, within5, n


def dense_us(m, n, k, tflops, fixed_us, dequant_tbs):
    """src/plan_device.c: the dense path (dequantize, then cuBLAS) with the fitted constants."""
    nk = n * k
    gemm_bytes = 2 * nk + 2 * m * k + 2 * m * n
    gemm = max(2.0 * m * nk / (tflops * 1e6), gemm_bytes / (BANDWIDTH_TBS * 1e6))
    return fixed_us + nk * 2.53125 / (dequant_tbs * 1e6) + gemm


def medians(paths, contender, keep):
    """{(proj, n, k, m): median µs} of a contender's passing rows over several CSVs."""
    runs = {}
    for path in paths:
        for r in read_csv_with_meta(path)[1]:
            if r.get("contender") == contender and r["status"] == "pass" and keep(int(r["m"])):
                key = (r["proj"], int(r["n"]), int(r["k"]), int(r["m"]))
                runs.setdefault(key, []).append(float(r["graph_med_us"]))
    return {key: float(np.median(v)) for key, v in sorted(runs.items())}


def fit_dense(paths):
    """The dense path's constants: for each GEMM rate on a grid, the fixed µs and the dequantize
    rate by least squares of the relative error; the rate with the least squared error wins."""
    cells = medians(paths, "dense", lambda m: True)
    best = None
    for tflops in range(500, 1001, 10):
        rows = [((1.0, n * k * 2.53125 / 1e6), t - dense_us(m, n, k, tflops, 0.0, float("inf")), t)
                for (_, n, k, m), t in cells.items()]
        a = np.array([np.array(x) / t for x, _, t in rows])
        th = nonneg_lstsq(a, np.array([g / t for _, g, t in rows]))
        if th[1] <= 0:
            continue
        err = [dense_us(m, n, k, tflops, th[0], 1 / th[1]) / t - 1
               for (_, n, k, m), t in cells.items()]
        if best is None or np.dot(err, err) < best[0]:
            best = (float(np.dot(err, err)), tflops, th[0], 1 / th[1], err)
    if best is None:
        sys.exit("fit_dense: no GEMM rate on the grid gives a positive dequantize rate")
    _, tflops, fixed, tbs, err = best
    print("dense (%d cells, medians over %d CSVs): dense_tflops %.0f, dense_fixed_us %.3g, "
          "dense_dequant_tbs %.3g" % (len(cells), len(paths), tflops, fixed, tbs))
    for ((proj, n, k, m), t), e in zip(cells.items(), err):
        print("  %-5s M=%-5d measured %7.2f predicted %7.2f %+5.1f %%"
              % (proj, m, t, t * (1 + e), 100 * e))


def fit_matvec_medians(paths):
    """The matvec's constants over the medians of its rows at M <= 8 in several CSVs."""
    cells = medians(paths, "matvec", lambda m: m <= 8)
    rows = [(proj, m, np.array([1, n * k * 0.53125 / 1e6, (m - 1) * n / 1e3]), t)
            for (proj, n, k, m), t in cells.items()]
    th = nonneg_lstsq(np.array([x / t for *_, x, t in rows]), np.ones(len(rows)))
    if th[1] <= 0:
        sys.exit("fit_matvec_medians: no positive rate fits these cells")
    print("matvec (%d cells, medians over %d CSVs): fixed_us %.3g, tbs %.3g, row_token_ns %.3g"
          % (len(rows), len(paths), th[0], 1 / th[1], th[2]))
    for proj, m, x, t in rows:
        print("  %-5s M=%d measured %6.2f predicted %6.2f %+5.1f %%" % (proj, m, t, x @ th,
                                                                       100 * (x @ th / t - 1)))


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


def fit_wide(cells):
    """wide_kblock_us alone, the other constants as shipped: least squares of the relative error
    over the 256-token tile's forced cells."""
    th = np.array([SHIPPED[k] for k in NAMES])
    i = NAMES.index("wide_kblock_us")
    th[i] = 0
    rows = [(x, t) for *_, x, t in forced_rows(cells) if x[i] > 0]
    a = np.array([x[i] / t for x, t in rows])
    b = np.array([1 - (x @ th) / t for x, t in rows])
    th[i] = max(0.0, float(a @ b / (a @ a)))
    print("wide_kblock_us = %.3g over %d cells of the 256-token tile" % (th[i], len(rows)))
    return th


if __name__ == "__main__":
    if sys.argv[1:2] == ["--wide"]:
        path = sys.argv[2]
        cells = read_cells(path)
        evaluate(path, cells, fit_wide(cells))
        sys.exit(0)
    if sys.argv[1:2] in (["--dense"], ["--matvec"]):
        (fit_dense if sys.argv[1] == "--dense" else fit_matvec_medians)(sys.argv[2:])
        sys.exit(0)
    if sys.argv[1:2] == ["--shipped"]:
        th = np.array([SHIPPED[k] for k in NAMES])
        for path in sys.argv[2:] or DEFAULTS[:2]:
            evaluate(path, read_cells(path), th)
        sys.exit(0)
    a = sys.argv[1:] + DEFAULTS[len(sys.argv) - 1:]
    cells = read_cells(a[0])
    th = fit_wgmma(cells)
    print("wgmma model (%d forced cells of %s):" % (sum(1 for _ in forced_rows(cells)), a[0]))
    for name, v in zip(NAMES, th):
        print("  .%s = %.4g," % (name, v))
    evaluate(a[0], cells, th, residuals=True)
    evaluate(a[1], read_cells(a[1]), th)
    fit_matvec([(a[2], 1), (a[3], 8)])
