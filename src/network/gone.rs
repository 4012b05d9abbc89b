//! Whether a connection's client has gone: set once by the reader (it saw the close),
//! read and awaited by the writer. Part of the connection's [`super::link::Link`].
//!
//! A flag and one `Notify` rather than a `watch` channel: every connection has one, and a
//! watch channel's shared state (eight wait lists for its receivers) is ten times larger.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct ClientGone {
    gone: AtomicBool,
    changed: Notify,
}

impl ClientGone {
    /// Records that the client has gone, waking the writer if it waits for that.
    pub fn set(&self) {
        self.gone.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.gone.load(Ordering::Acquire)
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
