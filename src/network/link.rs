//! What a connection's reader, its writer and its listener share, in one allocation: the
//! queue of requests waiting for the writer, whether the client has gone, when the
//! connection last read or answered, and the listener's word to the reader (stop, or check
//! whether it is idle).
//!
//! The listener speaks to an idle reader through the link rather than each reader keeping
//! its own idle timer and shutdown watch: an idle connection then waits on its socket and
//! one `Notify`, and the listener's sweep (see [`super::server`]) finds the connections
//! idle past `connections.max.idle.ms` from their last read or write, as Kafka's selector
//! does.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::dispatch::Job;
use super::gone::ClientGone;
use super::queue::{Queue, Refused};

pub struct Link {
    jobs: Queue<Box<Job>>,
    pub gone: ClientGone,
    /// One of `RUNNING`, `CHECK_IDLE`, `STOP`.
    control: AtomicU8,
    /// Woken when `control` changes; the reader is the one waiter.
    control_changed: Notify,
    opened: Instant,
    /// Milliseconds from `opened` to the last read or the last answer written.
    last_active_ms: AtomicU64,
}

const RUNNING: u8 = 0;
const CHECK_IDLE: u8 = 1;
const STOP: u8 = 2;

/// What the listener asked of the reader.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// Stop reading: the broker or the listener is shutting down.
    Stop,
    /// The last activity is older than the idle limit: close if nothing awaits an answer.
    CheckIdle,
}

impl Link {
    /// A new connection's link, with a queue of `max_in_flight` requests; the reader's and
    /// the writer's ends of the queue, and the link itself for the listener.
    pub fn open(max_in_flight: usize) -> (JobSender, JobReceiver, Arc<Link>) {
        let link = Arc::new(Link {
            jobs: Queue::new(max_in_flight),
            gone: ClientGone::default(),
            control: AtomicU8::new(RUNNING),
            control_changed: Notify::new(),
            opened: Instant::now(),
            last_active_ms: AtomicU64::new(0),
        });
        (JobSender(link.clone()), JobReceiver(link.clone()), link)
    }

    /// Tells the reader to stop reading. Lasts: a reader that is not waiting now sees it at
    /// its next wait.
    pub fn stop(&self) {
        self.control.store(STOP, Ordering::Release);
        self.control_changed.notify_waiters();
    }

    /// Asks the reader to close the connection if it is idle (unless it was told to stop).
    pub fn check_idle(&self) {
        if self
            .control
            .compare_exchange(RUNNING, CHECK_IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.control_changed.notify_waiters();
        }
    }

    /// Resolves once the listener asks something of the reader; an idle check is answered
    /// by being returned.
    pub async fn asked(&self) -> Asked {
        loop {
            let changed = self.control_changed.notified();
            tokio::pin!(changed);
            // Registered before checking, so a change in between is not missed.
            changed.as_mut().enable();
            match self.control.load(Ordering::Acquire) {
                STOP => return Asked::Stop,
                CHECK_IDLE => {
                    let _ = self.control.compare_exchange(
                        CHECK_IDLE,
                        RUNNING,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    return Asked::CheckIdle;
                }
                _ => changed.await,
            }
        }
    }

    /// Resolves once the reader is told to stop; idle checks are ignored (a muted reader
    /// has requests waiting to be answered, so it is not idle).
    pub async fn stopped(&self) {
        while self.asked().await != Asked::Stop {}
    }

    /// Records that the connection has just read a request or written answers.
    pub fn touch(&self) {
        let now = self.opened.elapsed().as_millis() as u64;
        self.last_active_ms.store(now, Ordering::Relaxed);
    }

    /// How long since the connection last read or wrote (or since it opened).
    pub fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }
}

/// The reader's end of the request queue; dropping it tells the writer no more will come.
pub struct JobSender(Arc<Link>);

impl JobSender {
    pub fn link(&self) -> &Link {
        &self.0
    }

    pub fn try_send(&self, job: Box<Job>) -> Result<(), Refused<Box<Job>>> {
        self.0.jobs.try_push(job)
    }

    /// Queues `job` once there is room; `Err` if the writer has ended.
    pub async fn send(&self, job: Box<Job>) -> Result<(), Box<Job>> {
        self.0.jobs.push(job).await
    }
}

impl Drop for JobSender {
    fn drop(&mut self) {
        self.0.jobs.close_pushing();
    }
}

/// The writer's end of the request queue; dropping it drops what is still queued.
pub struct JobReceiver(Arc<Link>);

impl JobReceiver {
    pub fn link(&self) -> &Link {
        &self.0
    }

    /// The next request, waiting for one; `None` once the reader has ended and every
    /// request it queued was taken.
    pub async fn recv(&self) -> Option<Box<Job>> {
        self.0.jobs.pop().await
    }

    pub fn try_recv(&self) -> Option<Box<Job>> {
        self.0.jobs.try_pop()
    }
}

impl Drop for JobReceiver {
    fn drop(&mut self) {
        self.0.jobs.close_popping();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_outlasts_idle_checks_and_reaches_a_reader_that_was_not_waiting() {
        let (_jobs, _pending, link) = Link::open(4);
        link.check_idle();
        assert_eq!(link.asked().await, Asked::CheckIdle);
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.asked().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "an idle check is answered once");
        link.stop();
        let asked = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken by the stop")
            .unwrap();
        assert_eq!(asked, Asked::Stop);
        link.check_idle();
        tokio::time::timeout(Duration::from_secs(5), link.stopped())
            .await
            .expect("still stopped, whatever was asked since");
    }

    #[tokio::test]
    async fn idle_time_counts_from_the_last_activity() {
        let (_jobs, _pending, link) = Link::open(4);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(link.idle_for() >= Duration::from_millis(50));
        link.touch();
        assert!(link.idle_for() < Duration::from_millis(50));
    }
}
