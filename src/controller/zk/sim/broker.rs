//! The simulation's brokers: what each knows of its partitions from the controller's
//! requests, and a log per replica modelled as the leader epoch of each record, enough
//! for Kafka's replication rules: a leader appends; a follower fetches from the leader
//! it was told of, at the epoch it was told, truncating what diverges from the leader's
//! log; the leader's high watermark is the smallest log end of its maximal ISR (the ISR
//! and any change in flight), and what lies below it is acknowledged. A broker refuses
//! requests from an older controller epoch or for an older registration of itself, and
//! a leadership at a leader epoch no newer than the one it has.

use std::collections::BTreeMap;

use super::super::context::TopicPartition;
use kafka_protocol::messages::{LeaderAndIsrRequest, StopReplicaRequest};

use super::super::requests::ControlRequest;

#[derive(Debug, Default, Clone)]
pub struct Replica {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
    /// Stopped (StopReplica): neither leads nor fetches.
    pub stopped: bool,
    /// As leader: each follower's log end, from its fetches at this epoch.
    pub follower_ends: BTreeMap<i32, usize>,
    /// As leader: an ISR change sent to the controller and not yet answered.
    pub pending_isr: Option<Vec<i32>>,
    pub in_flight: bool,
}

impl Replica {
    pub fn leads(&self, me: i32) -> bool {
        !self.stopped && self.leader == me
    }
}

#[derive(Default)]
pub struct Broker {
    pub id: i32,
    /// The process runs (its member may still be between sessions).
    pub up: bool,
    pub controller_epoch: i32,
    pub controller_id: i32,
    pub partitions: BTreeMap<TopicPartition, Replica>,
    /// Records' leader epochs, per partition: survives restarts, as a log dir does.
    pub logs: BTreeMap<TopicPartition, Vec<i32>>,
    pub high_watermarks: BTreeMap<TopicPartition, usize>,
}

/// What a delivered request asks the driver to do next.
pub enum Applied {
    /// A stale controller epoch or broker epoch.
    Refused,
    /// (partition, leader epoch) the broker now leads.
    Led(Vec<(TopicPartition, i32)>),
    Done,
}

impl Broker {
    pub fn new(id: i32) -> Broker {
        Broker {
            id,
            up: true,
            controller_epoch: -1,
            controller_id: -1,
            ..Broker::default()
        }
    }

    /// The process stops: what it knew of leaderships is gone, its logs stay.
    pub fn crash(&mut self) {
        self.up = false;
        self.partitions.clear();
        self.controller_epoch = -1;
        self.controller_id = -1;
    }

    fn accept_controller(&mut self, epoch: i32, id: i32) -> bool {
        if epoch < self.controller_epoch {
            return false;
        }
        self.controller_epoch = epoch;
        self.controller_id = id;
        true
    }

    /// Applies a controller request addressed to registration `broker_epoch` while
    /// the current one is `current_epoch`.
    pub fn apply(
        &mut self,
        request: &ControlRequest,
        broker_epoch: i64,
        current_epoch: i64,
    ) -> Applied {
        if broker_epoch < current_epoch {
            return Applied::Refused;
        }
        match request {
            ControlRequest::LeaderAndIsr { request, .. } => self.leader_and_isr(request),
            ControlRequest::UpdateMetadata { request, .. } => {
                match self.accept_controller(request.controller_epoch, request.controller_id.0) {
                    true => Applied::Done,
                    false => Applied::Refused,
                }
            }
            ControlRequest::StopReplica { request, .. } => self.stop_replica(request),
        }
    }

    /// Hosts every partition the request names this broker a replica of at a newer
    /// leader epoch; answers those it now leads.
    fn leader_and_isr(&mut self, request: &LeaderAndIsrRequest) -> Applied {
        let (epoch, id) = (request.controller_epoch, request.controller_id.0);
        if !self.accept_controller(epoch, id) {
            return Applied::Refused;
        }
        let states = request.ungrouped_partition_states.iter().chain(
            request
                .topic_states
                .iter()
                .flat_map(|t| t.partition_states.iter()),
        );
        let mut led = Vec::new();
        for s in states {
            let tp = TopicPartition::new(s.topic_name.0.to_string(), s.partition_index);
            let known = self.partitions.get(&tp);
            if known.is_some_and(|r| s.leader_epoch <= r.leader_epoch) {
                continue;
            }
            let replicas: Vec<i32> = s.replicas.iter().map(|b| b.0).collect();
            if !replicas.contains(&self.id) {
                continue;
            }
            let r = Replica {
                leader: s.leader.0,
                leader_epoch: s.leader_epoch,
                partition_epoch: s.partition_epoch,
                isr: s.isr.iter().map(|b| b.0).collect(),
                replicas,
                ..Replica::default()
            };
            if r.leader == self.id {
                led.push((tp.clone(), r.leader_epoch));
            }
            self.logs.entry(tp.clone()).or_default();
            self.partitions.insert(tp, r);
        }
        Applied::Led(led)
    }

    /// Stops the partitions named (unless for an older leadership), deleting those the
    /// request says to.
    fn stop_replica(&mut self, request: &StopReplicaRequest) -> Applied {
        if !self.accept_controller(request.controller_epoch, request.controller_id.0) {
            return Applied::Refused;
        }
        for t in &request.topic_states {
            for p in &t.partition_states {
                let tp = TopicPartition::new(t.topic_name.0.to_string(), p.partition_index);
                if let Some(r) = self.partitions.get_mut(&tp) {
                    if p.leader_epoch >= 0 && p.leader_epoch < r.leader_epoch {
                        continue; // an older leadership's stop
                    }
                    r.stopped = true;
                }
                if p.delete_partition {
                    self.partitions.remove(&tp);
                    self.logs.remove(&tp);
                    self.high_watermarks.remove(&tp);
                }
            }
        }
        Applied::Done
    }
}
