#!/usr/bin/env python3
"""A recording TCP proxy: captures the request frames a real Kafka client sends.

    skua --override listeners=PLAINTEXT://127.0.0.1:9192 \
         --override advertised.listeners=PLAINTEXT://127.0.0.1:9092 ...
    python3 protocol-tests/capture.py --listen 127.0.0.1:9092 --upstream 127.0.0.1:9192 \
         --client librdkafka --client-version 2.16.1
    # ... run the client against 127.0.0.1:9092, then Ctrl-C (or SIGTERM) the proxy.

The broker must advertise the proxy's address (advertised.listeners), otherwise clients
follow Metadata to the broker itself and the proxy sees only the bootstrap requests.

Each request frame's body (the bytes after the 4-byte size prefix) is written to
`<out>/<client>/<ApiName>-v<version>-<n>.bin`, and the matching response body to
`...-<n>.resp.bin`. One line per fixture is appended to `<out>/MANIFEST.tsv`, in capture
order; replaying a client's fixtures in that order reproduces the state they depend on.

Clients repeat themselves (metadata refreshes, long-poll fetches), so at most
`--max-per-version` frames are kept per (api, version); a request is always kept when its
(api, version) has not been seen yet, and requests that change group state (KEEP_ALL) are
always kept. Python 3.11 standard library only.
"""

import argparse
import os
import signal
import socket
import struct
import sys
import threading

# Kafka's api keys (clients/src/main/resources/common/message/*Request.json).
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch", 55: "DescribeQuorum", 56: "AlterPartition",
    57: "UpdateFeatures", 58: "Envelope", 59: "FetchSnapshot", 60: "DescribeCluster",
    61: "DescribeProducers", 62: "BrokerRegistration", 63: "BrokerHeartbeat",
    64: "UnregisterBroker", 65: "DescribeTransactions", 66: "ListTransactions",
    67: "AllocateProducerIds", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 74: "ListClientMetricsResources",
    75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe",
    78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
}

# Requests that change a group's state (membership, generation, member epoch, committed
# offsets) or a config: each is kept whatever the cap, because the replay rebuilds that state
# from them and later answers depend on it (a SyncGroup after a dropped JoinGroup would be
# answered UNKNOWN_MEMBER_ID). OffsetCommit, JoinGroup, LeaveGroup, SyncGroup, AlterConfigs,
# DeleteGroups, IncrementalAlterConfigs, OffsetDelete, ConsumerGroupHeartbeat; and the
# share group requests, which move a member's epoch, its share session's epoch or its
# records' states: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.
KEEP_ALL = {8, 11, 13, 14, 33, 42, 44, 47, 68, 76, 78, 79}

MANIFEST_HEADER = "seq\tclient\tclient_version\tapi_key\tapi_name\tversion\tfile\n"
MAX_FRAME_BYTES = 100 * 1024 * 1024


def api_name(key):
    return API_NAMES.get(key, f"Api{key}")


class Recorder:
    """Decides which frames to keep and writes them; shared by all connections."""

    def __init__(self, out, client, client_version, max_per_version, responses, reset,
                 apis=None):
        self.out = out
        self.apis = apis
        self.client = client
        self.client_version = client_version
        self.max_per_version = max_per_version
        self.responses = responses
        self.lock = threading.Lock()
        self.dir = os.path.join(out, client)
        os.makedirs(self.dir, exist_ok=True)
        self.manifest = os.path.join(out, "MANIFEST.tsv")
        self.counts = {}
        self.metadata_seen = set()
        self.seq = 0
        if reset:
            self._reset()
        self._load_manifest()

    def _reset(self):
        """Forgets this client's earlier fixtures: its files and its manifest lines."""
        for name in os.listdir(self.dir):
            if name.endswith(".bin"):
                os.remove(os.path.join(self.dir, name))
        if os.path.exists(self.manifest):
            with open(self.manifest) as f:
                lines = f.read().splitlines(keepends=True)
            kept = [l for l in lines[1:] if l.split("\t")[1:2] != [self.client]]
            with open(self.manifest, "w") as f:
                f.write(MANIFEST_HEADER + "".join(kept))

    def _load_manifest(self):
        """Continues numbering after fixtures already captured for this client."""
        if not os.path.exists(self.manifest):
            with open(self.manifest, "w") as f:
                f.write(MANIFEST_HEADER)
            return
        with open(self.manifest) as f:
            for line in f.read().splitlines()[1:]:
                cols = line.split("\t")
                if len(cols) < 7:
                    continue
                self.seq = max(self.seq, int(cols[0]))
                if cols[1] == self.client:
                    key = (int(cols[3]), int(cols[5]))
                    self.counts[key] = self.counts.get(key, 0) + 1

    def request(self, frame):
        """Records a request body; returns the file stem for its response, or None."""
        if len(frame) < 8:
            return None
        key, version = struct.unpack(">hh", frame[:4])
        if self.apis is not None and key not in self.apis:
            return None
        with self.lock:
            n = self.counts.get((key, version), 0)
            new_question = self._new_metadata_question(key, frame)
            if (n >= self.max_per_version and key not in KEEP_ALL
                    and not (new_question and n < 4 * self.max_per_version)):
                return None
            self.counts[(key, version)] = n + 1
            self.seq += 1
            stem = f"{api_name(key)}-v{version}-{n + 1}"
            with open(os.path.join(self.dir, stem + ".bin"), "wb") as f:
                f.write(frame)
            with open(self.manifest, "a") as f:
                f.write(f"{self.seq}\t{self.client}\t{self.client_version}\t{key}\t"
                        f"{api_name(key)}\t{version}\t{self.client}/{stem}.bin\n")
            print(f"captured {self.client}/{stem}.bin ({len(frame)} bytes)", file=sys.stderr)
            return stem if self.responses else None

    def _new_metadata_question(self, key, frame):
        """Metadata asking about topics not asked about before is kept past the cap: its
        response is where the replay learns topic ids (Fetch v13+ names topics by id)."""
        body = frame[:4] + frame[8:]  # without the correlation id
        new = key == 3 and body not in self.metadata_seen
        if key == 3:
            self.metadata_seen.add(body)
        return new

    def response(self, stem, frame):
        with open(os.path.join(self.dir, stem + ".resp.bin"), "wb") as f:
            f.write(frame)


def read_frame(sock):
    """One frame body, or None at end of stream."""
    header = read_exact(sock, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">i", header)
    if size < 0 or size > MAX_FRAME_BYTES:
        raise ValueError(f"frame size {size} out of range")
    return read_exact(sock, size)


def read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf.extend(chunk)
    return bytes(buf)


def send_frame(sock, body):
    sock.sendall(struct.pack(">i", len(body)) + body)


def proxy(client_sock, upstream, recorder):
    """Forwards one connection, recording its requests (and their responses)."""
    try:
        server_sock = socket.create_connection(upstream)
    except OSError as e:
        print(f"cannot reach upstream {upstream}: {e}", file=sys.stderr)
        client_sock.close()
        return
    # Correlation id -> response file stem; responses come back in request order.
    pending = {}
    pending_lock = threading.Lock()

    def responses():
        try:
            while True:
                frame = read_frame(server_sock)
                if frame is None:
                    break
                if len(frame) >= 4:
                    (corr,) = struct.unpack(">i", frame[:4])
                    with pending_lock:
                        stem = pending.pop(corr, None)
                    if stem:
                        recorder.response(stem, frame)
                send_frame(client_sock, frame)
        except (OSError, ValueError):
            pass
        finally:
            shutdown(client_sock)

    threading.Thread(target=responses, daemon=True).start()
    try:
        while True:
            frame = read_frame(client_sock)
            if frame is None:
                break
            stem = recorder.request(frame)
            if stem and len(frame) >= 8:
                (corr,) = struct.unpack(">i", frame[4:8])
                with pending_lock:
                    pending[corr] = stem
            send_frame(server_sock, frame)
    except (OSError, ValueError):
        pass
    finally:
        shutdown(server_sock)


def shutdown(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def parse_addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, help="host:port the client connects to")
    p.add_argument("--upstream", required=True, help="host:port of the broker")
    p.add_argument("--client", required=True, help="fixture directory name, e.g. librdkafka")
    p.add_argument("--client-version", default="unknown")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    p.add_argument("--max-per-version", type=int, default=3)
    p.add_argument("--no-responses", action="store_true", help="keep only requests")
    p.add_argument("--apis", help="comma-separated api keys to keep (default: all)")
    p.add_argument("--reset", action="store_true",
                   help="delete this client's earlier fixtures and manifest lines first")
    args = p.parse_args()

    recorder = Recorder(args.out, args.client, args.client_version, args.max_per_version,
                        not args.no_responses, args.reset,
                        {int(k) for k in args.apis.split(",")} if args.apis else None)
    listener = socket.create_server(parse_addr(args.listen), reuse_port=False)
    upstream = parse_addr(args.upstream)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"proxy {args.listen} -> {args.upstream}, recording {args.client}", file=sys.stderr)
    try:
        while True:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=proxy, args=(conn, upstream, recorder), daemon=True).start()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
