"""`scripts/bench --scale`: scale cells on one broker, Apache Kafka and skua one after the
other on fresh data dirs:
  - many topics: the time to create TOPICS x PARTITIONS topics (one CreateTopics request,
    until every partition has a leader in the metadata), the broker's RSS after it, and the
    time from start to the first ApiVersions answer on restart after a clean stop and after
    kill -9 with those partitions on disk;
  - one topic of SPREAD_PARTITIONS partitions created in one CreateTopics request, then
    produced to and consumed from by skua-load, one batch per partition per request:
    records/s, broker CPU per GB, RSS; then the time of a clean stop, the restart after it
    and the restart after kill -9, every record read back after each;
  - IDLE_CONNECTIONS connections each left idle after an ApiVersions and a Metadata request:
    the broker's RSS growth per connection and its CPU while they idle;
  - COMMIT_GROUPS consumer groups committing offsets (skua-load's commit phase): commits/s,
    broker CPU per commit, commit latency in microseconds.

Imported by bench.py (which owns Broker, logging, the tool runner and the doc writer)."""

import json
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import time

SCALE_HEADING = "## Scale"
# (topics, partitions per topic). Kafka refuses one operation of more than 10,000 metadata
# records (a topic record and one per partition): "excessively large batch operation".
SCALE_CELLS = [(50, 100)]
SCALE_CELLS_QUICK = [(5, 20)]
# one topic of this many partitions, produced to and consumed from: (partitions, records of
# 100 B, records per batch, i.e. per partition per request)
SPREAD = (9_999, 500_000, 50)
SPREAD_QUICK = (1_000, 100_000, 50)
IDLE_CONNECTIONS, IDLE_CONNECTIONS_QUICK = 10_000, 1_000
# (groups, commits measured, commits of warm-up)
COMMITS = (1_000, 100_000, 50_000)
COMMITS_QUICK = (1_000, 20_000, 10_000)
# commit connections, commits in flight on each
COMMIT_CONNECTIONS, COMMIT_IN_FLIGHT = 4, 8
# the longest a stop or a restart of the spread cell's broker may take (Kafka's restart with
# 10,000 partitions takes about a minute)
RESTART_TIMEOUT = 300
# the broker's warm-up (Kafka's JIT) before the load cells: records over 8 partitions
WARMUP, WARMUP_QUICK = 1_000_000, 100_000


def rss_mib(pid):
    """Current resident set (VmRSS) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def proc_cpu_s(pid):
    """User + system CPU seconds of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raise_fd_limit(need):
    """Raises this process's (so the brokers' it starts) open-files limit to its hard
    limit; the idle-connection cell needs `need` descriptors on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit < need + 1000:
        raise RuntimeError(f"open-files limit {limit} is below the {need} connections + 1000 "
                           "the idle-connection cell needs; raise `ulimit -Hn`")


def _recv_answer(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise OSError("closed")
        head += chunk
    (n,) = struct.unpack(">i", head)
    if not 0 <= n <= 1 << 20:
        raise OSError(f"answer of {n} bytes")
    left = n
    while left:
        chunk = s.recv(min(left, 65536))
        if not chunk:
            raise OSError("closed")
        left -= len(chunk)


def idle_connection(port, cid):
    """One connection that has sent ApiVersions v0 and Metadata v4 (no topics, no
    auto-creation) and read both answers, as a client's bootstrap does."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    client = b"bench-idle"
    head = lambda key, version, corr: struct.pack(">hhih", key, version, corr, len(client)) + client
    api_versions = head(18, 0, cid)
    metadata = head(3, 4, cid + 1) + struct.pack(">ib", 0, 0)
    for body in (api_versions, metadata):
        s.sendall(struct.pack(">i", len(body)) + body)
        _recv_answer(s)
    return s


def idle_connections(b, n):
    """Opens `n` idle connections to `b`; its RSS before and after, and its CPU over 10 s
    while they idle."""
    pid = b.proc.pid
    time.sleep(2)
    before = rss_mib(pid)
    conns = []
    t0 = time.monotonic()
    try:
        for i in range(n):
            conns.append(idle_connection(b.port, 2 * i))
        opened_s = time.monotonic() - t0
        time.sleep(2)
        after = rss_mib(pid)
        c0 = proc_cpu_s(pid)
        time.sleep(10)
        idle_cpu = proc_cpu_s(pid) - c0
        # every connection is still open: a broker may not drop idle clients this soon
        alive = 0
        for s in conns:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
    finally:
        for s in conns:
            s.close()
    return {"connections": n, "alive": alive, "open_s": opened_s, "rss_before_mib": before,
            "rss_after_mib": after, "kib_per_connection": (after - before) * 1024 / n,
            "idle_cpu_s_per_10s": idle_cpu}


def load(opts, b, topic, args, timeout=900, create=True, name=None):
    """One skua-load run against `b` (creating `topic` unless `create` is false); its JSON
    report, kept as scale-`name`.json."""
    out = f"{opts.workdir}/scale-{name or topic}.json"
    argv = [opts.load, "--bootstrap", b.bootstrap, "--topic", topic,
            *(["--create"] if create else []),
            "--broker-pid", str(b.proc.pid), "--json", out, *map(str, args)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    try:
        r = json.load(open(out))
    except (OSError, ValueError):
        raise RuntimeError(f"skua-load {topic} failed: {p.stderr.strip() or p.stdout.strip()}")
    if p.returncode != 0:
        raise RuntimeError(f"skua-load {topic}: {'; '.join(r['errors']) or p.stderr.strip()}")
    return r


def restart(b, argv, wait_ready, spawn, stop, how):
    """Stops `b`'s process (SIGTERM and wait, or SIGKILL) and starts `argv` again on the same
    data dir; returns seconds from the spawn until it answers ApiVersions."""
    if how == "clean":
        stop(b.proc, grace=120)
    else:
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
    out = open(f"{b.dir}/stdout-{how}.log", "w")
    t0 = time.monotonic()
    b.proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=b.dir)
    return wait_ready(b.port, b.proc, t0, timeout=600)


def spread_restarts(opts, b, argv, wait_ready, spawn, parts, expected, log):
    """After the spread cell: the time of a clean stop (SIGTERM until the process has exited),
    the restart after it, then kill -9 and the restart after that, each restart timed from
    the process start to the first ApiVersions answer; after each restart skua-load reads
    every partition back and its count of records must be `expected`."""
    r = {}
    pgid = b.proc.pid
    t0 = time.monotonic()
    os.killpg(pgid, signal.SIGTERM)
    try:
        b.proc.wait(RESTART_TIMEOUT)
        r["stop_clean_s"] = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        log(f"scale {b.kind} clean stop with {parts} partitions: no exit in {RESTART_TIMEOUT} s")
        os.killpg(pgid, signal.SIGKILL)
        b.proc.wait()
        r["stop_clean_s"] = None
    for how in ("clean", "kill9"):
        if how == "kill9":
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait()
        out = open(f"{b.dir}/stdout-spread-{how}.log", "w")
        t0 = time.monotonic()
        b.proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=b.dir)
        try:
            r[f"restart_{how}_s"] = wait_ready(b.port, b.proc, t0, timeout=RESTART_TIMEOUT)
        except RuntimeError as e:
            log(f"scale {b.kind} restart after {how} with {parts} partitions: {e}")
            r[f"restart_{how}_s"] = None
            return r
        c = load(opts, b, "spread", ["--partitions", parts, "--consumers", 2,
                                     "--phases", "consume"],
                 timeout=1800, create=False, name=f"spread-after-{how}")
        r[f"records_after_{how}"] = c["consume_records"]
        if c["consume_records"] != expected:
            raise RuntimeError(f"{b.kind} after a restart ({how}) with {parts} partitions: "
                               f"{c['consume_records']} records, {expected} written")
    return r


def skua_argv(b):
    return [b.binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            "--override", f"log.dirs={b.dir}/data"]


def kafka_argv(b):
    """The running Kafka's own command line: Broker.start prepared server.properties and
    formatted the dir, so the same command starts it again on that dir."""
    with open(f"/proc/{b.proc.pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def scale(opts, Broker, log, tool, wait_ready, spawn, stop):
    idle_n = IDLE_CONNECTIONS_QUICK if opts.quick else IDLE_CONNECTIONS
    raise_fd_limit(idle_n)
    results = {"topics": topic_cells(opts, Broker, log, tool, wait_ready, spawn, stop),
               "load": {}}
    spread = SPREAD_QUICK if opts.quick else SPREAD
    groups, commits, commit_warmup = COMMITS_QUICK if opts.quick else COMMITS
    warmup = WARMUP_QUICK if opts.quick else WARMUP
    for kind in ("kafka", "skua"):
        r = results["load"][kind] = {}
        # many partitions: one broker, warmed up first
        b = Broker(kind, opts, opts.workdir)
        b.start()
        try:
            load(opts, b, "warmup", ["--partitions", 8, "--producers", 4, "--records", warmup,
                                     "--batch-records", 160, "--phases", "produce"])
            parts, records, batch = spread
            # the warm-up writes one batch to every partition (each is then ready, on Kafka
            # some seconds after CreateTopics was answered), then the measured records
            r["spread"] = load(opts, b, "spread", [
                "--partitions", parts, "--producers", 4, "--consumers", 2, "--records", records,
                "--warmup-records", parts * batch, "--batch-records", batch,
                "--record-size", 100], timeout=1800)
            r["spread"]["rss_mib"] = rss_mib(b.proc.pid)
            r["spread"]["hwm_mib"] = hwm_mib(b.proc.pid)
            log(f"scale {kind} spread over {parts} partitions: {summary(r['spread'])}")
            argv = skua_argv(b) if kind == "skua" else kafka_argv(b)
            r["spread_restart"] = spread_restarts(opts, b, argv, wait_ready, spawn, parts,
                                                  parts * batch + records, log)
            log(f"scale {kind} stop and restarts with {parts} partitions: {r['spread_restart']}")
        finally:
            b.stop()
        # idle connections, then committing groups: another fresh broker
        b = Broker(kind, opts, opts.workdir)
        b.start()
        try:
            r["idle"] = idle_connections(b, idle_n)
            log(f"scale {kind} idle connections: {r['idle']}")
            r["commit"] = load(opts, b, "commits", [
                "--partitions", 10, "--phases", "commit", "--groups", groups,
                "--commits", commits, "--warmup-records", commit_warmup,
                "--connections", COMMIT_CONNECTIONS, "--in-flight", COMMIT_IN_FLIGHT])
            r["commit"]["hwm_mib"] = hwm_mib(b.proc.pid)
            log(f"scale {kind} {groups} groups committing: {summary(r['commit'])}")
        finally:
            b.stop()
    return results


def hwm_mib(pid):
    """Peak resident set (VmHWM) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def summary(r):
    return {k: v for k, v in r.items() if k != "errors" and v is not None}


def topic_cells(opts, Broker, log, tool, wait_ready, spawn, stop):
    """Many topics: creation, RSS, restarts."""
    cells = SCALE_CELLS_QUICK if opts.quick else SCALE_CELLS
    results = []
    for topics, partitions in cells:
        for kind in ("kafka", "skua"):
            b = Broker(kind, opts, opts.workdir)
            ready = b.start()
            argv = skua_argv(b) if kind == "skua" else kafka_argv(b)
            names = [f"scale{i}:{partitions}" for i in range(topics)]
            t0 = time.monotonic()
            out = tool(opts, "BenchClient", ["create", b.bootstrap, *names], timeout=900)
            wall = time.monotonic() - t0
            m = re.search(r"create_ms=(\d+)", out)
            create_s = int(m.group(1)) / 1000 if m else None
            rss = rss_mib(b.proc.pid)
            clean = restart(b, argv, wait_ready, spawn, stop, "clean")
            killed = restart(b, argv, wait_ready, spawn, stop, "kill")
            rss_after = rss_mib(b.proc.pid)
            b.stop()
            r = {"broker": kind, "topics": topics, "partitions": partitions,
                 "start_s": ready, "create_s": create_s, "create_tool_s": wall,
                 "rss_mib": rss, "restart_clean_s": clean, "restart_kill9_s": killed,
                 "rss_after_restart_mib": rss_after}
            log(f"scale {kind} {topics}x{partitions}: {r}")
            results.append(r)
    return results


def render_scale(opts, results, meta, fmt, rfmt, ratio):
    m = meta["machine"]
    load = meta["load_start"]
    lines = [SCALE_HEADING, "",
             f"`{meta['command']}` on {meta['date']} ({m['cores']} cores, {m['cpu']}, "
             f"{m['ram_gib']:.0f} GiB; load average {load:.2f} at the start"
             f"{', ' + format(meta['load_end'], '.2f') + ' at the end' if meta.get('load_end') is not None else ''}"
             f"{': a shared machine, other jobs ran beside it' if load > 1.0 else ''}). "
             f"Apache Kafka {opts.kafka_version} (KRaft, single node, shipped defaults, default heap) "
             "and skua (defaults), one after the other, each on a fresh data dir per part.", ""]
    w = lines.append
    w("### Many topics")
    w("")
    w("Topic creation is one CreateTopics request for every topic, timed from the request until every "
      "partition has a leader in the metadata (`BenchClient create`); RSS is VmRSS after creation; a "
      "restart is timed from the process start to its first ApiVersions answer, after a clean stop "
      "(SIGTERM) and after kill -9.")
    w("")
    w("| partitions | broker | create | RSS | restart after clean stop | restart after kill -9 |")
    w("|---|---|---|---|---|---|")
    by = {(r["topics"], r["partitions"], r["broker"]): r for r in results["topics"]}
    for (topics, partitions, kind), r in sorted(by.items()):
        w(f"| {topics} x {partitions} | {kind} | {fmt(r['create_s'], ' s', 2)} | "
          f"{fmt(r['rss_mib'], ' MiB', 0)} | {fmt(r['restart_clean_s'], ' s', 2)} | "
          f"{fmt(r['restart_kill9_s'], ' s', 2)} |")
    w("")
    w("skua / Kafka:")
    w("")
    for topics, partitions in sorted({(r["topics"], r["partitions"]) for r in results["topics"]}):
        s, k = by.get((topics, partitions, "skua")), by.get((topics, partitions, "kafka"))
        if not (s and k):
            continue
        parts = [f"{key} {rfmt(ratio(s[key], k[key]))}"
                 for key in ("create_s", "rss_mib", "restart_clean_s", "restart_kill9_s")]
        w(f"- {topics} x {partitions}: " + ", ".join(parts))
    w("")

    K, S = results["load"].get("kafka", {}), results["load"].get("skua", {})
    get = lambda R, cell, key: (R.get(cell) or {}).get(key)
    row = lambda name, cell, key, unit="", nd=0: (
        f"| {name} | {fmt(get(K, cell, key), unit, nd)} | {fmt(get(S, cell, key), unit, nd)} | "
        f"**{rfmt(ratio(get(S, cell, key), get(K, cell, key)))}** |")
    sp = S.get("spread") or K.get("spread") or {}
    parts = sp.get("partitions")
    for R in (K, S):
        r = R.get("spread")
        if r:
            gb = lambda b: max(b, 1) / 1e9
            r["rps"] = r["produce_records_acked"] / r["produce_seconds"]
            r["consume_rps"] = r["consume_records"] / r["consume_seconds"]
            r["cpu_s_per_gb"] = (r["produce_broker_cpu_s"] or 0) / gb(r["produce_bytes"])
            r["consume_cpu_s_per_gb"] = (r["consume_broker_cpu_s"] or 0) / gb(r["consume_bytes"])
        r = R.get("commit")
        if r:
            r["commits_per_s"] = r["commit_count"] / r["commit_seconds"]
            r["broker_us_per_commit"] = (r["commit_broker_cpu_s"] or 0) * 1e6 / max(r["commit_count"], 1)
    idle = S.get("idle") or K.get("idle") or {}
    c = S.get("commit") or K.get("commit") or {}
    w(f"### {fmt(parts, nd=0)} partitions, {fmt(idle.get('connections'), nd=0)} idle connections, "
      f"{fmt(c.get('commit_groups'), nd=0)} groups committing")
    w("")
    w(f"One topic of {fmt(parts, nd=0)} partitions created in one CreateTopics request (`skua-load --create`, timed "
      "until every partition has a leader in the metadata), after a warm-up of the broker (Kafka's JIT). "
      f"`skua-load` then writes one batch of 50 records of 100 B to every partition (unmeasured: on Kafka a "
      "partition takes writes some seconds after CreateTopics is answered), then "
      f"{fmt(get(S, 'spread', 'produce_records_acked'), nd=0)} records over "
      "4 connections, one batch of 50 records per request, the partitions in turn, and 2 consumers read every partition back from offset 0 in fetches naming all of "
      "their partitions. Broker CPU per GB of record payload; RSS after both. Then the broker is "
      "stopped with SIGTERM (timed until the process exits), restarted, killed with kill -9 and "
      "restarted again (each restart timed from the process start to its first ApiVersions answer, "
      f"at most {RESTART_TIMEOUT} s), and after each restart skua-load reads every partition back: "
      "the count must be every record written.")
    w("")
    w("| cell | Kafka | skua | **skua / Kafka** |")
    w("|---|---:|---:|---:|")
    w(row(f"create {fmt(parts, nd=0)} partitions, s", "spread", "create_seconds", "", 2))
    w(row("produce rec/s", "spread", "rps"))
    w(row("produce p99 µs (per request)", "spread", "produce_p99_us"))
    w(row("produce broker CPU s/GB", "spread", "cpu_s_per_gb", "", 2))
    w(row("consume rec/s", "spread", "consume_rps"))
    w(row("consume broker CPU s/GB", "spread", "consume_cpu_s_per_gb", "", 2))
    w(row("RSS after, MiB", "spread", "rss_mib"))
    w(row("peak RSS (VmHWM), MiB", "spread", "hwm_mib"))
    w(row("clean stop (SIGTERM to exit), s", "spread_restart", "stop_clean_s", "", 2))
    w(row("restart after the clean stop, s", "spread_restart", "restart_clean_s", "", 2))
    w(row("restart after kill -9, s", "spread_restart", "restart_kill9_s", "", 2))
    w(row("records read back after the clean stop", "spread_restart", "records_after_clean"))
    w(row("records read back after kill -9", "spread_restart", "records_after_kill9"))
    w("")
    w(f"Idle connections, on a fresh broker: {fmt(idle.get('connections'), nd=0)} connections from 127.0.0.1, "
      "opened one after another, each after an ApiVersions and a Metadata request (no topics) answered, then "
      "left idle. RSS growth is VmRSS 2 s after the last one minus VmRSS before the first, per "
      "connection; idle CPU is the broker's over 10 s while they stay open; every connection is "
      "checked to be still open at the end.")
    w("")
    w("| cell | Kafka | skua | **skua / Kafka** |")
    w("|---|---:|---:|---:|")
    w(row("time to open them all, s", "idle", "open_s", "", 2))
    w(row("RSS before, MiB", "idle", "rss_before_mib"))
    w(row("RSS with them open, MiB", "idle", "rss_after_mib"))
    w(row("RSS growth per connection, KiB", "idle", "kib_per_connection", "", 1))
    w(row("broker CPU over 10 s idle, s", "idle", "idle_cpu_s_per_10s", "", 2))
    w(row("connections still open", "idle", "alive"))
    w("")
    w(f"Consumer groups committing, on the same broker afterwards: {fmt(c.get('commit_groups'), nd=0)} groups "
      "commit offsets as groups without members do (generation -1, as a consumer that assigns "
      f"its partitions itself), one partition per OffsetCommit, over {COMMIT_CONNECTIONS} connections "
      f"with {COMMIT_IN_FLIGHT} commits in flight on each, after a warm-up in which every group commits; "
      "latency is send to answer.")
    w("")
    w("| cell | Kafka | skua | **skua / Kafka** |")
    w("|---|---:|---:|---:|")
    w(row("commits/s", "commit", "commits_per_s"))
    w(row("broker CPU µs per commit", "commit", "broker_us_per_commit", "", 1))
    w(row("commit latency p50 µs", "commit", "commit_p50_us"))
    w(row("commit latency p99 µs", "commit", "commit_p99_us"))
    w(row("commit latency p99.9 µs", "commit", "commit_p999_us"))
    w(row("peak RSS (VmHWM), MiB", "commit", "hwm_mib"))
    w("")
    return "\n".join(lines)
