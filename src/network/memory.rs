//! Bounds on the memory held by requests read but not yet answered.
//!
//! Two pools, each a count of bytes: one for the whole broker (`queued.max.request.bytes`)
//! and one per connection (its read-ahead). A connection reserves a frame's size in both
//! before it reads the frame's body, adds what the decoded request holds once it is
//! decoded, and gives it all back when the request is answered (or dropped). While a pool
//! is full the connection waits before reading more: it is muted, and the client's bytes
//! wait in the socket buffers, where they cost skua nothing.
//!
//! Like Kafka's memory pool, a reservation is granted whenever the pool is below its
//! capacity, even if the request is larger than what is left: a request as large as
//! `socket.request.max.bytes` is then always readable, and the pool overshoots by at most
//! one request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A count of bytes held, bounded by a capacity (or unbounded).
#[derive(Debug)]
pub struct MemoryPool {
    /// `None`: unbounded (`queued.max.request.bytes` <= 0, as in Kafka); still counted.
    capacity: Option<usize>,
    used: AtomicUsize,
    freed: Notify,
}

impl MemoryPool {
    pub fn new(capacity: Option<usize>) -> Arc<MemoryPool> {
        Arc::new(MemoryPool {
            capacity,
            used: AtomicUsize::new(0),
            freed: Notify::new(),
        })
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Takes `bytes` if the pool is below its capacity.
    pub fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        let mut current = self.used.load(Ordering::Acquire);
        loop {
            if self.capacity.is_some_and(|cap| current >= cap) {
                return None;
            }
            match self.used.compare_exchange_weak(
                current,
                current.saturating_add(bytes),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(self.held(bytes)),
                Err(now) => current = now,
            }
        }
    }

    /// Waits until the pool is below its capacity, then takes `bytes`.
    pub async fn reserve(self: &Arc<Self>, bytes: usize) -> Reservation {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before trying, so a release in between is not missed.
            freed.as_mut().enable();
            if let Some(r) = self.try_reserve(bytes) {
                return r;
            }
            freed.await;
        }
    }

    fn held(self: &Arc<Self>, bytes: usize) -> Reservation {
        Reservation {
            pool: self.clone(),
            bytes,
        }
    }

    fn release(&self, bytes: usize) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }
}

/// Bytes held in a pool until dropped.
#[derive(Debug)]
pub struct Reservation {
    pool: Arc<MemoryPool>,
    bytes: usize,
}

impl Reservation {
    /// Adds `bytes` at once, whatever the pool holds: memory already allocated is counted,
    /// not asked for.
    pub fn grow(&mut self, bytes: usize) {
        self.pool.used.fetch_add(bytes, Ordering::AcqRel);
        self.bytes += bytes;
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.release(self.bytes);
    }
}

/// A request's memory, held in its connection's pool and the broker's until it is answered.
#[derive(Debug)]
pub struct RequestMemory {
    connection: Reservation,
    broker: Reservation,
}

impl RequestMemory {
    /// Adds what the decoded request holds beyond its frame.
    pub fn grow(&mut self, bytes: usize) {
        self.connection.grow(bytes);
        self.broker.grow(bytes);
    }

    pub fn bytes(&self) -> usize {
        self.broker.bytes()
    }

    /// What this request holds in its connection's pool.
    pub fn connection_bytes(&self) -> usize {
        self.connection.bytes()
    }
}

/// The two pools a connection reserves from.
#[derive(Clone, Debug)]
pub struct ConnectionMemory {
    pub connection: Arc<MemoryPool>,
    pub broker: Arc<MemoryPool>,
}

impl ConnectionMemory {
    /// Reserves `bytes` in both pools without waiting, or `None` if either is full.
    pub fn try_reserve(&self, bytes: usize) -> Option<RequestMemory> {
        let connection = self.connection.try_reserve(bytes)?;
        let broker = self.broker.try_reserve(bytes)?;
        Some(RequestMemory { connection, broker })
    }

    /// Reserves `bytes` in the connection's pool, then the broker's, waiting for each.
    pub async fn reserve(self, bytes: usize) -> RequestMemory {
        let connection = self.connection.reserve(bytes).await;
        let broker = self.broker.reserve(bytes).await;
        RequestMemory { connection, broker }
    }

    /// Whether nothing read on this connection is waiting to be answered.
    pub fn idle(&self) -> bool {
        self.connection.used() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_pool_waits_until_memory_is_given_back() {
        let pool = MemoryPool::new(Some(100));
        let big = pool
            .try_reserve(150)
            .expect("below capacity: granted, overshooting");
        assert_eq!(pool.used(), 150);
        assert!(pool.try_reserve(1).is_none(), "full");
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.reserve(10).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "muted while the pool is full");
        drop(big);
        let r = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when memory is freed")
            .unwrap();
        assert_eq!((r.bytes(), pool.used()), (10, 10));
        drop(r);
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn growth_is_counted_and_returned() {
        let memory = ConnectionMemory {
            connection: MemoryPool::new(Some(10)),
            broker: MemoryPool::new(None),
        };
        let mut r = memory.try_reserve(8).unwrap();
        r.grow(100);
        assert_eq!((memory.connection.used(), memory.broker.used()), (108, 108));
        assert!(
            memory.try_reserve(1).is_none(),
            "the connection's pool is full"
        );
        assert!(!memory.idle());
        drop(r);
        assert!(memory.idle());
        assert_eq!(memory.broker.used(), 0);
    }
}
