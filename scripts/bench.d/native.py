"""`scripts/bench --native`: skua's own load generator (src/bin/skua-load) against Apache
Kafka and skua, both running at once on fresh data dirs and driven in turn: every cell's
runs alternate between the brokers (Kafka, skua, skua, Kafka, ...), so both see the same
machine, and each run records what else the machine did meanwhile (disturbance.py). The
generator needs little CPU of its own and counts fetched records from batch headers, so
the broker rather than the client is what these cells measure; it reports latency in
microseconds (HDR histogram) and the broker's and its own CPU apart.

Imported by bench.py (which owns Broker, logging, stats and the doc writer)."""

import json
import statistics
import subprocess

from disturbance import Watch

NATIVE_HEADING = "## Native load generator"
KINDS = ("kafka", "skua")
NAMES = {"kafka": "Kafka", "skua": "skua"}

# (name, record size, partitions, producers, consumers, acks, records per batch): batches
# of about 16 KiB, as the Java producer's batch.size.
NATIVE_CELLS = [
    ("100B p1 acks=1", 100, 1, 1, 1, "1", 160),
    ("100B p8 acks=1", 100, 8, 4, 2, "1", 160),
    ("100B p8 acks=all", 100, 8, 4, 2, "all", 160),
    ("1024B p8 acks=1", 1024, 8, 4, 2, "1", 16),
]
# The consume phase reads what was produced this many times over: enough bytes (about
# 600 MB a run) that its seconds and CPU are not a fraction of a scheduler quantum.
CONSUME_PASSES = 3
# Latency: one record per request (linger.ms=0), one producer, at shares of Kafka's
# maximum for the same requests, with a consumer long-polling the partition meanwhile:
# produce (due to ack) and end-to-end (due to fetched) latency from the same run.
NATIVE_LATENCY_CELLS = [("100B p1 acks=1 b1", "1"), ("100B p1 acks=all b1", "all")]
NATIVE_SHARES = [10, 50, 80]
# A run during which processes other than the brokers and the load generator used more
# than this share of the machine's CPU is flagged under the tables.
DISTURBED_SHARE = 0.10


def run_load(opts, brokers, kind, topic, args, bootstrap=None):
    """One skua-load run against brokers[kind] (at `bootstrap`, else its PLAINTEXT
    listener); its JSON report with the rates derived and, under `env`, what the machine
    did meanwhile (the other broker idles)."""
    broker = brokers[kind]
    out = f"{opts.workdir}/load-{topic}.json"
    argv = [opts.load, "--bootstrap", bootstrap or broker.bootstrap, "--topic", topic, "--create",
            "--broker-pid", str(broker.proc.pid), "--json", out, *map(str, args)]
    watch = Watch({k: b.proc.pid for k, b in brokers.items()})
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    env = watch.stop()
    try:
        r = json.load(open(out))
    except (OSError, ValueError):
        raise RuntimeError(f"skua-load {topic} failed: {p.stderr.strip() or p.stdout.strip()}")
    r["ok"] = p.returncode == 0
    if not r["ok"]:
        # its stderr too: a panic or a log line says more than the report's errors
        raise RuntimeError(f"skua-load {topic}: {'; '.join(r['errors'])} (its report: {out}; "
                           f"stderr: {p.stderr.strip()[-1500:] or 'empty'})")
    idle = [k for k in brokers if k != kind]
    r["env"] = {"other_share": env["other_share"], "steal_share": env["steal_share"],
                "load1": env["load1"], "wall_s": env["wall_s"],
                # cores the idle broker used while this one was driven
                "idle_broker_cores": sum(env["cpu_s"][k] for k in idle) / env["wall_s"] if idle else None}
    return derive(r)


def derive(r):
    """Rates and CPU per GB from a skua-load report."""
    gb = lambda b: max(b, 1) / 1e9
    if "produce_seconds" in r:
        r["rps"] = r["produce_records_acked"] / r["produce_seconds"]
        r["mbps"] = r["produce_bytes"] / 1e6 / r["produce_seconds"]
        r["cpu_s_per_gb"] = (r["produce_broker_cpu_s"] or 0) / gb(r["produce_bytes"])
        r["client_cpu_s_per_gb"] = r["produce_client_cpu_s"] / gb(r["produce_bytes"])
    if "consume_seconds" in r:
        r["consume_rps"] = r["consume_records"] / r["consume_seconds"]
        r["consume_mbps"] = r["consume_bytes"] / 1e6 / r["consume_seconds"]
        r["consume_cpu_s_per_gb"] = (r["consume_broker_cpu_s"] or 0) / gb(r["consume_bytes"])
        r["consume_client_cpu_s_per_gb"] = r["consume_client_cpu_s"] / gb(r["consume_bytes"])
    return r


def in_turn(i):
    """Who goes first flips from one rep (or share) to the next."""
    return KINDS if i % 2 == 0 else KINDS[::-1]


def slug(name):
    return name.replace(" ", "-").replace("=", "")


def describe(kind, r):
    e = r["env"]
    what = []
    if "rps" in r:
        what.append(f"{r['rps']:,.0f} rec/s produce")
    if "consume_rps" in r:
        what.append(f"{r['consume_rps']:,.0f} rec/s consume")
    if "e2e_p99_us" in r:
        what.append(f"e2e p99 {r['e2e_p99_us']:,} µs")
    return (f"{NAMES[kind]}: {', '.join(what)}; others {e['other_share']:.0%}, steal {e['steal_share']:.0%}, "
            f"load {e['load1']:.1f}, idle broker {e['idle_broker_cores']:.3f} cores")


def native(opts, Broker, log):
    records = 200_000 if opts.quick else 2_000_000
    warmup = 200_000 if opts.quick else 3_000_000
    results = {"kafka": {"label": f"Apache Kafka {opts.kafka_version}", "cells": {}, "latency": {}},
               "skua": {"label": "skua", "cells": {}, "latency": {}}, "rates": {}}
    brokers = {kind: Broker(kind, opts, opts.workdir) for kind in KINDS}
    try:
        for b in brokers.values():
            b.start()
        # each broker's warm-up (Kafka's JIT) while the other idles
        for kind in KINDS:
            run_load(opts, brokers, kind, f"{kind}-warmup",
                     ["--partitions", 8, "--producers", 4, "--records", warmup,
                      "--batch-records", 160, "--phases", "produce"])
        for name, size, parts, prod, cons, acks, batch in NATIVE_CELLS:
            args = ["--partitions", parts, "--producers", prod, "--consumers", cons,
                    "--record-size", size, "--acks", acks, "--batch-records", batch,
                    "--records", records * 100 // size, "--warmup-records", records * 100 // size // 3,
                    "--consume-passes", CONSUME_PASSES]
            for kind in KINDS:
                results[kind]["cells"][name] = []
            for rep in range(opts.reps):
                for kind in in_turn(rep):
                    r = run_load(opts, brokers, kind, f"{kind}-{slug(name)}-{rep}", args)
                    results[kind]["cells"][name].append(r)
                    log(f"native {name} rep {rep + 1} {describe(kind, r)}")
            k, s = results["kafka"]["cells"][name], results["skua"]["cells"][name]
            lo, hi = paired_ratio_range(k, s, "rps")
            log(f"native {name}: produce skua/Kafka {ratio_of_medians(k, s, 'rps'):.2f} ({lo:.2f}-{hi:.2f}), "
                f"consume {ratio_of_medians(k, s, 'consume_rps'):.2f}")
        lat_records = 20_000 if opts.quick else 100_000
        for name, acks in NATIVE_LATENCY_CELLS:
            base = ["--partitions", 1, "--acks", acks, "--batch-records", 1]
            top = run_load(opts, brokers, "kafka", f"kafka-{slug(name)}-max",
                           base + ["--records", lat_records, "--phases", "produce"])
            results["kafka"]["latency"][f"{name} max"] = [top]
            log(f"native {name} max {describe('kafka', top)}")
            results["rates"][name] = {s: top["rps"] * s / 100 for s in NATIVE_SHARES}
            for i, (share, rate) in enumerate(results["rates"][name].items()):
                n = max(int(rate * (2 if opts.quick else 10)), 1000)
                for kind in in_turn(i):
                    r = run_load(opts, brokers, kind, f"{kind}-{slug(name)}-{share}",
                                 base + ["--records", n, "--warmup-records", n // 3,
                                         "--rate", f"{rate:.0f}", "--phases", "e2e"])
                    results[kind]["latency"][f"{name} @{share}%"] = [r]
                    log(f"native {name} @{share}% {describe(kind, r)}")
    finally:
        for b in brokers.values():
            b.stop()
    return results


def paired_ratios(k, s, key):
    """skua/Kafka of each rep's pair of runs (made back to back)."""
    return [b[key] / a[key] for a, b in zip(k, s) if a.get(key) and b.get(key) is not None]


def paired_ratio_range(k, s, key):
    r = paired_ratios(k, s, key)
    return (min(r), max(r)) if r else (0.0, 0.0)


def ratio_of_medians(k, s, key):
    a = statistics_median(k, key)
    return statistics_median(s, key) / a if a else 0.0


def statistics_median(runs, key):
    vals = sorted(r[key] for r in runs if r.get(key) is not None)
    return vals[len(vals) // 2] if vals else 0.0


def all_runs(results):
    """(label, broker, run) for every measured run, cells and latency alike."""
    for kind in KINDS:
        for name, runs in results[kind]["cells"].items():
            for i, r in enumerate(runs):
                yield f"{name} #{i + 1}", kind, r
        for name, runs in results[kind]["latency"].items():
            for r in runs:
                yield name, kind, r


def worst_env(runs):
    """The worst disturbance over `runs`: others / steal as % of the machine, and load."""
    envs = [r["env"] for r in runs if "env" in r]
    if not envs:
        return "–"
    return (f"{max(e['other_share'] for e in envs):.0%} / {max(e['steal_share'] for e in envs):.0%}, "
            f"{max(e['load1'] for e in envs):.1f}")


def ratio_range(k, s, key):
    r = paired_ratios(k, s, key)
    return "–" if not r else f"{min(r):.2f}–{max(r):.2f}×"


def render_native(opts, results, meta, fmt, rfmt, ratio):
    K, S = results["kafka"], results["skua"]
    m = statistics_median
    runs = list(all_runs(results))
    # cores each broker used while the other was driven
    idle = {kind: [r["env"]["idle_broker_cores"] for _, k, r in runs if k != kind and "env" in r]
            for kind in KINDS}
    idle_text = "; ".join(f"{NAMES[kind]} idle {statistics.median(v):.3f} cores median, {max(v):.3f} at most"
                          for kind, v in idle.items() if v)
    lines = [NATIVE_HEADING, ""]
    w = lines.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if meta['load_start'] > 1.0 else ''}. "
      f"{K['label']} (shipped defaults, default heap) and skua run at once, each on a fresh data dir and "
      f"warmed up with {'200,000' if opts.quick else '3,000,000'} records first; then each cell's runs "
      f"alternate between them (Kafka then skua in the first pair, skua then Kafka in the next, and so on), "
      f"so the two runs of a pair see the same machine. {opts.reps} pairs per cell: the median is shown, "
      f"and beside each ratio of medians the range of the pairs' own skua/Kafka ratios, which says how "
      f"stable that ratio is. The broker not being driven idles meanwhile ({idle_text or 'not measured'}).")
    w("")
    w("Driven by `skua-load` (src/bin/skua-load): producers send one batch per request (about 16 KiB, as "
      "the Java producer's `batch.size`), 5 requests in flight per connection; consumers then read every "
      f"partition back {CONSUME_PASSES} times over, counting records from batch headers without decoding them. "
      "Every run checks that records sent = acked and that each pass fetched every one. Latency is per "
      "request, send to ack, in microseconds. Broker CPU is the broker process's CPU time read from its "
      "CPU-time clock (`clock_getcpuclockid`: nanoseconds over every thread, threads that exited included, "
      "where /proc/PID/stat counts in 10 ms ticks); client CPU is skua-load's own; both per GB of record "
      "payload (produce) or of record bytes fetched (consume).")
    w("")
    w("Each run also records what else the machine did meanwhile: the CPU every other process used (from "
      "/proc/stat, less both brokers, skua-load and the script; kernel threads writing a broker's data back "
      "count as others, so this is an upper bound), the hypervisor's steal time, both as shares of all "
      "cores, and the 1-minute load average at its end. The last column shows the cell's worst run.")
    w("")
    w("| cell | Kafka rec/s | skua rec/s | **ratio** | pairs' range | p50 / p99 / p99.9 µs Kafka | skua | "
      "broker CPU s/GB K / s | **CPU ratio** | pairs' range | client CPU s/GB K / s | others / steal, load |")
    w("|---|---:|---:|---:|---|---|---|---|---:|---|---|---|")
    for name in K["cells"]:
        k, s = K["cells"][name], S["cells"][name]
        lat = lambda runs: " / ".join(fmt(m(runs, f"produce_{q}_us"), nd=0) for q in ("p50", "p99", "p999"))
        w(f"| produce {name} | {fmt(m(k, 'rps'), nd=0)} | {fmt(m(s, 'rps'), nd=0)} | "
          f"**{rfmt(ratio(m(s, 'rps'), m(k, 'rps')))}** | {ratio_range(k, s, 'rps')} | {lat(k)} | {lat(s)} | "
          f"{fmt(m(k, 'cpu_s_per_gb'))} / {fmt(m(s, 'cpu_s_per_gb'))} | "
          f"**{rfmt(ratio(m(s, 'cpu_s_per_gb'), m(k, 'cpu_s_per_gb')))}** | "
          f"{ratio_range(k, s, 'cpu_s_per_gb')} | "
          f"{fmt(m(k, 'client_cpu_s_per_gb'))} / {fmt(m(s, 'client_cpu_s_per_gb'))} | {worst_env(k + s)} |")
    for name in K["cells"]:
        k, s = K["cells"][name], S["cells"][name]
        w(f"| consume {name} | {fmt(m(k, 'consume_rps'), nd=0)} | {fmt(m(s, 'consume_rps'), nd=0)} | "
          f"**{rfmt(ratio(m(s, 'consume_rps'), m(k, 'consume_rps')))}** | "
          f"{ratio_range(k, s, 'consume_rps')} | – | – | "
          f"{fmt(m(k, 'consume_cpu_s_per_gb'))} / {fmt(m(s, 'consume_cpu_s_per_gb'))} | "
          f"**{rfmt(ratio(m(s, 'consume_cpu_s_per_gb'), m(k, 'consume_cpu_s_per_gb')))}** | "
          f"{ratio_range(k, s, 'consume_cpu_s_per_gb')} | "
          f"{fmt(m(k, 'consume_client_cpu_s_per_gb'))} / {fmt(m(s, 'consume_client_cpu_s_per_gb'))} | "
          f"{worst_env(k + s)} |")
    w("")
    w(disturbed_line(runs))
    w("")
    w("Latency at fixed rates (one record per request, one connection, shares of Kafka's maximum "
      "for the same requests), while a consumer long-polls the partition (`max_wait_ms` 500, `min_bytes` 1) "
      "over a connection of its own. Produce latency is from each request's scheduled send time to its "
      "ack, so a broker that falls behind is charged for it; end-to-end latency is from the same due "
      "time to the arrival of the fetch answer carrying the record (skua-load `--phases e2e`). One pair "
      "of runs per rate, who goes first flipping from one rate to the next.")
    w("")
    latency_table(w, results, "produce", fmt, rfmt, ratio, disturbance=True)
    w("End to end, the same runs:")
    w("")
    latency_table(w, results, "e2e", fmt, rfmt, ratio)
    return "\n".join(lines) + "\n"


def disturbed_line(runs, most=12):
    """The runs during which other processes used more than DISTURBED_SHARE of the machine."""
    hit = sorted((label, NAMES[kind], r["env"]["other_share"]) for label, kind, r in runs
                 if "env" in r and r["env"]["other_share"] > DISTURBED_SHARE)
    head = f"Runs during which other processes used more than {DISTURBED_SHARE:.0%} of the machine's CPU: "
    if not hit:
        return head + f"none of {len(runs)}."
    if len(hit) == len(runs):
        return head + f"all {len(runs)}, from {min(h[2] for h in hit):.0%} to {max(h[2] for h in hit):.0%}."
    listed = ", ".join(f"{label} {name} ({share:.0%})" for label, name, share in hit[:most])
    more = f" and {len(hit) - most} more" if len(hit) > most else ""
    return head + f"{len(hit)} of {len(runs)}: {listed}{more}."


def latency_table(w, results, what, fmt, rfmt, ratio, disturbance=False):
    """The fixed-rate cells' `what` latency (the report's `<what>_p50_us` and so on), Kafka
    beside skua, and with `disturbance` the worst of the pair's machines; cells a broker has
    no such numbers for are left out."""
    K, S, m = results["kafka"], results["skua"], statistics_median
    extra = (" others / steal, load |", "---|") if disturbance else ("", "")
    w("| cell | rate rec/s | Kafka p50 / p99 / p99.9 / max µs | skua p50 / p99 / p99.9 / max µs | "
      f"**p99 ratio** | p99.9 ratio |{extra[0]}")
    w(f"|---|---:|---|---|---:|---:|{extra[1]}")
    for name, _ in NATIVE_LATENCY_CELLS:
        for share, rate in results["rates"][name].items():
            key = f"{name} @{share}%"
            k, s = K["latency"].get(key), S["latency"].get(key)
            if not k or not s or m(k, f"{what}_p99_us") == 0:
                continue
            lat = lambda runs: " / ".join(fmt(m(runs, f"{what}_{q}_us"), nd=0) for q in ("p50", "p99", "p999", "max"))
            env = f" {worst_env(k + s)} |" if disturbance else ""
            w(f"| {name} @{share}% | {fmt(rate, nd=0)} | {lat(k)} | {lat(s)} | "
              f"**{rfmt(ratio(m(s, f'{what}_p99_us'), m(k, f'{what}_p99_us')))}** | "
              f"{rfmt(ratio(m(s, f'{what}_p999_us'), m(k, f'{what}_p999_us')))} |{env}")
    w("")
