//! File descriptor headroom. Each segment keeps its `.log` open and each connection holds
//! a socket, so a broker asked for ever more partitions would run into `RLIMIT_NOFILE`;
//! worse, a restart must reopen every segment at once, so a broker that used its last
//! descriptor for a new log might not start again. New logs are therefore refused while
//! fewer than `reserve` descriptors are left: the client gets KAFKA_STORAGE_ERROR, the log
//! says why, and the reserve covers what a restart needs beyond the running broker's.

use std::io;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::LogError;

/// Descriptors kept free for connections, checkpoints and restarts: 1/20 of the limit,
/// at least 64.
pub fn reserve(limit: u64) -> u64 {
    (limit / 20).max(64)
}

/// Descriptors one new log may open, for the estimate between two counts (its `.log`,
/// with room to spare).
const FDS_PER_CHECK: u64 = 4;
/// The longest an estimate stands in for a count.
const COUNT_MAX_AGE: Duration = Duration::from_secs(1);

/// The last count of open descriptors: when, how many, the checks passed since and the
/// soft limit read with it (process-wide). The limit is read again only with a count, not
/// on every check, as it changes only when the process raises it at start.
static LAST_COUNT: Mutex<Option<LastCount>> = Mutex::new(None);

struct LastCount {
    at: Instant,
    in_use: u64,
    checks: u64,
    limit: u64,
}

/// Errors when opening a new log would leave fewer than `reserve` descriptors free.
///
/// Counting means listing /proc/self/fd, whose length grows with the logs: counted on
/// every check, creating n partitions cost O(n²). So a count stands for up to a second
/// while far from the limit, each check since assumed to have opened `FDS_PER_CHECK`
/// descriptors; close to the limit every check counts.
pub fn check_headroom() -> Result<(), LogError> {
    {
        let mut last = LAST_COUNT.lock();
        if let Some(count) = last.as_mut() {
            count.checks += 1;
            let estimate = count.in_use + count.checks * FDS_PER_CHECK;
            if count.at.elapsed() < COUNT_MAX_AGE
                && estimate + 2 * reserve(count.limit) <= count.limit
            {
                return Ok(());
            }
        }
        *last = None;
    }
    let Some(limit) = soft_limit() else {
        return Ok(());
    };
    let in_use = match open_descriptors() {
        Ok(n) => n,
        // Listing /proc/self/fd needs a descriptor too: none left is the answer.
        Err(e) if super::is_fd_exhaustion(&e) => limit,
        Err(_) => return Ok(()), // no /proc: nothing to measure
    };
    *LAST_COUNT.lock() = Some(LastCount {
        at: Instant::now(),
        in_use,
        checks: 0,
        limit,
    });
    if in_use + reserve(limit) <= limit {
        return Ok(());
    }
    let message = format!(
        "too many open files to create a log: {in_use} of {limit} descriptors in use, \
         {} kept free for connections and restarts (raise `ulimit -n`)",
        reserve(limit)
    );
    tracing::error!("{message}");
    Err(LogError::KafkaStorage(io::Error::other(message)))
}

/// The soft `RLIMIT_NOFILE`, if there is a finite one.
fn soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

fn open_descriptors() -> io::Result<u64> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_a_twentieth_but_at_least_64() {
        assert_eq!(reserve(256), 64);
        assert_eq!(reserve(1024 * 1024), 52_428);
    }

    #[test]
    fn headroom_is_fine_in_a_test_process() {
        check_headroom().unwrap();
        assert!(open_descriptors().unwrap() > 0);
    }
}
