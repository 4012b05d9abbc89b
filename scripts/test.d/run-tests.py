#!/usr/bin/env python3
"""Runs integration-test binaries one test per process, in two lanes.

  run-tests.py --bin target/debug/deps/it-HASH [--bin ...] [--heavy-jobs 2]
               [--light-jobs 2] [--filter SUBSTRING] [--times FILE] [--logs DIR]
               [--groups FILE]

Tests of the `it` binary go by their module path (`zk_cluster::deposed_...`), those of
another binary by `binary/test`.

The heavy lane holds the tests listed in scripts/test.d/heavy-tests.txt (they start
ZooKeeper, Kafka JVMs or brokers as processes, and mostly wait on their timers); at most
--heavy-jobs of them run at once, longest first (by the times of the last run, else by
the list's estimates), so the longest does not start last. The light lane runs the rest,
--light-jobs at a time. A process of its own per test keeps a test's process-wide
state (fd limits, signal handlers, leaked threads) from reaching another.

Prints each failure with its output's tail, the slowest tests, and `N passed, M failed`;
exits 1 when a test failed or ran past its time limit (it is then killed with its
process group, so a hang cannot stall the run). Per-test wall times go to --times (TSV);
per scenario file (a module of `it`, or another binary) --groups gets its lane, its
tests, the wall time from its first test's start to its last one's end, and the sum of
its tests' times.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# A heavy test past this is killed; a light one past LIGHT_LIMIT.
HEAVY_LIMIT = int(os.environ.get("SKUA_TEST_HEAVY_LIMIT", "900"))
LIGHT_LIMIT = int(os.environ.get("SKUA_TEST_LIGHT_LIMIT", "300"))
# A light test slower than this is named at the end: it belongs in the heavy list.
LIGHT_SLOW = 20.0


def list_tests(binary, *extra):
    out = subprocess.run([binary, "--list", "--format", "terse", *extra], check=True,
                         capture_output=True, text=True).stdout
    return [line[: -len(": test")] for line in out.splitlines() if line.endswith(": test")]


def binary_name(binary):
    """`it` for target/debug/deps/it-0123abcd."""
    return Path(binary).name.rsplit("-", 1)[0]


def display(binary, test):
    name = binary_name(binary)
    return test if name == "it" else f"{name}/{test}"


def heavy_estimates():
    """Module paths or test names of the heavy lane, with estimated seconds."""
    found = {}
    for line in (HERE / "heavy-tests.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, secs = line.split()
            found[name] = float(secs)
    return found


def heavy_estimate(test, estimates):
    """The estimate of the longest entry naming `test` or a module above it, or None."""
    parts = test.split("::")
    for i in range(len(parts), 0, -1):
        key = "::".join(parts[:i])
        if key in estimates:
            return estimates[key]
    return None


def last_times(path):
    times = {}
    try:
        for line in Path(path).read_text().splitlines():
            name, secs, _ = line.split("\t")
            times[name] = float(secs)
    except (OSError, ValueError):
        pass
    return times


# Lines in a failed test's log that mean the cluster harness could not start one of the
# JVMs (Kafka 3.9.1 or ZooKeeper) it compares skua with, before the test checked anything.
JVM_START_FAILURES = (
    "Exiting Kafka due to fatal exception during startup",
)


class Run:
    def __init__(self, logs):
        self.logs = Path(logs)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.results = []  # (name, seconds, status)
        self.spans = {}  # name -> (start, end), monotonic
        self.lock = threading.Lock()

    def one(self, test, limit):
        binary, exact = test
        name = display(binary, exact)
        log_path = self.logs / (name.replace("::", "__").replace("/", "__") + ".log")
        start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [binary, "--exact", exact, "--test-threads", "1", "--nocapture"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=limit)
                status = "ok" if rc == 0 else "FAILED"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                status = f"TIMEOUT after {limit}s"
        end = time.monotonic()
        secs = end - start
        with self.lock:
            self.results.append((name, secs, status))
            self.spans[name] = (start, end)
            if status != "ok":
                tail = log_path.read_text(errors="replace").splitlines()[-60:]
                print(f"---- {name}: {status} ({secs:.1f}s), log {log_path}", flush=True)
                print("\n".join("    " + line for line in tail), flush=True)

    def rerun_failed_jvm_starts(self, tests, limit):
        """Runs once more, alone, each failed test whose log shows that one of the Apache
        Kafka or ZooKeeper JVMs the cluster harness starts never came up (on two loaded
        cores a JVM can stall past a 6 s ZooKeeper session during its own startup). Only
        that signature is rerun: a failure of skua's own is reported as it happened. The
        first attempt's log is kept beside the rerun's."""
        by_name = {display(*t): t for t in tests}
        for i, (name, _, status) in enumerate(list(self.results)):
            if status == "ok":
                continue
            log_path = self.logs / (name.replace("::", "__").replace("/", "__") + ".log")
            text = log_path.read_text(errors="replace")
            if not any(sig in text for sig in JVM_START_FAILURES):
                continue
            first = log_path.with_suffix(".first.log")
            log_path.rename(first)
            print(f"---- {name}: a harness JVM did not start; running it once more "
                  f"(first log {first})", flush=True)
            before = len(self.results)
            self.one(by_name[name], limit)
            _, secs, again = self.results.pop(before)
            self.results[i] = (name, secs, again if again != "ok" else
                               "ok (rerun: a harness JVM did not start the first time)")

    def lane(self, queue, jobs, limit):
        def worker():
            while True:
                with self.lock:
                    if not queue:
                        return
                    name = queue.pop(0)
                self.one(name, limit)
        threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
        for t in threads:
            t.start()
        return threads


def group_of(name):
    """The scenario file a test belongs to: its module in `it`, or its binary."""
    return name.split("/", 1)[0] if "/" in name else name.split("::", 1)[0]


def write_groups(path, run, heavy_set):
    groups = {}
    for name, secs, status in run.results:
        start, end = run.spans[name]
        g = groups.setdefault(group_of(name), {"lane": "light", "tests": 0, "sum": 0.0,
                                               "start": start, "end": end, "failed": 0})
        g["tests"] += 1
        g["sum"] += secs
        g["start"], g["end"] = min(g["start"], start), max(g["end"], end)
        g["failed"] += not status.startswith("ok")
        if name in heavy_set:
            g["lane"] = "heavy"
    with open(path, "w") as f:
        for name, g in sorted(groups.items(), key=lambda kv: (kv[1]["lane"], -kv[1]["sum"])):
            f.write(f"{name}\t{g['lane']}\t{g['tests']}\t{g['end'] - g['start']:.0f}"
                    f"\t{g['sum']:.0f}\t{g['failed']}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--heavy-jobs", type=int, default=2)
    ap.add_argument("--light-jobs", type=int, default=2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--times", default="target/test-times.tsv")
    ap.add_argument("--logs", default="target/test-logs")
    ap.add_argument("--groups", default="")
    args = ap.parse_args()

    tests, skipped = [], 0
    for binary in args.bin:
        ignored = set(list_tests(binary, "--ignored"))
        skipped += len(ignored)
        tests += [(binary, t) for t in list_tests(binary)
                  if t not in ignored and args.filter in display(binary, t)]
    estimates = heavy_estimates()
    previous = last_times(args.times)
    heavy, light = [], []
    for t in tests:
        name = display(*t)
        est = heavy_estimate(name, estimates)
        (heavy if est is not None else light).append((previous.get(name, est or 0.0), t))
    heavy_set = {display(*t) for _, t in heavy}
    heavy = [t for _, t in sorted(heavy, reverse=True)]
    light = [t for _, t in sorted(light, reverse=True)]
    print(f"{len(tests)} tests: {len(heavy)} heavy ({args.heavy_jobs} at a time), "
          f"{len(light)} light ({args.light_jobs} at a time)", flush=True)

    run = Run(args.logs)
    started = time.monotonic()
    threads = run.lane(heavy, args.heavy_jobs, HEAVY_LIMIT) + run.lane(light, args.light_jobs, LIGHT_LIMIT)
    for t in threads:
        t.join()
    run.rerun_failed_jvm_starts(tests, HEAVY_LIMIT)
    wall = time.monotonic() - started

    with open(args.times, "w") as f:
        for name, secs, status in sorted(run.results):
            f.write(f"{name}\t{secs:.1f}\t{status}\n")
    if args.groups:
        write_groups(args.groups, run, heavy_set)
    print("slowest tests:")
    for name, secs, status in sorted(run.results, key=lambda r: -r[1])[:15]:
        lane = "heavy" if name in heavy_set else "light"
        print(f"  {secs:7.1f}s  {lane:5}  {name}{'' if status == 'ok' else '  ' + status}")
    slow_light = [r for r in run.results if r[0] not in heavy_set and r[1] > LIGHT_SLOW]
    for name, secs, _ in slow_light:
        print(f"note: {name} took {secs:.0f}s in the light lane; list it in scripts/test.d/heavy-tests.txt")
    for name, secs, status in run.results:
        if status.startswith("ok ("):
            print(f"  {name}: {status}")
    failed = [r for r in run.results if not r[2].startswith("ok")]
    passed = len(run.results) - len(failed)
    print(f"{passed} passed, {len(failed)} failed, {skipped} ignored, in {wall:.0f}s")
    for name, secs, status in failed:
        print(f"  failed: {name} ({status}, {secs:.1f}s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
