"""Does HOST:PORT answer a Kafka ApiVersions (v0) request? Exit 0 if so.

    python3 probe.py HOST:PORT [TIMEOUT_SECONDS]

Prints the broker's supported API keys and version ranges on success.
"""
import socket
import struct
import sys

host, port = sys.argv[1].rsplit(":", 1)
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 10
client_id = b"skua-compat-probe"
body = struct.pack(">hhih", 18, 0, 0x5C0A, len(client_id)) + client_id
try:
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)

        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise EOFError("connection closed")
                buf += chunk
            return buf

        size = struct.unpack(">i", read(4))[0]
        resp = read(size)
except Exception as e:  # noqa: BLE001
    sys.exit(f"no ApiVersions answer from {host}:{port}: {type(e).__name__}: {e}")
corr, err, n = struct.unpack(">ihi", resp[:10])
if corr != 0x5C0A:
    sys.exit(f"ApiVersions answer has correlation id {corr}, want {0x5C0A}")
if err != 0:
    sys.exit(f"ApiVersions error code {err}")
apis = [struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i]) for i in range(n)]
print("ApiVersions: " + " ".join(f"{k}:{lo}-{hi}" for k, lo, hi in apis))
