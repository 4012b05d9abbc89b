"""`scripts/bench --replicated`: three brokers on this machine, replication factor 3,
min.insync.replicas=2, idempotent producers with acks=all, for skua (ZooKeeper mode) and
Apache Kafka 3.9 (ZooKeeper mode) and, when the tool jars are a 4.x, Apache Kafka 4.x
(KRaft, three combined broker+controller nodes), one cluster after the other, each on fresh
dirs. Driven by Apache Kafka's own perf tools (kafka-producer-perf-test, which routes each
partition to its leader and numbers idempotent batches; kafka-consumer-perf-test).

Imported by bench.py (which owns process handling, the tool runner, the producer and
consumer runs and the doc writer)."""

import atexit
import json
import os
import statistics
import subprocess
import tempfile
import time

REPL_HEADING = "## Replicated: RF 3, acks=all"
BROKERS = 3
RECORD_SIZE = 1024
PARTITIONS = (1, 8)
SHARES = (10, 50, 80)
# The same for every cluster; the rest are each broker's shipped defaults.
CLUSTER_CONFIG = {
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": "1073741824",
}
KAFKA_LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""


class Cluster:
    """Three brokers of one kind on 127.0.0.1 (plus ZooKeeper for the ZooKeeper-mode
    kinds), with the interface bench.py's producer and consumer runs use: bootstrap, cpu()
    (summed over the brokers; ZooKeeper is not counted, it is the same for skua and Kafka
    3.9) and the brokers' peak RSS."""

    def __init__(self, kind, opts, b):
        # kind: "skua", "kafka" (3.9 on ZooKeeper) or "kafka4" (KRaft)
        self.kind, self.opts, self.b = kind, opts, b
        self.procs, self.ports, self.zk_dir = [], [], None

    def start(self):
        b, opts = self.b, self.opts
        self.dir = tempfile.mkdtemp(prefix=f"repl-{self.kind}-", dir=opts.workdir)
        self.ports = [b.free_port() for _ in range(BROKERS)]
        if self.kind == "kafka4":
            self.cports = [b.free_port() for _ in range(BROKERS)]
        else:
            self.zk_dir = f"{self.dir}/zk"
            self.zk_connect = subprocess.run([f"{opts.repo}/scripts/zk", "start", "--dir", self.zk_dir],
                                             check=True, capture_output=True, text=True).stdout.strip()
        cluster_id, argvs = None, []
        for i in range(BROKERS):
            d = f"{self.dir}/broker-{i + 1}"
            os.makedirs(f"{d}/data")
            props = f"{d}/server.properties"
            with open(props, "w") as f:
                f.write(self._properties(i, d))
            if self.kind == "skua":
                argvs.append((d, [opts.skua, props]))
                continue
            jvm = self._kafka_jvm(d)
            if self.kind == "kafka4":
                cluster_id = cluster_id or subprocess.run(
                    jvm + ["kafka.tools.StorageTool", "random-uuid"],
                    check=True, capture_output=True, text=True).stdout.strip()
                subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", props],
                               check=True, capture_output=True, text=True)
            argvs.append((d, jvm + ["kafka.Kafka", props]))
        # timed from the first broker's start (after KRaft's storage format)
        t0 = time.monotonic()
        for d, argv in argvs:
            out = open(f"{d}/stdout.log", "w")
            self.procs.append(b.spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=d))
        for port, proc in zip(self.ports, self.procs):
            b.wait_ready(port, proc, t0, timeout=180)
        return time.monotonic() - t0

    def _properties(self, i, d):
        port = self.ports[i]
        p = {"log.dirs": f"{d}/data",
             "listeners": f"PLAINTEXT://127.0.0.1:{port}",
             "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"}
        if self.kind == "kafka4":
            voters = ",".join(f"{j + 1}@127.0.0.1:{c}" for j, c in enumerate(self.cports))
            p.update({"process.roles": "broker,controller", "node.id": str(i + 1),
                      "controller.quorum.voters": voters,
                      "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.cports[i]}",
                      "inter.broker.listener.name": "PLAINTEXT",
                      "controller.listener.names": "CONTROLLER",
                      "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                      "share.coordinator.state.topic.replication.factor": "3",
                      "share.coordinator.state.topic.min.isr": "2"})
        else:
            p.update({"broker.id": str(i + 1), "zookeeper.connect": self.zk_connect,
                      "inter.broker.protocol.version": "3.9"})
        p.update(CLUSTER_CONFIG)
        return "".join(f"{k}={v}\n" for k, v in p.items())

    def _kafka_jvm(self, d):
        # kafka-server-start.sh's default heap (-Xmx1G -Xms1G) and kafka-run-class.sh's
        # default JVM performance options, per broker
        libs = self.opts.kafka_libs if self.kind == "kafka4" else self.opts.cluster_kafka_libs
        with open(f"{d}/log4j.properties", "w") as f:
            f.write(KAFKA_LOG4J)
        return ["java", "-Xmx1G", "-Xms1G", *self.b.KAFKA_JVM_PERF, f"-Dkafka.logs.dir={d}",
                f"-Dlog4j.configuration=file:{d}/log4j.properties",
                f"-Dlog4j2.configurationFile={self.b.KAFKA_LOG4J2_FILE}", "-cp", f"{libs}/*"]

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def cpu(self):
        return sum(self.b.proc_cpu(p.pid) for p in self.procs)

    def hwm(self):
        """Each broker's peak RSS, MiB."""
        return [self.b.proc_hwm_mib(p.pid) for p in self.procs]

    def stop(self):
        # all at once (a controlled shutdown each), then ZooKeeper
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 15)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            self.b.stop(p, grace=60)
        self.procs = []
        if self.zk_dir:
            subprocess.run([f"{self.opts.repo}/scripts/zk", "stop", self.zk_dir], capture_output=True)
            self.zk_dir = None


def cell(parts):
    return {"size": RECORD_SIZE, "parts": parts, "acks": "all", "comp": "none"}


# skua-load cells: (name, partitions, producers, consumers); 16 records of RECORD_SIZE per
# batch (16 KiB, as the Java producer's batch.size), 5 requests in flight per connection
LOAD_CELLS = [("p1", 1, 1, 1), ("p8", 8, 4, 2)]
LOAD_BATCH = 16


def run_load(opts, b, c, topic, args):
    """One skua-load run against cluster `c` (topic created with RF 3 and
    min.insync.replicas=2, CPU summed over the three brokers); its derived report."""
    import native
    out = f"{opts.workdir}/load-{topic}.json"
    argv = [opts.load, "--bootstrap", c.bootstrap.split(",")[0], "--topic", topic, "--create",
            "--replication-factor", "3", "--min-insync-replicas", "2", "--acks", "all",
            "--broker-pid", ",".join(str(p.pid) for p in c.procs), "--json", out, *map(str, args)]
    p = b.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=900)
    finally:
        b.stop(p, grace=2)
    try:
        r = json.load(open(out))
    except (OSError, ValueError):
        raise RuntimeError(f"skua-load {topic} failed: {err.strip()[-500:]}")
    if p.returncode != 0:
        raise RuntimeError(f"skua-load {topic}: {'; '.join(r['errors'])}")
    return native.derive(r)


def load_cells(opts, b, c, kind, R, plan):
    """skua-load: max throughput with 16 KiB batches (produce, then consume), and latency
    in microseconds with one record per request at Kafka 3.9's maximum's shares."""
    records = 30_000 if opts.quick else 300_000
    for name, parts, prod, cons in LOAD_CELLS:
        r = run_load(opts, b, c, f"load-{name}", [
            "--partitions", parts, "--producers", prod, "--consumers", cons,
            "--record-size", RECORD_SIZE, "--batch-records", LOAD_BATCH,
            "--records", records, "--warmup-records", records // 3])
        R["load"][name] = r
        b.log(f"replicated {kind} skua-load {name}: {r['rps']:,.0f} rec/s produce, p99 {r['produce_p99_us']} µs, "
              f"{r['consume_rps']:,.0f} rec/s consume")
    base = ["--partitions", 1, "--batch-records", 1, "--record-size", RECORD_SIZE, "--phases", "produce"]
    if kind == "kafka":
        top = run_load(opts, b, c, "load-lat-max", base + ["--records", 5_000 if opts.quick else 30_000])
        R["load"]["lat max"] = top
        plan["load_lat_max_rps"] = top["rps"]
    for pct in SHARES:
        rate = plan["load_lat_max_rps"] * pct / 100
        n = max(int(rate * (2 if opts.quick else 10)), 1000)
        r = run_load(opts, b, c, f"load-lat-{pct}", base + ["--records", n, "--warmup-records", n // 3,
                                                             "--rate", f"{rate:.0f}"])
        R["load"][f"lat @{pct}%"] = dict(r, rate=rate)
        b.log(f"replicated {kind} skua-load b1 @{pct}% ({rate:.0f}/s): p50/p99/p99.9 "
              f"{r['produce_p50_us']}/{r['produce_p99_us']}/{r['produce_p999_us']} µs")


def kinds(opts):
    """Kafka 3.9 first: its maximum sets the fixed rates for the others."""
    k = ["kafka"]
    if opts.kafka_version.startswith("4."):
        k.append("kafka4")
    return k + ["skua"]


def replicated(opts, b):
    """b: the bench module (Broker helpers, tools, runs)."""
    seconds = 1.0 if opts.quick else 4.0
    rate_seconds = 2.0 if opts.quick else 10.0
    reps = 1 if opts.quick else 3
    rate_reps = 1
    warmup = 50_000 if opts.quick else 200_000
    results, plan = {}, {}
    for kind in kinds(opts):
        c = Cluster(kind, opts, b)
        # bench.py stops its children at exit; ZooKeeper is scripts/zk's, stopped here
        atexit.register(c.stop)
        ready = c.start()
        log = b.log
        log(f"replicated {kind}: 3 brokers ready in {ready:.1f} s on {c.bootstrap}")
        R = results[kind] = {"ready_s": ready, "producer": {}, "rate": {}, "consumer": {}, "load": {}}
        try:
            topics = [f"repl-max-p{p}:{p}:3:2" for p in PARTITIONS]
            topics += [f"repl-rate-p{p}:{p}:3:2" for p in PARTITIONS] + ["repl-warmup:8:3:2"]
            b.tool(opts, "BenchClient", ["create", c.bootstrap, *topics], timeout=180)
            # JIT for Kafka, page cache and allocator for both
            w = b.run_producer(opts, c, "repl-warmup", cell(8), warmup, -1, warmup // 2)
            log(f"replicated {kind} warm-up: {w['rps']:,.0f} rec/s")
            for parts in PARTITIONS:
                name, t = f"p{parts}", f"repl-max-p{parts}"
                p = plan.setdefault(name, {})
                warm = 20_000 if opts.quick else 50_000
                b.run_producer(opts, c, t, cell(parts), warm, -1, warm // 2)
                if "records" not in p:   # decided on Kafka 3.9: ~`seconds` of its maximum
                    p["records"] = int(min(max(w["rps"] * seconds * 1.5, warm), warm * 20))
                runs = [b.run_producer(opts, c, t, cell(parts), p["records"], -1, p["records"] // 3)
                        for _ in range(reps)]
                R["producer"][name] = runs
                if kind == "kafka":
                    p["kafka_max_rps"] = statistics.median(r["rps"] for r in runs)
                p["written"] = warm + p["records"] * reps
                log(f"replicated {kind} p{parts} max: {statistics.median(r['rps'] for r in runs):,.0f} rec/s, "
                    f"p99 {statistics.median(r['p99'] for r in runs)} ms, load {b.loadavg():.2f}")
            for parts in PARTITIONS:
                name, t = f"p{parts}", f"repl-rate-p{parts}"
                for pct in SHARES:
                    rate = max(1, int(plan[name]["kafka_max_rps"] * pct / 100))
                    n = max(int(rate * rate_seconds), 100)
                    runs = [b.run_producer(opts, c, t, cell(parts), n, rate, n // 3) for _ in range(rate_reps)]
                    R["rate"][f"{name} @{pct}%"] = {"rate": rate, "runs": runs}
                    log(f"replicated {kind} p{parts} @{pct}% ({rate}/s): p50/p99/p99.9 "
                        f"{statistics.median(r['p50'] for r in runs)}/{statistics.median(r['p99'] for r in runs)}/"
                        f"{statistics.median(r['p999'] for r in runs)} ms")
            for parts in PARTITIONS:
                name, t = f"p{parts}", f"repl-max-p{parts}"
                n = plan[name]["written"]
                try:
                    runs = [b.run_consumer(opts, c, t, cell(parts), n, "consumer-perf-test") for _ in range(reps)]
                except RuntimeError as e:
                    log(f"replicated {kind} consumer {name}: FAILED {e}")
                    R["consumer"][name] = {"error": str(e)[:300], "runs": []}
                    continue
                R["consumer"][name] = {"runs": runs}
                log(f"replicated {kind} consumer p{parts}: {statistics.median(r['rps'] for r in runs):,.0f} rec/s")
            if opts.load:
                load_cells(opts, b, c, kind, R, plan)
            R["hwm_mib"] = c.hwm()
            R["cpu_total_s"] = c.cpu()
        finally:
            c.stop()
    return {"results": results, "plan": plan}


def label(opts, kind):
    return {"kafka": "Kafka 3.9.1 (ZooKeeper)", "kafka4": f"Kafka {opts.kafka_version} (KRaft)",
            "skua": "skua (ZooKeeper)"}[kind]


def render_replicated(opts, data, meta, fmt, rfmt, ratio, med):
    res, plan = data["results"], data["plan"]
    ks = [k for k in kinds(opts) if k in res]
    others = [k for k in ks if k != "skua"]
    S = res.get("skua", {})
    L = [REPL_HEADING, ""]
    w = L.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"`uptime` load {meta['load_start']:.2f} before the run and {meta.get('load_end', 0):.2f} after"
      f"{' (shared machine)' if meta['load_start'] > 1.0 else ''}.")
    w("")
    w("Three brokers of one kind on 127.0.0.1 at a time, each cluster on fresh dirs: "
      + ", ".join(label(opts, k) for k in ks) + ". Kafka brokers run with the shipped defaults "
      "and heap (-Xmx1G each); skua with its defaults; ZooKeeper 3.8 for the ZooKeeper-mode clusters. "
      "Topics: replication factor 3, `min.insync.replicas=2`, 1 and 8 partitions, leaders spread by "
      "each broker's own assignment. Producers: `kafka-producer-perf-test` (Kafka "
      f"{opts.kafka_version}'s tool for every cluster), {RECORD_SIZE} B records, `acks=all`, "
      "`enable.idempotence=true`, `linger.ms=5`, `batch.size=16384`, uncompressed; steady-state numbers "
      "(`--warmup-records` = a third of each run). Fixed rates are shares of Kafka 3.9's maximum for the same "
      "cell. Consumers: `kafka-consumer-perf-test` over everything the producers wrote. Broker CPU is the "
      "user + system time of the three broker processes together (ZooKeeper not counted), per GB of "
      "record payload; peak RSS is each broker's VmHWM. The perf tool reports latency in whole "
      "milliseconds, so the latency columns are ms.")
    w("")
    hdr = " | ".join(f"{label(opts, k)}" for k in ks)
    w(f"| cell | rec/s: {hdr} | **skua/Kafka 3.9** | p50 / p99 / p99.9 ms: {hdr} | **p99 skua/3.9** | "
      f"CPU s/GB (3 brokers): {hdr} | **CPU skua/3.9** |")
    w("|---|" + "---:|" * len(ks) + "---:|" + "---|" * len(ks) + "---:|" + "---:|" * len(ks) + "---:|")

    def lat(runs):
        return " / ".join(fmt(med(runs, q), nd=0) for q in ("p50", "p99", "p999"))

    def row(title, get):
        cells = {k: get(res[k]) for k in ks}
        if any(not v for v in cells.values()):
            return
        k3 = cells["kafka"]
        s = cells.get("skua") or []
        w(f"| {title} | " + " | ".join(fmt(med(cells[k], "rps"), nd=0) for k in ks)
          + f" | **{rfmt(ratio(med(s, 'rps'), med(k3, 'rps')))}** | "
          + " | ".join(lat(cells[k]) for k in ks)
          + f" | **{rfmt(ratio(med(s, 'p99'), med(k3, 'p99')))}** | "
          + " | ".join(fmt(med(cells[k], "cpu_s_per_gb")) for k in ks)
          + f" | **{rfmt(ratio(med(s, 'cpu_s_per_gb'), med(k3, 'cpu_s_per_gb')))}** |")

    for parts in PARTITIONS:
        row(f"produce p{parts} max", lambda R, n=f"p{parts}": R["producer"].get(n))
    for parts in PARTITIONS:
        for pct in SHARES:
            key = f"p{parts} @{pct}%"
            rate = res["kafka"]["rate"].get(key, {}).get("rate")
            row(f"produce p{parts} @{pct}% ({fmt(rate, nd=0)}/s)", lambda R, k=key: R["rate"].get(k, {}).get("runs"))
    w("")
    w(f"| consume | rec/s: {hdr} | **skua/Kafka 3.9** | CPU s/GB (3 brokers): {hdr} | **CPU skua/3.9** |")
    w("|---|" + "---:|" * len(ks) + "---:|" + "---:|" * len(ks) + "---:|")
    for parts in PARTITIONS:
        n = f"p{parts}"
        cells = {k: res[k]["consumer"].get(n, {}).get("runs") for k in ks}
        if any(not v for v in cells.values()):
            errs = "; ".join(f"{k}: {res[k]['consumer'].get(n, {}).get('error', '')}" for k in ks if not cells[k])
            w(f"| p{parts} | failed: {errs} |")
            continue
        s, k3 = cells["skua"], cells["kafka"]
        w(f"| p{parts} | " + " | ".join(fmt(med(cells[k], "rps"), nd=0) for k in ks)
          + f" | **{rfmt(ratio(med(s, 'rps'), med(k3, 'rps')))}** | "
          + " | ".join(fmt(med(cells[k], "cpu_s_per_gb")) for k in ks)
          + f" | **{rfmt(ratio(med(s, 'cpu_s_per_gb'), med(k3, 'cpu_s_per_gb')))}** |")
    w("")
    if all(res[k].get("load") for k in ks):
        render_load(opts, res, ks, hdr, w, fmt, rfmt, ratio)
    w("Peak RSS per broker (MiB): " + "; ".join(
        f"{label(opts, k)} " + " / ".join(fmt(x, nd=0) for x in res[k].get("hwm_mib", [])) for k in ks)
      + ". Three brokers ready (every one answering ApiVersions) after: " + "; ".join(
        f"{label(opts, k)} {fmt(res[k]['ready_s'], ' s', 1)}" for k in ks) + ".")
    w("")
    if S and others:
        k3 = res["kafka"]
        mx = [ratio(med(S["producer"].get(f"p{p}"), "rps"), med(k3["producer"].get(f"p{p}"), "rps")) for p in PARTITIONS]
        p99 = [ratio(med(S["rate"][k]["runs"], "p99"), med(k3["rate"][k]["runs"], "p99"))
               for k in k3["rate"] if k in S["rate"]]
        w("Targets (skua / Kafka 3.9): throughput ≥ 1.5× — "
          + ", ".join(f"p{p} {rfmt(r)}" for p, r in zip(PARTITIONS, mx))
          + "; p99 at fixed rates ≤ 0.5× — " + ", ".join(rfmt(r) for r in p99) + ".")
        w("")
    return "\n".join(L) + "\n"


def render_load(opts, res, ks, hdr, w, fmt, rfmt, ratio):
    w("With skua's own load generator (`skua-load`: the same topics, RF 3, `min.insync.replicas=2`, "
      "`acks=all`, each request sent to the partition's leader; not idempotent, it has no producer id), "
      f"latency per request in microseconds. Throughput cells: {LOAD_BATCH} records of {RECORD_SIZE} B per "
      "request (16 KiB), 5 requests in flight per connection, 1 producer for 1 partition and 4 for 8, then "
      "consumers reading everything back from the leaders. Latency cells: one record per request, 1 partition, "
      "at shares of Kafka 3.9's maximum for the same requests, latency from each request's scheduled send time.")
    w("")
    w(f"| cell | rec/s: {hdr} | **skua/Kafka 3.9** | p50 / p99 / p99.9 µs: {hdr} | **p99 skua/3.9** | "
      f"CPU s/GB (3 brokers): {hdr} | **CPU skua/3.9** |")
    w("|---|" + "---:|" * len(ks) + "---:|" + "---|" * len(ks) + "---:|" + "---:|" * len(ks) + "---:|")
    names = [n for n, *_ in LOAD_CELLS] + [f"lat @{p}%" for p in SHARES]
    for n in names:
        cells = {k: res[k]["load"].get(n) for k in ks}
        if any(v is None for v in cells.values()):
            continue
        s, k3 = cells["skua"], cells["kafka"]
        title = f"produce {n}" if not n.startswith("lat") else f"produce b1 {n[4:]} ({fmt(k3.get('rate'), nd=0)}/s)"
        lat = lambda r: " / ".join(fmt(r.get(f"produce_{q}_us"), nd=0) for q in ("p50", "p99", "p999"))
        w(f"| {title} | " + " | ".join(fmt(cells[k]["rps"], nd=0) for k in ks)
          + f" | **{rfmt(ratio(s['rps'], k3['rps']))}** | " + " | ".join(lat(cells[k]) for k in ks)
          + f" | **{rfmt(ratio(s.get('produce_p99_us'), k3.get('produce_p99_us')))}** | "
          + " | ".join(fmt(cells[k]["cpu_s_per_gb"]) for k in ks)
          + f" | **{rfmt(ratio(s['cpu_s_per_gb'], k3['cpu_s_per_gb']))}** |")
    for n, *_ in LOAD_CELLS:
        cells = {k: res[k]["load"].get(n) for k in ks}
        if any(v is None or "consume_rps" not in v for v in cells.values()):
            continue
        s, k3 = cells["skua"], cells["kafka"]
        w(f"| consume {n} | " + " | ".join(fmt(cells[k]["consume_rps"], nd=0) for k in ks)
          + f" | **{rfmt(ratio(s['consume_rps'], k3['consume_rps']))}** | " + " | ".join("–" for _ in ks)
          + " | – | " + " | ".join(fmt(cells[k]["consume_cpu_s_per_gb"]) for k in ks)
          + f" | **{rfmt(ratio(s['consume_cpu_s_per_gb'], k3['consume_cpu_s_per_gb']))}** |")
    w("")


def one_cell():
    """`python3 scripts/bench.d/replicated.py --skua BIN --load BIN --rate N`: one skua-load
    latency cell alone (one record of 1024 B per request, 1 partition, RF 3, acks=all) on a
    fresh three-broker cluster, printed as JSON; `--kind kafka --cluster-kafka-libs DIR`
    runs it on Kafka 3.9 instead. For looking at one number without the whole matrix."""
    import argparse
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import bench as b
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["skua", "kafka"], default="skua")
    ap.add_argument("--skua")
    ap.add_argument("--load", required=True)
    ap.add_argument("--cluster-kafka-libs")
    ap.add_argument("--rate", type=float, required=True, help="requests per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs on the same cluster")
    ap.add_argument("--warmup", type=int, default=200_000, help="records of the full-speed warm-up run")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--consume", type=int, default=0,
                    help="then: write this many 1 KiB records to one partition and read them back with "
                         "kafka-consumer-perf-test (needs --kafka-libs, --tools-log4j), with its CPU and the brokers'")
    ap.add_argument("--kafka-libs", help="the perf tools' jars (Kafka 4.x)")
    ap.add_argument("--tools-log4j")
    ap.add_argument("--hops", action="store_true",
                    help="skua: log each hop (replica_latency debug events) and print where the time goes")
    opts = ap.parse_args()
    if opts.hops:
        os.environ["RUST_LOG"] = "info,replica_latency=debug"
    opts.repo = os.path.dirname(os.path.dirname(here))
    opts.workdir = opts.workdir or tempfile.mkdtemp(prefix="repl-cell-")
    os.makedirs(opts.workdir, exist_ok=True)
    opts.quick = False
    c = Cluster(opts.kind, opts, b)
    atexit.register(c.stop)
    b.log(f"{opts.kind}: 3 brokers ready in {c.start():.1f} s; load {b.loadavg():.2f}")
    # Kafka's JIT (and both brokers' page cache): a run at full speed first, as the matrix's
    # warm-up does
    run_load(opts, b, c, "cell-warmup", ["--partitions", 1, "--record-size", RECORD_SIZE, "--batch-records",
                                         LOAD_BATCH, "--records", opts.warmup, "--phases", "produce"])
    n = max(int(opts.rate * opts.seconds), 1000)
    base = ["--partitions", 1, "--batch-records", 1, "--record-size", RECORD_SIZE, "--phases", "produce"]
    try:
        for i in range(opts.repeat):
            r = run_load(opts, b, c, f"cell-{i}", base + ["--records", n, "--warmup-records", n // 3,
                                                         "--rate", f"{opts.rate:.0f}"])
            print(json.dumps({k: r.get(k) for k in ("rps", "produce_p50_us", "produce_p99_us",
                                                    "produce_p999_us", "cpu_s_per_gb")}), flush=True)
            b.log(f"load {b.loadavg():.2f}")
        if opts.consume:
            consume_cell(opts, b, c)
    finally:
        c.stop()
    if opts.hops and opts.kind == "skua":
        subprocess.run([sys.executable, f"{here}/replicated_hops.py", c.dir, f"cell-{opts.repeat - 1}-0"])


def consume_cell(opts, b, c):
    """The Java consumer cell alone: what kafka-consumer-perf-test reads per second from one
    partition, and whose CPU it costs (the tool's own process against the three brokers')."""
    opts.helper_cp = ""
    run_load(opts, b, c, "cons-p1", ["--partitions", 1, "--record-size", RECORD_SIZE, "--batch-records",
                                     LOAD_BATCH, "--records", opts.consume, "--phases", "produce"])
    for _ in range(opts.repeat):
        r = b.run_consumer(opts, c, "cons-p1", cell(1), opts.consume, "consumer-perf-test")
        wall = r["records"] / r["rps"]
        print(json.dumps({"consume_rps": round(r["rps"]), "seconds": round(wall, 2),
                          "brokers_cpu_s": round(r["cpu_s"], 2),
                          "client_cpu_s": round(r["client_cpu_s_per_gb"] * r["records"] * RECORD_SIZE / 1e9, 2)}),
              flush=True)


if __name__ == "__main__":
    one_cell()
