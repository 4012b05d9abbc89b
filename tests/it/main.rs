//! The integration tests in one binary (one link of the broker instead of one per
//! scenario file): a module per file. `scripts/test` runs each test in a process of its
//! own, the cluster scenarios two at a time (`scripts/test.d/run-tests.py`); plain
//! `cargo test` runs them all in this process. The tests that install a global allocator
//! to measure what decoding allocates (`tests/decoder_fuzz.rs`,
//! `tests/offsets_records_fuzz.rs`, `tests/resource_bounds.rs`) are binaries of their
//! own: another test's allocations would count against theirs.

mod client_quotas;
mod common;
mod fuzzing;
mod replay;

mod acl_cluster;
mod acls;
mod authorized_operations;
mod auto_create;
mod broker_jobs;
mod broker_loggers;
mod broker_over_tcp;
mod cli;
mod cluster_fixtures;
mod cluster_ops;
mod compaction;
mod compaction_crash;
mod consumer_groups;
mod consumer_protocol;
mod controller_requests;
mod coordinator_leadership;
mod crash_recovery;
mod decompression_bombs;
mod dynamic_configs;
mod dynamic_listeners;
mod faults;
mod fetch_progress;
mod fetch_sessions;
mod follower_fetch_sessions;
mod group_configs;
mod idle_groups;
mod isr_membership;
mod kafka_dir_adoption;
mod kraft_broker;
mod kraft_controller;
mod kraft_quorum;
mod load_generator;
mod log_dir_failure;
mod log_dirs;
mod metadata_records_fuzz;
mod metrics_cluster;
mod metrics_endpoint;
mod named_listeners;
mod offsets_topic_safety;
mod old_protocol_replication;
mod outbound_client;
mod partition_limits;
mod protocol_fixtures;
mod reassignment;
mod record_validation_over_tcp;
mod replication_bytes;
mod replication_over_tcp;
mod replication_throttles;
mod request_pipeline;
mod retention;
mod sasl_cluster;
mod sasl_listeners;
mod share_cluster;
mod share_groups;
mod share_v2;
mod storage_limits;
mod stored_data_fuzz;
mod strays_and_deletions;
mod tls_cluster;
mod tls_listeners;
mod transactions;
mod txn_cluster;
mod txn_offsets;
mod txn_offsets_cluster;
mod zk_broker_replay;
mod zk_cluster;
mod zk_controller_apis;
mod zk_log_dir_identity;
mod zk_metadata_names_fuzz;
mod zk_producer_id_block;
mod zk_session;
mod zk_untrusted_names;
