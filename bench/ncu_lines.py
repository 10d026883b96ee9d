#!/usr/bin/env python3
"""Where a kernel's warps wait, by source line: ncu's per-instruction warp-state samples mapped
onto the innermost source line of each SASS instruction.

    ncu --section SourceCounters --import-source yes -o rep ...        (on the GPU machine)
    ncu -i rep.ncu-rep --page source --csv --print-source sass | gzip > k.csv.gz
    cuobjdump -xelf all obj.o && nvdisasm -gi -c obj.sm_90a.cubin > all.sass   (here; the same
        build as the profiled binary), then cut out the kernel's .text section into k.sass
    bench/ncu_lines.py k.csv.gz k.sass [--top N]

Prints the share of samples and the three main stall reasons per source line (inlined
functions resolved to their own lines), then the N hottest instructions. A stall at a barrier
is sampled on the instruction after the BAR. Used for bench/NOTES.md rows 86-90.
"""
import argparse
import csv
import gzip
import re


def read_samples(path):
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        rows = csv.reader(f)
        next(rows)  # the kernel's name
        head = next(rows)
        return head, [r for r in rows if r]


def read_listing(path):
    """{offset: ((file, line), instruction)}: the first of a run of '//## File' comments is the
    innermost location (nvdisasm -gi lists the inlining chain outward)."""
    where, out, in_run = None, {}, False
    for text in open(path):
        m = re.search(r'//## File "([^"]+)", line (\d+)', text)
        if m:
            if not in_run:
                where = (m.group(1).rsplit("/", 1)[-1], int(m.group(2)))
            in_run = True
            continue
        in_run = False
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", text)
        if m:
            out[int(m.group(1), 16)] = (where, m.group(2).strip())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("samples", help="ncu --page source --csv --print-source sass (optionally .gz)")
    ap.add_argument("listing", help="nvdisasm -gi listing of the same kernel")
    ap.add_argument("--lines", type=int, default=40, help="source lines to print")
    ap.add_argument("--top", type=int, default=20, help="instructions to print")
    args = ap.parse_args()

    head, rows = read_samples(args.samples)
    col = {name: i for i, name in enumerate(head)}
    stalls = [n for n in head if n.startswith("stall_") and "(Not Issued)" not in n]
    listing = read_listing(args.listing)
    base = int(rows[0][col["Address"]], 16)

    per_line, hot, total = {}, [], 0
    for r in rows:
        n = int(r[col["# Samples"]] or 0)
        if not n:
            continue
        off = int(r[col["Address"]], 16) - base
        where, ins = listing.get(off, (None, r[col["Source"]].strip()))
        total += n
        d = per_line.setdefault(where, {"n": 0})
        d["n"] += n
        for s in stalls:
            v = int(r[col[s]] or 0)
            if v:
                d[s] = d.get(s, 0) + v
        hot.append((n, off, where, ins))
    if len(listing) != len(rows):
        print(f"warning: {len(rows)} profiled instructions, {len(listing)} in the listing: "
              "not the same build?")
    print(f"{total} samples")
    for where, d in sorted(per_line.items(), key=lambda kv: -kv[1]["n"])[: args.lines]:
        top = sorted(((k, v) for k, v in d.items() if k != "n"), key=lambda kv: -kv[1])[:3]
        why = " ".join(f"{k[6:]}={100 * v / d['n']:.0f}%" for k, v in top)
        print(f"{100 * d['n'] / total:5.1f}%  {where}  {why}")
    print()
    for n, off, where, ins in sorted(hot, reverse=True)[: args.top]:
        print(f"{100 * n / total:5.1f}%  {off:6x}  {where}  {ins[:70]}")


if __name__ == "__main__":
    main()
