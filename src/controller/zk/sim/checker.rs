//! The simulation's invariants over what ZooKeeper committed, every write in order (so
//! no intermediate state escapes), and over what brokers were told and hold:
//! - one controller per controller epoch, and epochs only rise;
//! - a partition's leader is in its ISR, and its ISR within its replicas;
//! - leader epochs only rise, and a new leader comes from the ISR before it (unclean
//!   election is off in the simulation);
//! - no acknowledged record is missing from a new leader's log (checked by the brokers).

use std::collections::BTreeMap;

use crate::zk::memory::Write;
use crate::zk::znodes::{
    self, controller_epoch, paths, ControllerRegistration, LeaderIsrAndControllerEpoch,
};

#[derive(Default)]
pub struct Checker {
    states: BTreeMap<String, LeaderIsrAndControllerEpoch>,
    /// Topic → partition → full replica set (RS).
    replicas: BTreeMap<String, BTreeMap<i32, Vec<i32>>>,
    /// Controller epoch → the broker elected in it.
    controllers: BTreeMap<i32, i32>,
    last_epoch: i32,
    /// The controller named by the `/controller` just created, for the epoch set next.
    elected: Option<i32>,
    pub violations: Vec<String>,
}

/// `/brokers/topics/<t>/partitions/<p>/state` → (t, p).
fn state_path(path: &str) -> Option<(&str, i32)> {
    let rest = path.strip_prefix("/brokers/topics/")?;
    let (topic, rest) = rest.split_once("/partitions/")?;
    let p = rest.strip_suffix("/state")?;
    Some((topic, p.parse().ok()?))
}

fn topic_path(path: &str) -> Option<&str> {
    let t = path.strip_prefix("/brokers/topics/")?;
    (!t.contains('/')).then_some(t)
}

impl Checker {
    pub fn apply(&mut self, w: &Write) {
        match w {
            Write::Created { path, data } | Write::Set { path, data } => self.written(path, data),
            Write::Deleted { path } => {
                self.states.remove(path);
                if let Some(t) = topic_path(path) {
                    self.replicas.remove(t);
                }
            }
        }
    }

    /// A controller, as a broker heard from it: (epoch, id) must match the election.
    pub fn heard_from(&mut self, controller_epoch: i32, controller_id: i32) {
        match self.controllers.get(&controller_epoch) {
            Some(&id) if id != controller_id => self.violations.push(format!(
                "a broker heard from controller {controller_id} at epoch {controller_epoch}, which elected {id}"
            )),
            Some(_) => {}
            None => self.violations.push(format!(
                "a broker heard from controller {controller_id} at epoch {controller_epoch}, never elected"
            )),
        }
    }

    fn written(&mut self, path: &str, data: &[u8]) {
        if path == paths::CONTROLLER {
            self.elected = znodes::decode::<ControllerRegistration>(data)
                .ok()
                .map(|c| c.brokerid);
        } else if path == paths::CONTROLLER_EPOCH {
            self.epoch_written(data);
        } else if let Some((topic, p)) = state_path(path) {
            match znodes::decode::<LeaderIsrAndControllerEpoch>(data) {
                Ok(s) => self.state_written(path, topic, p, s),
                Err(e) => self
                    .violations
                    .push(format!("{path}: unreadable state: {e}")),
            }
        } else if let Some(topic) = topic_path(path) {
            if let Ok(a) = znodes::decode::<znodes::TopicAssignment>(data) {
                self.replicas.insert(topic.to_string(), a.partitions.0);
            }
        }
    }

    fn epoch_written(&mut self, data: &[u8]) {
        let Some(epoch) = controller_epoch::decode(data) else {
            self.violations.push("unreadable /controller_epoch".into());
            return;
        };
        if epoch <= self.last_epoch && epoch != 0 {
            self.violations.push(format!(
                "controller epoch went from {} to {epoch}",
                self.last_epoch
            ));
        }
        self.last_epoch = epoch;
        let Some(id) = self.elected.take() else {
            return; // the epoch znode's creation, at 0
        };
        if let Some(other) = self.controllers.insert(epoch, id) {
            self.violations.push(format!(
                "controllers {other} and {id} both elected at epoch {epoch}"
            ));
        }
    }

    fn state_written(&mut self, path: &str, topic: &str, p: i32, s: LeaderIsrAndControllerEpoch) {
        let v = &mut self.violations;
        if s.leader >= 0 && !s.isr.contains(&s.leader) {
            v.push(format!(
                "{path}: leader {} not in ISR {:?}",
                s.leader, s.isr
            ));
        }
        let replicas = self.replicas.get(topic).and_then(|t| t.get(&p));
        match replicas {
            Some(rs) if s.isr.iter().all(|r| rs.contains(r)) => {}
            Some(rs) => v.push(format!(
                "{path}: ISR {:?} not within replicas {rs:?}",
                s.isr
            )),
            None => v.push(format!(
                "{path}: written for a partition with no assignment"
            )),
        }
        if let Some(prev) = self.states.get(path) {
            if s.leader_epoch < prev.leader_epoch {
                v.push(format!(
                    "{path}: leader epoch went from {} to {}",
                    prev.leader_epoch, s.leader_epoch
                ));
            }
            if s.leader != prev.leader && s.leader_epoch <= prev.leader_epoch {
                v.push(format!(
                    "{path}: leader {} → {} at the same epoch {}",
                    prev.leader, s.leader, s.leader_epoch
                ));
            }
            if s.leader >= 0 && s.leader != prev.leader && !prev.isr.contains(&s.leader) {
                v.push(format!(
                    "{path}: leader {} elected from outside the ISR {:?}",
                    s.leader, prev.isr
                ));
            }
        }
        self.states.insert(path.to_string(), s);
    }
}
