#!/usr/bin/env python3
"""Driver for scripts/bench: runs Apache Kafka and skua one after the other on this
machine, drives both with Apache Kafka's own perf tools, and writes docs/benchmarks.md.

Not meant to be run directly: scripts/bench builds skua, fetches Kafka's jars, compiles
BenchClient.java and then calls this with the paths it prepared."""

import argparse
import atexit
import datetime
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
LINGER_MS = 5          # Kafka 4.x producer default, stated explicitly
BATCH_SIZE = 16384     # Kafka producer default (16 KiB), stated explicitly
CHILDREN = []          # every process we start; all stopped at exit


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- processes

def spawn(argv, **kw):
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    CHILDREN.append(p)
    return p


def stop(p, grace=20):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in CHILDREN:
        CHILDREN.remove(p)


def stop_all():
    for p in list(CHILDREN):
        stop(p, grace=5)


def on_signal(sig, _frame):
    log(f"signal {sig}: stopping everything")
    stop_all()
    sys.exit(128 + sig)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def proc_cpu(pid):
    """utime + stime of PID (all its threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


# --------------------------------------------------------------------------- readiness

def _recvn(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def api_versions(port, wait_s):
    """Send ApiVersions v0; True once the broker answers it without error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.settimeout(wait_s)
            cid = b"bench"
            body = struct.pack(">hhih", 18, 0, 7, len(cid)) + cid
            s.sendall(struct.pack(">i", len(body)) + body)
            (n,) = struct.unpack(">i", _recvn(s, 4))
            corr, err = struct.unpack(">ih", _recvn(s, n)[:6])
            return corr == 7 and err == 0
    except OSError:
        return False


def wait_ready(port, proc, t0, timeout=120):
    """Seconds from t0 (just before the broker process was started) until the broker
    answers an ApiVersions request."""
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before it was ready")
        if api_versions(port, wait_s=5):
            return time.monotonic() - t0
        time.sleep(0.002)
    raise RuntimeError("broker not ready in time")


# --------------------------------------------------------------------------- brokers

# Kafka's broker log to a file in its logs dir, state changes at WARN (log4j2, Kafka 4.x): the
# same configuration compat/kafka-broker.sh gives its reference broker.
KAFKA_LOG4J2_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "compat",
                                 "kafka", "log4j2.properties")
KAFKA_JVM_PERF = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-Djava.awt.headless=true"]


class Broker:
    def __init__(self, kind, opts, workdir, binary=None, extra=None):
        self.kind, self.opts, self.workdir = kind, opts, workdir
        # broker configs beyond the defaults (the same for both brokers)
        self.extra = extra or {}
        self.binary = binary or getattr(opts, "skua", None)
        self.proc = None
        self.port = None

    def _fresh_dir(self):
        d = tempfile.mkdtemp(prefix=f"{self.kind}-", dir=self.workdir)
        os.makedirs(f"{d}/data")
        return d

    def start(self):
        """Start on a fresh data dir; returns start-to-ready seconds."""
        d = self._fresh_dir()
        self.dir = d
        self.port = free_port()
        out = open(f"{d}/stdout.log", "w")
        if self.kind == "skua":
            argv = [self.binary,
                    "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "--override", f"log.dirs={d}/data"]
            for k, v in self.extra.items():
                argv += ["--override", f"{k}={v}"]
        else:
            argv = self._kafka_prepare(d)
        t0 = time.monotonic()
        self.proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=d)
        ready = wait_ready(self.port, self.proc, t0)
        return ready

    def _kafka_prepare(self, d):
        cport = free_port()
        with open(f"{d}/server.properties", "w") as f:
            # Kafka's shipped config/server.properties (KRaft, combined mode), loopback only
            f.write(f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{cport}
listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={d}/data
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
""" + "".join(f"{k}={v}\n" for k, v in self.extra.items()))
        # kafka-server-start.sh's default heap (-Xmx1G -Xms1G) and kafka-run-class.sh's
        # default JVM performance options
        jvm = ["java", "-Xmx1G", "-Xms1G", *KAFKA_JVM_PERF,
               f"-Dkafka.logs.dir={d}", f"-Dlog4j2.configurationFile={KAFKA_LOG4J2_FILE}",
               "-cp", f"{self.opts.kafka_libs}/*"]
        cluster = subprocess.run(jvm + ["kafka.tools.StorageTool", "random-uuid"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "-t", cluster,
                              "-c", f"{d}/server.properties"],
                       check=True, capture_output=True, text=True)
        return jvm + ["kafka.Kafka", f"{d}/server.properties"]

    def cpu(self):
        return proc_cpu(self.proc.pid)

    def hwm(self):
        return proc_hwm_mib(self.proc.pid)

    def stop(self):
        if self.proc:
            stop(self.proc)
            self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"


# --------------------------------------------------------------------------- tools

def tool(opts, cls, args, timeout=300):
    """Run a class from Kafka's jars the way Kafka's bin/kafka-*.sh scripts do
    (KAFKA_HEAP_OPTS=-Xmx512M, kafka-run-class.sh's JVM performance options)."""
    argv = ["java", "-Xmx512M", *KAFKA_JVM_PERF,
            f"-Dlog4j2.configurationFile={opts.tools_log4j}",
            "-cp", f"{opts.kafka_libs}/*:{opts.helper_cp}", cls, *args]
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p, grace=2)
        raise RuntimeError(f"{cls} timed out after {timeout}s")
    finally:
        if p in CHILDREN:
            CHILDREN.remove(p)
    if p.returncode != 0:
        raise RuntimeError(f"{cls} exited {p.returncode}: {err.strip()[-800:] or out.strip()[-800:]}")
    return out


STEADY_RE = re.compile(
    r"(\d+) steady state records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
PRODUCER_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def producer_props(cell):
    idem = "true" if cell["acks"] == "all" else "false"
    return [f"acks={cell['acks']}", f"enable.idempotence={idem}",
            f"compression.type={cell['comp']}", f"linger.ms={LINGER_MS}", f"batch.size={BATCH_SIZE}"]


def has_warmup_option(opts):
    import zipfile
    jar = f"{opts.kafka_libs}/kafka-tools-{opts.kafka_version}.jar"
    with zipfile.ZipFile(jar) as z:
        return b"warmup-records" in z.read("org/apache/kafka/tools/ProducerPerformance.class")


def run_producer(opts, broker, topic, cell, records, rate, warmup=0):
    """One kafka-producer-perf-test run. With warmup > 0 (and a tool that has
    --warmup-records) rates and latencies are its steady-state numbers, i.e. without the
    client's start-up, metadata fetch and JIT warm-up; CPU s/GB counts every record."""
    c0, l0, t0 = broker.cpu(), loadavg(), children_cpu()
    extra = ["--warmup-records", str(warmup)] if warmup and opts.warmup_option else []
    out = tool(opts, "org.apache.kafka.tools.ProducerPerformance",
               ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                "--num-records", str(records), "--record-size", str(cell["size"]),
                "--throughput", str(rate), *extra, "--producer-props", *producer_props(cell)])
    cpu, client_cpu = broker.cpu() - c0, children_cpu() - t0
    m = PRODUCER_RE.findall(out)
    if not m:
        raise RuntimeError(f"no summary line from ProducerPerformance: {out[-500:]}")
    total = int(m[-1][0])
    steady = STEADY_RE.findall(out)
    n, rps, mbs, avg, mx, p50, p95, p99, p999 = steady[-1] if steady else m[-1]
    gb = total * cell["size"] / 1e9
    return {"records": total, "steady": bool(steady), "rps": float(rps), "mbps": float(rps) * cell["size"] / 1e6,
            "avg_ms": float(avg), "p50": float(p50), "p99": float(p99), "p999": float(p999),
            "cpu_s": cpu, "cpu_s_per_gb": cpu / gb, "client_cpu_s_per_gb": client_cpu / gb,
            "load_before": l0, "load_after": loadavg()}


def children_cpu():
    """CPU seconds of every child process reaped so far (the tools run one at a time and
    the broker is reaped only when stopped, so a delta is one tool's CPU)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_consumer(opts, broker, topic, cell, records, method):
    c0, l0, t0 = broker.cpu(), loadavg(), children_cpu()
    if method == "consumer-perf-test":
        out = tool(opts, "org.apache.kafka.tools.ConsumerPerformance",
                   ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                    "--num-records", str(records), "--timeout", "60000",
                    "--group", f"bench-{time.time_ns()}", "--hide-header"], timeout=180)
        # start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec
        row = [x.strip() for x in out.strip().splitlines()[-1].split(",")]
        n, ms = int(row[4]), float(row[7])
        nbytes = float(row[2]) * 1024 * 1024
    else:
        out = tool(opts, "BenchClient", ["consume", broker.bootstrap, topic, str(records)], timeout=180)
        kv = dict(x.split("=") for x in out.split())
        n, nbytes, ms = int(kv["records"]), int(kv["bytes"]), float(kv["ms"])
    cpu, client_cpu = broker.cpu() - c0, children_cpu() - t0
    if n < records:
        raise RuntimeError(f"consumer read {n} of {records} records")
    return {"records": n, "rps": n / (ms / 1000), "mbps": nbytes / 1e6 / (ms / 1000),
            "cpu_s": cpu, "cpu_s_per_gb": cpu / (nbytes / 1e9),
            "client_cpu_s_per_gb": client_cpu / (nbytes / 1e9),
            "load_before": l0, "load_after": loadavg()}


E2E_RE = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")
AVG_RE = re.compile(r"Avg latency: ([\d.]+) ms")


def run_e2e(opts, broker, topic, cell, records, method):
    c0, l0 = broker.cpu(), loadavg()
    if method == "EndToEndLatency":
        out = tool(opts, "org.apache.kafka.tools.EndToEndLatency",
                   ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                    "--num-records", str(records), "--producer-acks", cell["acks"],
                    "--record-size", str(cell["size"])], timeout=240)
        m, a = E2E_RE.search(out), AVG_RE.search(out)
        if not m or not a:
            raise RuntimeError(f"no percentiles from EndToEndLatency: {out[-500:]}")
        r = {"avg_ms": float(a.group(1)), "p50": float(m.group(1)),
             "p99": float(m.group(2)), "p999": float(m.group(3))}
    else:
        out = tool(opts, "BenchClient", ["e2e", broker.bootstrap, topic, str(records),
                                         cell["acks"], str(cell["size"])], timeout=240)
        r = {k: float(v) for k, v in (x.split("=") for x in out.split())}
    cpu = broker.cpu() - c0
    r.update({"records": records, "cpu_s": cpu, "load_before": l0, "load_after": loadavg()})
    return r


# --------------------------------------------------------------------------- matrix

def cell_name(c):
    acks = "acks=1" if c["acks"] == "1" else "acks=all+idem"
    return f"{c['size']}B p{c['parts']} {acks} {c['comp']}"


def topic_name(prefix, c):
    return f"{prefix}-{c['size']}-p{c['parts']}-a{c['acks']}-{c['comp']}"


def matrix(opts):
    sizes = [100, 1024]
    cells = [{"size": s, "parts": p, "acks": a, "comp": z}
             for s in sizes for p in (1, 8) for a in ("1", "all") for z in ("none", "lz4")]
    if opts.quick:
        cells = [c for c in cells if c["comp"] == "none" and c["parts"] == 8 or
                 (c["size"] == 100 and c["acks"] == "1" and c["comp"] == "lz4" and c["parts"] == 8)]
    # fixed-rate latency on the two cells the targets name (keeps the full run near 25 min)
    rate_cells = [c for c in cells if c["parts"] == 1 and c["comp"] == "none" and
                  (c["size"], c["acks"]) in ((100, "1"), (1024, "all"))]
    if opts.quick:
        rate_cells = [c for c in cells if c["size"] == 100 and c["acks"] == "1" and c["comp"] == "none"]
    cons_cells = [c for c in cells if c["acks"] == "1"]
    e2e_cells = [{"size": s, "parts": 1, "acks": a, "comp": "none"} for s in sizes for a in ("1", "all")]
    if opts.quick:
        e2e_cells = e2e_cells[:1]
    return cells, rate_cells, cons_cells, e2e_cells


def summarize(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    if not vals:
        return None
    med = statistics.median(vals)
    return {"median": med, "min": min(vals), "max": max(vals), "n": len(vals),
            "spread_pct": (max(vals) - min(vals)) / med * 100 if med else 0.0}


def bench_broker(opts, kind, plan, results, binary=None):
    """One broker's whole run. plan carries the record counts and fixed rates (decided
    during Kafka's run and reused for skua so both do the same work). kind "baseline" is
    skua built from another revision (`binary`)."""
    cells, rate_cells, cons_cells, e2e_cells = matrix(opts)
    R = results[kind] = {"ready_s": [], "producer": {}, "rate": {}, "consumer": {}, "e2e": {}}
    b = Broker("kafka" if kind == "kafka" else "skua", opts, opts.workdir, binary)
    # start-to-ready: start/stop on fresh dirs; the last start is the one benchmarked
    nstarts = opts.starts
    for i in range(nstarts):
        R["ready_s"].append(b.start())
        log(f"{kind}: ready in {R['ready_s'][-1] * 1000:.0f} ms (pid {b.proc.pid})")
        if i < nstarts - 1:
            b.stop()
    try:
        topics = [f"{topic_name('max', c)}:{c['parts']}" for c in cells]
        topics += [f"{topic_name('rate', c)}:{c['parts']}" for c in rate_cells]
        topics += [f"{topic_name('e2e', c)}:{c['parts']}" for c in e2e_cells]
        topics += [f"warmup:8"]
        tool(opts, "BenchClient", ["create", b.bootstrap, *topics])
        # broker warm-up (JIT for Kafka, page cache and allocator for both)
        w = run_producer(opts, b, "warmup", {"size": 100, "parts": 8, "acks": "1", "comp": "none"},
                         opts.broker_warmup, -1, opts.broker_warmup // 2)
        log(f"{kind} warm-up: {w['rps']:,.0f} rec/s")

        for c in cells:
            name, t = cell_name(c), topic_name("max", c)
            p = plan.setdefault(name, {})
            warm = opts.warm_records[c["size"]]
            w = run_producer(opts, b, t, c, warm, -1, warm // 2)
            if "records" not in p:   # decided on Kafka: ~opts.seconds of Kafka's max rate
                p["records"] = int(min(max(w["rps"] * opts.seconds * 1.5, warm), warm * 20))
            runs = [run_producer(opts, b, t, c, p["records"], -1, p["records"] // 3)
                    for _ in range(opts.reps)]
            R["producer"][name] = {"cell": c, "warmup": w, "runs": runs}
            if kind == "kafka":
                p["kafka_max_rps"] = statistics.median(r["rps"] for r in runs)
            p["written"] = warm + p["records"] * opts.reps
            log(f"{kind} producer {name}: {statistics.median(r['rps'] for r in runs):,.0f} rec/s "
                f"({p['records']} x {opts.reps}), load {loadavg():.2f}")

        for c in rate_cells:
            name, t = cell_name(c), topic_name("rate", c)
            kmax = plan[name]["kafka_max_rps"]
            for pct in opts.rates:
                rate = max(1, int(kmax * pct / 100))
                n = max(int(rate * opts.rate_seconds), 100)
                # The first third is --warmup-records: a short run's p99 is the client JVM
                # warming up (JIT, first GCs), the same on both brokers, not the broker.
                runs = [run_producer(opts, b, t, c, n, rate, n // 3) for _ in range(opts.reps)]
                R["rate"][f"{name} @{pct}%"] = {"cell": c, "pct": pct, "rate": rate, "runs": runs}
                log(f"{kind} rate {name} @{pct}% ({rate}/s): p99 "
                    f"{statistics.median(r['p99'] for r in runs)} ms")

        for c in cons_cells:
            name, t = cell_name(c), topic_name("max", c)
            p = plan[name]
            n = min(p["written"], p["records"] * opts.consume_factor)
            try:
                run_consumer(opts, b, t, c, min(n, opts.warm_records[c["size"]]), opts.consumer_method)
                runs = [run_consumer(opts, b, t, c, n, opts.consumer_method) for _ in range(opts.reps)]
            except RuntimeError as e:
                log(f"{kind} consumer {name}: FAILED {e}")
                R["consumer"][name] = {"cell": c, "error": str(e)[:300], "runs": []}
                continue
            R["consumer"][name] = {"cell": c, "runs": runs}
            log(f"{kind} consumer {name}: {statistics.median(r['rps'] for r in runs):,.0f} rec/s")

        for c in e2e_cells:
            name, t = cell_name(c), topic_name("e2e", c)
            try:
                run_e2e(opts, b, t, c, max(opts.e2e_records // 4, 50), opts.e2e_method)
                runs = [run_e2e(opts, b, t, c, opts.e2e_records, opts.e2e_method) for _ in range(opts.reps)]
            except RuntimeError as e:
                log(f"{kind} e2e {name}: FAILED {e}")
                R["e2e"][name] = {"cell": c, "error": str(e)[:300], "runs": []}
                continue
            R["e2e"][name] = {"cell": c, "runs": runs}
            log(f"{kind} e2e {name}: p99 {statistics.median(r['p99'] for r in runs)} ms")
        R["hwm_mib"] = b.hwm()
        R["cpu_total_s"] = b.cpu()
    finally:
        b.stop()


def probe_groups(opts):
    """Does skua serve kafka-consumer-perf-test (which needs a consumer group)?"""
    b = Broker("skua", opts, opts.workdir)
    b.start()
    try:
        tool(opts, "BenchClient", ["create", b.bootstrap, "probe:1"])
        tool(opts, "org.apache.kafka.tools.ProducerPerformance",
             ["--bootstrap-server", b.bootstrap, "--topic", "probe", "--num-records", "1000",
              "--record-size", "100", "--throughput", "-1", "--producer-props", "acks=1"])
        try:
            out = tool(opts, "org.apache.kafka.tools.ConsumerPerformance",
                       ["--bootstrap-server", b.bootstrap, "--topic", "probe", "--num-records", "1000",
                        "--timeout", "15000", "--group", "bench-probe", "--hide-header"], timeout=60)
            row = out.strip().splitlines()[-1].split(",")
            groups = (int(row[4]) >= 1000, "works on skua" if int(row[4]) >= 1000 else f"read {row[4]} of 1000 on skua")
        except RuntimeError as e:
            groups = (False, "on skua: " + str(e).splitlines()[0][:200])
        try:
            tool(opts, "org.apache.kafka.tools.EndToEndLatency",
                 ["--bootstrap-server", b.bootstrap, "--topic", "probe", "--num-records", "20",
                  "--producer-acks", "1", "--record-size", "100"], timeout=60)
            e2e = (True, "works on skua")
        except RuntimeError as e:
            e2e = (False, "on skua: " + str(e).splitlines()[0][:200])
        return groups, e2e
    finally:
        b.stop()


# --------------------------------------------------------------------------- loopback

def loopback_bandwidth(seconds):
    """Loopback TCP bandwidth in bytes/s: iperf3 if installed, else a Python sender/receiver."""
    if shutil.which("iperf3"):
        port = free_port()
        srv = spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            bps = None
            for _ in range(20):
                time.sleep(0.25)
                out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                                     capture_output=True, text=True, timeout=seconds + 30).stdout
                res = json.loads(out)
                if "error" not in res:
                    bps = res["end"]["sum_received"]["bits_per_second"]
                    break
            if bps is None:
                raise RuntimeError(res.get("error"))
            return bps / 8, "iperf3 (1 stream, default 128 KiB writes)"
        except Exception as e:  # fall through to python
            log(f"iperf3 failed ({e}); using the Python loopback test")
        finally:
            stop(srv, grace=2)
    import threading
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    got = [0]

    def sink():
        c, _ = ls.accept()
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            got[0] += len(d)
        c.close()
    th = threading.Thread(target=sink)
    th.start()
    s = socket.create_connection(ls.getsockname())
    buf = b"x" * (1 << 20)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        s.sendall(buf)
    s.close()
    th.join()
    return got[0] / (time.monotonic() - t0), "Python socket sender/receiver (1 MiB writes)"


# --------------------------------------------------------------------------- report

def fmt(x, unit="", nd=None):
    if x is None:
        return "–"
    if nd is None:
        nd = 0 if abs(x) >= 100 else (1 if abs(x) >= 10 else 2)
    return f"{x:,.{nd}f}{unit}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def rfmt(r):
    return "–" if r is None else f"{r:.2f}×"


def med(runs, key):
    s = summarize(runs, key)
    return s["median"] if s else None


def spread(runs, key):
    s = summarize(runs, key)
    return "–" if not s else f"±{s['spread_pct'] / 2:.0f}%"


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 1024 / 1024
    return {"cores": os.cpu_count(), "ram_gib": mem, "cpu": model, "kernel": os.uname().release}


def render(opts, results, plan, meta):
    K, S = results["kafka"], results["skua"]
    L = []
    w = L.append
    w("# skua vs Apache Kafka: benchmarks\n")
    w(f"Generated by `{meta['command']}` on {meta['date']} (wall time {meta['wall_min']:.1f} min). "
      "Both brokers ran one after the other on the same machine, each on a fresh data dir with "
      "freshly created topics, driven by the same Apache Kafka tools.\n")
    w("| | |\n|---|---|")
    m = meta["machine"]
    w(f"| machine | {m['cores']} cores, {m['ram_gib']:.1f} GiB RAM, {m['cpu']}, Linux {m['kernel']} |")
    w(f"| skua | {meta['skua_version']} (release build, defaults) |")
    w(f"| Apache Kafka | {opts.kafka_version} broker and tools (Maven Central), KRaft single node, "
      "shipped `server.properties` values, default heap `-Xmx1G -Xms1G`, G1 |")
    w(f"| Java | {meta['java']} |")
    w(f"| load average | {meta['load_start']:.2f} at start, {meta['load_end']:.2f} at end"
      + (" — **the machine was shared with other jobs during this run; numbers are noisy**"
         if meta['shared'] else " — idle at start; the load during the run is the benchmark's own "
         "client and broker") + " |")
    w(f"| mode | {'`--quick` (tiny matrix, smoke test only)' if opts.quick else 'full matrix'}; "
      f"a {opts.broker_warmup:,}-record produce warm-up per broker, then per cell 1 warm-up run and "
      f"{opts.reps} measured runs; median reported, ± is half the min–max range. Records per run are "
      f"set from Kafka's warm-up rate for the cell (about {opts.seconds:g} s at Kafka's speed) and "
      "are the same for both brokers |")
    w("")
    if meta["shared"]:
        def loads(R):
            v = [r["load_before"] for sec in ("producer", "rate", "consumer", "e2e")
                 for c in R[sec].values() for r in c["runs"]]
            return (min(v), statistics.median(v), max(v)) if v else (0, 0, 0)
        lk, ls = loads(K), loads(S)
        w("> **Read the ratios with care.** This run shared the machine with other jobs. The 1-minute load "
          f"average before each run was {lk[0]:.1f}–{lk[2]:.1f} (median {lk[1]:.1f}) during Kafka's half and "
          f"{ls[0]:.1f}–{ls[2]:.1f} (median {ls[1]:.1f}) during skua's half (see the *load K / s* columns)"
          + (", so the throughput and latency ratios are biased in favour of the broker that ran under less load"
             if abs(lk[1] - ls[1]) > 1 else "") +
          ". The client JVM also shares the cores with the broker. Broker CPU s/GB, peak RSS and "
          "start-to-ready are the least load-sensitive numbers; rerun `scripts/bench` on an idle machine "
          "before quoting a throughput ratio.\n")
    w("## Targets (skua / Kafka)\n")
    w("| target | goal | measured | |\n|---|---|---|---|")
    for t in meta["targets"]:
        w(f"| {t['what']} | {t['goal']} | {t['value']} | {t['verdict']} |")
    w("")
    w("## Producer, maximum throughput (`kafka-producer-perf-test --throughput -1`)\n")
    w(f"`linger.ms={LINGER_MS}`, `batch.size={BATCH_SIZE}` in every cell; acks=all cells use "
      "`enable.idempotence=true`, acks=1 cells `enable.idempotence=false`. Latency columns are the "
      "tool's send-to-ack latency under saturation (whole milliseconds). CPU is broker utime+stime "
      "per GB of record payload (all records of the run); *client CPU* is the perf tool's own "
      "(whole JVM) per GB. Client and broker share this machine's cores, so a broker that needs "
      "less CPU leaves more to the client.\n")
    if opts.warmup_option:
        w("Each measured run sends N records of which the first N/3 are `--warmup-records`: rates "
          "and latencies are the tool's *steady-state* numbers, so the client JVM's start-up, "
          "metadata fetch and JIT warm-up are not in them.\n")
    w("| cell | records/run | Kafka rec/s | skua rec/s | **rec/s ratio** | MB/s ratio | p50 ratio | p99 ratio | p99.9 ratio | CPU s/GB Kafka | CPU s/GB skua | **CPU ratio** | client CPU s/GB K / s | load K / s |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, k in K["producer"].items():
        s = S["producer"].get(name, {"runs": []})
        kr, sr = k["runs"], s["runs"]
        w(f"| {name} | {plan[name]['records']:,} | {fmt(med(kr, 'rps'))} {spread(kr, 'rps')} | "
          f"{fmt(med(sr, 'rps'))} {spread(sr, 'rps')} | **{rfmt(ratio(med(sr, 'rps'), med(kr, 'rps')))}** | "
          f"{rfmt(ratio(med(sr, 'mbps'), med(kr, 'mbps')))} | {rfmt(ratio(med(sr, 'p50'), med(kr, 'p50')))} | "
          f"{rfmt(ratio(med(sr, 'p99'), med(kr, 'p99')))} | {rfmt(ratio(med(sr, 'p999'), med(kr, 'p999')))} | "
          f"{fmt(med(kr, 'cpu_s_per_gb'))} | {fmt(med(sr, 'cpu_s_per_gb'))} | "
          f"**{rfmt(ratio(med(sr, 'cpu_s_per_gb'), med(kr, 'cpu_s_per_gb')))}** | "
          f"{fmt(med(kr, 'client_cpu_s_per_gb'))} / {fmt(med(sr, 'client_cpu_s_per_gb'))} | "
          f"{loadrange(kr)} / {loadrange(sr)} |")
    w("")
    w("Absolute numbers (median [min–max]):\n")
    w("| cell | broker | rec/s | MB/s | p50 ms | p99 ms | p99.9 ms | CPU s/GB |\n|---|---|---|---|---|---|---|---|")
    for name, k in K["producer"].items():
        for lbl, runs in (("Kafka", k["runs"]), ("skua", S["producer"].get(name, {"runs": []})["runs"])):
            w(f"| {name} | {lbl} | {rng(runs, 'rps')} | {rng(runs, 'mbps')} | {rng(runs, 'p50')} | "
              f"{rng(runs, 'p99')} | {rng(runs, 'p999')} | {rng(runs, 'cpu_s_per_gb')} |")
    w("")
    w("## Producer latency at fixed rates (10 %, 50 %, 80 % of Kafka's maximum)\n")
    w(f"Same offered load for both brokers; `--throughput` set to the given share of Kafka's median "
      f"maximum for that cell; each run lasts about {opts.rate_seconds:g} s, the first third of its "
      "records being `--warmup-records`. Latency is "
      "kafka-producer-perf-test's send-to-ack latency (whole milliseconds, so 0–1 ms values are coarse).\n")
    w("| cell | rate rec/s | Kafka p50 / p99 / p99.9 ms | skua p50 / p99 / p99.9 ms | **p99 ratio** | p99.9 ratio | CPU s/GB K / s | load K / s |")
    w("|---|---|---|---|---|---|---|---|")
    for name, k in K["rate"].items():
        s = S["rate"].get(name, {"runs": []})
        kr, sr = k["runs"], s["runs"]
        w(f"| {name} | {k['rate']:,} | {fmt(med(kr, 'p50'))} / {fmt(med(kr, 'p99'))} / {fmt(med(kr, 'p999'))} | "
          f"{fmt(med(sr, 'p50'))} / {fmt(med(sr, 'p99'))} / {fmt(med(sr, 'p999'))} | "
          f"**{rfmt(ratio(med(sr, 'p99'), med(kr, 'p99')))}** | {rfmt(ratio(med(sr, 'p999'), med(kr, 'p999')))} | "
          f"{fmt(med(kr, 'cpu_s_per_gb'))} / {fmt(med(sr, 'cpu_s_per_gb'))} | {loadrange(kr)} / {loadrange(sr)} |")
    w("")
    w("## Consumer throughput\n")
    if opts.consumer_method == "consumer-perf-test":
        w("Method (both brokers): `kafka-consumer-perf-test` with a fresh group per run; rate from its "
          "`fetch.nMsg.sec` (excludes the group join).\n")
    else:
        w("Method (both brokers): **group-less consumer** (`scripts/bench.d/BenchClient.java consume`: "
          "Kafka's `KafkaConsumer` with `assign()` + `seekToBeginning()`, no `group.id`, default fetch "
          "settings), because skua does not serve `kafka-consumer-perf-test` yet "
          f"(probe: {opts.group_probe}). Time runs from the first `poll()` to the one returning the "
          "last record. The same method is used for Kafka so the ratio compares like with like.\n")
    w("Each run reads the same records from the beginning of the acks=1 topic the producer cell wrote.\n")
    w("*Client CPU* is the consumer tool's own CPU (its whole JVM, start-up included) per GB: the "
      "same client doing the same work on both brokers. When the client spends about as many CPU "
      "seconds as the run lasts, it is the bottleneck and the rec/s ratio says little about the "
      "brokers; the broker CPU ratio then shows what each broker spent to serve it.\n")
    w("| cell | records/run | Kafka rec/s | skua rec/s | **rec/s ratio** | MB/s ratio | CPU s/GB Kafka | CPU s/GB skua | **CPU ratio** | client CPU s/GB K / s | load K / s |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, k in K["consumer"].items():
        s = S["consumer"].get(name, {"runs": []})
        kr, sr = k["runs"], s["runs"]
        err = s.get("error") or k.get("error")
        w(f"| {name.replace(' acks=1', '')} | {fmt(med(kr, 'records'))} | {fmt(med(kr, 'rps'))} {spread(kr, 'rps')} | "
          f"{fmt(med(sr, 'rps'))} {spread(sr, 'rps')} | **{rfmt(ratio(med(sr, 'rps'), med(kr, 'rps')))}** | "
          f"{rfmt(ratio(med(sr, 'mbps'), med(kr, 'mbps')))} | {fmt(med(kr, 'cpu_s_per_gb'))} | "
          f"{fmt(med(sr, 'cpu_s_per_gb'))} | **{rfmt(ratio(med(sr, 'cpu_s_per_gb'), med(kr, 'cpu_s_per_gb')))}** | "
          f"{fmt(med(kr, 'client_cpu_s_per_gb'))} / {fmt(med(sr, 'client_cpu_s_per_gb'))} | "
          f"{loadrange(kr)} / {loadrange(sr)}{' — ' + err if err else ''} |")
    w("")
    w("## End-to-end latency\n")
    w(f"One record at a time: produce (`linger.ms=0`, wait for the ack), then poll until it arrives "
      f"({opts.e2e_records} records per run, 1 partition, no compression, no other load).\n")
    if opts.e2e_method == "EndToEndLatency":
        w("Method (both brokers): `org.apache.kafka.tools.EndToEndLatency`; percentiles are whole "
          "milliseconds as printed by the tool.\n")
    else:
        w("Method (both brokers): **group-less copy of Kafka's `EndToEndLatency` loop** "
          "(`scripts/bench.d/BenchClient.java e2e`: same producer/consumer settings, `assign()` + "
          "`seekToEnd()`, `fetch.max.wait.ms=0`, but no `group.id`, and microsecond resolution), "
          f"because Kafka {opts.kafka_version}'s `EndToEndLatency` sets a `group.id` and so needs "
          f"FindCoordinator, which skua lacks for now (probe: EndToEndLatency {opts.e2e_probe}).\n")
    w("| cell | Kafka avg / p50 / p99 / p99.9 ms | skua avg / p50 / p99 / p99.9 ms | avg ratio | **p99 ratio** | load K / s |")
    w("|---|---|---|---|---|---|")
    for name, k in K["e2e"].items():
        s = S["e2e"].get(name, {"runs": []})
        kr, sr = k["runs"], s["runs"]
        err = s.get("error") or k.get("error")
        w(f"| {name} | {fmt(med(kr, 'avg_ms'), nd=2)} / {fmt(med(kr, 'p50'))} / {fmt(med(kr, 'p99'))} / {fmt(med(kr, 'p999'))} | "
          f"{fmt(med(sr, 'avg_ms'), nd=2)} / {fmt(med(sr, 'p50'))} / {fmt(med(sr, 'p99'))} / {fmt(med(sr, 'p999'))} | "
          f"{rfmt(ratio(med(sr, 'avg_ms'), med(kr, 'avg_ms')))} | **{rfmt(ratio(med(sr, 'p99'), med(kr, 'p99')))}** | "
          f"{loadrange(kr)} / {loadrange(sr)}{' — ' + err if err else ''} |")
    w("")
    w("## Broker footprint\n")
    w("| | Kafka | skua | ratio |\n|---|---|---|---|")
    kr, sr = statistics.median(K["ready_s"]) * 1000, statistics.median(S["ready_s"]) * 1000
    w(f"| start-to-ready, ms (process start → first ApiVersions answer; median of {len(K['ready_s'])} / "
      f"{len(S['ready_s'])} starts on fresh dirs; Kafka's `storage format` step not included) | "
      f"{kr:,.0f} [{min(K['ready_s']) * 1000:,.0f}–{max(K['ready_s']) * 1000:,.0f}] | "
      f"{sr:,.1f} [{min(S['ready_s']) * 1000:,.1f}–{max(S['ready_s']) * 1000:,.1f}] | {rfmt(ratio(sr, kr))} |")
    w(f"| peak RSS (VmHWM over the whole run), MiB | {fmt(K.get('hwm_mib'))} | {fmt(S.get('hwm_mib'))} | "
      f"{rfmt(ratio(S.get('hwm_mib'), K.get('hwm_mib')))} |")
    w(f"| broker CPU over the whole run, s | {fmt(K.get('cpu_total_s'))} | {fmt(S.get('cpu_total_s'))} | "
      f"{rfmt(ratio(S.get('cpu_total_s'), K.get('cpu_total_s')))} |")
    w("")
    w("## Produce throughput vs. loopback bandwidth\n")
    lb = meta["loopback_Bps"]
    w(f"Loopback TCP bandwidth measured in the same run with {meta['loopback_method']}: "
      f"**{lb / 1e6:,.0f} MB/s**. Produce MB/s with 16 KiB batches (`batch.size=16384`), "
      "as a fraction of it:\n")
    w("| cell | Kafka MB/s | skua MB/s | Kafka / loopback | skua / loopback |\n|---|---|---|---|---|")
    for name in meta["loopback_cells"]:
        k, s = K["producer"].get(name), S["producer"].get(name)
        if not k or not s:
            continue
        km, sm = med(k["runs"], "mbps"), med(s["runs"], "mbps")
        w(f"| {name} | {fmt(km)} | {fmt(sm)} | {km * 1e6 / lb * 100:.1f} % | "
          f"{(sm or 0) * 1e6 / lb * 100:.1f} % |")
    w("")
    w("## Notes\n")
    w("- Client and broker share the machine's cores, so a broker that leaves more CPU to the client "
      "also gets more throughput; CPU s/GB is the cleaner efficiency number.")
    w("- Tools run like Kafka's `bin/kafka-*.sh` scripts: `-Xmx512M`, G1, full JIT, a fresh JVM per run "
      "(the producer's `--warmup-records` keep the client's start-up out of the producer numbers; the "
      "consumer and end-to-end runs start timing after the client has connected and been assigned).")
    w("- Peak RSS does not include the page cache; Kafka relies on the page cache for reads, and so do "
      "skua's log segments, so neither number contains the data itself.")
    w("- Raw per-run numbers: `results.json` in the run directory "
      f"(`{os.path.relpath(opts.workdir, opts.repo)}`, not committed).")
    w("")
    return "\n".join(L) + "\n"


def loadrange(runs):
    if not runs:
        return "–"
    return f"{min(r['load_before'] for r in runs):.1f}–{max(r['load_after'] for r in runs):.1f}"


def rng(runs, key):
    s = summarize(runs, key)
    if not s:
        return "–"
    return f"{fmt(s['median'])} [{fmt(s['min'])}–{fmt(s['max'])}]"


def targets(results, plan):
    K, S = results["kafka"], results["skua"]
    out = []

    def agg(section, pred, key):
        rs = []
        for name, k in K[section].items():
            s = S[section].get(name)
            if pred(k["cell"]) and s and s["runs"] and k["runs"]:
                r = ratio(med(s["runs"], key), med(k["runs"], key))
                if r is not None:
                    rs.append((name, r))
        return rs

    def add(what, goal, rs, ok):
        if not rs:
            out.append({"what": what, "goal": goal, "value": "not measured", "verdict": "–"})
            return
        vals = [r for _, r in rs]
        lo, hi = min(vals), max(vals)
        g = statistics.geometric_mean(vals)
        verdict = "met" if all(ok(v) for v in vals) else ("partly met" if any(ok(v) for v in vals) else "**missed**")
        out.append({"what": what, "goal": goal,
                    "value": f"{g:.2f}× (geomean of {len(vals)} cells, range {lo:.2f}–{hi:.2f}×)",
                    "verdict": verdict})

    add("producer rec/s, 100 B, acks=1", "≥ 1.5×",
        agg("producer", lambda c: c["size"] == 100 and c["acks"] == "1", "rps"), lambda v: v >= 1.5)
    add("producer rec/s, 1 KiB, acks=all + idempotence", "≥ 1.5×",
        agg("producer", lambda c: c["size"] == 1024 and c["acks"] == "all", "rps"), lambda v: v >= 1.5)
    add("consumer rec/s", "≥ 1.5×", agg("consumer", lambda c: True, "rps"), lambda v: v >= 1.5)
    add("end-to-end p99 (one record at a time)", "≤ 0.5×", agg("e2e", lambda c: True, "p99"), lambda v: v <= 0.5)
    add("produce p99 at equal load (10/50/80 % of Kafka max)", "≤ 0.5×",
        agg("rate", lambda c: True, "p99"), lambda v: v <= 0.5)
    add("broker CPU s/GB, producer max", "≤ 0.5×", agg("producer", lambda c: True, "cpu_s_per_gb"),
        lambda v: v <= 0.5)
    add("broker CPU s/GB, consumer", "≤ 0.5×", agg("consumer", lambda c: True, "cpu_s_per_gb"),
        lambda v: v <= 0.5)
    hk, hs = K.get("hwm_mib"), S.get("hwm_mib")
    if hk and hs:
        out.append({"what": "peak RSS", "goal": "≤ 0.1×", "value": f"{hs / hk:.3f}× ({hs:,.0f} / {hk:,.0f} MiB)",
                    "verdict": "met" if hs / hk <= 0.1 else "**missed**"})
    sr = statistics.median(S["ready_s"]) * 1000
    out.append({"what": "skua start-to-ready", "goal": "< 100 ms", "value": f"{sr:.1f} ms "
                f"(Kafka {statistics.median(K['ready_s']) * 1000:,.0f} ms)",
                "verdict": "met" if sr < 100 else "**missed**"})
    return out


def write_doc(path, text):
    """Replace everything above '## Where skua's time goes' (kept if present)."""
    keep = ""
    if os.path.exists(path):
        old = open(path).read()
        i = old.find("## Where skua's time goes")
        if i >= 0:
            keep = "\n" + old[i:]
    with open(path, "w") as f:
        f.write(text + keep)


def print_ratios(results, against="kafka"):
    K, S = results[against], results["skua"]
    print(f"\nskua / {against}")
    print(f"{'cell':44} {'rec/s':>7} {'MB/s':>7} {'p99':>7} {'CPU/GB':>7}")
    for sec in ("producer", "rate", "consumer", "e2e"):
        for name, k in K[sec].items():
            s = S[sec].get(name, {"runs": []})
            kr, sr = k["runs"], s["runs"]
            cols = [ratio(med(sr, key), med(kr, key)) for key in ("rps", "mbps", "p99", "cpu_s_per_gb")]
            print(f"{sec + ' ' + name:44} " + " ".join(f"{rfmt(c):>7}" for c in cols))


# --------------------------------------------------------------------------- profile

def profile(opts):
    """perf record -g on skua under a produce load and then a consume load."""
    out = {}
    b = Broker("skua", opts, opts.workdir)
    b.start()
    try:
        c = {"size": 100, "parts": 8, "acks": "1", "comp": "none"}
        tool(opts, "BenchClient", ["create", b.bootstrap, "prof:8"])
        run_producer(opts, b, "prof", c, 200_000, -1)      # warm-up
        for phase in ("produce", "consume"):
            data = f"{opts.workdir}/perf-{phase}.data"
            perf = spawn(["perf", "record", "-e", "cpu-clock", "-F", "1999", "-g", "-p", str(b.proc.pid),
                          "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            if phase == "produce":
                r = run_producer(opts, b, "prof", c, opts.profile_records, -1)
            else:
                r = run_consumer(opts, b, "prof", c, opts.profile_records, "groupless")
            os.kill(perf.pid, signal.SIGINT)
            perf.wait(30)
            CHILDREN.remove(perf)
            out[phase] = r
            log(f"profile {phase}: {r['rps']:,.0f} rec/s, {data}")
    finally:
        b.stop()
    return out


# --------------------------------------------------------------------------- validation

VALIDATION_HEADING = "## Validating compressed batches on produce"
VALIDATION_SIZE = 1000
VALIDATION_CODECS = ["none", "lz4", "zstd"]


def validation_payload(workdir):
    """Text records of random words, one per line: kafka-producer-perf-test's default payload
    repeats one record, which compresses far better than real data and would make
    decompression look cheaper than it is."""
    import random
    rnd = random.Random(7)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(2000)]
    path = f"{workdir}/validation-payload.txt"
    with open(path, "w") as f:
        for i in range(20_000):
            line = f"{i:08d} level=info "
            while len(line) < VALIDATION_SIZE:
                line += rnd.choice(words) + " "
            f.write(line[:VALIDATION_SIZE] + "\n")
    return path


def run_payload_producer(opts, broker, topic, codec, records, payload):
    c0, l0 = broker.cpu(), loadavg()
    props = ["acks=1", "enable.idempotence=false", f"compression.type={codec}",
             f"linger.ms={LINGER_MS}", f"batch.size={BATCH_SIZE}"]
    out = tool(opts, "org.apache.kafka.tools.ProducerPerformance",
               ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records),
                "--payload-file", payload, "--payload-delimiter", "\n", "--throughput", "-1",
                "--producer-props", *props])
    cpu = broker.cpu() - c0
    m = PRODUCER_RE.findall(out)
    if not m:
        raise RuntimeError(f"no summary line from ProducerPerformance: {out[-500:]}")
    total, rps = int(m[-1][0]), float(m[-1][1])
    gb = total * VALIDATION_SIZE / 1e9
    return {"records": total, "rps": rps, "cpu_s": cpu, "cpu_s_per_gb": cpu / gb,
            "load_before": l0, "load_after": loadavg()}


def stored_ratio(broker, codec, records):
    """Record bytes sent per byte stored in the codec's topic (its .log files)."""
    d = f"{broker.dir}/data/v-{codec}-0"
    stored = sum(os.path.getsize(f"{d}/{f}") for f in os.listdir(d) if f.endswith(".log"))
    return records * VALIDATION_SIZE / stored if stored else None


def validation(opts):
    """One produce cell per codec on Kafka, skua before (the baseline) and skua now."""
    payload = validation_payload(opts.workdir)
    records = 60_000 if opts.quick else 250_000
    brokers = [("kafka", f"Apache Kafka {opts.kafka_version}", None),
               ("baseline", f"skua before (`{opts.baseline_rev}`)", opts.skua_baseline),
               ("skua", "skua", opts.skua)]
    results = {}
    for key, label, binary in brokers:
        b = Broker("kafka" if key == "kafka" else "skua", opts, opts.workdir, binary)
        b.start()
        try:
            topics = [f"v-{c}:1" for c in VALIDATION_CODECS] + ["warmup:1"]
            tool(opts, "BenchClient", ["create", b.bootstrap, *topics])
            run_payload_producer(opts, b, "warmup", "lz4", records // 2, payload)
            R = results[key] = {"label": label, "codecs": {}}
            for c in VALIDATION_CODECS:
                runs = [run_payload_producer(opts, b, f"v-{c}", c, records, payload)
                        for _ in range(opts.reps)]
                R["codecs"][c] = runs
            if key == "skua":
                R["stored_ratio"] = {c: stored_ratio(b, c, records * opts.reps) for c in VALIDATION_CODECS}
                log(f"{label} {c}: {statistics.median(r['cpu_s_per_gb'] for r in runs):.2f} CPU s/GB, "
                    f"{statistics.median(r['rps'] for r in runs):,.0f} rec/s")
        finally:
            b.stop()
    return results


def render_validation(opts, results, meta):
    lines = [VALIDATION_HEADING, ""]
    w = lines.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if meta['load_start'] > 1.0 else ''}. "
      f"{'`--quick`: ' if opts.quick else ''}{opts.reps} runs of "
      f"{results['kafka']['codecs']['none'][0]['records']:,} records per cell, median shown.")
    w("")
    ratios = results["skua"].get("stored_ratio") or {}
    stored = ", ".join(f"{ratios[c]:.2f}:1 under {c}" for c in VALIDATION_CODECS if c != "none" and ratios.get(c))
    w(f"kafka-producer-perf-test, {VALIDATION_SIZE}-byte records of random words"
      f"{f' (stored at {stored})' if stored else ''}, 1 partition, acks=1, linger.ms={LINGER_MS}, "
      f"batch.size={BATCH_SIZE}, one producer at a time. Broker CPU is the broker process's user + "
      "system time over the run, per GB of uncompressed record bytes. The baseline stored compressed "
      "batches after checking header and CRC only; skua now decompresses and walks every record, as "
      "Kafka does, so the difference between the two skua columns is what that costs.")
    w("")
    K, B, S = results["kafka"], results["baseline"], results["skua"]
    w(f"| compression | {K['label']} CPU s/GB | {B['label']} CPU s/GB | skua CPU s/GB | skua / Kafka | "
      "rec/s Kafka / before / skua |")
    w("|---|---:|---:|---:|---:|---|")
    for c in VALIDATION_CODECS:
        k, b, s = (med(R["codecs"][c], "cpu_s_per_gb") for R in (K, B, S))
        rps = " / ".join(f"{med(R['codecs'][c], 'rps'):,.0f}" for R in (K, B, S))
        w(f"| {c} | {fmt(k)} | {fmt(b)} | {fmt(s)} | {rfmt(ratio(s, k))} | {rps} |")
    w("")
    return "\n".join(lines) + "\n"


def write_section(path, heading, text):
    """Replace the section under `heading` (up to the next `## `), or append it."""
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find(heading)
    if i < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        j = old.find("\n## ", i + len(heading))
        new = old[:i] + text + (old[j + 1:] if j >= 0 else "")
    with open(path, "w") as f:
        f.write(new)


# --------------------------------------------------------------------------- cleaner

CLEANER_HEADING = "## Log cleaner"
CLEANER_SIZE = 1000
CLEANER_KEYS = 10_000
CLEANER_SEGMENT = 16 * 1024 * 1024
# the same for both brokers: the cleaner looks for work every second (Kafka's default is
# 15 s, which would dominate a short measurement)
CLEANER_BROKER = {"log.cleaner.backoff.ms": "1000"}
# the producer whose latency is measured while the cleaner runs: 1 KB records at a fixed
# rate into another topic
CLEANER_PRODUCE = {"size": 1000, "acks": "1", "comp": "none", "parts": 1}
CLEANER_RATE = 5000


def log_bytes(broker, topic):
    """Bytes of the partition's segment files in force (not .cleaned/.swap/.deleted)."""
    d = f"{broker.dir}/data/{topic}-0"
    return sum(os.path.getsize(f"{d}/{f}") for f in os.listdir(d) if f.endswith(".log"))


def active_segment_bytes(broker, topic):
    """Bytes of the newest segment, which no cleaner touches."""
    d = f"{broker.dir}/data/{topic}-0"
    return os.path.getsize(f"{d}/{max(f for f in os.listdir(d) if f.endswith('.log'))}")


def cleaner(opts):
    """Each broker in turn: write a topic of keyed records with cleanup.policy=delete, then
    turn it into compact and time until its log stops shrinking, while a producer at a
    fixed rate writes to another topic; the same producer before, with no cleaning, is
    the baseline of its latency."""
    records = 100_000 if opts.quick else 500_000
    produce_records = CLEANER_RATE * (10 if opts.quick else 30)
    results = {}
    for kind, label in (("kafka", f"Apache Kafka {opts.kafka_version}"), ("skua", "skua")):
        b = Broker(kind, opts, opts.workdir, extra=CLEANER_BROKER)
        b.start()
        try:
            tool(opts, "BenchClient", ["create", b.bootstrap, "c:1", "p:1"])
            tool(opts, "BenchClient", ["config", b.bootstrap, "c", f"segment.bytes={CLEANER_SEGMENT}"])
            tool(opts, "BenchClient", ["keyed", b.bootstrap, "c", str(records), str(CLEANER_SIZE),
                                       str(CLEANER_KEYS)], timeout=900)
            before = log_bytes(b, "c")
            cleanable = before - active_segment_bytes(b, "c")
            idle = run_producer(opts, b, "p", CLEANER_PRODUCE, produce_records, CLEANER_RATE)
            sizes, done = [], threading.Event()

            def watch():
                while not done.is_set():
                    sizes.append((time.monotonic(), log_bytes(b, "c")))
                    time.sleep(0.1)

            watcher = threading.Thread(target=watch, daemon=True)
            c0 = b.cpu()
            t0 = time.monotonic()
            watcher.start()
            tool(opts, "BenchClient", ["config", b.bootstrap, "c", "cleanup.policy=compact"])
            during = run_producer(opts, b, "p", CLEANER_PRODUCE, produce_records, CLEANER_RATE)
            # then until the log has not shrunk for 5 s (at most 5 minutes)
            while time.monotonic() - t0 < 300:
                time.sleep(1)
                last = sizes[-1][1]
                since = [t for t, n in sizes if n == last]
                if last < before and time.monotonic() - since[0] > 5:
                    break
            done.set()
            watcher.join()
            cpu = b.cpu() - c0
            final = sizes[-1][1]
            cleaned_at = next(t for t, n in sizes if n == final)
            secs = cleaned_at - t0
            results[kind] = {"label": label, "records": records, "before": before, "after": final,
                             "seconds": secs, "cleanable": cleanable,
                             "mbps": cleanable / 1e6 / secs if final < before else None,
                             "cpu_s": cpu, "idle": idle, "during": during,
                             "overlap": min(1.0, secs / (produce_records / CLEANER_RATE))}
            log(f"{label}: {before / 1e6:.0f} MB -> {final / 1e6:.1f} MB in {secs:.1f} s; produce p99 "
                f"{idle['p99']:.0f} ms idle, {during['p99']:.0f} ms while cleaning")
        finally:
            b.stop()
    return results


def render_cleaner(opts, results, meta):
    lines = [CLEANER_HEADING, ""]
    w = lines.append
    K, S = results["kafka"], results["skua"]
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if meta['load_start'] > 1.0 else ''}.")
    w("")
    w(f"One partition of {K['records']:,} records of {CLEANER_SIZE} bytes over {CLEANER_KEYS:,} keys "
      f"({K['before'] / 1e6:,.0f} MB in {CLEANER_SEGMENT >> 20} MiB segments, uncompressed), written with "
      "`cleanup.policy=delete` and then switched to `compact` with IncrementalAlterConfigs; the time is "
      "from that switch until the log's segment files stop shrinking (so it includes the wait for the "
      "cleaner's next turn, `log.cleaner.backoff.ms=1000` on both brokers, and every round). Cleaner "
      "MB/s is the log below the active segment (which no cleaner touches) over that time. Meanwhile kafka-producer-perf-test writes "
      f"{CLEANER_PRODUCE['size']}-byte records at {CLEANER_RATE:,}/s (acks=1) into another topic; its "
      "p99 is shown with the same run before the switch (no cleaning) beside it. Broker CPU is the "
      "broker process's user + system time from the switch to the end of the measurement (the "
      "producer's run included). On a shared machine (load above 1 before the run) the latencies "
      "say more about the other jobs than about either broker.")
    w("")
    w("| broker | log before → after | time to clean | cleaner MB/s | broker CPU s | produce p99 idle → while cleaning |")
    w("|---|---|---:|---:|---:|---|")
    for R in (K, S):
        w(f"| {R['label']} | {R['before'] / 1e6:,.0f} MB → {R['after'] / 1e6:,.1f} MB | {R['seconds']:.1f} s | "
          f"{fmt(R['mbps'])} | {R['cpu_s']:.1f} | {R['idle']['p99']:.0f} ms → {R['during']['p99']:.0f} ms |")
    w("")
    w(f"skua / Kafka cleaner MB/s: {rfmt(ratio(S['mbps'], K['mbps']))}. The cleaning took "
      f"{K['overlap'] * 100:.0f} % (Kafka) and {S['overlap'] * 100:.0f} % (skua) of the producer's run, so "
      "the latency under cleaning is diluted by that share.")
    w("")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- transactions

TXN_HEADING = "## Transactions"
TXN_SIZE = 1000
TXN_COMMIT_EVERY = (100, 1000)
TXN_RE = re.compile(r"records=(\d+) ms=([\d.]+) txns=(\d+) commit_p50=([\d.]+) commit_p99=([\d.]+)")


def txn(opts):
    """Each broker in turn, on a fresh data dir: one Java transactional producer into one
    partition, committing every 100 and every 1000 records."""
    records = 20_000 if opts.quick else 200_000
    results = {}
    for kind, label in (("kafka", f"Apache Kafka {opts.kafka_version}"), ("skua", "skua")):
        b = Broker(kind, opts, opts.workdir)
        b.start()
        try:
            results[kind] = {"label": label, "cells": {}}
            for every in TXN_COMMIT_EVERY:
                topic = f"txn-{every}"
                tool(opts, "BenchClient", ["create", b.bootstrap, f"{topic}:1"])
                c0 = b.cpu()
                out = tool(opts, "BenchClient", ["txn", b.bootstrap, topic, str(records), str(TXN_SIZE),
                                                 str(every)], timeout=900)
                cpu = b.cpu() - c0
                m = TXN_RE.search(out)
                if not m:
                    raise RuntimeError(f"no summary line from BenchClient txn: {out[-500:]}")
                n, ms, txns, p50, p99 = int(m[1]), float(m[2]), int(m[3]), float(m[4]), float(m[5])
                cell = {"records": n, "seconds": ms / 1000, "txns": txns, "rps": n / (ms / 1000),
                        "mbps": n * TXN_SIZE / 1e6 / (ms / 1000), "txn_per_s": txns / (ms / 1000),
                        "commit_p50": p50, "commit_p99": p99,
                        "cpu_s_per_gb": cpu / (n * TXN_SIZE / 1e9)}
                results[kind]["cells"][str(every)] = cell
                log(f"{label}, commit every {every}: {cell['rps']:,.0f} records/s, "
                    f"{cell['txn_per_s']:,.0f} transactions/s, commit p99 {p99:.1f} ms")
        finally:
            b.stop()
    return results


def render_txn(opts, results, meta):
    lines = [TXN_HEADING, ""]
    w = lines.append
    K, S = results["kafka"], results["skua"]
    n = next(iter(K["cells"].values()))["records"]
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run{' (shared machine)' if shared_machine(meta) else ''}.")
    w("")
    w(f"One Java transactional producer (Kafka's client {opts.kafka_version}, acks=all, linger.ms=5, "
      f"batch.size=16384, uncompressed) writes {n:,} records of {TXN_SIZE} bytes into one partition, "
      "committing every 100 or every 1000 records, after one warm-up transaction; each broker runs "
      "alone on a fresh data dir with its defaults (Kafka: its shipped single-node KRaft config with "
      "the transaction log's replication factor 1). Records/s and transactions/s run from the first "
      "measured transaction's start to the last commit's return; a commit's latency is "
      "`commitTransaction()` (it flushes the transaction's last batches, then EndTxn answers once the "
      "markers are written). Broker CPU is user + system time of the broker process per GB sent.")
    w("")
    w("| broker | commit every | records/s | MB/s | transactions/s | commit p50 | commit p99 | broker CPU s/GB |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for every in TXN_COMMIT_EVERY:
        for R in (K, S):
            c = R["cells"][str(every)]
            w(f"| {R['label']} | {every} | {c['rps']:,.0f} | {c['mbps']:.1f} | {c['txn_per_s']:,.1f} | "
              f"{c['commit_p50']:.1f} ms | {c['commit_p99']:.1f} ms | {c['cpu_s_per_gb']:.1f} |")
    w("")
    ratios = ", ".join(f"{rfmt(ratio(S['cells'][str(e)]['rps'], K['cells'][str(e)]['rps']))} committing every {e}"
                       for e in TXN_COMMIT_EVERY)
    w(f"skua / Kafka records/s: {ratios}." + (" On a shared machine (load above 1 before the run) the "
      "numbers say more about the other jobs than about either broker." if shared_machine(meta) else ""))
    w("")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main

def shared_machine(meta):
    """Only the load before anything starts tells of other jobs: during the run the
    benchmark's own client and broker keep both cores of a 2-core machine busy."""
    return meta["load_start"] > 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skua", required=True)
    ap.add_argument("--kafka-libs", required=True)
    ap.add_argument("--kafka-version", required=True)
    ap.add_argument("--helper-cp", required=True)
    ap.add_argument("--tools-log4j", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="scripts/bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--from-json", help="re-render docs from a results.json of an earlier run")
    ap.add_argument("--consumer-method", choices=["auto", "consumer-perf-test", "groupless"], default="auto")
    ap.add_argument("--validation", action="store_true")
    ap.add_argument("--cleaner", action="store_true")
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--txn", action="store_true")
    ap.add_argument("--replicated", action="store_true")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--share", action="store_true")
    ap.add_argument("--cluster-kafka-libs", help="Apache Kafka 3.9's jars (--replicated)")
    ap.add_argument("--load", help="the skua-load binary (--native, --replicated, --scale)")
    ap.add_argument("--skua-baseline")
    ap.add_argument("--baseline-rev")
    opts = ap.parse_args()

    if opts.quick:
        opts.reps, opts.seconds, opts.rate_seconds, opts.starts = 2, 1.0, 1.5, 1
        opts.warm_records = {100: 20_000, 1024: 5_000}
        opts.broker_warmup = 100_000
        opts.rates, opts.e2e_records, opts.consume_factor = [50], 200, 2
    else:
        opts.reps, opts.seconds, opts.rate_seconds, opts.starts = 3, 3.0, 10.0, 3
        opts.warm_records = {100: 150_000, 1024: 40_000}
        opts.broker_warmup = 1_000_000
        # 5000: p99 is then the 50th slowest record, not the client JVM's first warm-up sends
        opts.rates, opts.e2e_records, opts.consume_factor = [10, 50, 80], 5000, 3
    opts.profile_records = 1_000_000

    opts.warmup_option = has_warmup_option(opts)
    atexit.register(stop_all)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    os.makedirs(opts.workdir, exist_ok=True)

    if opts.validation:
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = validation(opts)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/validation.json", "w"), indent=1)
        write_section(opts.out, VALIDATION_HEADING, render_validation(opts, results, meta))
        log(f"wrote the validation section of {opts.out}; raw results in {opts.workdir}/validation.json")
        return

    if opts.cleaner:
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = cleaner(opts)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/cleaner.json", "w"), indent=1)
        write_section(opts.out, CLEANER_HEADING, render_cleaner(opts, results, meta))
        log(f"wrote the log cleaner section of {opts.out}; raw results in {opts.workdir}/cleaner.json")
        return

    if opts.txn:
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = txn(opts)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/txn.json", "w"), indent=1)
        write_section(opts.out, TXN_HEADING, render_txn(opts, results, meta))
        log(f"wrote the transactions section of {opts.out}; raw results in {opts.workdir}/txn.json")
        return

    if opts.share:
        import share as sh
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = sh.share(opts, Broker, log, tool)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/share.json", "w"), indent=1)
        write_section(opts.out, sh.SHARE_HEADING, sh.render_share(opts, results, meta, rfmt, ratio, shared_machine))
        log(f"wrote the share groups section of {opts.out}; raw results in {opts.workdir}/share.json")
        return

    if opts.tls:
        import tls as tl
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = tl.tls(opts, Broker, log, tool, free_port, spawn, wait_ready, PRODUCER_RE, children_cpu)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/tls.json", "w"), indent=1)
        write_section(opts.out, tl.TLS_HEADING, tl.render_tls(opts, results, meta, rfmt, ratio))
        log(f"wrote the TLS section of {opts.out}; raw results in {opts.workdir}/tls.json")
        return

    if opts.native:
        import native as nat
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = nat.native(opts, Broker, log)
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/native.json", "w"), indent=1)
        write_section(opts.out, nat.NATIVE_HEADING, nat.render_native(opts, results, meta, fmt, rfmt, ratio))
        log(f"wrote the native load generator section of {opts.out}; raw results in {opts.workdir}/native.json")
        return

    if opts.scale:
        import scale as sc
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        results = sc.scale(opts, Broker, log, tool, wait_ready, spawn, stop)
        meta["load_end"] = loadavg()
        json.dump({"results": results, "meta": meta}, open(f"{opts.workdir}/scale.json", "w"), indent=1)
        write_section(opts.out, sc.SCALE_HEADING, sc.render_scale(opts, results, meta, fmt, rfmt, ratio))
        log(f"wrote the scale section of {opts.out}; raw results in {opts.workdir}/scale.json")
        return

    if opts.replicated:
        import replicated as rp
        meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "load_start": loadavg()}
        data = rp.replicated(opts, sys.modules[__name__])
        meta["load_end"] = loadavg()
        json.dump({"data": data, "meta": meta}, open(f"{opts.workdir}/replicated.json", "w"), indent=1)
        write_section(opts.out, rp.REPL_HEADING, rp.render_replicated(opts, data, meta, fmt, rfmt, ratio, med))
        log(f"wrote the replicated section of {opts.out}; raw results in {opts.workdir}/replicated.json")
        return

    if opts.profile:
        r = profile(opts)
        json.dump(r, open(f"{opts.workdir}/profile.json", "w"), indent=1)
        return

    if opts.from_json:
        d = json.load(open(opts.from_json))
        for k, v in d["opts"].items():
            if k not in ("out", "from_json"):
                setattr(opts, k, v)
        opts.warm_records = {int(k): v for k, v in opts.warm_records.items()}
        d["meta"]["shared"] = shared_machine(d["meta"])
        write_doc(opts.out, render(opts, d["results"], d["plan"], d["meta"]))
        print_ratios(d["results"])
        return

    t_start = time.monotonic()
    meta = {"command": opts.command, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "load_start": loadavg()}
    meta["java"] = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    meta["skua_version"] = subprocess.run([opts.skua, "--version"], capture_output=True, text=True).stdout.strip()
    try:
        rev = subprocess.run(["git", "-C", opts.repo, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        meta["skua_version"] += f" at `{rev}`"
    except OSError:
        pass

    (gok, opts.group_probe), (eok, opts.e2e_probe) = probe_groups(opts)
    if opts.consumer_method == "auto":
        opts.consumer_method = "consumer-perf-test" if gok else "groupless"
    else:
        opts.group_probe += "; method forced by --consumer-method"
    opts.e2e_method = "EndToEndLatency" if eok else "groupless"
    log(f"consumer method: {opts.consumer_method} (kafka-consumer-perf-test {opts.group_probe})")
    log(f"end-to-end method: {opts.e2e_method} (EndToEndLatency {opts.e2e_probe})")

    meta["loopback_Bps"], meta["loopback_method"] = loopback_bandwidth(2 if opts.quick else 5)
    log(f"loopback: {meta['loopback_Bps'] / 1e6:,.0f} MB/s via {meta['loopback_method']}")

    results, plan = {}, {}
    kinds = [("kafka", None), ("skua", opts.skua)]
    if opts.skua_baseline:
        kinds.insert(1, ("baseline", opts.skua_baseline))
    for kind, binary in kinds:
        bench_broker(opts, kind, plan, results, binary)
        json.dump({"results": results, "plan": plan, "meta": meta},
                  open(f"{opts.workdir}/results.json", "w"), indent=1, default=str)

    meta["load_end"] = loadavg()
    meta["wall_min"] = (time.monotonic() - t_start) / 60
    meta["shared"] = shared_machine(meta)
    meta["loopback_cells"] = [n for n in results["kafka"]["producer"]
                              if n.startswith("1024B") and "acks=1 none" in n]
    meta["targets"] = targets(results, plan)
    json.dump({"results": results, "plan": plan, "meta": meta, "opts": vars(opts)},
              open(f"{opts.workdir}/results.json", "w"), indent=1, default=str)
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    write_doc(opts.out, render(opts, results, plan, meta))
    print_ratios(results)
    if "baseline" in results:
        print_ratios(results, "baseline")
    print()
    for t in meta["targets"]:
        print(f"  {t['what']:55} {t['goal']:9} {t['value']:55} {t['verdict']}")
    log(f"wrote {opts.out}; raw results in {opts.workdir}/results.json")


if __name__ == "__main__":
    main()
