"""Calls 1 and 2's sm90_trace sweeps side by side (min over rounds, µs): HEAD (h64*, h48*, hmx)
against the t64 build (t64*, t48*, tmx) per schedule, each one's best forced schedule against
HEAD's auto, and whether the outputs' hashes match; then sw32 / sw24 (HEAD alone): each split in
64-row blocks (cS) and 128-row blocks (cSx128).  usage: compare.py [FOLDER ...] (default r1 r2
beside this file)"""
import csv, glob, gzip, os, sys

here = os.path.dirname(os.path.abspath(__file__))
dirs = sys.argv[1:] or [here, os.path.join(here, '..', 'r2')]


def load(pattern):
    out = {}
    for f in sorted(g for d in dirs for g in glob.glob(os.path.join(d, pattern))):
        op = gzip.open if f.endswith('.gz') else open
        with op(f, 'rt') as fh:
            for r in csv.DictReader(l for l in fh if l.strip() and not l.startswith('#')):
                if r.get('proj') == 'proj' or not r.get('us'):
                    continue
                out.setdefault((r['proj'], int(r['m']), r['schedule']), []).append(
                    (float(r['us']), r['output_hash'], int(r['ctas'])))
    return out


def best(cells, p, m, auto=False):
    v = [(min(a for a, _, _ in x), k[2]) for k, x in cells.items()
         if k[0] == p and k[1] == m and (auto or k[2] != 'auto')]
    return min(v) if v else (float('nan'), '-')


for m, hp, tp in ((64, 'h64*.csv*', 't64*.csv*'), (48, 'h48*.csv*', 't48*.csv*'), (33, 'hmx*', 'tmx*'),
                  (40, 'hmx*', 'tmx*'), (56, 'hmx*', 'tmx*')):
    h, t = load(hp), load(tp)
    if not any(k[1] == m for k in h):
        continue
    scheds = sorted({k[2] for k in h if k[1] == m}, key=lambda s: (s != 'auto', s))
    print(f'== M = {m}: HEAD / t64, min over rounds, µs (CTAs in the build)')
    for p in ('q', 'k', 'o', 'gate', 'down'):
        if (p, m, 'auto') not in h:
            continue
        line = f'{p:5s}'
        for s in scheds:
            a, b = h.get((p, m, s)), t.get((p, m, s))
            fa = f'{min(x for x, _, _ in a):.2f}' if a else '-'
            fb = f'{min(x for x, _, _ in b):.2f}({b[0][2]})' if b else '-'
            line += f' {s}:{fa}/{fb}'
        print(line)
        ha = min(x for x, _, _ in h[(p, m, 'auto')])
        hb, hs = best(h, p, m)
        tb, ts = best(t, p, m)
        same = [s for s in scheds if s != 'auto' and (p, m, s) in h and (p, m, s) in t
                and h[(p, m, s)][0][1] == t[(p, m, s)][0][1]]
        print(f'      HEAD auto {ha:.2f}, best forced {hb:.2f} ({hs}); t64 best {tb:.2f} ({ts}) '
              f'= {(tb / ha - 1) * 100:+.1f} % against HEAD auto; equal hashes: {same}')

for m, pat in ((32, 'sw32.csv*'), (24, 'sw24.csv*')):
    c = load(pat)
    if not c:
        continue
    print(f'== M = {m} (HEAD): cS / cSx128, µs; auto and each height\'s best')
    for p in ('q', 'k', 'o', 'gate', 'down'):
        if (p, m, 'auto') not in c:
            continue
        line = f'{p:5s} auto {min(x for x, _, _ in c[(p, m, "auto")]):.2f}'
        for s in range(2, 9):
            a, b = c.get((p, m, f'c{s}')), c.get((p, m, f'c{s}x128'))
            if a or b:
                line += f' c{s}:' + (f'{a[0][0]:.2f}' if a else '-') + '/' + (f'{b[0][0]:.2f}' if b else '-')
        print(line)
