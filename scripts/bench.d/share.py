"""`scripts/bench --share`: share groups (KIP-932) on one partition, Apache Kafka against
skua, each broker alone on a fresh data dir with its defaults, driven by the Java
KafkaShareConsumer (kafka-clients of the benchmarked Kafka version).

For 1, 4 and 16 consumers in one share group:
  - consume throughput: Kafka's own `kafka-share-consumer-perf-test`
    (org.apache.kafka.tools.ShareConsumerPerformance --threads N, implicit
    acknowledgement: each poll accepts the previous one's records);
  - acknowledgement latency: `BenchClient share-ack` (N KafkaShareConsumers in another
    share group on the same records, explicit acknowledgement, commitSync() after each
    poll; the time of each commitSync is one acknowledgement round trip).
Both groups are set to share.auto.offset.reset=earliest before they start (a share group
starts at the latest offset otherwise).

Imported by bench.py (which owns Broker, the tools and the doc writer)."""

import re

SHARE_HEADING = "## Share groups: many consumers on one partition"
SHARE_CONSUMERS = (1, 4, 16)
SHARE_SIZE = 1000
# ShareConsumerPerformance's summary line: start, end, MB, MB/s, records/s, records, fetch ms
PERF_RE = re.compile(r"^[\d-]+ [\d:]+, [\d-]+ [\d:]+, ([\d.]+), ([\d.]+), ([\d.]+), (\d+), (\d+)\s*$", re.M)
ACK_RE = re.compile(r"records=(\d+) ms=([\d.]+) commits=(\d+) ack_p50=([\d.]+) ack_p99=([\d.]+)")


def share(opts, Broker, log, tool):
    records = 2_000 if opts.quick else 100_000
    results = {"records": records}
    for kind, label in (("kafka", f"Apache Kafka {opts.kafka_version}"), ("skua", "skua")):
        b = Broker(kind, opts, opts.workdir)
        b.start()
        try:
            results[kind] = {"label": label, "cells": {}}
            for n in SHARE_CONSUMERS:
                topic = f"share-{n}"
                tool(opts, "BenchClient", ["create", b.bootstrap, f"{topic}:1"])
                tool(opts, "org.apache.kafka.tools.ProducerPerformance",
                     ["--topic", topic, "--num-records", str(records), "--record-size", str(SHARE_SIZE),
                      "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap}", "acks=1",
                      "linger.ms=5", "batch.size=16384"], timeout=600)
                perf_group, ack_group = f"share-perf-{n}", f"share-ack-{n}"
                for g in (perf_group, ack_group):
                    tool(opts, "BenchClient", ["config", b.bootstrap, f"group:{g}", "share.auto.offset.reset=earliest"])
                c0 = b.cpu()
                out = tool(opts, "org.apache.kafka.tools.ShareConsumerPerformance",
                           ["--bootstrap-server", b.bootstrap, "--topic", topic, "--group", perf_group,
                            "--num-records", str(records), "--threads", str(n), "--timeout", "60000"],
                           timeout=900)
                cpu = b.cpu() - c0
                m = PERF_RE.search(out)
                if not m:
                    raise RuntimeError(f"no summary line from ShareConsumerPerformance: {out[-500:]}")
                mb, mbps, rps, got, fetch_ms = float(m[1]), float(m[2]), float(m[3]), int(m[4]), int(m[5])
                if got < records:
                    raise RuntimeError(f"{label}, {n} consumers: ShareConsumerPerformance read {got} of {records}")
                out = tool(opts, "BenchClient", ["share-ack", b.bootstrap, topic, ack_group, str(records), str(n)],
                           timeout=900)
                a = ACK_RE.search(out)
                if not a:
                    raise RuntimeError(f"no summary line from BenchClient share-ack: {out[-500:]}")
                cell = {"records": got, "mb": mb, "mbps": mbps, "rps": rps, "fetch_ms": fetch_ms,
                        "cpu_s_per_gb": cpu / (got * SHARE_SIZE / 1e9),
                        "ack_records": int(a[1]), "ack_rps": int(a[1]) / (float(a[2]) / 1000),
                        "ack_commits": int(a[3]), "ack_p50": float(a[4]), "ack_p99": float(a[5])}
                results[kind]["cells"][str(n)] = cell
                log(f"{label}, {n} share consumers: {rps:,.0f} records/s, acknowledgement p50 "
                    f"{cell['ack_p50']:.1f} ms, p99 {cell['ack_p99']:.1f} ms")
        finally:
            b.stop()
    return results


def render_share(opts, results, meta, rfmt, ratio, shared_machine):
    K, S = results["kafka"], results["skua"]
    lines = [SHARE_HEADING, ""]
    w = lines.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if shared_machine(meta) else ''}.")
    w("")
    w(f"{results['records']:,} records of {SHARE_SIZE} bytes in one partition, read by 1, 4 or 16 "
      f"KafkaShareConsumers (Kafka's client {opts.kafka_version}) of one share group; each broker runs alone "
      "on a fresh data dir with its defaults (Kafka: its shipped single-node KRaft config, share groups on "
      "by default; the share-partition lets at most `group.share.partition.max.record.locks`, 2000, records "
      "be acquired at once on both). Throughput is Kafka's own `kafka-share-consumer-perf-test` "
      "(ShareConsumerPerformance, implicit acknowledgement; its records/s run from its start, group join "
      "included, to the last record). Acknowledgement latency is `commitSync()` of a KafkaShareConsumer in "
      "explicit mode that acknowledges every record of a poll and then commits (ShareAcknowledge to the "
      "leader and back; the broker persists the new state before answering); that run's records/s are in "
      "the last column. Broker CPU is user + system time of the broker process per GB read, during the "
      "perf-test run.")
    w("")
    w("| broker | consumers | records/s | MB/s | broker CPU s/GB | ack p50 | ack p99 | records/s acknowledging each poll |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in SHARE_CONSUMERS:
        for R in (K, S):
            c = R["cells"][str(n)]
            w(f"| {R['label']} | {n} | {c['rps']:,.0f} | {c['mbps']:.1f} | {c['cpu_s_per_gb']:.1f} | "
              f"{c['ack_p50']:.1f} ms | {c['ack_p99']:.1f} ms | {c['ack_rps']:,.0f} |")
    w("")
    ratios = ", ".join(f"{rfmt(ratio(S['cells'][str(n)]['rps'], K['cells'][str(n)]['rps']))} with {n}"
                       for n in SHARE_CONSUMERS)
    w(f"skua / Kafka records/s: {ratios}." + (" On a shared machine (load above 1 before the run) the "
      "numbers say more about the other jobs than about either broker." if shared_machine(meta) else ""))
    w("")
    return "\n".join(lines) + "\n"
