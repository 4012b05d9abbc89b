//! skua: a Kafka-compatible broker.
//!
//! A request's path through the broker, and the module that owns each step:
//!
//! ```text
//! client ──TCP──▶ network/    listeners, a reader and a writer task per connection over a
//!                             transport, length-prefixed frames, pipelined requests
//!                             answered in order, request memory bounded (muting)
//!              ▶ protocol/   request header + body codec (kafka-protocol crate)
//!              ▶ router      ApiKey → handler table and what each API needs (auth/needs);
//!                            ApiVersions is derived from it
//!              ▶ network/pipeline  the one place every request passes: authentication
//!                            state, the route's declared authorization, the RequestMetrics
//!                            time split, error counts, the quota's throttle
//!              ▶ handlers/   one file per API, protocol only; resource checks through the
//!                            Authorizer helpers (auth/); errors reach the client as one
//!                            type (error.rs)
//!              ▶ replica/    ReplicaManager: append_records(origin, …) and fetch(params, …)
//!                            own every append (client, coordinator, marker, follower) and
//!                            every read (consumer, follower), and count their bytes per
//!                            topic; the partitions hosted as leader or follower: ISR, high
//!                            watermark, delayed produce (acks=all) and delayed fetch;
//!                            share/: share groups' share-partitions (records acquired,
//!                            acknowledged, redelivered), share sessions, ShareFetch's
//!                            long poll through the delayed fetch
//!              ▶ log/        LogManager → Log → LogSegment → .log/.index/.timeindex/.txnindex
//! beside them:
//!                controller/ cluster metadata behind one trait: the KRaft metadata log
//!                            (Kafka's records), the image replaying it gives, and the
//!                            deltas the replica manager and the group coordinator follow;
//!                            or zk/, Kafka 3.9's ZooKeeper-mode controller
//!                coordinator/ runtime/: one owner per internal-topic partition, records
//!                            replayed once written; group/: consumer groups and
//!                            committed offsets in __consumer_offsets, loaded and unloaded
//!                            as the partitions' leadership changes; txn/: transactions
//!                            in __transaction_state, markers to their partitions;
//!                            share/: share-partitions' state in __share_group_state
//!                            (KIP-932), found through FindCoordinator key type SHARE,
//!                            reached in process or with its RPCs from other brokers
//!                config/     server.properties and per-topic configs
//!                auth/       the Authorizer trait (allow-all by default), per-API needs,
//!                            the request context's helpers, authorized operations;
//!                            Kafka's ACLs (acl, acl_index), the ACL authorizer and its
//!                            stores (the metadata log's records, ZooKeeper's znodes)
//!                tls/        SSL listeners' settings, keystores, rustls contexts (inbound
//!                            and the broker's outbound connections), mTLS principals
//!                sasl/       SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER) and Kafka's JAAS
//!                            grammar as pure state machines, a listener's SASL settings;
//!                            network/authenticator runs them ahead of the pipeline
//!                metrics/    Kafka's metrics under the names Strimzi's JMX exporter rules
//!                            give them: RequestMetrics per API, BrokerTopicMetrics, handles
//!                            resolved once and marked with atomic adds; gauges computed at
//!                            scrape time; the `metrics.listener` HTTP endpoint
//!                logging/    the broker's own log: text or JSON lines, a level per
//!                            logger (Kafka's names mapped to module paths) from config
//!                            and the BROKER_LOGGER resource (handlers/broker_loggers)
//!                quota/      client quotas: Kafka's quota managers (byte rates, request time,
//!                            controller mutations), asked by the pipeline per request
//!                zk/         Kafka's znodes and a ZooKeeper session (for ZooKeeper mode)
//!                client/     outbound Kafka client (pipelined, reconnecting), used by the tests
//!                scheduler   the broker's periodic jobs (checkpoints, flushes, retention, the
//!                            log cleaner, expiry, removal of deleted logs), owned by the
//!                            broker; jobs.rs lists them
//!                clock       the wall clock every layer reads (the ZooKeeper controller's is
//!                            injected, for its simulation)
//! ```

pub mod auth;
pub mod broker;
pub mod client;
pub mod clock;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod error;
pub mod handlers;
pub mod jobs;
pub mod log;
pub mod logging;
pub mod metrics;
pub mod network;
pub mod protocol;
pub mod quota;
pub mod replica;
pub mod router;
pub mod sasl;
pub mod scheduler;
pub mod tls;
pub mod zk;
