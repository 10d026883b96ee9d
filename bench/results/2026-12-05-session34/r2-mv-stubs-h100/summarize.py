# Medians of each build's mv_shapes CSVs here (b*, sa_*, s3_*, s2_*, s1_*), µs and % against b: python3 summarize.py
import csv,collections,statistics as st,glob,sys
def load(f):
    d={}
    for r in csv.DictReader(open(f)):
        d[(r['proj'],int(r['m']))]=(float(r['us']),float(r['read_us']))
    return d
sets=collections.defaultdict(list)
for f in sorted(glob.glob('*.csv')):
    k=f.split('_')[0].split('.')[0]
    if k[0]=='b' and k[1:].isdigit(): k='b'
    sets[k].append(load(f))
names=[n for n in ['b','sa','s3','s2','s1'] if n in sets]
keys=sorted(sets['b'][0].keys())
print('proj   m  read   '+'  '.join(f"{n:>5s}" for n in names)+' | '+' '.join(f"{n:>5s}%" for n in names[1:]))
tot=collections.defaultdict(float)
for k in keys:
    med={n:st.median(d[k][0] for d in sets[n]) for n in names}
    rd=sets['b'][0][k][1]
    for n in med:
        if 2<=k[1]<=8: tot[n]+=med[n]
    print(f"{k[0]:5s} {k[1]:2d} {rd:5.2f}  "+'  '.join(f"{med[n]:5.2f}" for n in names)+' | '+' '.join(f"{100*(med[n]/med['b']-1):+5.1f}" for n in names[1:]))
print('sum M=2..8:',{n:round(v,2) for n,v in tot.items()})
print('runs', {n:len(v) for n,v in sets.items()})
