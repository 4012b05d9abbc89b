"""Turn `go test -json` output into suite lines for skua's compatibility runner.

    go test -json ... | python3 gotest2cases.py PREFIX

Top-level tests only: `PASS PREFIX.TestName`, `FAIL PREFIX.TestName: first error line`,
`SKIP PREFIX.TestName`. Tests that started but never finished (the package timed out or
crashed) are reported as failures.
"""
import json
import re
import sys

prefix = sys.argv[1]
started, done, output = [], {}, {}
for line in sys.stdin:
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    test = ev.get("Test")
    if not test or "/" in test:
        continue
    act = ev.get("Action")
    if act == "run":
        started.append(test)
    elif act == "output":
        out = ev.get("Output", "")
        if not re.match(r"\s*(=== |--- |PASS|FAIL|ok )", out) and out.strip():
            output.setdefault(test, []).append(out.strip())
    elif act in ("pass", "fail", "skip"):
        done[test] = act

for test in started:
    act = done.get(test)
    cid = f"{prefix}.{test}"
    if act == "pass":
        print(f"PASS {cid}")
    elif act == "skip":
        print(f"SKIP {cid}")
    else:
        lines = output.get(test, [])
        why = next((l for l in lines if "panic" in l or "Error" in l or "error" in l or ".go:" in l), lines[0] if lines else "")
        if act is None:
            why = "did not finish (go test -timeout reached or the test binary crashed) " + why
        print(f"FAIL {cid}: {why[:300]}")
sys.stdout.flush()
