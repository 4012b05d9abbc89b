"""`scripts/bench-ab`: two skua brokers side by side on the same machine, driven in turn by
skua's load generator (src/bin/skua-load), to tell whether a change costs throughput.

Both brokers run at once on fresh data dirs; every cell's runs alternate between them
(A then B in the first pair, B then A in the next, ...), so the two runs of a pair see the
same machine, and each run records what else the machine did meanwhile (disturbance.py).
The result is the median of each side and the range of the pairs' own B/A ratios.

Variants (what B differs in):
  binaries  B is another build (BIN_B), same configuration
  metrics   B serves `metrics.listener` and is scraped every second during its runs
  acls      B runs StandardAuthorizer with 1,000 prefixed ACLs besides the one that
            allows the load, and a default user quota far above the rate
  scrape    no pair: one broker with a topic of 10,000 partitions; the time and size of
            a /metrics scrape (with the partitions produced to and idle)
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from disturbance import Watch  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPAT_BIN = os.path.join(REPO, "compat", "bin")
# (name, record size, partitions, producers, consumers, acks, records per batch): the
# cells of `scripts/bench --native`, batches of about 16 KiB.
CELLS = [
    ("100B p1 acks=1", 100, 1, 1, 1, "1", 160),
    ("100B p8 acks=1", 100, 8, 4, 2, "1", 160),
    ("100B p8 acks=all", 100, 8, 4, 2, "all", 160),
    ("1024B p8 acks=1", 1024, 8, 4, 2, "1", 16),
]
PORTS = {"A": 19192, "B": 19292}
METRICS_PORT = 19404
OTHER_ACLS = 1000


def free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class Broker:
    def __init__(self, side, binary, workdir, extra):
        self.side, self.binary, self.port = side, binary, PORTS[side]
        self.dir = os.path.join(workdir, side)
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, "server.properties")
        with open(self.config, "w") as f:
            # A deleted run's files go at once (the same for both brokers).
            f.write(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\n"
                    f"log.dirs={self.dir}/data\nlog.segment.delete.delay.ms=1000\n"
                    + "".join(f"{k}={v}\n" for k, v in extra.items()))
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        if not free(self.port):
            raise SystemExit(f"port {self.port} is taken")
        self.proc = subprocess.Popen([self.binary, self.config], stdout=open(f"{self.dir}/broker.log", "w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"broker {self.side} exited: see {self.dir}/broker.log")
            if not free(self.port):
                return
            time.sleep(0.1)
        raise SystemExit(f"broker {self.side} did not listen within 60 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Scraper:
    """Scrapes /metrics every `every` seconds while a run of its broker lasts."""

    def __init__(self, every=1.0):
        self.every, self.stopped, self.times, self.sizes = every, threading.Event(), [], []

    def __enter__(self):
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()
        return self

    def loop(self):
        while not self.stopped.wait(self.every):
            t = time.monotonic()
            body = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read()
            self.times.append(time.monotonic() - t)
            self.sizes.append(len(body))

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join()


def run_load(opts, brokers, side, topic, args, scraper=None):
    b = brokers[side]
    out = f"{opts.workdir}/load-{topic}.json"
    argv = [opts.load, "--bootstrap", b.bootstrap, "--topic", topic, "--create",
            "--broker-pid", str(b.proc.pid), "--json", out, *map(str, args)]
    watch = Watch({k: x.proc.pid for k, x in brokers.items()})
    if scraper:
        with scraper:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    else:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    env = watch.stop()
    if p.returncode != 0:
        raise SystemExit(f"skua-load {topic} failed: {p.stderr.strip() or p.stdout.strip()}")
    r = json.load(open(out))
    gb = lambda n: max(n, 1) / 1e9
    r["rps"] = r["produce_records_acked"] / r["produce_seconds"]
    r["cpu_s_per_gb"] = (r["produce_broker_cpu_s"] or 0) / gb(r["produce_bytes"])
    r["consume_rps"] = r["consume_records"] / r["consume_seconds"]
    r["consume_cpu_s_per_gb"] = (r["consume_broker_cpu_s"] or 0) / gb(r["consume_bytes"])
    r["other_share"], r["load1"] = env["other_share"], env["load1"]
    return r


def delete_topic(port, topic):
    """DeleteTopics v3 (the run's data is not needed again, and the disk is finite)."""
    client, name = b"bench-ab", topic.encode()
    body = (struct.pack(">hhih", 20, 3, 1, len(client)) + client + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">i", 30000))
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        s.recv(size, socket.MSG_WAITALL)


def add_acls(broker):
    """1,000 prefixed ACLs for other principals and prefixes, and the ones the load needs
    (every operation on topics `ab-*`, the cluster and groups for User:ANONYMOUS), through
    Kafka's own kafka-acls.sh; a default user quota far above any rate through
    kafka-configs.sh."""
    tool = lambda name, *args: subprocess.run([os.path.join(COMPAT_BIN, name), "--bootstrap-server",
                                               broker.bootstrap, *args], check=True, capture_output=True,
                                              text=True, timeout=300)
    others = []
    for i in range(OTHER_ACLS):
        others += ["--topic", f"team-{i:04}."]
    tool("kafka-acls.sh", "--add", "--allow-principal", "User:team", "--operation", "Write",
         "--resource-pattern-type", "prefixed", *others)
    tool("kafka-acls.sh", "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "All",
         "--resource-pattern-type", "prefixed", "--topic", "ab-", "--group", "ab-")
    tool("kafka-acls.sh", "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "All", "--cluster")
    tool("kafka-configs.sh", "--alter", "--entity-type", "users", "--entity-default", "--add-config",
         "producer_byte_rate=100000000000,consumer_byte_rate=100000000000,request_percentage=10000")
    listed = tool("kafka-acls.sh", "--list").stdout
    return listed.count("principal=")


def pairs(opts):
    variant_extra = {
        "binaries": {},
        "metrics": {"metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"},
        "acls": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "false", "super.users": "User:nobody"},
    }[opts.variant]
    brokers = {"A": Broker("A", opts.bin_a, opts.workdir, {}),
               "B": Broker("B", opts.bin_b or opts.bin_a, opts.workdir, variant_extra)}
    results = {}
    try:
        for b in brokers.values():
            b.start()
        if opts.variant == "acls":
            # The ACLs must allow the setup itself: until the cluster ACL exists the
            # tools' requests are refused, so the first ACLs go in with everyone allowed.
            print(f"B: {add_acls_bootstrapped(brokers['B'], opts)} ACL entries listed", flush=True)
        for side in brokers:
            run_load(opts, brokers, side, f"ab-warmup-{side}",
                     ["--partitions", 8, "--producers", 4, "--records", opts.records,
                      "--batch-records", 160, "--phases", "produce,consume"])
            delete_topic(brokers[side].port, f"ab-warmup-{side}")
        for name, size, parts, prod, cons, acks, batch in CELLS:
            args = ["--partitions", parts, "--producers", prod, "--consumers", cons, "--record-size", size,
                    "--acks", acks, "--batch-records", batch, "--records", opts.records * 100 // size,
                    "--warmup-records", opts.records * 100 // size // 3, "--consume-passes", 3]
            for rep in range(opts.reps):
                for side in ("A", "B") if rep % 2 == 0 else ("B", "A"):
                    scraper = Scraper() if opts.variant == "metrics" and side == "B" else None
                    slug = name.replace(" ", "-").replace("=", "")
                    topic = f"ab-{slug}-{rep}-{side}"
                    r = run_load(opts, brokers, side, topic, args, scraper)
                    delete_topic(brokers[side].port, topic)
                    if scraper:
                        r["scrapes"] = len(scraper.times)
                    results.setdefault(name, {}).setdefault(side, []).append(r)
                    print(f"{name} rep {rep + 1} {side}: produce {r['rps']:,.0f} rec/s "
                          f"({r['cpu_s_per_gb']:.2f} CPU s/GB), consume {r['consume_rps']:,.0f} rec/s "
                          f"({r['consume_cpu_s_per_gb']:.2f}); others {r['other_share']:.0%}, "
                          f"load {r['load1']:.1f}", flush=True)
    finally:
        for b in brokers.values():
            b.stop()
    return results


def add_acls_bootstrapped(broker, opts):
    # StandardAuthorizer with allow.everyone.if.no.acl.found=false refuses the tools until
    # the cluster ACL exists; restart B with everyone allowed to add them, then without.
    broker.stop()
    cfg = open(broker.config).read()
    open(broker.config, "w").write(cfg.replace("allow.everyone.if.no.acl.found=false",
                                               "allow.everyone.if.no.acl.found=true"))
    broker.start()
    n = add_acls(broker)
    broker.stop()
    open(broker.config, "w").write(cfg)
    broker.start()
    return n


def table(results, variant):
    med = lambda runs, k: statistics.median(r[k] for r in runs)
    rng = lambda a, b, k: (min(y[k] / x[k] for x, y in zip(a, b)), max(y[k] / x[k] for x, y in zip(a, b)))
    lines = [f"| cell | produce rec/s A / B | B/A (pairs) | broker CPU s/GB A / B | consume rec/s A / B "
             f"| B/A (pairs) | consume CPU s/GB A / B |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, d in results.items():
        a, b = d["A"], d["B"]
        lo, hi = rng(a, b, "rps")
        clo, chi = rng(a, b, "consume_rps")
        lines.append(
            f"| {name} | {med(a, 'rps'):,.0f} / {med(b, 'rps'):,.0f} | **{med(b, 'rps') / med(a, 'rps'):.3f}** "
            f"({lo:.2f}–{hi:.2f}) | {med(a, 'cpu_s_per_gb'):.2f} / {med(b, 'cpu_s_per_gb'):.2f} "
            f"| {med(a, 'consume_rps'):,.0f} / {med(b, 'consume_rps'):,.0f} "
            f"| **{med(b, 'consume_rps') / med(a, 'consume_rps'):.3f}** ({clo:.2f}–{chi:.2f}) "
            f"| {med(a, 'consume_cpu_s_per_gb'):.2f} / {med(b, 'consume_cpu_s_per_gb'):.2f} |")
    return "\n".join(lines)


def scrape(opts):
    b = Broker("A", opts.bin_a, opts.workdir, {"metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"})
    b.start()
    try:
        def measure(what):
            times, size = [], 0
            for _ in range(opts.reps * 3):
                t = time.monotonic()
                body = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=60).read()
                times.append((time.monotonic() - t) * 1000)
                size, lines = len(body), body.count(b"\n")
            print(f"| {what} | {statistics.median(times):.1f} | {max(times):.1f} | {size / 1e6:.2f} "
                  f"| {lines:,} |", flush=True)
        print("| broker | scrape ms median | max | MB | lines |\n|---|---:|---:|---:|---:|")
        measure("empty")
        # One record into each partition, so every partition has its per-partition series.
        p = subprocess.run([opts.load, "--bootstrap", b.bootstrap, "--topic", "ab-scale", "--create",
                            "--partitions", "10000", "--producers", "4", "--records", "100000",
                            "--batch-records", "1", "--phases", "produce"],
                           capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"skua-load failed: {p.stderr}")
        measure("10,000 partitions, each produced to")
    finally:
        b.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["binaries", "metrics", "acls", "scrape"], default="binaries")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--load", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("bin_a")
    ap.add_argument("bin_b", nargs="?")
    opts = ap.parse_args()
    if opts.variant == "binaries" and not opts.bin_b:
        ap.error("--variant binaries needs two broker binaries")
    shutil.rmtree(opts.workdir, ignore_errors=True)
    os.makedirs(opts.workdir)
    started = time.time()
    if opts.variant == "scrape":
        scrape(opts)
    else:
        results = pairs(opts)
        print(f"\n{opts.variant}: A = {opts.bin_a}, B = {opts.bin_b or opts.bin_a}; "
              f"{opts.reps} pairs a cell, {time.time() - started:.0f} s; load average {os.getloadavg()[0]:.1f}\n")
        print(table(results, opts.variant))
        json.dump(results, open(os.path.join(opts.workdir, "results.json"), "w"), default=str)


if __name__ == "__main__":
    main()
