//! Kafka's replica assignment (`AdminUtils.assignReplicasToBrokers`), so a topic created
//! through skua is spread exactly as Kafka would spread it.
//!
//! Without racks: partition p's first replica is broker `(p + start) % n` of the broker
//! list, and its followers follow at a shift that grows by one every n partitions, so
//! leaders and followers both spread evenly. With racks (every broker has one): the
//! broker list alternates racks first, and followers skip brokers in a rack that already
//! holds a replica while some rack holds none. Kafka draws `start` and the first shift at
//! random; `fixed_start` gives both, for tests against Kafka's own outputs.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use crate::controller::ControllerError;

/// A live broker as assignment sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub id: i32,
    pub rack: Option<String>,
}

/// Partition → replicas for `partitions` partitions numbered from `start_partition`
/// (`fixed_start`: Kafka's `fixedStartIndex`; None draws it at random).
pub fn assign_replicas_to_brokers(
    brokers: &[BrokerMetadata],
    partitions: i32,
    replication_factor: i32,
    fixed_start: Option<usize>,
    start_partition: i32,
) -> Result<BTreeMap<i32, Vec<i32>>, ControllerError> {
    if partitions <= 0 {
        return Err(ControllerError::new(
            ResponseError::InvalidPartitions,
            "Number of partitions must be larger than 0.",
        ));
    }
    if replication_factor <= 0 {
        return Err(ControllerError::new(
            ResponseError::InvalidReplicationFactor,
            "Replication factor must be larger than 0.",
        ));
    }
    if replication_factor as usize > brokers.len() {
        return Err(ControllerError::new(
            ResponseError::InvalidReplicationFactor,
            format!(
                "Replication factor: {replication_factor} larger than available brokers: {}.",
                brokers.len()
            ),
        ));
    }
    let n = brokers.len();
    let draw = || fixed_start.unwrap_or_else(|| random_index(n));
    let (start, shift) = (draw(), draw());
    if brokers.iter().all(|b| b.rack.is_none()) {
        let ids: Vec<i32> = brokers.iter().map(|b| b.id).collect();
        return Ok(rack_unaware(
            partitions,
            replication_factor as usize,
            &ids,
            start,
            shift,
            start_partition,
        ));
    }
    let racks: BTreeMap<i32, String> = brokers
        .iter()
        .map(|b| {
            b.rack.clone().map(|r| (b.id, r)).ok_or_else(|| {
                ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    "Not all brokers have rack information for replica rack aware assignment.",
                )
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(rack_aware(
        partitions,
        replication_factor as usize,
        &racks,
        start,
        shift,
        start_partition,
    ))
}

fn rack_unaware(
    partitions: i32,
    rf: usize,
    brokers: &[i32],
    start: usize,
    mut shift: usize,
    start_partition: i32,
) -> BTreeMap<i32, Vec<i32>> {
    let n = brokers.len();
    let mut out = BTreeMap::new();
    let first = start_partition.max(0);
    for p in first..first + partitions {
        let p_index = p as usize;
        if p_index > 0 && p_index % n == 0 {
            shift += 1;
        }
        let first_replica = (p_index + start) % n;
        let mut replicas = vec![brokers[first_replica]];
        for j in 0..rf - 1 {
            replicas.push(brokers[replica_index(first_replica, shift, j, n)]);
        }
        out.insert(p, replicas);
    }
    out
}

fn rack_aware(
    partitions: i32,
    rf: usize,
    racks: &BTreeMap<i32, String>,
    start: usize,
    mut shift: usize,
    start_partition: i32,
) -> BTreeMap<i32, Vec<i32>> {
    let rack_count = racks.values().collect::<BTreeSet<_>>().len();
    let arranged = rack_alternated_broker_list(racks);
    let n = arranged.len();
    let mut out = BTreeMap::new();
    let first = start_partition.max(0);
    for p in first..first + partitions {
        let p_index = p as usize;
        if p_index > 0 && p_index % n == 0 {
            shift += 1;
        }
        let first_replica = (p_index + start) % n;
        let leader = arranged[first_replica];
        let mut replicas = vec![leader];
        let mut racks_with_replicas = BTreeSet::from([&racks[&leader]]);
        let mut brokers_with_replicas = BTreeSet::from([leader]);
        let mut k = 0;
        for _ in 0..rf - 1 {
            loop {
                let broker = arranged[replica_index(first_replica, shift * rack_count, k, n)];
                let rack = &racks[&broker];
                k += 1;
                // Skip a broker whose rack already has a replica while some rack has none,
                // and a broker that has one while some broker has none.
                if (!racks_with_replicas.contains(rack) || racks_with_replicas.len() == rack_count)
                    && (!brokers_with_replicas.contains(&broker)
                        || brokers_with_replicas.len() == n)
                {
                    replicas.push(broker);
                    racks_with_replicas.insert(rack);
                    brokers_with_replicas.insert(broker);
                    break;
                }
            }
        }
        out.insert(p, replicas);
    }
    out
}

/// Brokers taken one rack at a time (racks in name order, brokers of a rack by id):
/// Kafka's `getRackAlternatedBrokerList`.
pub fn rack_alternated_broker_list(racks: &BTreeMap<i32, String>) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, std::vec::IntoIter<i32>> = BTreeMap::new();
    let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (id, rack) in racks {
        grouped.entry(rack.as_str()).or_default().push(*id);
    }
    for (rack, ids) in grouped {
        by_rack.insert(rack, ids.into_iter());
    }
    let mut out = Vec::with_capacity(racks.len());
    let names: Vec<&str> = by_rack.keys().copied().collect();
    let mut i = 0;
    while out.len() < racks.len() {
        if let Some(id) = by_rack.get_mut(names[i]).and_then(Iterator::next) {
            out.push(id);
        }
        i = (i + 1) % names.len();
    }
    out
}

/// A uniformly drawn index below `n` (a v4 uuid carries 122 random bits).
fn random_index(n: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % n as u128) as usize
}

fn replica_index(first: usize, second_shift: usize, replica: usize, n: usize) -> usize {
    let shift = 1 + (second_shift + replica) % (n - 1);
    (first + shift) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(ids: &[i32]) -> Vec<BrokerMetadata> {
        ids.iter()
            .map(|&id| BrokerMetadata { id, rack: None })
            .collect()
    }

    fn racked(brokers: &[(i32, &str)]) -> Vec<BrokerMetadata> {
        brokers
            .iter()
            .map(|&(id, r)| BrokerMetadata {
                id,
                rack: Some(r.into()),
            })
            .collect()
    }

    fn as_lists(m: &BTreeMap<i32, Vec<i32>>) -> Vec<Vec<i32>> {
        m.values().cloned().collect()
    }

    /// Kafka's `AdminRackAwareTest`/`ReplicationUtilsTest` expectation for 5 brokers,
    /// 10 partitions, RF 3, fixed start index 0 (`testReplicaAssignment` in Kafka's
    /// `AdminUtilsTest`).
    #[test]
    fn rack_unaware_matches_kafka() {
        let got = assign_replicas_to_brokers(&plain(&[0, 1, 2, 3, 4]), 10, 3, Some(0), -1).unwrap();
        let expected = vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ];
        assert_eq!(as_lists(&got), expected);
    }

    /// Kafka's `AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers`.
    #[test]
    fn rack_aware_matches_kafka() {
        let brokers = racked(&[
            (0, "rack1"),
            (1, "rack3"),
            (2, "rack3"),
            (3, "rack2"),
            (4, "rack2"),
            (5, "rack1"),
        ]);
        let racks: BTreeMap<i32, String> = brokers
            .iter()
            .map(|b| (b.id, b.rack.clone().unwrap()))
            .collect();
        assert_eq!(rack_alternated_broker_list(&racks), vec![0, 3, 1, 5, 4, 2]);
        let mut fewer = racks.clone();
        fewer.remove(&5);
        assert_eq!(rack_alternated_broker_list(&fewer), vec![0, 3, 1, 4, 2]);
        let got = assign_replicas_to_brokers(&brokers, 7, 3, Some(0), 0).unwrap();
        assert_eq!(
            as_lists(&got),
            vec![
                vec![0, 3, 1],
                vec![3, 1, 5],
                vec![1, 5, 4],
                vec![5, 4, 2],
                vec![4, 2, 0],
                vec![2, 0, 3],
                vec![0, 4, 2]
            ]
        );
    }

    #[test]
    fn shift_grows_every_round_of_brokers() {
        let got = assign_replicas_to_brokers(&plain(&[1, 2, 3]), 6, 2, Some(1), 0).unwrap();
        // start 1, shift 1: p0 → [2, 1]? first = (0+1)%3 = 1 → broker 2; follower
        // index (1 + 1 + (1+0)%2) % 3 = 0 → broker 1.
        assert_eq!(
            as_lists(&got),
            vec![
                vec![2, 1],
                vec![3, 2],
                vec![1, 3],
                vec![2, 3],
                vec![3, 1],
                vec![1, 2]
            ]
        );
    }

    #[test]
    fn refusals_are_kafkas() {
        let e = assign_replicas_to_brokers(&plain(&[1, 2]), 3, 3, None, 0).unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
        assert_eq!(
            e.message,
            "Replication factor: 3 larger than available brokers: 2."
        );
        let e = assign_replicas_to_brokers(&plain(&[1]), 0, 1, None, 0).unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidPartitions);
        let mut mixed = plain(&[1, 2]);
        mixed[0].rack = Some("a".into());
        let e = assign_replicas_to_brokers(&mixed, 1, 1, None, 0).unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidReplicaAssignment);
    }

    #[test]
    fn random_start_stays_within_kafkas_outputs() {
        let brokers = plain(&[1, 2, 3]);
        let possible: Vec<_> = (0..3)
            .flat_map(|s| (0..3).map(move |t| rack_unaware(6, 2, &[1, 2, 3], s, t, 0)))
            .collect();
        for _ in 0..20 {
            let got = assign_replicas_to_brokers(&brokers, 6, 2, None, 0).unwrap();
            assert!(possible.contains(&got));
        }
    }
}
