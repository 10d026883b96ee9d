"""Row 204's sweeps side by side: sm90_trace's forced schedules of the base (sw*_b*), the one-a-SM
128-row builds (sw*_t*) and the two-a-SM ones (sw*_u*), min over rounds; and whether the two-a-SM
builds' output hashes equal the base's.  usage: compare.py FOLDER"""
import csv, gzip, sys, glob, os
d = sys.argv[1]
def load(name):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, name + '.gz'))):
        for r in csv.DictReader(l for l in gzip.open(f, 'rt') if l.strip() and not l.startswith('#')):
            if r.get('proj') == 'proj' or not r.get('us'): continue
            out.setdefault((r['proj'], int(r['m']), r['schedule']), []).append((float(r['us']), r['output_hash'], r['ctas']))
    return out
for m in (16, 32):
    b, t, u = load(f'sw{m}_b*.csv'), load(f'sw{m}_t*.csv'), load(f'sw{m}_u*.csv')
    print(f'== M={m}: min over rounds, µs (ctas)')
    for p in ('q','k','o','gate','down'):
        line = f'{p:5s}'
        for s in ('auto','s1','c2','c3','c4','c5','c6','c7','c8'):
            def cell(x):
                v = x.get((p, m, s))
                return f'{min(a for a,_,_ in v):6.2f}' if v else '     -'
            line += f' {s}:' + cell(b) + '/' + cell(t) + '/' + cell(u)
        print(line)
        hb = {s: b[(p,m,s)][0][1] for s in ('s1','c2','c3','c4','c5','c6','c7','c8') if (p,m,s) in b}
        hu = {s: u[(p,m,s)][0][1] for s in hb if (p,m,s) in u}
        same = [s for s in hu if hu[s] == hb[s]]
        print(f'      b2 hash == base: {same} of {list(hu)}')
        bb = min(min(a for a,_,_ in v) for k, v in b.items() if k[0]==p and k[1]==m)
        tb = min((min(a for a,_,_ in v) for k, v in t.items() if k[0]==p and k[1]==m and k[2] != 'auto'), default=0)
        ub = min((min(a for a,_,_ in v) for k, v in u.items() if k[0]==p and k[1]==m and k[2] != 'auto'), default=0)
        ba = min(a for a,_,_ in b[(p,m,'auto')])
        print(f'      base auto {ba:.2f} best {bb:.2f} | tall best {tb:.2f} ({(tb/ba-1)*100:+.1f}% vs auto) | tall-b2 best {ub:.2f} ({(ub/ba-1)*100:+.1f}%)')
