"""`scripts/bench --scale`: many partitions on one broker, Apache Kafka and skua one after
the other on fresh data dirs: the time to create TOPICS x PARTITIONS topics (one
CreateTopics request, until every partition has a leader in the metadata), the broker's
RSS after it, and the time from start to the first ApiVersions answer on restart after a
clean stop and after kill -9 with those partitions on disk.

Imported by bench.py (which owns Broker, logging, the tool runner and the doc writer)."""

import re
import signal
import subprocess
import time

SCALE_HEADING = "## Scale: many partitions"
# (topics, partitions per topic)
SCALE_CELLS = [(50, 100), (100, 100)]
SCALE_CELLS_QUICK = [(5, 20)]


def rss_mib(pid):
    """Current resident set (VmRSS) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


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


def skua_argv(b):
    return [b.binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            "--override", f"log.dirs={b.dir}/data"]


def kafka_argv(b):
    """The running Kafka's own command line: Broker.start prepared server.properties and
    formatted the dir, so the same command starts it again on that dir."""
    with open(f"/proc/{b.proc.pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def scale(opts, Broker, log, tool, wait_ready, spawn, stop):
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
    lines = [SCALE_HEADING, "",
             f"`{meta['command']}` on {meta['date']} ({meta['machine']}; load average at start "
             f"{meta['load_start']}). Apache Kafka {opts.kafka_version} (KRaft, single node, shipped "
             "defaults) and skua (defaults), each on a fresh data dir. Topic creation is one "
             "CreateTopics request for every topic, timed from the request until every partition "
             "has a leader in the metadata (`BenchClient create`); RSS is VmRSS after creation; a "
             "restart is timed from the process start to its first ApiVersions answer, after a "
             "clean stop (SIGTERM) and after kill -9.", "",
             "| partitions | broker | create | RSS | restart after clean stop | restart after kill -9 |",
             "|---|---|---|---|---|---|"]
    by = {(r["topics"], r["partitions"], r["broker"]): r for r in results}
    for (topics, partitions, kind), r in sorted(by.items()):
        lines.append(f"| {topics} x {partitions} | {kind} | {fmt(r['create_s'], ' s', 2)} | "
                     f"{fmt(r['rss_mib'], ' MiB', 0)} | {fmt(r['restart_clean_s'], ' s', 2)} | "
                     f"{fmt(r['restart_kill9_s'], ' s', 2)} |")
    lines.append("")
    lines.append("skua / Kafka:")
    lines.append("")
    for topics, partitions in sorted({(r["topics"], r["partitions"]) for r in results}):
        s, k = by.get((topics, partitions, "skua")), by.get((topics, partitions, "kafka"))
        if not (s and k):
            continue
        parts = [f"{key} {rfmt(ratio(s[key], k[key]))}"
                 for key in ("create_s", "rss_mib", "restart_clean_s", "restart_kill9_s")]
        lines.append(f"- {topics} x {partitions}: " + ", ".join(parts))
    lines.append("")
    return "\n".join(lines)
