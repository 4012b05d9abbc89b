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

/// CPU time of process `pid` (the broker), every thread of it, or None when it cannot be
/// read (no such process).
///
/// Read from the process's CPU-time clock (clock_getcpuclockid): the kernel sums the
/// scheduler's nanosecond runtime of every live thread and of every thread that has
/// exited, the same total /proc/PID/stat's utime + stime is scaled to, but without that
/// file's 10 ms clock ticks, which quantise a CPU reading of a second or two by ±25 %.
/// Summing /proc/PID/task/*/schedstat instead would miss threads that exited during the
/// run. Children the process has reaped are not counted (neither broker forks).
pub fn of_pid(pid: u32) -> Option<Duration> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes only the clock id it is given a pointer to.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    // SAFETY: clock_gettime writes only into the zeroed timespec it is given.
    let now = unsafe {
        let mut now: libc::timespec = std::mem::zeroed();
        (libc::clock_gettime(clock, &mut now) == 0).then_some(now)
    }?;
    Some(Duration::new(
        u64::try_from(now.tv_sec).ok()?,
        u32::try_from(now.tv_nsec).ok()?,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU time the calling thread has used.
    fn thread_cpu() -> Duration {
        // SAFETY: clock_gettime writes only into the zeroed timespec it is given.
        let now = unsafe {
            let mut now: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now);
            now
        };
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    /// Threads that burn CPU and exit before the second reading are still counted, as a
    /// broker's short-lived threads are (a sum over /proc/PID/task would lose them).
    #[test]
    fn counts_threads_that_exited() {
        let pid = std::process::id();
        let before = of_pid(pid).expect("this process's CPU clock");
        let burned: Duration = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    let start = thread_cpu();
                    while thread_cpu() - start < Duration::from_millis(30) {}
                    thread_cpu() - start
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("burner thread"))
            .sum();
        let after = of_pid(pid).expect("this process's CPU clock");
        assert!(
            after - before >= burned,
            "{burned:?} burned by exited threads, clock moved {:?}",
            after - before
        );
    }

    #[test]
    fn gone_process() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait true");
        assert_eq!(of_pid(pid), None);
    }
}
