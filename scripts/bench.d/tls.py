"""`scripts/bench --tls`: produce and consume over TLS, Apache Kafka against skua on the same
machine, driven by Kafka's own perf tools (the Java client over an SSL listener), and the
memory each broker holds per idle TLS connection.

Both brokers get the same PKCS12 keystore (a certificate for 127.0.0.1 from a CA made for
the run) and listen on PLAINTEXT (readiness and topic creation only) and SSL (the measured
traffic); each cell's runs alternate between them (Kafka, skua, then skua, Kafka, ...).

Imported by bench.py (which owns Broker, the tools and the doc writer)."""

import json
import os
import socket
import ssl
import statistics
import struct
import subprocess
import time

TLS_HEADING = "## Over TLS: produce, consume and idle connections"
# (name, record size, partitions, acks)
TLS_CELLS = [("100B p8 acks=1", 100, 8, "1"), ("1024B p8 acks=1", 1024, 8, "1"),
             ("1024B p8 acks=all+idem", 1024, 8, "all")]
PASSWORD = "bench-secret"
# skua-load over TLS (skua's own rustls client, `--tls-truststore`), when bench.py has a
# skua-load binary: a client that needs little CPU, so the cells measure the brokers' TLS
# rather than the Java client's. (name, record size, partitions, producers, consumers,
# acks, records per batch), batches of about 16 KiB as in the native cells.
TLS_NATIVE_CELLS = [("100B p8 acks=1", 100, 8, 4, 2, "1", 160),
                    ("1024B p8 acks=1", 1024, 8, 4, 2, "1", 16)]


def make_stores(d):
    """A CA, a broker certificate for 127.0.0.1 signed by it, the broker's PKCS12 keystore
    and the clients' PKCS12 truststore; returns their paths and the CA's PEM file."""
    run = lambda *a: subprocess.run(a, check=True, capture_output=True, cwd=d)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "broker.key", "-out", "broker.csr")
    with open(f"{d}/san.ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.ext", "-out", "broker.pem")
    run("openssl", "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "ca.pem",
        "-name", "broker", "-passout", f"pass:{PASSWORD}", "-out", "broker.p12")
    run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-storetype", "PKCS12",
        "-keystore", "truststore.p12", "-storepass", PASSWORD)
    return {"keystore": f"{d}/broker.p12", "truststore": f"{d}/truststore.p12", "ca": f"{d}/ca.pem"}


def broker_ssl(stores):
    return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": stores["keystore"],
            "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD}


def client_config(workdir, stores):
    path = f"{workdir}/client-ssl.properties"
    with open(path, "w") as f:
        f.write(f"security.protocol=SSL\nssl.truststore.type=PKCS12\nssl.truststore.location={stores['truststore']}\n"
                f"ssl.truststore.password={PASSWORD}\n")
    return path


def tls_broker_class(Broker, free_port, spawn, wait_ready):
    class TlsBroker(Broker):
        """A Broker with an SSL listener beside its PLAINTEXT one."""

        def start(self):
            self.ssl_port = free_port()
            d = self._fresh_dir()
            self.dir = d
            self.port = free_port()
            out = open(f"{d}/stdout.log", "w")
            if self.kind == "skua":
                argv = [self.binary, "--override",
                        f"listeners=PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port}",
                        "--override", f"log.dirs={d}/data"]
                for k, v in self.extra.items():
                    argv += ["--override", f"{k}={v}"]
            else:
                argv = self._kafka_prepare(d)
                props = f"{d}/server.properties"
                text = open(props).read()
                cport = text.split("controller.quorum.voters=1@127.0.0.1:")[1].split()[0]
                text += (f"listeners=PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port},"
                         f"CONTROLLER://127.0.0.1:{cport}\n"
                         f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port}\n"
                         "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL\n")
                open(props, "w").write(text)
            t0 = time.monotonic()
            self.proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=d)
            return wait_ready(self.port, self.proc, t0)

        @property
        def ssl_bootstrap(self):
            return f"127.0.0.1:{self.ssl_port}"

    return TlsBroker


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def java_pid(pid):
    """The JVM among `pid` and its descendants (a launcher script may stand in front)."""
    try:
        if "java" in os.path.basename(os.readlink(f"/proc/{pid}/exe")):
            return pid
    except OSError:
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                found = java_pid(int(entry))
                if found:
                    return found
    return None


def live_heap_kib(pid):
    """A JVM's live heap, KiB: the total of `jcmd PID GC.class_histogram`, which first
    forces a full collection, so only what is still referenced (a connection's buffers,
    its SSLEngine and its channel's state) is counted."""
    jvm = java_pid(pid)
    if jvm is None:
        return None
    out = subprocess.run(["jcmd", str(jvm), "GC.class_histogram"], capture_output=True,
                         text=True, timeout=300).stdout
    for line in reversed(out.splitlines()):
        fields = line.split()
        if fields and fields[0] == "Total" and len(fields) >= 3:
            return int(fields[2]) / 1024
    return None


def api_versions(s, correlation):
    """One ApiVersions v0 on `s`, its answer read whole."""
    client = b"bench-idle"
    payload = struct.pack(">hhih", 18, 0, correlation, len(client)) + client
    s.sendall(struct.pack(">i", len(payload)) + payload)
    want, got = 4, b""
    while len(got) < want:
        chunk = s.recv(want - len(got))
        if not chunk:
            raise RuntimeError("connection closed before the ApiVersions answer")
        got += chunk
        if want == 4 and len(got) == 4:
            want += struct.unpack(">i", got)[0]


def idle_tls(b, ca, n):
    """`n` TLS connections to `b`'s SSL listener, each with its handshake done and one
    ApiVersions answered, held idle: the broker's RSS before and after, per connection."""
    ctx = ssl.create_default_context(cafile=ca)
    time.sleep(2)
    # A JVM's RSS hides what its connections hold: its heap is committed up front and
    # reused after each collection. Its live heap, after a full collection, does not.
    jvm = b.kind == "kafka"
    heap_before = live_heap_kib(b.proc.pid) if jvm else None
    before = rss_mib(b.proc.pid)
    conns = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=30)
            conns.append(ctx.wrap_socket(s, server_hostname="127.0.0.1"))
            api_versions(conns[-1], i)
        time.sleep(3)
        after = rss_mib(b.proc.pid)
        heap_after = live_heap_kib(b.proc.pid) if jvm else None
    finally:
        for s in conns:
            s.close()
    out = {"connections": n, "rss_before_mib": before, "rss_after_mib": after,
           "kib_per_connection": (after - before) * 1024 / n}
    if heap_before is not None and heap_after is not None:
        out["heap_before_kib"] = heap_before
        out["heap_after_kib"] = heap_after
        out["heap_kib_per_connection"] = (heap_after - heap_before) / n
    return out


def tls(opts, Broker, log, tool, free_port, spawn, wait_ready, PRODUCER_RE, children_cpu):
    stores_dir = f"{opts.workdir}/tls-stores"
    os.makedirs(stores_dir, exist_ok=True)
    stores = make_stores(stores_dir)
    client = client_config(opts.workdir, stores)
    TlsBroker = tls_broker_class(Broker, free_port, spawn, wait_ready)
    records = {100: 300_000 if opts.quick else 3_000_000, 1024: 60_000 if opts.quick else 600_000}
    reps = 1 if opts.quick else 3
    kinds = ("kafka", "skua")
    brokers = {k: TlsBroker(k, opts, opts.workdir, extra=broker_ssl(stores)) for k in kinds}
    results = {k: {"cells": {}, "consume": {}} for k in kinds}
    try:
        for b in brokers.values():
            b.start()
        for k, b in brokers.items():
            # Each broker's warm-up (Kafka's JIT, both brokers' TLS sessions) while the other idles.
            tool(opts, "BenchClient", ["create", b.bootstrap, "tls-warmup:8"])
            produce(opts, tool, b, client, "tls-warmup", 100, "1", records[100], PRODUCER_RE, children_cpu)
        for name, size, parts, acks in TLS_CELLS:
            for rep in range(reps):
                for k in kinds if rep % 2 == 0 else kinds[::-1]:
                    b = brokers[k]
                    topic = f"tls-{size}-{acks}-{rep}"
                    tool(opts, "BenchClient", ["create", b.bootstrap, f"{topic}:{parts}"])
                    p = produce(opts, tool, b, client, topic, size, acks, records[size], PRODUCER_RE, children_cpu)
                    c = consume(opts, tool, b, client, topic, records[size], children_cpu)
                    results[k]["cells"].setdefault(name, []).append(p)
                    results[k]["consume"].setdefault(name, []).append(c)
                    log(f"tls {name} rep {rep + 1} {k}: produce {p['rps']:,.0f} rec/s p99 {p['p99']:.0f} ms "
                        f"({p['cpu_s_per_gb']:.2f} CPU s/GB), consume {c['rps']:,.0f} rec/s "
                        f"({c['cpu_s_per_gb']:.2f} CPU s/GB)")
        if getattr(opts, "load", None):
            native_tls(opts, brokers, stores, log, results)
        n = 200 if opts.quick else 2000
        for k, b in brokers.items():
            results[k]["idle"] = idle_tls(b, stores["ca"], n)
            log(f"tls idle {k}: {results[k]['idle']}")
    except BaseException as e:
        # A run that fails (a skua-load error, a tool's timeout) ends the section without a
        # table; what was measured before it is kept for reading.
        path = f"{opts.workdir}/tls-partial.json"
        with open(path, "w") as f:
            json.dump({"results": results, "stopped_by": repr(e)}, f, indent=1)
        log(f"tls: stopped by {e!r}; the runs measured before it are in {path}")
        raise
    finally:
        for b in brokers.values():
            b.stop()
    return results


def native_tls(opts, brokers, stores, log, results):
    """skua-load against each broker's SSL listener, trusting the run's CA: produce then
    consume, runs alternating between the brokers, into results[kind]["native"]."""
    import native as nv
    records = 100_000 if opts.quick else 1_000_000
    reps = 1 if opts.quick else 3
    for name, size, parts, prod, cons, acks, batch in TLS_NATIVE_CELLS:
        n = records * 100 // size
        args = ["--partitions", parts, "--producers", prod, "--consumers", cons,
                "--record-size", size, "--acks", acks, "--batch-records", batch,
                "--records", n, "--warmup-records", n // 3, "--consume-passes", 2,
                "--tls-truststore", stores["ca"]]
        for rep in range(reps):
            for k in nv.in_turn(rep):
                r = nv.run_load(opts, brokers, k, f"tls-native-{k}-{nv.slug(name)}-{rep}", args,
                                bootstrap=brokers[k].ssl_bootstrap)
                results[k].setdefault("native", {}).setdefault(name, []).append(r)
                log(f"tls native {name} rep {rep + 1} {nv.describe(k, r)}")


def produce(opts, tool, b, client, topic, size, acks, records, PRODUCER_RE, children_cpu):
    c0, t0 = b.cpu(), children_cpu()
    idem = "true" if acks == "all" else "false"
    out = tool(opts, "org.apache.kafka.tools.ProducerPerformance",
               ["--bootstrap-server", b.ssl_bootstrap, "--topic", topic, "--num-records", str(records),
                "--record-size", str(size), "--throughput", "-1", "--producer.config", client,
                "--producer-props", f"acks={acks}", f"enable.idempotence={idem}", "linger.ms=5",
                "batch.size=16384"], timeout=900)
    cpu = b.cpu() - c0
    m = PRODUCER_RE.findall(out)
    if not m:
        raise RuntimeError(f"no summary line from ProducerPerformance: {out[-500:]}")
    n, rps, _mbs, _avg, _mx, _p50, _p95, p99, _p999 = m[-1]
    gb = int(n) * size / 1e9
    return {"records": int(n), "rps": float(rps), "p99": float(p99), "cpu_s_per_gb": cpu / gb,
            "client_cpu_s_per_gb": (children_cpu() - t0) / gb}


def consume(opts, tool, b, client, topic, records, children_cpu):
    c0 = b.cpu()
    out = tool(opts, "org.apache.kafka.tools.ConsumerPerformance",
               ["--bootstrap-server", b.ssl_bootstrap, "--topic", topic, "--num-records", str(records),
                "--timeout", "60000", "--group", f"tls-{time.time_ns()}", "--hide-header",
                "--consumer.config", client], timeout=300)
    cpu = b.cpu() - c0
    row = [x.strip() for x in out.strip().splitlines()[-1].split(",")]
    n, ms, nbytes = int(row[4]), float(row[7]), float(row[2]) * 1024 * 1024
    if n < records:
        raise RuntimeError(f"consumer read {n} of {records} records")
    return {"records": n, "rps": n / (ms / 1000), "cpu_s_per_gb": cpu / (nbytes / 1e9)}


def render_tls(opts, results, meta, rfmt, ratio):
    K, S = results["kafka"], results["skua"]
    med = lambda runs, key: statistics.median(r[key] for r in runs)
    lines = [TLS_HEADING, ""]
    w = lines.append
    w(f"`{meta['command']}`, {meta['date']}, {meta['machine']['cores']} cores, {meta['machine']['cpu']}; "
      f"load {meta['load_start']:.2f} before the run. Apache Kafka {opts.kafka_version} (its shipped single-node "
      "KRaft config, default heap) and skua run at once, each with an SSL listener on the same PKCS12 "
      "keystore (RSA 2048, a CA made for the run) beside a PLAINTEXT one used only to create topics; "
      "Kafka's `kafka-producer-perf-test` (linger.ms=5, batch.size=16384, uncompressed, --throughput -1) "
      "and `kafka-consumer-perf-test` (a group of one) talk TLS 1.3 to each in turn, runs alternating "
      "(Kafka first in the first pair, skua in the next); medians of the pairs. Broker CPU is user + "
      "system time of the broker process per GB of record bytes.")
    w("")
    w("| cell | produce rec/s Kafka / skua | skua/Kafka | p99 ms Kafka / skua | broker CPU s/GB Kafka / skua "
      "| skua/Kafka | consume rec/s Kafka / skua | skua/Kafka | consume CPU s/GB Kafka / skua | skua/Kafka |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, *_ in TLS_CELLS:
        kp, sp = K["cells"][name], S["cells"][name]
        kc, sc = K["consume"][name], S["consume"][name]
        w(f"| {name} | {med(kp, 'rps'):,.0f} / {med(sp, 'rps'):,.0f} | **{rfmt(ratio(med(sp, 'rps'), med(kp, 'rps')))}** "
          f"| {med(kp, 'p99'):.0f} / {med(sp, 'p99'):.0f} "
          f"| {med(kp, 'cpu_s_per_gb'):.2f} / {med(sp, 'cpu_s_per_gb'):.2f} "
          f"| **{rfmt(ratio(med(sp, 'cpu_s_per_gb'), med(kp, 'cpu_s_per_gb')))}** "
          f"| {med(kc, 'rps'):,.0f} / {med(sc, 'rps'):,.0f} | **{rfmt(ratio(med(sc, 'rps'), med(kc, 'rps')))}** "
          f"| {med(kc, 'cpu_s_per_gb'):.2f} / {med(sc, 'cpu_s_per_gb'):.2f} "
          f"| **{rfmt(ratio(med(sc, 'cpu_s_per_gb'), med(kc, 'cpu_s_per_gb')))}** |")
    w("")
    if K.get("native") and S.get("native"):
        w("skua's load generator (src/bin/skua-load) over TLS, its own rustls client trusting the run's CA: "
          "producers send batches of about 16 KiB, then consumers read every partition back twice; the client "
          "needs far less CPU than the Java one, so the brokers' TLS is what these cells measure.")
        w("")
        w("| cell | produce rec/s Kafka / skua | skua/Kafka | broker CPU s/GB Kafka / skua | skua/Kafka "
          "| consume rec/s Kafka / skua | skua/Kafka | consume CPU s/GB Kafka / skua | skua/Kafka |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, *_ in TLS_NATIVE_CELLS:
            kn, sn = K["native"][name], S["native"][name]
            m = lambda runs, key: statistics.median(r[key] for r in runs)
            w(f"| {name} | {m(kn, 'rps'):,.0f} / {m(sn, 'rps'):,.0f} | **{rfmt(ratio(m(sn, 'rps'), m(kn, 'rps')))}** "
              f"| {m(kn, 'cpu_s_per_gb'):.2f} / {m(sn, 'cpu_s_per_gb'):.2f} "
              f"| **{rfmt(ratio(m(sn, 'cpu_s_per_gb'), m(kn, 'cpu_s_per_gb')))}** "
              f"| {m(kn, 'consume_rps'):,.0f} / {m(sn, 'consume_rps'):,.0f} "
              f"| **{rfmt(ratio(m(sn, 'consume_rps'), m(kn, 'consume_rps')))}** "
              f"| {m(kn, 'consume_cpu_s_per_gb'):.2f} / {m(sn, 'consume_cpu_s_per_gb'):.2f} "
              f"| **{rfmt(ratio(m(sn, 'consume_cpu_s_per_gb'), m(kn, 'consume_cpu_s_per_gb')))}** |")
        w("")
    ki, si = K["idle"], S["idle"]
    w(f"Idle TLS connections: {si['connections']:,} connections opened to each broker's SSL listener, each "
      "with its handshake done and one ApiVersions answered (Python's ssl module), then held idle: Kafka's RSS "
      f"{ki['rss_before_mib']:.0f} → {ki['rss_after_mib']:.0f} MiB ({ki['kib_per_connection']:.1f} KiB a connection), "
      f"skua's {si['rss_before_mib']:.0f} → {si['rss_after_mib']:.0f} MiB ({si['kib_per_connection']:.1f} KiB a "
      "connection). Kafka's heap is committed up front (-Xms1G), so its RSS grows only where the "
      "connections touch pages it had not touched yet; both numbers are what the process holds.")
    if "heap_kib_per_connection" in ki:
        w("")
        w(f"Kafka's live heap (the total of `jcmd GC.class_histogram`, taken after the full collection it "
          f"forces) went {ki['heap_before_kib'] / 1024:.0f} → {ki['heap_after_kib'] / 1024:.0f} MiB with the "
          f"connections open: **{ki['heap_kib_per_connection']:.1f} KiB a connection** held in objects "
          "(its SSLEngine, buffers and channel state), against skua's "
          f"**{si['kib_per_connection']:.1f} KiB** of RSS ("
          f"{rfmt(ratio(si['kib_per_connection'], ki['heap_kib_per_connection']))} of Kafka's).")
    w("")
    return "\n".join(lines) + "\n"
