#!/usr/bin/env python3
"""Offline check of the matvec's CTA shape rule (NOTES row 99) on this folder's mv_shapes logs.

Each cell (projection, M) has the launcher's shape at 518a187's parent (R = 0 rows: `auto`) and
every forced shape; a rule picks one forced shape per cell and is scored by that shape's measured
time. The rule: the least  ceil(CTAs/SMs) * (R + M/8) * ceil(groups/C) + 5 * log2(C)  among the
shapes resident in one wave (clusters of 4 / 8 hold 368 / 360 of 396 CTAs at 3 a SM, NOTES row 62),
then the most warps.  usage: python3 rule_eval.py"""
import collections, math, os
HERE = os.path.dirname(os.path.abspath(__file__))
NK = {'qkv': (6144, 2560), 'q': (4096, 2560), 'k': (1024, 2560), 'o': (2560, 4096),
      'gate': (9728, 2560), 'gate_up': (19456, 2560), 'down': (2560, 9728)}
SMS = 132
rows, auto = [], {}
for name, W in (('shapes8.log', 8), ('shapes4w.log', 4)):
    for line in open(os.path.join(HERE, name)):
        p = line.strip().split(',')
        if len(p) != 8 or p[0] == 'proj':
            continue
        proj, m, R, C, ctas, us = p[0], int(p[1]), int(p[2]), int(p[3]), int(p[4]), float(p[5])
        if R == 0:
            if W == 8:
                auto[(proj, m)] = us
            continue
        if m > 8 or (W == 4 and m > 1):
            continue
        cap = (3 if W == 8 else 6) * SMS * {1: 1, 2: 1, 4: 368 / 396, 8: 360 / 396}[C]
        if ctas > cap:
            continue
        groups = NK[proj][1] // 128
        per, gc = math.ceil(ctas / SMS), math.ceil(groups / C)
        cost = per * (R + m / 8) * gc + 5 * math.log2(C)
        rows.append(dict(proj=proj, m=m, W=W, R=R, C=C, ctas=ctas, us=us, cost=cost))
cells = collections.defaultdict(list)
for r in rows:
    cells[(r['proj'], r['m'])].append(r)
ta = tp = tb = 0
for key in sorted(cells):
    v = cells[key]
    pick = min(v, key=lambda r: (r['cost'], -r['ctas'] * r['W']))
    best = min(v, key=lambda r: r['us'])
    ta, tp, tb = ta + auto[key], tp + pick['us'], tb + best['us']
    print('%-8s M=%d  old rule %.2f  new W%d R%d C%d %.2f (%+.1f%%)  best %.2f' % (
        key[0], key[1], auto[key], pick['W'], pick['R'], pick['C'], pick['us'],
        100 * (pick['us'] / auto[key] - 1), best['us']))
print('total: old rule %.1f  new %.1f  best %.1f us' % (ta, tp, tb))
