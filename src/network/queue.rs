//! A bounded queue between one pusher (a connection's reader) and one popper (its writer),
//! kept inside the connection's [`super::link::Link`].
//!
//! tokio's `mpsc` channel would do, but it costs every connection two allocations whatever
//! it holds: its shared state (about 512 bytes, the sender's and receiver's parts padded to
//! a cache line each) and a first block of 32 slots. This queue is a `VecDeque`, empty
//! until a request arrives, and two `Notify`s; each side has one waiter at most.

use std::collections::VecDeque;

use parking_lot::Mutex;
use tokio::sync::Notify;

pub struct Queue<T> {
    capacity: usize,
    state: Mutex<State<T>>,
    /// The popper waits here for an item or the pusher's end.
    pushed: Notify,
    /// The pusher waits here for room or the popper's end.
    popped: Notify,
}

struct State<T> {
    items: VecDeque<T>,
    pusher_done: bool,
    popper_done: bool,
}

/// Why an item was not queued; the item comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused<T> {
    Full(T),
    /// The popper has ended: nothing pushed now would be popped.
    Closed(T),
}

impl<T> Queue<T> {
    /// A queue of at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Queue<T> {
        Queue {
            capacity: capacity.max(1),
            state: Mutex::new(State {
                items: VecDeque::new(),
                pusher_done: false,
                popper_done: false,
            }),
            pushed: Notify::new(),
            popped: Notify::new(),
        }
    }

    pub fn try_push(&self, item: T) -> Result<(), Refused<T>> {
        let mut state = self.state.lock();
        if state.popper_done {
            return Err(Refused::Closed(item));
        }
        if state.items.len() >= self.capacity {
            return Err(Refused::Full(item));
        }
        state.items.push_back(item);
        drop(state);
        self.pushed.notify_one();
        Ok(())
    }

    /// Pushes once there is room; gives the item back if the popper has ended.
    pub async fn push(&self, mut item: T) -> Result<(), T> {
        loop {
            let popped = self.popped.notified();
            tokio::pin!(popped);
            // Registered before trying, so a pop in between is not missed.
            popped.as_mut().enable();
            match self.try_push(item) {
                Ok(()) => return Ok(()),
                Err(Refused::Closed(back)) => return Err(back),
                Err(Refused::Full(back)) => item = back,
            }
            popped.await;
        }
    }

    pub fn try_pop(&self) -> Option<T> {
        let item = self.state.lock().items.pop_front();
        if item.is_some() {
            self.popped.notify_one();
        }
        item
    }

    /// The next item, waiting for one; `None` once the pusher has ended and all it pushed
    /// was popped.
    pub async fn pop(&self) -> Option<T> {
        loop {
            let pushed = self.pushed.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            {
                let mut state = self.state.lock();
                if let Some(item) = state.items.pop_front() {
                    drop(state);
                    self.popped.notify_one();
                    return Some(item);
                }
                if state.pusher_done {
                    return None;
                }
            }
            pushed.await;
        }
    }

    /// The pusher's end: the popper gets what was pushed, then `None`.
    pub fn close_pushing(&self) {
        self.state.lock().pusher_done = true;
        self.pushed.notify_one();
    }

    /// The popper's end: what is queued is dropped (with the memory it holds) and further
    /// pushes are refused.
    pub fn close_popping(&self) {
        let dropped = {
            let mut state = self.state.lock();
            state.popper_done = true;
            std::mem::take(&mut state.items)
        };
        drop(dropped);
        self.popped.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn items_come_out_in_order_and_a_full_queue_waits_for_a_pop() {
        let q = Arc::new(Queue::new(2));
        q.try_push(1).unwrap();
        q.try_push(2).unwrap();
        assert_eq!(q.try_push(3), Err(Refused::Full(3)));
        let pushing = tokio::spawn({
            let q = q.clone();
            async move { q.push(3).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!pushing.is_finished(), "no room yet");
        assert_eq!(q.pop().await, Some(1));
        tokio::time::timeout(Duration::from_secs(5), pushing)
            .await
            .expect("woken by the pop")
            .unwrap()
            .unwrap();
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.try_pop(), Some(3));
        assert_eq!(q.try_pop(), None);
    }

    #[tokio::test]
    async fn the_popper_gets_what_was_pushed_before_the_pusher_ended() {
        let q = Arc::new(Queue::new(4));
        let popping = tokio::spawn({
            let q = q.clone();
            async move {
                let mut got = Vec::new();
                while let Some(i) = q.pop().await {
                    got.push(i);
                }
                got
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.try_push(7).unwrap();
        q.try_push(8).unwrap();
        q.close_pushing();
        let got = tokio::time::timeout(Duration::from_secs(5), popping)
            .await
            .expect("the popper ends")
            .unwrap();
        assert_eq!(got, vec![7, 8]);
    }

    #[tokio::test]
    async fn the_popper_ending_drops_what_is_queued_and_wakes_a_waiting_pusher() {
        let item = Arc::new(());
        let q = Arc::new(Queue::new(1));
        q.try_push(item.clone()).unwrap();
        let pushing = tokio::spawn({
            let (q, item) = (q.clone(), item.clone());
            async move { q.push(item).await.is_err() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.close_popping();
        let refused = tokio::time::timeout(Duration::from_secs(5), pushing)
            .await
            .expect("woken by the end")
            .unwrap();
        assert!(refused, "nobody pops any more");
        assert_eq!(Arc::strong_count(&item), 1, "the queued item was dropped");
        assert!(matches!(q.try_push(item), Err(Refused::Closed(_))));
    }
}
