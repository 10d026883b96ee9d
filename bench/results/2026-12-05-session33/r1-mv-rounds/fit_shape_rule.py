#!/usr/bin/env python3
"""The matvec's CTA shape rule for several tokens, refit on `mv_shapes` sweeps (NOTES row 182).

src/cuda/matvec_shape.cu picks, among the shapes whose CTAs are all resident, the least
    P * (R + lam * m / 4) * ceil(groups / C) + mu * P + nu * log2(C),   P = ceil(CTAs / SMs),
with (lam, mu, nu) = (0.5, 0, 5) from two tokens on (8-warp CTAs, R >= 2), fitted on session
13's sweep (`2026-12-02-session13/r2-shapes/rule_eval.py`). With the activations staged in rounds
the staging term (lam) should shrink; this script scores every (lam, mu, nu) of a grid on one or
more sweeps of the current format (`mv_shapes 2 4 8` > FILE.csv: proj,m,shape,W,R,C,ctas,us,...)
by the measured time of the shape each would pick, and prints the shipped constants' total and
worst cell beside the best few. Residency is approximated as in rule_eval.py (three 8-warp CTAs
a SM; clusters of 4 / 8 hold 368 / 360 of 396, NOTES row 62).
usage: fit_shape_rule.py SWEEP.csv [SWEEP.csv ...] [--m 2,4,8]"""
import collections, math, sys

NK = {'qkv': (6144, 2560), 'q': (4096, 2560), 'k': (1024, 2560), 'o': (2560, 4096),
      'gate': (9728, 2560), 'gate_up': (19456, 2560), 'down': (2560, 9728), 'head': (151936, 2560)}
SMS = 132
SHIPPED = (0.5, 0.0, 5.0)


def cells(paths, ms):
    out = collections.defaultdict(list)
    for path in paths:
        for line in open(path):
            p = line.strip().split(',')
            if len(p) < 8 or p[0] == 'proj' or p[2] != 'forced' or p[0] not in NK:
                continue
            proj, m, w, r, c, ctas, us = p[0], int(p[1]), int(p[3]), int(p[4]), int(p[5]), int(p[6]), float(p[7])
            if m not in ms or w != 8 or r < 2 or us <= 0:
                continue
            if ctas > 3 * SMS * {1: 1, 2: 1, 4: 368 / 396, 8: 360 / 396}[c]:
                continue
            out[(path, proj, m)].append(dict(proj=proj, m=m, R=r, C=c, ctas=ctas, us=us))
    return out


def pick(v, lam, mu, nu):
    def cost(x):
        per, gc = math.ceil(x['ctas'] / SMS), math.ceil(NK[x['proj']][1] // 128 / x['C'])
        return per * (x['R'] + lam * x['m'] / 4) * gc + mu * per + nu * math.log2(x['C'])
    return min(v, key=lambda x: (round(cost(x), 9), -x['ctas'], x['R']))  # then most warps, fewer tiles


def score(cs, k):
    total = best = worst = 0.0
    for v in cs.values():
        p, b = pick(v, *k)['us'], min(x['us'] for x in v)
        total, best, worst = total + p, best + b, max(worst, p / b - 1)
    return total, best, worst


def main(argv):
    ms = {2, 4, 8}
    if '--m' in argv:
        i = argv.index('--m')
        ms = {int(x) for x in argv[i + 1].split(',')}
        argv = argv[:i] + argv[i + 2:]
    cs = cells(argv, ms)
    if not cs:
        sys.exit('fit_shape_rule: no 8-warp forced shapes at M in %s' % sorted(ms))
    t, b, w = score(cs, SHIPPED)
    print('%d cells; shipped (%g, %g, %g): %.2f us, best shapes %.2f (+%.1f %%), worst cell +%.1f %%'
          % (len(cs), *SHIPPED, t, b, 100 * (t / b - 1), 100 * w))
    grid = [(l, u, n) for l in (0, 0.125, 0.25, 0.375, 0.5, 0.75, 1, 1.5) for u in (0, 1, 2, 3, 5)
            for n in (0, 1, 2, 3, 5, 8)]
    for t, w, k in sorted((score(cs, k)[0], score(cs, k)[2], k) for k in grid)[:8]:
        print('  (%g, %g, %g): %.2f us (%+.1f %% against shipped), worst cell +%.1f %%'
              % (*k, t, 100 * (t / score(cs, SHIPPED)[0] - 1), 100 * w))


if __name__ == '__main__':
    main(sys.argv[1:])
