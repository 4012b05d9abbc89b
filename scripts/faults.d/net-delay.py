"""A slow link for scripts/faults.d/net: reads every frame tc redirects to the tap device
NAME and writes it back (into the bridge it is a port of) DELAY_MS +- JITTER_MS later.
Frames overtake each other when their delays do, as on a jittery link. Runs until killed;
the tap device goes with it.

    net-delay.py NAME DELAY_MS JITTER_MS
"""
import fcntl
import heapq
import os
import random
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def main():
    name, delay_ms, jitter_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    due = []  # (when, sequence, frame)
    seq = 0
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else None
        readable, _, _ = select.select([fd], [], [], timeout)
        if readable:
            frame = os.read(fd, 65536)
            delay = (delay_ms + random.uniform(-jitter_ms, jitter_ms)) / 1000
            heapq.heappush(due, (time.monotonic() + max(0.0, delay), seq, frame))
            seq += 1
        now = time.monotonic()
        while due and due[0][0] <= now:
            try:
                os.write(fd, heapq.heappop(due)[2])
            except OSError:
                pass  # a frame the bridge would not take is lost, as on a real link


if __name__ == "__main__":
    main()
