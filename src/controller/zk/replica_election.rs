//! Replica leader elections on demand (Kafka's `KafkaController`
//! `processReplicaLeaderElection`, `onReplicaElection`, `checkAndTriggerAutoLeaderRebalance`):
//! the ElectLeaders API (preferred or unclean), the legacy
//! `/admin/preferred_replica_election` znode, and the periodic automatic rebalance that
//! hands leadership back to preferred replicas (`auto.leader.rebalance.enable`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use serde::Deserialize;

use super::context::TopicPartition;
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::leader_election::Strategy;
use super::states::PartitionState;
use super::store;

/// Where Kafka's controller (and its tools before KIP-460) ask for a preferred election.
pub const PREFERRED_REPLICA_ELECTION: &str = "/admin/preferred_replica_election";

/// ElectLeaders' `ElectionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first assigned replica, if it is live and in the ISR.
    Preferred,
    /// For a partition without a live leader: a live ISR member, else any live replica.
    Unclean,
}

impl ElectionType {
    /// The wire code (v0 has no field and means preferred).
    pub fn from_code(code: i8) -> Option<ElectionType> {
        match code {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// Who asked for an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    AdminClient,
    /// `/admin/preferred_replica_election` was written: deleted once acted on.
    Znode,
    /// The controller's periodic imbalance check.
    Auto,
}

/// An election's failure: the error code and its message.
pub type ElectionError = (ResponseError, Option<String>);
/// Per partition, the new leader or why there is none.
pub type ElectionResults = BTreeMap<TopicPartition, Result<i32, ElectionError>>;

/// `/admin/preferred_replica_election` as Kafka writes it.
#[derive(Deserialize)]
struct PreferredReplicaElectionZnode {
    partitions: Vec<ZnodePartition>,
}

#[derive(Deserialize)]
struct ZnodePartition {
    topic: String,
    partition: i32,
}

/// The partitions a `/admin/preferred_replica_election` znode names (None when unreadable).
pub fn parse_preferred_replica_election(data: &[u8]) -> Option<BTreeSet<TopicPartition>> {
    let z: PreferredReplicaElectionZnode = serde_json::from_slice(data).ok()?;
    Some(
        z.partitions
            .into_iter()
            .map(|p| TopicPartition::new(p.topic, p.partition))
            .collect(),
    )
}

/// Kafka's imbalance rule: per preferred broker, the partitions it should lead but does
/// not; those of a broker whose share of them exceeds `percentage` are candidates when
/// the preferred replica is live and in the ISR (`is_candidate`).
pub fn imbalanced(
    preferred: &BTreeMap<TopicPartition, i32>,
    leaders: &BTreeMap<TopicPartition, i32>,
    percentage: i32,
    is_candidate: impl Fn(&TopicPartition, i32) -> bool,
) -> Vec<TopicPartition> {
    let mut by_broker: BTreeMap<i32, Vec<&TopicPartition>> = BTreeMap::new();
    for (tp, &b) in preferred {
        by_broker.entry(b).or_default().push(tp);
    }
    let mut out = Vec::new();
    for (broker, partitions) in by_broker {
        let not_led: Vec<&TopicPartition> = partitions
            .iter()
            .copied()
            .filter(|tp| leaders.get(*tp).is_some_and(|&l| l != broker))
            .collect();
        let ratio = not_led.len() as f64 / partitions.len() as f64;
        if ratio > f64::from(percentage) / 100.0 {
            out.extend(
                not_led
                    .into_iter()
                    .filter(|tp| is_candidate(tp, broker))
                    .cloned(),
            );
        }
    }
    out
}

impl ControllerLoop {
    /// An election asked for by ElectLeaders or the znode: partitions that do not exist,
    /// are being deleted or already have the right leader are answered without one.
    pub(super) async fn process_replica_leader_election(
        &mut self,
        partitions: BTreeSet<TopicPartition>,
        election: ElectionType,
        trigger: Trigger,
    ) -> ZkResult<ElectionResults> {
        if !self.is_active() {
            return Ok(partitions
                .into_iter()
                .map(|tp| (tp, Err((ResponseError::NotController, None))))
                .collect());
        }
        let known: BTreeSet<TopicPartition> = self.ctx.all_partitions().into_iter().collect();
        let live = self.ctx.live_broker_ids();
        let mut results = ElectionResults::new();
        let mut electable = Vec::new();
        for tp in partitions {
            if !known.contains(&tp) {
                tracing::info!(partition = %tp, ?election, ?trigger, "skipping the leader election of a partition that does not exist");
                let e = (
                    ResponseError::UnknownTopicOrPartition,
                    Some("The partition does not exist.".to_string()),
                );
                results.insert(tp, Err(e));
                continue;
            }
            if self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                let e = (
                    ResponseError::InvalidTopicException,
                    Some("The topic is being deleted".to_string()),
                );
                results.insert(tp, Err(e));
                continue;
            }
            let leader = self
                .ctx
                .leadership
                .get(&tp)
                .map_or(-1, |l| l.leader_and_isr.leader);
            let needed = match election {
                ElectionType::Preferred => self.ctx.replicas(&tp).first() != Some(&leader),
                ElectionType::Unclean => leader == -1 || !live.contains(&leader),
            };
            if needed {
                electable.push(tp);
            } else {
                results.insert(tp, Err((ResponseError::ElectionNotNeeded, None)));
            }
        }
        results.extend(
            self.on_replica_election(&electable, election, trigger)
                .await?,
        );
        Ok(results)
    }

    /// Elects `partitions` under `election`'s strategy; the ones left without a new
    /// leader get PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE.
    async fn on_replica_election(
        &mut self,
        partitions: &[TopicPartition],
        election: ElectionType,
        trigger: Trigger,
    ) -> ZkResult<ElectionResults> {
        let strategy = match election {
            ElectionType::Preferred => Strategy::Preferred,
            ElectionType::Unclean => Strategy::Offline {
                allow_unclean: true,
            },
        };
        if !partitions.is_empty() {
            tracing::info!(
                ?partitions,
                ?election,
                ?trigger,
                "starting replica leader election"
            );
        }
        let elected: BTreeSet<TopicPartition> = self
            .partition_changes(partitions, PartitionState::Online, Some(strategy))
            .await?
            .into_iter()
            .collect();
        let results = partitions
            .iter()
            .map(|tp| {
                let leader = self.ctx.leadership.get(tp).map(|l| l.leader_and_isr.leader);
                let result = match leader {
                    Some(l) if elected.contains(tp) => Ok(l),
                    _ => {
                        let code = match election {
                            ElectionType::Preferred => ResponseError::PreferredLeaderNotAvailable,
                            ElectionType::Unclean => ResponseError::EligibleLeadersNotAvailable,
                        };
                        let message = format!(
                            "Failed to elect leader for partition {tp} under strategy {strategy:?}"
                        );
                        Err((code, Some(message)))
                    }
                };
                (tp.clone(), result)
            })
            .collect();
        if trigger == Trigger::Znode {
            // Acted on: deleting it lets the next request be written (Kafka's
            // `removePartitionsFromPreferredReplicaElection`).
            store::delete_fenced(&self.s, self.fence()?, PREFERRED_REPLICA_ELECTION).await?;
        }
        Ok(results)
    }

    /// Watches `/admin/preferred_replica_election` (unless a watch is armed) and acts on
    /// what it asks for.
    pub(super) async fn process_preferred_replica_election_znode(&mut self) -> ZkResult<()> {
        if !self.is_active() {
            return Ok(());
        }
        let found = if self.armed.preferred_election {
            self.s.get(PREFERRED_REPLICA_ELECTION).await?
        } else {
            let (found, watch) = self.s.get_and_watch(PREFERRED_REPLICA_ELECTION).await?;
            self.on_watch(watch, Event::PreferredReplicaElection(self.generation));
            self.armed.preferred_election = true;
            found
        };
        let Some((data, _)) = found else {
            return Ok(());
        };
        let partitions = match parse_preferred_replica_election(&data) {
            Some(p) => p,
            None => {
                tracing::error!(
                    data = %String::from_utf8_lossy(&data),
                    "unreadable /admin/preferred_replica_election; deleting it"
                );
                // Deleted by the (empty) election below, as Kafka drops what it cannot read.
                BTreeSet::new()
            }
        };
        let results = self
            .process_replica_leader_election(
                partitions.clone(),
                ElectionType::Preferred,
                Trigger::Znode,
            )
            .await?;
        for (tp, r) in results {
            match r {
                Ok(leader) => tracing::info!(partition = %tp, leader, "preferred replica elected"),
                Err((e, m)) => {
                    tracing::info!(partition = %tp, error = ?e, message = ?m, "preferred replica election not done")
                }
            }
        }
        Ok(())
    }

    /// Runs the imbalance check `delay` from now, for this term only.
    pub(super) fn schedule_auto_leader_rebalance(&self, delay: Duration) {
        if !self.settings.auto_leader_rebalance {
            return;
        }
        let tx = self.tx.clone();
        let generation = self.generation;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(Event::AutoLeaderRebalance(generation));
        });
    }

    /// Kafka's `checkAndTriggerAutoLeaderRebalance`, then the next check one interval later.
    pub(super) async fn process_auto_leader_rebalance(&mut self) -> ZkResult<()> {
        let result = self.check_and_trigger_auto_leader_rebalance().await;
        self.schedule_auto_leader_rebalance(self.settings.leader_imbalance_check_interval);
        result
    }

    async fn check_and_trigger_auto_leader_rebalance(&mut self) -> ZkResult<()> {
        let mut preferred = BTreeMap::new();
        let mut leaders = BTreeMap::new();
        for tp in self.ctx.all_partitions() {
            if self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                continue;
            }
            let Some(&first) = self.ctx.replicas(&tp).first() else {
                continue;
            };
            if let Some(l) = self.ctx.leadership.get(&tp) {
                leaders.insert(tp.clone(), l.leader_and_isr.leader);
            }
            preferred.insert(tp, first);
        }
        let ctx = &self.ctx;
        let candidates = imbalanced(
            &preferred,
            &leaders,
            self.settings.leader_imbalance_per_broker_percentage,
            |tp, broker| {
                ctx.is_replica_online(broker, tp, false)
                    && ctx
                        .leadership
                        .get(tp)
                        .is_some_and(|l| l.leader_and_isr.isr.contains(&broker))
            },
        );
        if candidates.is_empty() {
            return Ok(());
        }
        let results = self
            .on_replica_election(&candidates, ElectionType::Preferred, Trigger::Auto)
            .await?;
        let moved = results.values().filter(|r| r.is_ok()).count();
        tracing::info!(
            candidates = candidates.len(),
            moved,
            "automatic preferred replica leader election"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn reads_kafkas_znode() {
        let data = br#"{"version":1,"partitions":[{"topic":"a","partition":2},{"topic":"b","partition":0}]}"#;
        let got = parse_preferred_replica_election(data).unwrap();
        assert_eq!(
            got,
            [TopicPartition::new("a", 2), TopicPartition::new("b", 0)]
                .into_iter()
                .collect()
        );
        assert_eq!(parse_preferred_replica_election(b"{\"version\":1}"), None);
        assert_eq!(parse_preferred_replica_election(b"not json"), None);
    }

    #[test]
    fn election_type_codes() {
        assert_eq!(ElectionType::from_code(0), Some(ElectionType::Preferred));
        assert_eq!(ElectionType::from_code(1), Some(ElectionType::Unclean));
        assert_eq!(ElectionType::from_code(2), None);
    }

    #[test]
    fn imbalance_above_the_percentage_elects_the_preferred_leaders() {
        // Broker 1 prefers p0..p3 and leads only p0: 3/4 imbalance.
        // Broker 2 prefers p4..p13 (10) and leads all but p4: 1/10 = 10%, not above.
        let mut preferred = BTreeMap::new();
        let mut leaders = BTreeMap::new();
        for p in 0..4 {
            preferred.insert(tp(p), 1);
            leaders.insert(tp(p), if p == 0 { 1 } else { 2 });
        }
        for p in 4..14 {
            preferred.insert(tp(p), 2);
            leaders.insert(tp(p), if p == 4 { 1 } else { 2 });
        }
        let got = imbalanced(&preferred, &leaders, 10, |_, _| true);
        assert_eq!(got, vec![tp(1), tp(2), tp(3)]);
        // p2's preferred replica cannot lead (down or out of the ISR): not a candidate.
        let got = imbalanced(&preferred, &leaders, 10, |t, _| *t != tp(2));
        assert_eq!(got, vec![tp(1), tp(3)]);
        // Percentage 0: any imbalance counts.
        let got = imbalanced(&preferred, &leaders, 0, |_, _| true);
        assert_eq!(got, vec![tp(1), tp(2), tp(3), tp(4)]);
        // A partition without a leadership is not counted as led elsewhere.
        leaders.remove(&tp(1));
        leaders.remove(&tp(2));
        let got = imbalanced(&preferred, &leaders, 30, |_, _| true);
        assert_eq!(got, vec![], "1 of 4 is 25%, not above 30%");
    }
}
