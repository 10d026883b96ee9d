#!/usr/bin/env python3
"""One line per (projection, M) of a `qmm bench ops` CSV: auto (its plan and prediction), cuBLAS
and auto x cuBLAS, the wgmma kernel unsplit (s1) and stream-K (sk), and split-K in clusters of
2..8 (cluster contenders) — the wgmma schedules side by side.  usage: cells.py ops.csv"""
import collections
import csv
import sys

from csvmeta import open_csv

rows = list(csv.DictReader(l for l in open_csv(sys.argv[1]) if not l.startswith('#')))
cells = collections.defaultdict(list)
for r in rows:
    cells[(r['proj'], int(r['m']))].append(r)
for (proj, m), rs in sorted(cells.items()):
    t = {}
    for r in rs:
        name = r['contender'] + (r['split'] if r['contender'] == 'cluster' else '')
        t[name] = float(r['graph_med_us'])
    a = next(r for r in rs if r['contender'] == 'auto')
    cb = t.get('cublas', 0)
    cl = ' '.join('%d:%.1f' % (s, t['cluster%d' % s]) for s in range(2, 9) if 'cluster%d' % s in t)
    print('%-5s %4d auto %6.2f (%s/%s pred %.1f) cublas %6.2f x%.2f | s1 %.1f sk %.1f | %s' % (
        proj, m, t['auto'], a['path'], a['split'], float(a['predicted_us'] or -1), cb,
        cb / t['auto'], t.get('wgmma_s1', 0), t.get('streamk', 0), cl))
