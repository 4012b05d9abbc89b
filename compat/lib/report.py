"""Aggregate suite results for skua's compatibility runner.

    python3 report.py --results DIR --expectations compat/expectations.txt \
        --franz compat/go/franz-expected.txt --suites java-tools,... [--readme compat/README.md]

DIR holds one raw-<suite>.txt per suite (PASS/FAIL/SKIP lines as the suite printed them)
and timings.tsv (suite, seconds, exit status). Prints the final per-case lines
(PASS / FAIL / XFAIL / XPASS / SKIP), the summary `N passed, M failed`, and exits 1 if any
case expected to pass did not.
"""
import argparse
import datetime
import os
import re
import sys

# suite name -> id prefixes it reports
SUITE_PREFIXES = {
    "java-clients": ("java.client.", "java.admin.", "java.group.", "java.txn."),
    "java-tools": ("java.topics.", "java.console.", "java.consumer_groups.", "java.configs.", "java.tools.", "java.perf."),
    "librdkafka": ("librdkafka.",),
    "kcat": ("kcat.",),
    "kafka-python": ("kafkapython.",),
    "franz-go": ("franz.",),
    "franz-cases": ("franzcases.",),
    "sarama": ("sarama.",),
    "kafkajs": ("kafkajs.",),
    "migration": ("migration.", "zkmigration."),
    "rolling": ("rolling.", "rolling_kraft."),
    "ssl": ("ssl.",),
}
CLIENT_NAMES = {
    "java-clients": "Java client (kafka-clients)",
    "java-tools": "Kafka CLI tools",
    "librdkafka": "librdkafka (confluent-kafka-python)",
    "kcat": "kcat",
    "kafka-python": "kafka-python",
    "franz-go": "franz-go (its own kgo tests)",
    "franz-cases": "franz-go (skua's cases)",
    "sarama": "sarama",
    "kafkajs": "kafkajs",
    "migration": "Kafka 4.4 KRaft and Kafka 3.9 ZooKeeper-mode data dirs to skua and back",
    "rolling": "a three-broker Kafka 3.9 cluster replaced by skua broker by broker, and back",
    "ssl": "kcat (librdkafka) and the Java console tools over an SSL listener with client certificates",
}
# (column, regex on the case id); first match wins; the last column catches the rest
FEATURES = [
    ("transactions", r"\.txn\.|Txn"),
    ("groups", r"[Gg]roup|perf\.consumer|848|Issue523|Share"),
    ("idempotence", r"idempot"),
    ("compression", r"\.(gzip|snappy|lz4|zstd)$|console\.zstd|[Cc]ompress|Zstd|LZ4|Gzip|Decompress|xerial"),
    ("partitioning", r"keyed|[Pp]artitioner|Murmur|Sarama"),
    ("ACLs & auth", r"acl|SASL|SCRAM|OAuth"),
    ("offsets & timestamps", r"offset|[Tt]imes|seek|delete_records|log_append|Lookback"),
    ("configs", r"configs"),
    ("admin topics", r"\.admin\.|\.topics\.|metadata|api_versions|describe_cluster|Topics|AddRemovePartitions"),
    ("produce & consume", r"."),
]
COLUMNS = ["produce & consume", "compression", "idempotence", "partitioning", "offsets & timestamps",
           "admin topics", "configs", "groups", "transactions", "ACLs & auth"]


def load_expectations(path):
    exp = {}
    for n, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1] not in ("pass", "xfail"):
            sys.exit(f"{path}:{n}: want `ID pass` or `ID xfail REASON`: {raw.rstrip()}")
        exp[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return exp


def load_franz(path):
    """franz-expected.txt: `TestName` (expected to pass) or `TestName xfail REASON`."""
    exp = {}
    if not os.path.exists(path):
        return exp
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        kind = parts[1] if len(parts) > 1 else "pass"
        exp["franz." + parts[0]] = (kind, parts[2] if len(parts) > 2 else "")
    return exp


def suite_of(cid):
    for s, prefixes in SUITE_PREFIXES.items():
        if cid.startswith(prefixes):
            return s
    return None


def feature_of(cid):
    name = cid.split(".", 1)[1] if cid.startswith("franz.") else cid
    for col, rx in FEATURES:
        if re.search(rx, name):
            return col
    return "produce & consume"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--expectations", required=True)
    ap.add_argument("--franz", required=True)
    ap.add_argument("--suites", required=True)
    ap.add_argument("--readme")
    ap.add_argument("--broker", default="unknown broker")
    ap.add_argument("--reference", action="store_true",
                    help="the broker is Apache Kafka: xfail cases are expected to pass")
    args = ap.parse_args()

    suites = args.suites.split(",")
    exp = load_expectations(args.expectations)
    exp.update(load_franz(args.franz))

    raw = {}  # id -> (status, reason)
    for s in suites:
        p = os.path.join(args.results, f"raw-{s}.txt")
        if not os.path.exists(p):
            continue
        for line in open(p, errors="replace"):
            m = re.match(r"^(PASS|FAIL|SKIP) (\S+?)(?::\s*(.*))?$", line.rstrip("\n"))
            if not m:
                continue
            cid, status = m.group(2), m.group(1)
            if cid in raw:
                # a case reported twice means its suite ran twice (a runner bug): the case
                # fails rather than letting the last report hide the first
                status = "FAIL"
                reason = f"reported more than once ({raw[cid][0]}, then {m.group(1)}): its suite ran it twice"
                raw[cid] = (status, reason)
            else:
                raw[cid] = (status, m.group(3) or "")

    final = []  # (id, outcome, detail)
    counts = dict(passed=0, failed=0, xfail=0, xpass=0, skipped=0, new=0)
    selected = lambda cid: suite_of(cid) in suites  # noqa: E731
    ids = sorted(set(raw) | {c for c in exp if selected(c) and not c.startswith("franz.")}
                 | {c for c in exp if c.startswith("franz.") and "franz-go" in suites and exp[c][0] == "pass"})
    for cid in ids:
        status, reason = raw.get(cid, ("MISSING", "no result: the suite did not report this case"))
        kind, why = exp.get(cid, (None, ""))
        if kind is None and cid.startswith("franz."):
            kind, why = "xfail", "not listed in compat/go/franz-expected.txt"
            if status == "PASS":
                counts["new"] += 1
        if status == "SKIP":
            final.append((cid, "SKIP", ""))
            counts["skipped"] += 1
        elif kind == "xfail":
            if status == "PASS":
                final.append((cid, "XPASS", why))
                counts["xpass"] += 1
            else:
                final.append((cid, "XFAIL", why))
                counts["xfail"] += 1
        else:  # expected to pass (or an unlisted non-franz case: strict)
            if status == "PASS":
                final.append((cid, "PASS", "" if kind else "not in compat/expectations.txt"))
                counts["passed"] += 1
            else:
                final.append((cid, "FAIL", reason))
                counts["failed"] += 1

    for cid, outcome, detail in final:
        if outcome == "FAIL":
            print(f"FAIL {cid}: {detail}")
        elif outcome == "XPASS":
            print(f"XPASS {cid}" + ("" if args.reference else f"   <-- unexpected pass ({detail}); update the expectation"))
        elif outcome == "PASS" and detail:
            print(f"PASS {cid}   <-- {detail}")
        else:
            print(f"{outcome} {cid}")

    timings = []
    tp = os.path.join(args.results, "timings.tsv")
    if os.path.exists(tp):
        timings = [l.rstrip("\n").split("\t") for l in open(tp) if l.strip()]
    print()
    for row in timings:
        print(f"  {row[0]:<14} {float(row[1]):7.1f}s" + (f"  (exit {row[2]})" if len(row) > 2 and row[2] != "0" else ""))
    xp = [c for c, o, _ in final if o == "XPASS"]
    if xp and args.reference:
        print()
        print(f"{len(xp)} xfail cases passed: expected on Apache Kafka, which has every feature skua lacks so far.")
    elif xp:
        print()
        print("!" * 72)
        print(f"!! {len(xp)} UNEXPECTED PASS(ES): these xfail cases now pass; mark them `pass`:")
        for c in xp:
            print(f"!!   {c}")
        print("!" * 72)
    print()
    print(f"{counts['xfail']} xfailed, {counts['xpass']} unexpectedly passed, {counts['skipped']} skipped"
          + (f", {counts['new']} passing franz-go tests not yet in franz-expected.txt" if counts["new"] else ""))
    print(f"{counts['passed']} passed, {counts['failed']} failed")

    if args.readme:
        write_readme(args.readme, final, suites, timings, counts, args.broker, args.results)
    return 1 if counts["failed"] else 0


def write_readme(path, final, suites, timings, counts, broker, results_dir):
    cells = {}
    for cid, outcome, _ in final:
        s = suite_of(cid)
        if s is None or outcome == "SKIP":
            continue
        cells.setdefault((s, feature_of(cid)), []).append(outcome)

    def cell(outs):
        if not outs:
            return ""
        ok = sum(o in ("PASS", "XPASS") for o in outs)
        if "FAIL" in outs:
            return f"**fail** ({ok}/{len(outs)})"
        if ok == len(outs):
            return f"pass ({ok})"
        if ok == 0:
            return "not yet"
        return f"partial ({ok}/{len(outs)})"

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    m = re.search(r"(\d{8}T\d{6}Z)", os.path.realpath(results_dir))
    if m:  # the run's own start time
        now = datetime.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d %H:%M UTC")
    L = []
    L.append("# skua compatibility suite")
    L.append("")
    L.append("<!-- Generated by scripts/compat from a full run. Do not edit by hand: edit")
    L.append("     compat/README.in.md or the suites, then rerun scripts/compat. -->")
    L.append("")
    tmpl = os.path.join(os.path.dirname(path), "README.in.md")
    if os.path.exists(tmpl):
        L.append(open(tmpl).read().rstrip())
        L.append("")
    L.append("## Last run")
    L.append("")
    L.append(f"- date: {now}")
    L.append(f"- broker under test: {broker}")
    L.append(f"- result: {counts['passed']} passed, {counts['failed']} failed; {counts['xfail']} xfailed, "
             f"{counts['xpass']} unexpectedly passed, {counts['skipped']} skipped")
    L.append("")
    L.append("Cells: `pass (n)` every case passed; `**fail** (k/n)` a case expected to pass failed;")
    L.append("`not yet` only cases marked xfail, none passing; `partial (k/n)` some xfail cases still fail.")
    L.append("")
    L.append("| client | " + " | ".join(COLUMNS) + " |")
    L.append("|---|" + "---|" * len(COLUMNS))
    for s in suites:
        L.append(f"| {CLIENT_NAMES.get(s, s)} | " + " | ".join(cell(cells.get((s, c), [])) for c in COLUMNS) + " |")
    L.append("")
    if timings:
        L.append("| suite | seconds |")
        L.append("|---|---|")
        for row in timings:
            L.append(f"| {row[0]} | {float(row[1]):.0f} |")
        L.append("")
    bad = [(c, o, d) for c, o, d in final if o in ("FAIL", "XPASS")]
    if bad:
        L.append("### Cases off their expectation")
        L.append("")
        for c, o, d in bad:
            L.append(f"- `{o}` {c}: {d}")
        L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
