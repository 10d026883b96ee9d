#!/usr/bin/env python3
"""Plot a `qmm bench ops --csv` file.

    python3 bench/plot_ops.py RESULTS.csv [-o OUT.png]

Writes two PNGs, one panel per projection, M on a log axis:
  OUT.png         speedup over cuBLAS bf16 (cuBLAS time / contender time) of qmm auto, the
                  unsplit tiled kernel, the best split-K, the matvec (M <= 8) and qmm's dense
                  path (M >= 128);
  OUT-splitk.png  unsplit tiled time / best split-K time, and / auto (the plan).
Above 1 means faster. OUT defaults to the CSV path with .png. Needs matplotlib.
"""
import argparse
import math
import os
import sys
from collections import defaultdict

from csvmeta import read_csv_with_meta


def read(path):
    """-> (metadata dict from the '# key: value' lines, list of row dicts that passed)."""
    meta, table = read_csv_with_meta(path)
    rows = []
    for r in table:
        if r.get("status") != "pass" or not r.get("graph_med_us"):
            continue
        r["m"] = int(r["m"])
        r["split"] = int(r["split"])
        r["us"] = float(r["graph_med_us"])
        rows.append(r)
    return meta, rows


def times_by_case(rows):
    """{proj: {m: {"auto": us, "tiled": us, "splitk": best us, "matvec": us, "dense": us,
    "cublas": us}}}
    and the projection order of the file."""
    out = defaultdict(lambda: defaultdict(dict))
    order = []
    for r in rows:
        p, m, c = r["proj"], r["m"], r["contender"]
        if p not in order:
            order.append(p)
        case = out[p][m]
        if c == "splitk":
            case["splitk"] = min(case.get("splitk", math.inf), r["us"])
        elif c in ("auto", "tiled", "matvec", "dense", "cublas"):
            case[c] = r["us"]
    return out, order


def grid(n):
    cols = min(4, n)
    return (n + cols - 1) // cols, cols


def panels(plt, order, title):
    rows_, cols = grid(len(order))
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, 3.4 * rows_), squeeze=False)
    fig.suptitle(title, fontsize=11)
    for i in range(rows_ * cols):
        if i >= len(order):
            axes[i // cols][i % cols].set_visible(False)
    return fig, [axes[i // cols][i % cols] for i in range(len(order))]


def style(ax, name, ylabel, ms):
    ax.set_xscale("log", base=2)
    if ms:
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms], fontsize=7, rotation=45)
        ax.minorticks_off()
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("M (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7)


def series(cases, num, den):
    """M values and cases[m][num] / cases[m][den] where both exist."""
    ms = sorted(m for m, c in cases.items() if num in c and den in c)
    return ms, [cases[m][num] / cases[m][den] for m in ms]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", help="output PNG (default: the CSV path with .png)")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta, rows = read(args.csv)
    if not rows:
        sys.exit(f"{args.csv}: no passing rows to plot")
    data, order = times_by_case(rows)
    out = args.out or os.path.splitext(args.csv)[0] + ".png"
    base = os.path.splitext(out)[0]
    gpu = meta.get("gpu", "GPU?")
    stamp = f"{gpu}, {meta.get('date', '')[:10]}, commit {meta.get('commit', '?')[:12]}, weights {meta.get('weights', '?')}"

    fig, axes = panels(plt, order, f"qmm W4A16 speedup over cuBLAS bf16 ({stamp})")
    for ax, p in zip(axes, order):
        for name, label, mark in (("auto", "qmm auto (plan)", "o-"), ("tiled", "tiled, unsplit", "s--"),
                                  ("splitk", "best split-K", "^-."), ("matvec", "matvec", "x:"),
                                  ("dense", "dense (dequant + cuBLAS)", "d:")):
            ms, ys = series(data[p], "cublas", name)
            if ms:
                ax.plot(ms, ys, mark, label=label, ms=4)
        style(ax, p, "× vs cuBLAS bf16", sorted(data[p]))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")

    fig, axes = panels(plt, order, f"split-K vs the unsplit tiled kernel ({stamp})")
    for ax, p in zip(axes, order):
        for name, label, mark in (("splitk", "best split-K", "^-"), ("auto", "qmm auto (plan)", "o--")):
            ms, ys = series(data[p], "tiled", name)
            if ms:
                ax.plot(ms, ys, mark, label=label, ms=4)
        style(ax, p, "unsplit time / time", sorted(data[p]))
    fig.tight_layout()
    fig.savefig(base + "-splitk.png", dpi=120)
    print(f"wrote {base}-splitk.png")


if __name__ == "__main__":
    main()
