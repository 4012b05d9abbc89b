//! The names a controller's requests carry, checked before the broker acts on them.
//!
//! A controller (skua's or Apache Kafka's) passes on whatever topic names ZooKeeper
//! holds, and anyone who can write to ZooKeeper or reach the broker's port can put any
//! string there. A name that is not a legal topic name (Kafka's `Topic.validate`), or a
//! negative partition index, never becomes a hosted partition, a cached topic or a path:
//! LeaderAndIsr and StopReplica answer it INVALID_TOPIC_EXCEPTION, UpdateMetadata
//! leaves it out, each with an error line naming it.

use std::borrow::Cow;

use crate::controller::topic_name;

/// Characters of a name a log line shows: a legal name whole, an attacker's 64 KiB
/// name as its start and its length.
const SHOWN_CHARS: usize = 300;

/// Why `topic`'s partition `partition` is not one the broker may host; `Ok` when it is.
/// The reason names the topic, cut to a readable length.
pub(super) fn check_partition(topic: &str, partition: i32) -> Result<(), String> {
    if topic.len() > topic_name::MAX_NAME_LENGTH {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {} characters, topic name: {}",
            topic_name::MAX_NAME_LENGTH,
            shown(topic)
        ));
    }
    topic_name::validate(topic)?;
    if partition < 0 {
        return Err(format!(
            "partition {partition} of topic {topic} has a negative index"
        ));
    }
    Ok(())
}

/// `name` as a log line shows it: cut after [`SHOWN_CHARS`] characters, with its length.
pub(super) fn shown(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(SHOWN_CHARS) {
        None => Cow::Borrowed(name),
        Some((cut, _)) => Cow::Owned(format!("{}... ({} bytes)", &name[..cut], name.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illegal_names_and_indexes_are_refused_with_a_short_reason() {
        assert!(check_partition("orders", 0).is_ok());
        let long = "L".repeat(70_000);
        let why = check_partition(&long, 0).unwrap_err();
        assert!(why.len() < 500 && why.contains("(70000 bytes)"), "{why}");
        for (topic, p) in [
            ("../outside/escaped", 0),
            ("/tmp/victim", 7),
            ("..", 0),
            ("", 0),
            ("t", -1),
        ] {
            assert!(check_partition(topic, p).is_err(), "{topic}-{p}");
        }
    }
}
