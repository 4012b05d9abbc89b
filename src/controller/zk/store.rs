//! The controller's reads and writes of Kafka's znodes (the parts of Kafka's
//! `KafkaZkClient` the controller uses). Every write that changes cluster state is a
//! multi-op checking `/controller_epoch`'s version, so a controller that lost its
//! election (and whose epoch znode moved on) changes nothing: the write fails whole with
//! `ZkError::Fenced`.

use std::collections::BTreeMap;

use futures::future::join_all;

use super::context::{Leadership, LiveBroker, TopicPartition};
use super::leader_and_isr::LeaderAndIsr;
use crate::zk::session::{Op, ZkError, ZkSession};
use crate::zk::znodes::{
    self, paths, BrokerRegistration, LeaderIsrAndControllerEpoch, TopicAssignment,
};

/// The fence every controller write carries: `/controller_epoch` at this version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub controller_epoch: i32,
    pub epoch_zk_version: i32,
}

/// Every registered broker with its epoch; a registration that does not parse is
/// skipped with a log line (Kafka would fail the whole read; one bad znode should not
/// stop a controller).
pub async fn read_brokers(s: &ZkSession) -> Result<BTreeMap<i32, LiveBroker>, ZkError> {
    let ids = s.children(paths::BROKER_IDS).await?.unwrap_or_default();
    let reads = ids.iter().map(|id| async move {
        let parsed: Option<i32> = id.parse().ok();
        (parsed, s.get(&format!("{}/{id}", paths::BROKER_IDS)).await)
    });
    let mut out = BTreeMap::new();
    for (id, read) in join_all(reads).await {
        let Some(id) = id else { continue };
        let Some((data, stat)) = read? else { continue };
        match znodes::decode::<BrokerRegistration>(&data)
            .ok()
            .and_then(|r| LiveBroker::from_registration(id, stat.czxid, &r))
        {
            Some(b) => {
                out.insert(id, b);
            }
            None => tracing::warn!(broker = id, "unreadable broker registration; ignored"),
        }
    }
    Ok(out)
}

/// The legal topic names under `/brokers/topics` (see `znode_checks`).
pub async fn read_topic_names(s: &ZkSession) -> Result<Vec<String>, ZkError> {
    let names = s.children(paths::TOPICS).await?.unwrap_or_default();
    Ok(super::znode_checks::legal_topic_names(names))
}

/// A topic's assignment znode and its version.
pub async fn read_assignment(
    s: &ZkSession,
    topic: &str,
) -> Result<Option<(TopicAssignment, i32)>, ZkError> {
    let Some((data, stat)) = s.get(&paths::topic(topic)).await? else {
        return Ok(None);
    };
    match znodes::decode::<TopicAssignment>(&data) {
        Ok(a) => Ok(Some((
            super::znode_checks::checked_assignment(topic, a),
            stat.version,
        ))),
        Err(e) => {
            tracing::warn!(topic, error = %e, "unreadable topic assignment; ignored");
            Ok(None)
        }
    }
}

pub async fn read_assignments(
    s: &ZkSession,
    topics: &[String],
) -> Result<BTreeMap<String, TopicAssignment>, ZkError> {
    let reads = topics
        .iter()
        .map(|t| async move { (t.clone(), read_assignment(s, t).await) });
    let mut out = BTreeMap::new();
    for (t, r) in join_all(reads).await {
        if let Some((a, _)) = r? {
            out.insert(t, a);
        }
    }
    Ok(out)
}

/// The partitions' `state` znodes (absent ones are left out).
pub async fn read_partition_states(
    s: &ZkSession,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, Leadership>, ZkError> {
    let reads = partitions.iter().map(|tp| async move {
        (
            tp.clone(),
            s.get(&paths::partition_state(&tp.topic, tp.partition))
                .await,
        )
    });
    let mut out = BTreeMap::new();
    for (tp, r) in join_all(reads).await {
        let Some((data, stat)) = r? else { continue };
        match znodes::decode::<LeaderIsrAndControllerEpoch>(&data) {
            Ok(state) => {
                out.insert(
                    tp,
                    Leadership {
                        leader_and_isr: LeaderAndIsr::from_znode(&state, stat.version),
                        controller_epoch: state.controller_epoch,
                    },
                );
            }
            Err(e) => tracing::warn!(partition = %tp, error = %e, "unreadable partition state"),
        }
    }
    Ok(out)
}

/// Creates the `state` znodes of new partitions (and their parents), each in its own
/// fenced multi-op. Returns the partitions whose state znode was created.
pub async fn create_partition_states(
    s: &ZkSession,
    fence: Fence,
    states: &[(TopicPartition, LeaderAndIsr)],
) -> Result<Vec<TopicPartition>, ZkError> {
    let mut topics: Vec<&str> = states.iter().map(|(tp, _)| tp.topic.as_str()).collect();
    topics.dedup();
    for t in topics {
        create_fenced_if_absent(s, fence, &paths::partitions(t), &[]).await?;
    }
    for (tp, _) in states {
        create_fenced_if_absent(s, fence, &paths::partition(&tp.topic, tp.partition), &[]).await?;
    }
    let creates = states.iter().map(|(tp, l)| async move {
        let path = paths::partition_state(&tp.topic, tp.partition);
        let data = znodes::encode(&l.to_znode(fence.controller_epoch));
        let op = Op::Create {
            path: &path,
            data: &data,
            ephemeral: false,
        };
        (
            tp.clone(),
            s.multi_checked(paths::CONTROLLER_EPOCH, fence.epoch_zk_version, &[op])
                .await,
        )
    });
    let mut created = Vec::new();
    for (tp, r) in join_all(creates).await {
        match r {
            Ok(_) => created.push(tp),
            Err(e @ (ZkError::Fenced { .. } | ZkError::SessionExpired)) => return Err(e),
            Err(e) => tracing::error!(partition = %tp, error = %e, "cannot create partition state"),
        }
    }
    Ok(created)
}

async fn create_fenced_if_absent(
    s: &ZkSession,
    fence: Fence,
    path: &str,
    data: &[u8],
) -> Result<(), ZkError> {
    let op = Op::Create {
        path,
        data,
        ephemeral: false,
    };
    match s
        .multi_checked(paths::CONTROLLER_EPOCH, fence.epoch_zk_version, &[op])
        .await
    {
        Ok(_) | Err(ZkError::NodeExists(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The outcome of writing one partition's new leadership.
#[derive(Debug)]
pub enum UpdateOutcome {
    /// Written; the leadership carries its new partition epoch.
    Done(LeaderAndIsr),
    /// The znode moved on since it was read: read again and retry.
    BadVersion,
    Failed(ZkError),
}

/// Writes new leaderships, each conditional on its partition epoch and fenced by the
/// controller epoch (Kafka's `updateLeaderAndIsr`). A fenced write fails the whole call.
pub async fn update_leader_and_isr(
    s: &ZkSession,
    fence: Fence,
    updates: &[(TopicPartition, LeaderAndIsr)],
) -> Result<Vec<(TopicPartition, UpdateOutcome)>, ZkError> {
    let writes = updates.iter().map(|(tp, l)| async move {
        let path = paths::partition_state(&tp.topic, tp.partition);
        let data = znodes::encode(&l.to_znode(fence.controller_epoch));
        let op = Op::SetData {
            path: &path,
            data: &data,
            version: Some(l.partition_epoch),
        };
        let r = s
            .multi_checked(paths::CONTROLLER_EPOCH, fence.epoch_zk_version, &[op])
            .await;
        (tp.clone(), l, r)
    });
    let mut out = Vec::new();
    for (tp, l, r) in join_all(writes).await {
        let outcome = match r {
            Ok(stats) => match stats.first().copied().flatten() {
                Some(stat) => UpdateOutcome::Done(LeaderAndIsr {
                    partition_epoch: stat.version,
                    ..l.clone()
                }),
                None => UpdateOutcome::Failed(ZkError::Other("no stat for a set".into())),
            },
            Err(ZkError::BadVersion(_)) => UpdateOutcome::BadVersion,
            Err(e @ (ZkError::Fenced { .. } | ZkError::SessionExpired)) => return Err(e),
            Err(e) => UpdateOutcome::Failed(e),
        };
        out.push((tp, outcome));
    }
    Ok(out)
}

/// Deletes `path` and everything under it, each delete fenced (Kafka's
/// `deleteRecursive` with the controller epoch version). A znode already gone is fine.
pub async fn delete_recursive_fenced(
    s: &ZkSession,
    fence: Fence,
    path: &str,
) -> Result<(), ZkError> {
    let mut stack = vec![(path.to_string(), false)];
    while let Some((p, expanded)) = stack.pop() {
        if !expanded {
            let children = s.children(&p).await?;
            let Some(children) = children else { continue };
            stack.push((p.clone(), true));
            for c in children {
                stack.push((format!("{p}/{c}"), false));
            }
            continue;
        }
        let op = Op::Delete {
            path: &p,
            version: None,
        };
        match s
            .multi_checked(paths::CONTROLLER_EPOCH, fence.epoch_zk_version, &[op])
            .await
        {
            Ok(_) | Err(ZkError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes one znode without children, fenced; gone already is fine.
pub async fn delete_fenced(s: &ZkSession, fence: Fence, path: &str) -> Result<(), ZkError> {
    let op = Op::Delete {
        path,
        version: None,
    };
    match s
        .multi_checked(paths::CONTROLLER_EPOCH, fence.epoch_zk_version, &[op])
        .await
    {
        Ok(_) | Err(ZkError::NoNode(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A topic's config overrides from `/config/topics/<topic>` (empty when absent).
pub async fn read_topic_config(
    s: &ZkSession,
    topic: &str,
) -> Result<BTreeMap<String, String>, ZkError> {
    let path = paths::entity_config(&format!("topics/{topic}"));
    Ok(match s.get(&path).await? {
        Some((data, _)) => znodes::decode::<znodes::EntityConfig>(&data)
            .map(|c| c.config.0)
            .unwrap_or_default(),
        None => BTreeMap::new(),
    })
}
