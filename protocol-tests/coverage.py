#!/usr/bin/env python3
"""Prints which clients' fixtures cover each (api, version) skua advertises, as Markdown.

    python3 protocol-tests/coverage.py

Routes are read from src/router.rs; `cargo test` fails on gaps (every_advertised_version_has_a_fixture).
"""
import collections
import csv
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def routes():
    text = open(os.path.join(HERE, "..", "src", "router.rs")).read()
    return [(m[1], int(m[2]), int(m[3]))
            for m in re.finditer(r"route!\(\s*(\w+),\s*(\d+),\s*(\d+),", text)]


def clients_by_version():
    with open(os.path.join(HERE, "fixtures", "MANIFEST.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    cov = collections.defaultdict(set)
    for r in rows:
        cov[(r[4], int(r[5]))].add(r[1])
    return cov


def short(clients):
    pins = sorted((c[len("franz-go-kafka-"):] for c in clients if c.startswith("franz-go-kafka-")),
                  key=lambda v: [int(x) for x in v.split(".")])
    out = sorted(c for c in clients if not c.startswith("franz-go-kafka-"))
    if pins:
        span = pins[0] if len(pins) == 1 else f"{pins[0]}…{pins[-1]}"
        out.append(f"franz-go pinned to Kafka {span} ({len(pins)})")
    return ", ".join(out)


def main():
    cov = clients_by_version()
    advertised = set()
    print("| API | version | clients |\n|---|---|---|")
    for api, lo, hi in routes():
        for v in range(lo, hi + 1):
            advertised.add((api, v))
            print(f"| {api} | {v} | {short(cov.get((api, v), set())) or '**none**'} |")
    for key in sorted(k for k in cov if k not in advertised):
        print(f"| {key[0]} | {key[1]} (not advertised) | {short(cov[key])} |")


if __name__ == "__main__":
    main()
