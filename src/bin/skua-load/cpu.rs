//! CPU time of this process and of the broker, each counted on its own, so a run can say
//! how much of the machine each side used.

use std::time::Duration;

/// User + system CPU this process has used so far.
pub fn own() -> Duration {
    // SAFETY: getrusage writes only into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// User + system CPU of process `pid` (the broker) from /proc/PID/stat, or None when it
/// cannot be read.
pub fn of_pid(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its closing ')' are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

/// User + system CPU of every process in `pids` together; None when there are none or
/// one cannot be read.
fn of_pids(pids: &[u32]) -> Option<Duration> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|pid| of_pid(*pid)).sum()
}

/// CPU used between two readings, by this process and by the brokers (summed).
#[derive(Clone)]
pub struct Meter {
    pids: Vec<u32>,
    client: Duration,
    broker: Option<Duration>,
}

impl Meter {
    pub fn start(pids: &[u32]) -> Meter {
        Meter {
            pids: pids.to_vec(),
            client: own(),
            broker: of_pids(pids),
        }
    }

    /// (client, brokers) CPU since `start`.
    pub fn elapsed(&self) -> (Duration, Option<Duration>) {
        let broker = match (self.broker, of_pids(&self.pids)) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        (own().saturating_sub(self.client), broker)
    }
}
