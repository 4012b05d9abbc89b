//! Metadata changes as deltas, and who follows them.
//!
//! Kafka's brokers follow the metadata log through `MetadataDelta`s that publishers (the
//! replica manager, the group coordinator, the authorizer) apply in order; skua's do the
//! same. A delta names what changed between two images; the listener reads the new state
//! from the image it is handed with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::image::{Change, MetadataImage};
use super::{ConfigResource, TopicInfo};

/// What happened to one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicDelta {
    /// Created or changed (partitions added, leadership, configs): its new state.
    Changed(Arc<TopicInfo>),
    /// Deleted: what it was.
    Removed(Arc<TopicInfo>),
}

/// The topics and config resources one change (or a whole image, at subscription)
/// touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    pub topics: BTreeMap<String, TopicDelta>,
    /// Resources other than topics whose configs changed; their configs are read from
    /// the image.
    pub configs: BTreeSet<ConfigResource>,
    /// The live brokers or the active controller changed (a ZooKeeper-mode
    /// UpdateMetadata that moves no partition still names a new controller or a broker
    /// back); they are read from the image.
    pub cluster: bool,
    /// The ACLs changed (AccessControlEntryRecord, RemoveAccessControlEntryRecord); they
    /// are read from the image.
    pub acls: bool,
    /// Client quotas changed; they are read from the image.
    pub client_quotas: bool,
    /// SCRAM credentials changed; they are read from the image (a KRaft broker's logins
    /// check the image it published last, so a change must publish one).
    pub scram_credentials: bool,
}

impl MetadataDelta {
    /// Every topic of `image`, as a new subscriber first sees it.
    pub fn everything(image: &MetadataImage) -> MetadataDelta {
        MetadataDelta {
            topics: image
                .topics()
                .map(|t| (t.name.clone(), TopicDelta::Changed(t.clone())))
                .collect(),
            configs: image.config_resources().cloned().collect(),
            cluster: true,
            acls: true,
            client_quotas: true,
            scram_credentials: true,
        }
    }

    /// The delta of `changes` (from replaying records), resolved against the image they
    /// produced. A topic removed and created again in one delta is both: removed first.
    pub fn from_changes(changes: &[Change], image: &MetadataImage) -> MetadataDelta {
        let mut delta = MetadataDelta::default();
        let mut removed = Vec::new();
        for change in changes {
            match change {
                Change::Topic(name) => {
                    if let Some(t) = image.topic(name) {
                        delta
                            .topics
                            .insert(name.clone(), TopicDelta::Changed(t.clone()));
                    }
                }
                Change::TopicRemoved(t) => removed.push(t.clone()),
                Change::Configs(resource) => {
                    delta.configs.insert(resource.clone());
                }
                Change::Acls => delta.acls = true,
                Change::ClientQuotas => delta.client_quotas = true,
                Change::ScramCredentials => delta.scram_credentials = true,
                Change::Cluster => delta.cluster = true,
                Change::None => {}
            }
        }
        for t in removed {
            delta
                .topics
                .entry(t.name.clone())
                .or_insert(TopicDelta::Removed(t));
        }
        delta
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
            && self.configs.is_empty()
            && !self.cluster
            && !self.acls
            && !self.client_quotas
            && !self.scram_credentials
    }
}

/// A failure to apply part of a delta: the topic it hit and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyError {
    pub topic: String,
    pub message: String,
}

/// Something that follows metadata: it applies each delta, in order, before the change
/// that produced it is answered.
pub trait MetadataListener: Send + Sync {
    /// Applies `delta`; `image` is the image it leads to. Returns what could not be
    /// applied (the change itself stands: it is in the metadata log).
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::MetadataRecord;
    use uuid::Uuid;

    #[test]
    fn a_topic_deleted_and_created_again_is_a_change() {
        let mut image = MetadataImage::default();
        let topic = |id| MetadataRecord::Topic {
            name: "t".into(),
            topic_id: Uuid::from_u128(id),
        };
        let mut changes = vec![image.replay(&topic(1)).unwrap()];
        assert!(matches!(
            MetadataDelta::from_changes(&changes, &image).topics["t"],
            TopicDelta::Changed(_)
        ));
        changes.push(
            image
                .replay(&MetadataRecord::RemoveTopic {
                    topic_id: Uuid::from_u128(1),
                })
                .unwrap(),
        );
        let delta = MetadataDelta::from_changes(&changes, &image);
        assert!(
            matches!(&delta.topics["t"], TopicDelta::Removed(t) if t.topic_id == Uuid::from_u128(1))
        );
        changes.push(image.replay(&topic(2)).unwrap());
        let delta = MetadataDelta::from_changes(&changes, &image);
        assert!(
            matches!(&delta.topics["t"], TopicDelta::Changed(t) if t.topic_id == Uuid::from_u128(2))
        );
        assert_eq!(MetadataDelta::everything(&image).topics.len(), 1);
    }

    /// A KRaft broker publishes an image only for a delta that is not empty, and its
    /// logins read the image it published: a SCRAM credential set or removed alone is a
    /// change (it once was none, and a user made through skua could not log in).
    #[test]
    fn a_scram_credential_alone_is_a_change() {
        use crate::controller::records::UserScramCredential;
        let mut image = MetadataImage::default();
        let set = MetadataRecord::UserScramCredential(UserScramCredential {
            name: "dave".into(),
            mechanism: 1,
            salt: vec![1; 16],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
            iterations: 4096,
        });
        let changes = vec![image.replay(&set).unwrap()];
        let delta = MetadataDelta::from_changes(&changes, &image);
        assert!(delta.scram_credentials && !delta.is_empty());
        let removed = MetadataRecord::RemoveUserScramCredential {
            name: "dave".into(),
            mechanism: 1,
        };
        let changes = vec![image.replay(&removed).unwrap()];
        assert!(!MetadataDelta::from_changes(&changes, &image).is_empty());
    }
}
