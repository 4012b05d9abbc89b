//! Whether a connection's client has gone: set once by the reader (it saw the close),
//! read and awaited by the writer. Part of the connection's [`super::link::Link`].
//!
//! Two ways to go. A clean close (the client's FIN, after the last request it sent)
//! leaves the requests already read to run in order, their answers going nowhere, as
//! Kafka's do: Kafka reads a connection's requests one at a time and handles each before
//! it reads the next, so what a client sent before closing is handled, a LeaveGroup
//! queued behind a JoinGroup still waiting for its rebalance included. A reset, or a
//! close seen while the connection was muted with too much in flight, abandons them: the
//! queued requests that expect an answer are dropped unrun.
//!
//! A flag and one `Notify` rather than a `watch` channel: every connection has one, and a
//! watch channel's shared state (eight wait lists for its receivers) is ten times larger.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct ClientGone {
    gone: AtomicBool,
    /// The requests it left behind unanswered are not to run (see the module's note).
    abandoned: AtomicBool,
    changed: Notify,
}

impl ClientGone {
    /// Records that the client closed the connection cleanly, waking the writer if it
    /// waits for that: nothing more is written, but what was read still runs.
    pub fn set(&self) {
        self.gone.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Records that the client reset the connection, or left while it was muted: the
    /// requests it left that expect an answer are dropped unrun.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        self.set();
    }

    pub fn is_set(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// Resolves once the client has gone; never if the reader ends without seeing it go.
    pub async fn wait(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before checking, so a `set` in between is not missed.
            changed.as_mut().enable();
            if self.is_set() {
                return;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiting_writer_is_woken_when_the_client_goes() {
        let gone = Arc::new(ClientGone::default());
        let waiting = tokio::spawn({
            let gone = gone.clone();
            async move { gone.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "the client is still there");
        gone.set();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken by set")
            .unwrap();
        assert!(gone.is_set());
        // Once set, waiting returns at once.
        tokio::time::timeout(Duration::from_secs(5), gone.wait())
            .await
            .expect("already gone");
    }
}
