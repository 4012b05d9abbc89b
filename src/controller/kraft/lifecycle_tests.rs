//! The scenarios of Kafka's `BrokerLifecycleManagerTest` (registration, its timeout,
//! controlled shutdown, offline dirs, re-registration) and the timings and errors around
//! them, each driven event by event with an explicit clock.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse,
};
use uuid::Uuid;

use super::*;

const INCARNATION: Uuid = Uuid::from_u128(0x1234);
const DIR_A: Uuid = Uuid::from_u128(0xa);
const DIR_B: Uuid = Uuid::from_u128(0xb);
const DIR_C: Uuid = Uuid::from_u128(0xc);

fn registration() -> Registration {
    Registration {
        broker_id: 99,
        cluster_id: "x4AJGXQSRnephtTZzujw4w".into(),
        incarnation_id: INCARNATION,
        listeners: vec![RegisteredListener {
            name: "PLAINTEXT".into(),
            host: "broker99.example".into(),
            port: 9092,
            security_protocol: 0,
        }],
        features: vec![
            SupportedFeature {
                name: "metadata.version".into(),
                min: 7,
                max: 27,
            },
            SupportedFeature {
                name: "kraft.version".into(),
                min: 0,
                max: 1,
            },
        ],
        rack: Some("rack-1".into()),
        log_dirs: vec![DIR_B, DIR_A],
        previous_broker_epoch: 10,
    }
}

const TIMING: Timing = Timing {
    heartbeat_interval_ms: 2000,
    session_timeout_ms: 9000,
    initial_registration_timeout_ms: 60_000,
};

fn lifecycle() -> Lifecycle {
    Lifecycle::new(registration(), TIMING)
}

fn registered(epoch: i64) -> Event {
    Event::RegistrationResponse(Ok(
        BrokerRegistrationResponse::default().with_broker_epoch(epoch)
    ))
}

fn registration_error(e: ResponseError) -> Event {
    Event::RegistrationResponse(Ok(
        BrokerRegistrationResponse::default().with_error_code(e.code())
    ))
}

fn heartbeat(caught_up: bool, fenced: bool, shut_down: bool) -> Event {
    Event::HeartbeatResponse(Ok(BrokerHeartbeatResponse::default()
        .with_is_caught_up(caught_up)
        .with_is_fenced(fenced)
        .with_should_shut_down(shut_down)))
}

fn heartbeat_error(e: ResponseError) -> Event {
    Event::HeartbeatResponse(Ok(
        BrokerHeartbeatResponse::default().with_error_code(e.code())
    ))
}

fn only_registration(out: &[Output]) -> BrokerRegistrationRequest {
    match out {
        [Output::SendRegistration(r)] => r.clone(),
        other => panic!("expected one registration, got {other:?}"),
    }
}

fn only_heartbeat(out: &[Output]) -> BrokerHeartbeatRequest {
    match out {
        [Output::SendHeartbeat(h)] => h.clone(),
        other => panic!("expected one heartbeat, got {other:?}"),
    }
}

/// Starts at t=0 and answers the registration with epoch 1000: the first heartbeat is
/// sent at once and is returned.
fn started_and_registered(l: &mut Lifecycle) -> BrokerHeartbeatRequest {
    only_registration(&l.decide(0, Event::Start));
    only_heartbeat(&l.decide(5, registered(1000)))
}

/// Registered, caught up, ready, unfenced: RUNNING at t=30 with no request in flight.
fn running(l: &mut Lifecycle) {
    started_and_registered(l);
    assert_eq!(
        l.decide(10, heartbeat(true, true, false)),
        vec![Output::CaughtUp]
    );
    let h = only_heartbeat(&l.decide(20, Event::ReadyToUnfence));
    assert!(!h.want_fence);
    assert_eq!(
        l.decide(30, heartbeat(true, false, false)),
        vec![Output::Unfenced]
    );
    assert_eq!(l.state(), BrokerState::Running);
}

#[test]
fn created_started_and_closed() {
    let mut l = lifecycle();
    assert_eq!(l.state(), BrokerState::NotRunning);
    assert_eq!(l.next_deadline(), None);
    assert!(
        l.decide(0, Event::Tick).is_empty(),
        "nothing is sent before Start"
    );
    only_registration(&l.decide(0, Event::Start));
    assert_eq!(l.state(), BrokerState::Starting);
    assert_eq!(
        l.decide(1, Event::Shutdown),
        vec![Output::ShutDown(ShutdownReason::Requested)]
    );
    assert_eq!(l.state(), BrokerState::ShuttingDown);
    assert_eq!(l.next_deadline(), None);
    assert!(
        l.decide(2, registered(5)).is_empty(),
        "nothing happens after shutdown"
    );
    assert_eq!(l.broker_epoch(), -1);
}

#[test]
fn the_registration_carries_the_brokers_identity_then_heartbeats_start() {
    let mut l = lifecycle();
    let r = only_registration(&l.decide(0, Event::Start));
    assert_eq!(r.broker_id.0, 99);
    assert_eq!(r.cluster_id.as_str(), "x4AJGXQSRnephtTZzujw4w");
    assert_eq!(r.incarnation_id, INCARNATION);
    assert_eq!(r.previous_broker_epoch, 10);
    assert_eq!(r.log_dirs, vec![DIR_A, DIR_B], "log dirs are sent sorted");
    assert_eq!(r.rack.as_ref().map(|s| s.as_str()), Some("rack-1"));
    assert!(!r.is_migrating_zk_broker);
    assert_eq!(r.listeners.len(), 1);
    assert_eq!(r.listeners[0].name.as_str(), "PLAINTEXT");
    assert_eq!(r.listeners[0].host.as_str(), "broker99.example");
    assert_eq!(r.listeners[0].port, 9092);
    assert_eq!(r.listeners[0].security_protocol, 0);
    let mv = r
        .features
        .iter()
        .find(|f| f.name.as_str() == "metadata.version")
        .unwrap();
    assert_eq!(
        (mv.min_supported_version, mv.max_supported_version),
        (7, 27)
    );
    // While the registration is in flight nothing else is sent, even when due.
    assert!(l.decide(3, Event::Tick).is_empty());
    assert!(l.decide(4, Event::ReadyToUnfence).is_empty());

    let h = only_heartbeat(&l.decide(5, registered(1000)));
    assert_eq!(l.broker_epoch(), 1000);
    assert_eq!(h.broker_id.0, 99);
    assert_eq!(h.broker_epoch, 1000);
    assert!(
        !h.want_fence,
        "ReadyToUnfence came before the registration's answer"
    );
    assert!(!h.want_shut_down);
    assert_eq!(h.current_metadata_offset, -1);
}

#[test]
fn the_heartbeat_carries_the_applied_metadata_offset_and_asks_to_stay_fenced_until_ready() {
    let mut l = lifecycle();
    only_registration(&l.decide(0, Event::Start));
    assert!(l.decide(1, Event::MetadataApplied(41)).is_empty());
    let h = only_heartbeat(&l.decide(5, registered(1000)));
    assert_eq!(h.current_metadata_offset, 41);
    assert!(h.want_fence);
    // Not caught up yet: the next heartbeat comes after 10 ms, still STARTING.
    assert!(l.decide(6, heartbeat(false, true, false)).is_empty());
    assert_eq!(l.state(), BrokerState::Starting);
    assert_eq!(l.next_deadline(), Some(16));
    assert!(l.decide(15, Event::Tick).is_empty());
    l.decide(15, Event::MetadataApplied(57));
    l.decide(15, Event::MetadataApplied(50)); // an older offset never goes back
    let h = only_heartbeat(&l.decide(16, Event::Tick));
    assert_eq!(h.current_metadata_offset, 57);
    assert!(h.want_fence);
}

#[test]
fn caught_up_then_unfenced_then_heartbeats_every_interval() {
    let mut l = lifecycle();
    started_and_registered(&mut l);
    assert_eq!(
        l.decide(10, heartbeat(true, true, false)),
        vec![Output::CaughtUp]
    );
    assert_eq!(l.state(), BrokerState::Recovery);
    // Still fenced: RECOVERY heartbeats come every interval until the broker is ready.
    only_heartbeat(&l.decide(20, Event::Tick));
    assert!(l.decide(21, heartbeat(true, true, false)).is_empty());
    assert_eq!(l.state(), BrokerState::Recovery);
    assert_eq!(l.next_deadline(), Some(2021));
    // Ready: the next heartbeat goes at once and asks to be unfenced.
    let h = only_heartbeat(&l.decide(30, Event::ReadyToUnfence));
    assert!(!h.want_fence);
    assert_eq!(
        l.decide(31, heartbeat(true, false, false)),
        vec![Output::Unfenced]
    );
    assert_eq!(l.state(), BrokerState::Running);
    assert_eq!(l.next_deadline(), Some(2031));
    assert!(l.decide(2030, Event::Tick).is_empty());
    only_heartbeat(&l.decide(2031, Event::Tick));
    assert!(l.decide(2032, heartbeat(true, false, false)).is_empty());
    assert_eq!(l.next_deadline(), Some(4032));
}

#[test]
fn controlled_shutdown_waits_for_the_controller() {
    let mut l = lifecycle();
    running(&mut l);
    // The heartbeat asking to shut down goes at once.
    let h = only_heartbeat(&l.decide(100, Event::BeginControlledShutdown));
    assert!(h.want_shut_down);
    assert_eq!(l.state(), BrokerState::PendingControlledShutdown);
    assert!(l.decide(101, Event::BeginControlledShutdown).is_empty());
    // Not yet: the first wait is 50 ms, then the heartbeat interval.
    assert!(l.decide(110, heartbeat(true, false, false)).is_empty());
    assert_eq!(l.next_deadline(), Some(160));
    assert!(only_heartbeat(&l.decide(160, Event::Tick)).want_shut_down);
    assert!(l.decide(170, heartbeat(true, false, false)).is_empty());
    assert_eq!(l.next_deadline(), Some(2170));
    only_heartbeat(&l.decide(2170, Event::Tick));
    assert_eq!(
        l.decide(2180, heartbeat(true, false, true)),
        vec![Output::ShutDown(ShutdownReason::ControlledShutdownDone)]
    );
    assert_eq!(l.state(), BrokerState::ShuttingDown);
}

#[test]
fn controlled_shutdown_asked_while_a_heartbeat_is_in_flight_goes_when_it_is_answered() {
    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::Tick));
    assert!(l.decide(2035, Event::BeginControlledShutdown).is_empty());
    // The answer to the earlier heartbeat comes: the shutdown heartbeat follows at once.
    let out = l.decide(2040, heartbeat(true, false, false));
    assert!(only_heartbeat(&out).want_shut_down);
}

#[test]
fn shutdown_before_running_skips_controlled_shutdown() {
    let mut l = lifecycle();
    started_and_registered(&mut l);
    assert_eq!(
        l.decide(10, Event::BeginControlledShutdown),
        vec![Output::ShutDown(ShutdownReason::Requested)]
    );
}

#[test]
fn the_registration_times_out_while_the_id_is_held_by_another_incarnation() {
    let mut l = lifecycle();
    only_registration(&l.decide(0, Event::Start));
    // DUPLICATE_BROKER_REGISTRATION while the old incarnation's session lasts: retried
    // with a backoff that doubles up to the session timeout.
    let mut now = 1;
    let mut waits = Vec::new();
    loop {
        let out = l.decide(
            now,
            registration_error(ResponseError::DuplicateBrokerRegistration),
        );
        assert!(out.is_empty(), "{out:?}");
        let next = l.next_deadline().unwrap();
        waits.push(next - now);
        if next >= 60_000 {
            break;
        }
        only_registration(&l.decide(next, Event::Tick));
        now = next + 1;
    }
    assert_eq!(
        &waits[..8],
        &[100, 200, 400, 800, 1600, 3200, 6400, 9000],
        "doubling from 100 ms, capped at broker.session.timeout.ms"
    );
    assert_eq!(
        l.decide(60_000, Event::Tick),
        vec![Output::ShutDown(ShutdownReason::RegistrationTimedOut)]
    );
    assert_eq!(l.state(), BrokerState::ShuttingDown);
    assert_eq!(l.broker_epoch(), -1);
}

#[test]
fn the_registration_timeout_is_only_for_the_first_registration() {
    let mut l = lifecycle();
    started_and_registered(&mut l);
    assert!(l
        .decide(6, heartbeat(true, true, false))
        .contains(&Output::CaughtUp));
    assert!(l.next_deadline().unwrap() < 60_000);
    // Failing heartbeats long past the registration timeout never stop the broker.
    let mut now = 16;
    while now < 200_000 {
        only_heartbeat(&l.decide(now, Event::Tick));
        l.decide(now + 1, Event::HeartbeatResponse(Err(Failure::Timeout)));
        now = l.next_deadline().unwrap();
    }
    assert_eq!(l.state(), BrokerState::Recovery);
}

#[test]
fn failures_back_off_and_a_success_resets_the_backoff() {
    let mut l = lifecycle();
    only_registration(&l.decide(0, Event::Start));
    for (at, failure) in [
        (0, Failure::Timeout),
        (100, Failure::Disconnected),
        (300, Failure::Authentication),
        (700, Failure::UnsupportedVersion),
    ] {
        if at > 0 {
            only_registration(&l.decide(at, Event::Tick));
        }
        assert!(l
            .decide(at, Event::RegistrationResponse(Err(failure)))
            .is_empty());
    }
    assert_eq!(l.next_deadline(), Some(1500));
    only_registration(&l.decide(1500, Event::Tick));
    only_heartbeat(&l.decide(1500, registered(7)));
    assert!(l
        .decide(1501, heartbeat_error(ResponseError::StaleBrokerEpoch))
        .is_empty());
    assert_eq!(
        l.next_deadline(),
        Some(1601),
        "the backoff starts again at 100 ms"
    );
}

#[test]
fn an_immediate_send_is_never_made_after_a_failure() {
    let mut l = lifecycle();
    started_and_registered(&mut l);
    // Asked for at once while the heartbeat is in flight, but the heartbeat fails: the
    // backoff wins.
    assert!(l.decide(6, Event::ReadyToUnfence).is_empty());
    assert!(l
        .decide(7, Event::HeartbeatResponse(Err(Failure::Timeout)))
        .is_empty());
    assert_eq!(l.next_deadline(), Some(107));
}

#[test]
fn not_controller_finds_the_active_controller_again() {
    let mut l = lifecycle();
    only_registration(&l.decide(0, Event::Start));
    assert_eq!(
        l.decide(1, registration_error(ResponseError::NotController)),
        vec![Output::FindController]
    );
    assert_eq!(l.next_deadline(), Some(101));
    only_registration(&l.decide(101, Event::Tick));
    only_heartbeat(&l.decide(102, registered(3)));
    assert_eq!(
        l.decide(103, heartbeat_error(ResponseError::NotController)),
        vec![Output::FindController]
    );
    assert_eq!(l.broker_epoch(), 3, "the registration stands");
    let h = only_heartbeat(&l.decide(203, Event::Tick));
    assert_eq!(h.broker_epoch, 3);
}

#[test]
fn accumulated_offline_dirs_are_always_sent() {
    let mut l = lifecycle();
    running(&mut l);
    let next_dirs = |l: &mut Lifecycle, now: u64| {
        let h = only_heartbeat(&l.decide(now, Event::Tick));
        assert!(l.decide(now + 1, heartbeat(true, false, false)).is_empty());
        h.offline_log_dirs
    };
    assert!(next_dirs(&mut l, 2030).is_empty());
    // A failed dir is reported at once, then in every heartbeat after.
    let h = only_heartbeat(&l.decide(
        2040,
        Event::OfflineDir {
            dir: DIR_C,
            timeout_ms: 30_000,
        },
    ));
    assert_eq!(h.offline_log_dirs, vec![DIR_C]);
    assert!(l.decide(2041, heartbeat(true, false, false)).is_empty());
    l.decide(
        2050,
        Event::HeartbeatResponse(Err(Failure::Timeout)), // stray: nothing in flight
    );
    let h = only_heartbeat(&l.decide(
        2060,
        Event::OfflineDir {
            dir: DIR_A,
            timeout_ms: 30_000,
        },
    ));
    assert_eq!(h.offline_log_dirs, vec![DIR_A, DIR_C]);
    assert!(l.decide(2061, heartbeat(true, false, false)).is_empty());
    assert_eq!(next_dirs(&mut l, 4061), vec![DIR_A, DIR_C]);
    // Both were answered: their deadlines pass with nothing to do.
    assert_eq!(l.decide(40_000, Event::Tick).len(), 1); // the due heartbeat only
    assert_ne!(l.state(), BrokerState::ShuttingDown);
}

#[test]
fn an_offline_dir_the_controllers_never_hear_of_stops_the_broker() {
    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(
        100,
        Event::OfflineDir {
            dir: DIR_B,
            timeout_ms: 5000,
        },
    ));
    // Every heartbeat carrying it fails.
    let mut now = 101;
    loop {
        l.decide(now, Event::HeartbeatResponse(Err(Failure::Disconnected)));
        let next = l.next_deadline().unwrap();
        if next >= 5100 {
            break;
        }
        only_heartbeat(&l.decide(next, Event::Tick));
        now = next + 1;
    }
    assert_eq!(l.next_deadline(), Some(5100));
    assert_eq!(
        l.decide(5100, Event::Tick),
        vec![Output::ShutDown(ShutdownReason::OfflineDirNotReported(
            DIR_B
        ))]
    );
}

#[test]
fn a_registration_sent_again_keeps_the_incarnation_and_takes_the_new_epoch() {
    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::Tick));
    // The metadata asks for a new registration while a heartbeat is in flight: it goes
    // once the heartbeat is answered.
    assert!(l.decide(2031, Event::ResendRegistration).is_empty());
    let r = only_registration(&l.decide(2032, heartbeat(true, false, false)));
    assert_eq!(r.incarnation_id, INCARNATION);
    let h = only_heartbeat(&l.decide(2033, registered(1200)));
    assert_eq!(l.broker_epoch(), 1200);
    assert_eq!(h.broker_epoch, 1200);
    assert_eq!(l.state(), BrokerState::Running);
}

/// The controllers time the session from the heartbeat they received: the broker, from
/// when it sent the last one they answered, can only be early.
#[test]
fn the_lease_expires_a_session_timeout_after_the_last_answered_heartbeat_was_sent() {
    let mut l = lifecycle();
    assert!(!l.lease_expired(0), "not registered: no lease");
    started_and_registered(&mut l);
    assert!(l.lease_expired(5), "registered, no heartbeat answered yet");
    l.decide(10, heartbeat(true, true, false));
    assert!(!l.lease_expired(9004), "sent at 5, answered at 10");
    assert!(l.lease_expired(9005));
}

/// Cut off from the controllers past the session timeout, a RUNNING broker doubts its
/// leaderships (they may have fenced it and moved them); a heartbeat they answer as
/// fenced keeps the doubt; only one answered as unfenced, sent within the lease, ends it.
#[test]
fn a_running_broker_cut_off_past_the_session_timeout_doubts_its_leaderships_until_unfenced() {
    let mut l = lifecycle();
    running(&mut l);
    // The last answered heartbeat was sent at 20: the lease runs to 9020, and a tick is
    // due then even while a heartbeat hangs unanswered.
    only_heartbeat(&l.decide(2030, Event::Tick));
    assert_eq!(l.next_deadline(), Some(9020));
    assert!(l.decide(9019, Event::Tick).is_empty());
    assert!(!l.leaderships_in_doubt());
    assert!(l.decide(9020, Event::Tick).is_empty());
    assert!(l.leaderships_in_doubt());
    assert_eq!(l.state(), BrokerState::Running, "the state is Kafka's");
    // Failures keep it.
    let next = l
        .decide(9100, Event::HeartbeatResponse(Err(Failure::Timeout)))
        .is_empty();
    assert!(next && l.leaderships_in_doubt());
    // The controllers answer again, as fenced (they fenced it meanwhile): still in doubt.
    let h = only_heartbeat(&l.decide(9200, Event::Tick));
    assert!(!h.want_fence, "a RUNNING broker asks to be unfenced again");
    l.decide(9210, heartbeat(false, true, false));
    assert!(l.leaderships_in_doubt());
    // Once the metadata it applied has reached theirs, they unfence it: the doubt ends.
    l.decide(9300, Event::MetadataApplied(77));
    let h = only_heartbeat(&l.decide(11_210, Event::Tick));
    assert_eq!(h.current_metadata_offset, 77);
    assert!(l.decide(11_220, heartbeat(true, false, false)).is_empty());
    assert!(!l.leaderships_in_doubt());
    assert_eq!(l.next_deadline(), Some(13_220));
}

/// The controllers' answer decides even within the lease: a heartbeat answered as fenced
/// (they fenced the broker, e.g. for a session they timed out before its answers came
/// back) raises the doubt at once.
#[test]
fn a_heartbeat_answered_as_fenced_raises_the_doubt_at_once() {
    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::Tick));
    l.decide(2040, heartbeat(true, true, false));
    assert!(l.leaderships_in_doubt());
    assert_eq!(
        l.next_deadline(),
        Some(4040),
        "the next heartbeat; no lease watched"
    );
    only_heartbeat(&l.decide(4040, Event::Tick));
    l.decide(4050, heartbeat(true, false, false));
    assert!(!l.leaderships_in_doubt());
}

/// An unfenced answer to a heartbeat sent before the lease ran out settles the doubt (the
/// controllers received it within the lease); one to a heartbeat sent too long ago does
/// not, and the next heartbeat decides.
#[test]
fn only_an_answer_to_a_heartbeat_sent_within_the_lease_ends_the_doubt() {
    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::Tick));
    l.decide(2040, Event::HeartbeatResponse(Err(Failure::Disconnected)));
    only_heartbeat(&l.decide(2140, Event::Tick));
    // Unanswered for 12 s (a request timeout past the session timeout).
    l.decide(9020, Event::Tick);
    assert!(l.leaderships_in_doubt());
    l.decide(14_000, heartbeat(true, false, false));
    assert!(
        l.leaderships_in_doubt(),
        "sent at 2140, its lease ended at 11140"
    );
    only_heartbeat(&l.decide(16_000, Event::Tick));
    l.decide(16_010, heartbeat(true, false, false));
    assert!(!l.leaderships_in_doubt());
}

/// No doubt before the broker serves (fenced while STARTING or in RECOVERY is what it
/// asked for), none at a granted controlled shutdown (answered fenced, the broker stops),
/// and a registration sent again keeps the doubt until an answer shows it unfenced.
#[test]
fn the_doubt_is_only_for_a_serving_broker_and_outlives_a_registration_sent_again() {
    let mut l = lifecycle();
    started_and_registered(&mut l);
    l.decide(10, heartbeat(true, true, false));
    l.decide(60_000, Event::Tick);
    assert_eq!(l.state(), BrokerState::Recovery);
    assert!(!l.leaderships_in_doubt());

    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::BeginControlledShutdown));
    assert_eq!(
        l.decide(2040, heartbeat(true, true, true)),
        vec![Output::ShutDown(ShutdownReason::ControlledShutdownDone)]
    );
    assert!(!l.leaderships_in_doubt());

    // While a registration is out the lease is not watched (no deadline to spin on).
    let mut l = lifecycle();
    running(&mut l);
    only_registration(&l.decide(2030, Event::ResendRegistration));
    assert_eq!(l.next_deadline(), None);
    assert!(l.decide(9020, Event::Tick).is_empty());
    assert!(!l.leaderships_in_doubt());

    let mut l = lifecycle();
    running(&mut l);
    only_heartbeat(&l.decide(2030, Event::Tick));
    l.decide(2040, heartbeat(true, true, false));
    assert!(l.leaderships_in_doubt());
    only_registration(&l.decide(2050, Event::ResendRegistration));
    only_heartbeat(&l.decide(4050, registered(1300)));
    assert!(
        l.leaderships_in_doubt(),
        "registered again, not yet unfenced"
    );
    l.decide(4060, heartbeat(true, false, false));
    assert!(!l.leaderships_in_doubt());
}

#[test]
fn stray_responses_are_ignored() {
    let mut l = lifecycle();
    assert!(l.decide(0, registered(5)).is_empty());
    assert_eq!(l.broker_epoch(), -1);
    only_registration(&l.decide(1, Event::Start));
    assert!(l.decide(2, heartbeat(true, false, false)).is_empty());
    assert_eq!(l.state(), BrokerState::Starting);
    only_heartbeat(&l.decide(3, registered(5)));
}

/// Heartbeats failing while the old active controller is gone back off towards the session
/// timeout; once the quorum names a new leader, the next one goes at once, and one in
/// flight to the old controller is retried at once if it fails. Without failures, a new
/// controller changes no schedule.
#[test]
fn a_new_active_controller_gets_the_failed_heartbeat_at_once() {
    let mut l = lifecycle();
    running(&mut l);
    assert!(l.decide(31, Event::ControllerChanged).is_empty());
    assert_eq!(l.next_deadline(), Some(2030), "the interval, unchanged");
    let mut at = 2030;
    for _ in 0..5 {
        only_heartbeat(&l.decide(at, Event::Tick));
        assert!(l
            .decide(at, Event::HeartbeatResponse(Err(Failure::Disconnected)))
            .is_empty());
        at = l.next_deadline().unwrap();
    }
    assert_eq!(at, 2030 + 100 + 200 + 400 + 800 + 1600, "backing off");
    only_heartbeat(&l.decide(4000, Event::ControllerChanged));
    // Named while a heartbeat is in flight (to the old controller): if it fails, the
    // retry goes in the same step.
    assert!(l.decide(4001, Event::ControllerChanged).is_empty());
    only_heartbeat(&l.decide(4002, Event::HeartbeatResponse(Err(Failure::Timeout))));
    // Only once: the next failure backs off.
    assert!(l
        .decide(4003, Event::HeartbeatResponse(Err(Failure::Disconnected)))
        .is_empty());
    assert!(
        l.next_deadline().unwrap() > 4003 + 1000,
        "{:?}",
        l.next_deadline()
    );
    only_heartbeat(&l.decide(4004, Event::ControllerChanged));
    // Answered: the next failure backs off again from 100 ms.
    assert!(l.decide(4005, heartbeat(true, false, false)).is_empty());
    only_heartbeat(&l.decide(6005, Event::Tick));
    assert!(l
        .decide(6006, Event::HeartbeatResponse(Err(Failure::Disconnected)))
        .is_empty());
    assert_eq!(l.next_deadline(), Some(6106));
}
