"""`scripts/bench --native`: skua's own load generator (src/bin/skua-load) against Apache
Kafka and skua, one after the other on fresh data dirs, after a warm-up long enough for
Kafka's JIT. The generator needs little CPU of its own and counts fetched records from
batch headers, so the broker rather than the client is what these cells measure; it
reports latency in microseconds (HDR histogram) and the broker's and its own CPU apart.

Imported by bench.py (which owns Broker, logging, stats and the doc writer)."""

import json
import subprocess

NATIVE_HEADING = "## Native load generator"

# (name, record size, partitions, producers, consumers, acks, records per batch): batches
# of about 16 KiB, as the Java producer's batch.size.
NATIVE_CELLS = [
    ("100B p1 acks=1", 100, 1, 1, 1, "1", 160),
    ("100B p8 acks=1", 100, 8, 4, 2, "1", 160),
    ("100B p8 acks=all", 100, 8, 4, 2, "all", 160),
    ("1024B p8 acks=1", 1024, 8, 4, 2, "1", 16),
]
# Latency: one record per request (linger.ms=0), one producer, at shares of Kafka's
# maximum for the same requests, with a consumer long-polling the partition meanwhile:
# produce (due to ack) and end-to-end (due to fetched) latency from the same run.
NATIVE_LATENCY_CELLS = [("100B p1 acks=1 b1", "1"), ("100B p1 acks=all b1", "all")]
NATIVE_SHARES = [10, 50, 80]


def run_load(opts, broker, topic, args):
    """One skua-load run; its JSON report, with `ok` saying whether its numbers add up."""
    out = f"{opts.workdir}/load-{topic}.json"
    argv = [opts.load, "--bootstrap", broker.bootstrap, "--topic", topic, "--create",
            "--broker-pid", str(broker.proc.pid), "--json", out, *map(str, args)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    try:
        r = json.load(open(out))
    except (OSError, ValueError):
        raise RuntimeError(f"skua-load {topic} failed: {p.stderr.strip() or p.stdout.strip()}")
    r["ok"] = p.returncode == 0
    if not r["ok"]:
        raise RuntimeError(f"skua-load {topic}: {'; '.join(r['errors'])}")
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


def native(opts, Broker, log):
    records = 200_000 if opts.quick else 2_000_000
    warmup = 200_000 if opts.quick else 3_000_000
    results = {"kafka": {"label": f"Apache Kafka {opts.kafka_version}"}, "skua": {"label": "skua"}}
    for kind in ("kafka", "skua"):
        b = Broker(kind, opts, opts.workdir)
        b.start()
        R = results[kind]
        R["cells"], R["latency"] = {}, {}
        try:
            # the broker's warm-up (Kafka's JIT), then one unmeasured run per cell
            run_load(opts, b, f"{kind}-warmup", ["--partitions", 8, "--producers", 4,
                                                   "--records", warmup, "--batch-records", 160,
                                                   "--phases", "produce"])
            for name, size, parts, prod, cons, acks, batch in NATIVE_CELLS:
                args = ["--partitions", parts, "--producers", prod, "--consumers", cons,
                        "--record-size", size, "--acks", acks, "--batch-records", batch,
                        "--records", records * 100 // size, "--warmup-records", records * 100 // size // 3]
                runs = []
                for rep in range(opts.reps):
                    topic = f"{kind}-{name.replace(' ', '-').replace('=', '')}-{rep}"
                    runs.append(run_load(opts, b, topic, args))
                R["cells"][name] = runs
                log(f"native {R['label']} {name}: {statistics_median(runs, 'rps'):,.0f} rec/s produce, "
                    f"{statistics_median(runs, 'consume_rps'):,.0f} rec/s consume")
            for name, acks in NATIVE_LATENCY_CELLS:
                base = ["--partitions", 1, "--acks", acks, "--batch-records", 1]
                lat_records = 20_000 if opts.quick else 100_000
                if kind == "kafka":
                    top = run_load(opts, b, f"{kind}-{name.replace(' ', '-').replace('=', '')}-max",
                                   base + ["--records", lat_records, "--phases", "produce"])
                    R["latency"][f"{name} max"] = [top]
                    results["rates"] = results.get("rates", {})
                    results["rates"][name] = {s: top["rps"] * s / 100 for s in NATIVE_SHARES}
                for share, rate in results["rates"][name].items():
                    n = max(int(rate * (2 if opts.quick else 10)), 1000)
                    r = run_load(opts, b, f"{kind}-{name.replace(' ', '-').replace('=', '')}-{share}",
                                 base + ["--records", n, "--warmup-records", n // 3,
                                         "--rate", f"{rate:.0f}", "--phases", "e2e"])
                    R["latency"][f"{name} @{share}%"] = [r]
        finally:
            b.stop()
    return results


def statistics_median(runs, key):
    vals = sorted(r[key] for r in runs if r.get(key) is not None)
    return vals[len(vals) // 2] if vals else 0.0


def render_native(opts, results, meta, fmt, rfmt, ratio):
    K, S = results["kafka"], results["skua"]
    m = statistics_median
    lines = [NATIVE_HEADING, ""]
    w = lines.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if meta['load_start'] > 1.0 else ''}. "
      f"{K['label']} (shipped defaults, default heap) and skua, one after the other, each warmed up with "
      f"{'200,000' if opts.quick else '3,000,000'} records first; {opts.reps} runs per cell, median shown.")
    w("")
    w("Driven by `skua-load` (src/bin/skua-load): producers send one batch per request (about 16 KiB, as "
      "the Java producer's `batch.size`), 5 requests in flight per connection; consumers then read every "
      "partition back, counting records from batch headers without decoding them. Every run checks that "
      "records sent = acked = fetched. Latency is per request, send to ack, in microseconds. Broker CPU "
      "is the broker process's user + system time; client CPU is skua-load's own; both per GB of record "
      "payload (produce) or of record bytes fetched (consume).")
    w("")
    w("| cell | Kafka rec/s | skua rec/s | **ratio** | p50 / p99 / p99.9 µs Kafka | skua | "
      "broker CPU s/GB K / s | **CPU ratio** | client CPU s/GB K / s |")
    w("|---|---:|---:|---:|---|---|---|---:|---|")
    for name in K["cells"]:
        k, s = K["cells"][name], S["cells"][name]
        lat = lambda runs: " / ".join(fmt(m(runs, f"produce_{q}_us"), nd=0) for q in ("p50", "p99", "p999"))
        w(f"| produce {name} | {fmt(m(k, 'rps'), nd=0)} | {fmt(m(s, 'rps'), nd=0)} | "
          f"**{rfmt(ratio(m(s, 'rps'), m(k, 'rps')))}** | {lat(k)} | {lat(s)} | "
          f"{fmt(m(k, 'cpu_s_per_gb'))} / {fmt(m(s, 'cpu_s_per_gb'))} | "
          f"**{rfmt(ratio(m(s, 'cpu_s_per_gb'), m(k, 'cpu_s_per_gb')))}** | "
          f"{fmt(m(k, 'client_cpu_s_per_gb'))} / {fmt(m(s, 'client_cpu_s_per_gb'))} |")
    for name in K["cells"]:
        k, s = K["cells"][name], S["cells"][name]
        w(f"| consume {name} | {fmt(m(k, 'consume_rps'), nd=0)} | {fmt(m(s, 'consume_rps'), nd=0)} | "
          f"**{rfmt(ratio(m(s, 'consume_rps'), m(k, 'consume_rps')))}** | – | – | "
          f"{fmt(m(k, 'consume_cpu_s_per_gb'))} / {fmt(m(s, 'consume_cpu_s_per_gb'))} | "
          f"**{rfmt(ratio(m(s, 'consume_cpu_s_per_gb'), m(k, 'consume_cpu_s_per_gb')))}** | "
          f"{fmt(m(k, 'consume_client_cpu_s_per_gb'))} / {fmt(m(s, 'consume_client_cpu_s_per_gb'))} |")
    w("")
    w("Latency at fixed rates (one record per request, one connection, shares of Kafka's maximum "
      "for the same requests), while a consumer long-polls the partition (`max_wait_ms` 500, `min_bytes` 1) "
      "over a connection of its own. Produce latency is from each request's scheduled send time to its "
      "ack, so a broker that falls behind is charged for it; end-to-end latency is from the same due "
      "time to the arrival of the fetch answer carrying the record (skua-load `--phases e2e`).")
    w("")
    latency_table(w, results, "produce", fmt, rfmt, ratio)
    w("End to end, the same runs:")
    w("")
    latency_table(w, results, "e2e", fmt, rfmt, ratio)
    return "\n".join(lines) + "\n"


def latency_table(w, results, what, fmt, rfmt, ratio):
    """The fixed-rate cells' `what` latency (the report's `<what>_p50_us` and so on), Kafka
    beside skua; cells a broker has no such numbers for are left out."""
    K, S, m = results["kafka"], results["skua"], statistics_median
    w("| cell | rate rec/s | Kafka p50 / p99 / p99.9 / max µs | skua p50 / p99 / p99.9 / max µs | **p99 ratio** | p99.9 ratio |")
    w("|---|---:|---|---|---:|---:|")
    for name, _ in NATIVE_LATENCY_CELLS:
        for share, rate in results["rates"][name].items():
            key = f"{name} @{share}%"
            k, s = K["latency"].get(key), S["latency"].get(key)
            if not k or not s or m(k, f"{what}_p99_us") == 0:
                continue
            lat = lambda runs: " / ".join(fmt(m(runs, f"{what}_{q}_us"), nd=0) for q in ("p50", "p99", "p999", "max"))
            w(f"| {name} @{share}% | {fmt(rate, nd=0)} | {lat(k)} | {lat(s)} | "
              f"**{rfmt(ratio(m(s, f'{what}_p99_us'), m(k, f'{what}_p99_us')))}** | "
              f"{rfmt(ratio(m(s, f'{what}_p999_us'), m(k, f'{what}_p999_us')))} |")
    w("")
