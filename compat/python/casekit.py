"""Tiny case runner shared by skua's Python compatibility suites.

Each case is a function; `run(id, fn)` prints `PASS id` or `FAIL id: reason`.
"""
import os
import sys
import threading
import traceback
import uuid

CASE_TIMEOUT = float(os.environ.get("COMPAT_CASE_TIMEOUT", "60"))


def topic_name(what):
    return f"compat-{what}-{uuid.uuid4().hex[:8]}"


class CaseFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CaseFailed(msg)


def run(case_id, fn, *args):
    result = {}

    def body():
        try:
            fn(*args)
            result["ok"] = True
        except BaseException as e:  # noqa: BLE001 - every failure is a case failure
            result["err"] = e
            if os.environ.get("COMPAT_VERBOSE"):
                traceback.print_exc()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(CASE_TIMEOUT)
    if t.is_alive():
        print(f"FAIL {case_id}: timed out after {CASE_TIMEOUT:.0f}s", flush=True)
    elif result.get("ok"):
        print(f"PASS {case_id}", flush=True)
    else:
        e = result["err"]
        msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:400]
        print(f"FAIL {case_id}: {msg}", flush=True)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (as in the Java client's Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) + ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= (data[idx + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[idx + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[idx] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


def bootstrap():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:9092")
