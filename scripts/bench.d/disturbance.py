"""What else the machine did while a benchmark run was timed: CPU used by processes other
than the brokers and the load generator, the hypervisor's steal time and the load average,
so a run made on a busy machine can be told from one made on a quiet one.

Broker CPU is read from each process's CPU-time clock (clock_getcpuclockid): nanoseconds
of every live and exited thread, where /proc/PID/stat has 10 ms ticks."""

import ctypes
import os
import resource
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
_libc = ctypes.CDLL(None, use_errno=True)


def process_cpu_s(pid):
    """CPU seconds process `pid` has used (all its threads, exited ones too); None if gone."""
    clock = ctypes.c_int()
    if _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        return None
    try:
        return time.clock_gettime(clock.value)
    except OSError:
        return None


def machine_cpu_s():
    """(busy, steal) CPU seconds of the whole machine so far, from /proc/stat: busy is user,
    nice, system, irq and softirq time of every core (guest time is inside user)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


def children_cpu_s():
    """CPU seconds of this process's children that have been waited for (the load generator)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def own_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Watch:
    """Started before a run and read after it: the run's wall time, each broker's CPU, the
    load generator's, everything else's and the steal, as shares of the machine."""

    def __init__(self, pids):
        self.pids = dict(pids)  # name -> pid
        self.start = self._sample()

    def _sample(self):
        busy, steal = machine_cpu_s()
        return {"wall": time.monotonic(), "busy": busy, "steal": steal,
                "client": children_cpu_s(), "self": own_cpu_s(),
                "pids": {name: process_cpu_s(pid) for name, pid in self.pids.items()}}

    def stop(self):
        a, b = self.start, self._sample()
        wall = max(b["wall"] - a["wall"], 1e-9)
        capacity = wall * (os.cpu_count() or 1)
        cpu = {name: (b["pids"][name] or 0) - (a["pids"][name] or 0) for name in self.pids}
        client = b["client"] - a["client"]
        # Whatever the machine did besides the brokers, the load generator and this script.
        # Kernel threads working for a broker (writeback, ksoftirqd) land here too, so this
        # is an upper bound on the disturbance from outside.
        other = (b["busy"] - a["busy"]) - sum(cpu.values()) - client - (b["self"] - a["self"])
        return {"wall_s": wall, "cpu_s": cpu, "client_cpu_s": client,
                "other_share": max(other, 0.0) / capacity,
                "steal_share": (b["steal"] - a["steal"]) / capacity,
                "load1": os.getloadavg()[0]}
