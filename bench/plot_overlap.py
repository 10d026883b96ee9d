#!/usr/bin/env python3
"""Plot the timelines of a `qmm bench overlap --csv` file.

    python3 bench/plot_overlap.py TIMELINE.csv [-o OUT.png]

One panel per (configuration, buffers b): three lanes (load = H2D, compute, store = D2H). The
measured segments (CUDA events) are filled bars in the upper half of each lane, the schedule
model's segments (fed with each engine's time alone) hatched bars in the lower half; a bar's
colour is its chunk. OUT defaults to the CSV path with .png. Needs matplotlib.
"""
import argparse
import os
import sys
from collections import defaultdict

from csvmeta import read_csv_with_meta

ENGINES = ["load", "compute", "store"]


def read(path):
    """-> (metadata from the '# key: value' lines, {(config, b): {kind: [row dicts]}}, config
    order)."""
    meta, table = read_csv_with_meta(path)
    runs = defaultdict(lambda: defaultdict(list))
    order = []
    for r in table:
        r["buffers"] = int(r["buffers"])
        r["chunk"] = int(r["chunk"])
        r["start_us"] = float(r["start_us"])
        r["end_us"] = float(r["end_us"])
        if r["config"] not in order:
            order.append(r["config"])
        runs[(r["config"], r["buffers"])][r["kind"]].append(r)
    return meta, runs, order


def makespan_ms(rows):
    return max((r["end_us"] for r in rows), default=0.0) / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", help="PNG path (default: the CSV path with .png)")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("plot_overlap.py needs matplotlib (pip install matplotlib)")

    meta, runs, order = read(args.csv)
    if not runs:
        sys.exit(f"{args.csv}: no timeline rows")
    bs = sorted({b for (_, b) in runs})
    fig, axes = plt.subplots(len(order), len(bs), figsize=(5.2 * len(bs), 2.3 * len(order)),
                             squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ci, config in enumerate(order):
        # one time scale per configuration, so b = 1, 2, 3 compare by eye
        span = max(makespan_ms(rows) for (c, _), kinds in runs.items() if c == config
                   for rows in kinds.values())
        for bi, b in enumerate(bs):
            ax = axes[ci][bi]
            kinds = runs.get((config, b), {})
            for kind, offset, style in (("measured", 0.05, {}),
                                        ("model", -0.40, {"hatch": "///", "alpha": 0.45})):
                for r in kinds.get(kind, []):
                    lane = 2 - ENGINES.index(r["engine"])
                    ax.broken_barh([(r["start_us"] / 1000.0, (r["end_us"] - r["start_us"]) / 1000.0)],
                                   (lane + offset, 0.35), facecolors=cmap(r["chunk"] % 10),
                                   edgecolor="black", linewidth=0.3, **style)
            ax.set_xlim(0, span * 1.02 if span > 0 else 1)
            ax.set_ylim(-0.5, 2.5)
            ax.set_yticks([2, 1, 0])
            ax.set_yticklabels(ENGINES if bi == 0 else [])
            ax.set_title(f"{config}, b={b}: measured {makespan_ms(kinds.get('measured', [])):.2f} ms,"
                         f" model {makespan_ms(kinds.get('model', [])):.2f} ms", fontsize=9)
            if ci == len(order) - 1:
                ax.set_xlabel("time (ms)")
            ax.grid(axis="x", alpha=0.3)
    handles = [Patch(facecolor="lightgray", edgecolor="black", label="measured (upper half)"),
               Patch(facecolor="lightgray", edgecolor="black", hatch="///", alpha=0.45,
                     label="model, engine times alone (lower half)")]
    fig.legend(handles=handles, loc="upper right", fontsize=8)
    title = "qmm bench overlap"
    if meta.get("gpu"):
        title += f" — {meta['gpu']}"
    if meta.get("commit"):
        title += f", commit {meta['commit']}"
    if meta.get("date"):
        title += f", {meta['date']}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    out = args.out or os.path.splitext(args.csv)[0] + ".png"
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
