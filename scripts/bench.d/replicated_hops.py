"""Where a one-record acks=all request's time goes on a skua cluster, hop by hop, from the
brokers' `replica_latency` debug events (`RUST_LOG=info,replica_latency=debug`; the one-cell
mode of replicated.py sets it with --hops):

    python3 scripts/bench.d/replicated_hops.py CLUSTER_DIR [TOPIC-PARTITION]

For each append on the leader after the first third (warm-up), microseconds from the
leader's append to: each parked follower fetch's wake-up read, each follower's append,
the follower's next fetch read at the new offset, and the high watermark passing it."""

import bisect
import datetime
import glob
import re
import sys

d = sys.argv[1]
ts_re = re.compile(r'^(\S+Z)\s+DEBUG\s+(.*)$')
def parse(path):
    ev = []
    for line in open(path, errors='replace'):
        m = ts_re.match(line)
        if not m: continue
        t = datetime.datetime.fromisoformat(m.group(1).replace('Z', '+00:00')).timestamp() * 1e6
        msg = m.group(2)
        f = dict(re.findall(r'(\w+)=(\S+)', msg))
        name = re.sub(r'\s*\w+=\S+', '', msg).strip()
        ev.append((t, name, f))
    return ev
logs = {p: parse(p) for p in sorted(glob.glob(f"{d}/broker-*/stdout.log"))}
# one partition: the one named, or the one with the most leader appends
counts = {}
for p, ev in logs.items():
    for t, n, f in ev:
        if n == "leader appended":
            counts[(p, f.get("tp"))] = counts.get((p, f.get("tp")), 0) + 1
leader, tp = max(counts, key=lambda k: (len(sys.argv) > 2 and k[1] == sys.argv[2], counts[k]))
def tpok(f): return f.get("tp") == tp
L = logs[leader]
app = {int(f['end']): t for t, n, f in L if n == 'leader appended' and tpok(f)}
hw = sorted((int(f['hw']), t) for t, n, f in L if n == 'high watermark advanced' and tpok(f))
reads = {}
for t, n, f in L:
    if n == 'follower fetch read' and tpok(f):
        reads.setdefault(f['replica'], []).append((t, int(f['offset'])))
fol = {}
for p, ev in logs.items():
    if p == leader: continue
    fol[p] = sorted((int(f['end']), t) for t, n, f in ev if n == 'follower appended' and tpok(f))
def first_at_least(pairs, e):
    i = bisect.bisect_left(pairs, (e, -1))
    return pairs[i][1] if i < len(pairs) else None
hops = {}
def add(k, v):
    if v is not None: hops.setdefault(k, []).append(v)
ends = sorted(app)
n = len(ends)
ends = ends[n // 3:]  # after warm-up
for e in ends:
    t0 = app[e]
    th = first_at_least(hw, e)
    add('append -> hw', th - t0 if th else None)
    for p, pairs in fol.items():
        tf = first_at_least(pairs, e)
        if tf is None: continue
        add(f'append -> follower appended ({p.split("/")[-2]})', tf - t0)
    for r, rs in reads.items():
        # wake: first read of offset e-1 at or after t0; next: first read with offset>=e
        w = next((t for t, o in rs if t >= t0 and o <= e - 1), None)
        nx = next((t for t, o in rs if t >= t0 and o >= e), None)
        add(f'append -> leader read for r{r} (wake)', (w - t0) if w else None)
        add(f'append -> leader read r{r} at new offset', (nx - t0) if nx else None)
def q(v, p): v = sorted(v); return v[min(len(v) - 1, int(len(v) * p))]
print(f"{tp}: leader {leader.split('/')[-2]}, {len(ends)} appends after the warm-up")
for k, v in hops.items():
    print(f"{k:55s} n={len(v):6d} p50={q(v,.5):8.0f} p90={q(v,.9):8.0f} p99={q(v,.99):8.0f} max={max(v):8.0f} us")
