//! A connection's own cache of the authorizer's decisions on its requests, so that a
//! check its requests keep repeating (WRITE on the topic every produce writes to) takes
//! no lock and reads no line other connections write.
//!
//! Kept in the connection's session, which fixes the principal and the host: an entry is
//! keyed by operation and resource alone. It is valid for one generation of the
//! authorizer ([`Authorizer::generation`](super::authorizer::Authorizer::generation)),
//! which every ACL change bumps, so a CreateAcls or DeleteAcls reaches open connections
//! at their next check, as in Kafka (whose authorizer answers from the ACLs in force at
//! each check). The lock is the connection's; a check that finds it taken (another of the
//! connection's requests checking at that instant) asks the authorizer instead of waiting.

use parking_lot::Mutex;

use super::authorizer::Action;
use super::operations::{AclOperation, ResourceType};

/// How many decisions a connection keeps: a producer or consumer asks about a handful of
/// resources; one asking about many (a Metadata request over every topic) replaces the
/// oldest entries.
const CAPACITY: usize = 16;

/// A connection's decisions, for one authorizer generation. Empty when cloned (a
/// re-authenticated session's principal may differ).
#[derive(Default)]
pub struct Decisions(Mutex<Entries>);

impl Clone for Decisions {
    fn clone(&self) -> Decisions {
        Decisions::default()
    }
}

#[derive(Default)]
struct Entries {
    generation: u64,
    entries: Vec<Entry>,
    /// The slot the next decision replaces once the cache is full.
    next: usize,
}

struct Entry {
    operation: AclOperation,
    resource_type: ResourceType,
    name: Box<str>,
    allowed: bool,
}

impl Decisions {
    /// The decision on `action` at the authorizer's `generation`: the one kept, or
    /// `decide`'s, then kept. A kept denial is not answered where the denial is to be
    /// logged (`log_if_denied`): `decide` runs again and logs it, as Kafka logs each.
    pub fn decide(
        &self,
        generation: u64,
        action: &Action<'_>,
        decide: impl FnOnce() -> bool,
    ) -> bool {
        let Some(mut kept) = self.0.try_lock() else {
            return decide();
        };
        if kept.generation != generation {
            kept.generation = generation;
            kept.entries.clear();
            kept.next = 0;
        }
        let found = kept.entries.iter().position(|e| {
            e.operation == action.operation
                && e.resource_type == action.resource_type
                && *e.name == *action.name
        });
        if let Some(i) = found {
            let allowed = kept.entries[i].allowed;
            if allowed || !action.log_if_denied {
                return allowed;
            }
            return decide();
        }
        let allowed = decide();
        let entry = Entry {
            operation: action.operation,
            resource_type: action.resource_type,
            name: action.name.into(),
            allowed,
        };
        if kept.entries.len() < CAPACITY {
            kept.entries.push(entry);
        } else {
            let at = kept.next;
            kept.entries[at] = entry;
            kept.next = (at + 1) % CAPACITY;
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn topic(op: AclOperation, name: &str) -> Action<'_> {
        Action::new(op, ResourceType::Topic, name)
    }

    #[test]
    fn a_decision_is_kept_for_its_generation_only() {
        let d = Decisions::default();
        let asked = Cell::new(0);
        let ask = |answer: bool| {
            asked.set(asked.get() + 1);
            answer
        };
        assert!(d.decide(1, &topic(AclOperation::Write, "t"), || ask(true)));
        assert!(d.decide(1, &topic(AclOperation::Write, "t"), || ask(false)));
        assert_eq!(asked.get(), 1, "answered from the cache");
        // Another operation, another resource: asked.
        assert!(!d.decide(1, &topic(AclOperation::Read, "t"), || ask(false)));
        assert!(!d.decide(1, &topic(AclOperation::Write, "u"), || ask(false)));
        assert_eq!(asked.get(), 3);
        // A new generation (an ACL change): asked again, and the new answer kept.
        assert!(!d.decide(2, &topic(AclOperation::Write, "t"), || ask(false)));
        assert_eq!(asked.get(), 4);
        assert!(d.decide(3, &topic(AclOperation::Write, "t"), || ask(true)));
        assert!(d.decide(3, &topic(AclOperation::Write, "t"), || ask(false)));
        assert_eq!(asked.get(), 5);
    }

    #[test]
    fn a_denial_to_be_logged_is_asked_again_and_a_clone_starts_empty() {
        let d = Decisions::default();
        let asked = Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            false
        };
        let quiet = Action {
            log_if_denied: false,
            ..topic(AclOperation::Describe, "t")
        };
        assert!(!d.decide(1, &quiet, ask));
        assert!(!d.decide(1, &quiet, ask));
        assert_eq!(asked.get(), 1);
        assert!(!d.decide(1, &topic(AclOperation::Describe, "t"), ask));
        assert_eq!(
            asked.get(),
            2,
            "a logged denial is decided (and logged) again"
        );
        let fresh = d.clone();
        assert!(!fresh.decide(1, &quiet, ask));
        assert_eq!(asked.get(), 3);
    }

    #[test]
    fn past_its_capacity_the_oldest_decisions_are_replaced() {
        let d = Decisions::default();
        let names: Vec<String> = (0..CAPACITY + 1).map(|i| format!("t{i}")).collect();
        for n in &names {
            d.decide(1, &topic(AclOperation::Write, n), || true);
        }
        assert_eq!(d.0.lock().entries.len(), CAPACITY);
        let asked = Cell::new(false);
        // t0 was replaced by the last; t1 is still kept.
        d.decide(1, &topic(AclOperation::Write, "t1"), || {
            asked.set(true);
            true
        });
        assert!(!asked.get());
        d.decide(1, &topic(AclOperation::Write, "t0"), || {
            asked.set(true);
            true
        });
        assert!(asked.get());
    }
}
