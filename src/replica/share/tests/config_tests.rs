use super::config::*;
use super::*;

#[test]
fn kafka_ranges_are_enforced() {
    assert!(SharePartitionConfig::default().validate().is_ok());
    let with = |f: fn(&mut SharePartitionConfig)| {
        let mut c = SharePartitionConfig::default();
        f(&mut c);
        c.validate()
    };
    assert!(with(|c| c.record_lock_duration_ms = 999).is_err());
    assert!(with(|c| c.record_lock_duration_ms = 3_600_001).is_err());
    assert!(with(|c| c.record_lock_duration_ms = 1_000).is_ok());
    assert!(with(|c| c.delivery_count_limit = 1).is_err());
    assert!(with(|c| c.delivery_count_limit = 11).is_err());
    assert!(with(|c| c.max_record_locks = 99).is_err());
    assert!(with(|c| c.max_record_locks = 10_001).is_err());
    let e = with(|c| c.delivery_count_limit = 11).unwrap_err();
    assert_eq!(e.name, "group.share.delivery.count.limit");
}

#[test]
fn auto_offset_reset_parses_kafkas_values() {
    assert_eq!(
        ShareAutoOffsetReset::parse("earliest"),
        Ok(ShareAutoOffsetReset::Earliest)
    );
    assert_eq!(
        ShareAutoOffsetReset::parse("LATEST"),
        Ok(ShareAutoOffsetReset::Latest)
    );
    let ms = |s| match ShareAutoOffsetReset::parse(s) {
        Ok(ShareAutoOffsetReset::ByDuration { duration_ms }) => Some(duration_ms),
        _ => None,
    };
    assert_eq!(ms("by_duration:PT1H"), Some(3_600_000));
    assert_eq!(ms("by_duration:P1D"), Some(86_400_000));
    assert_eq!(ms("by_duration:P1DT2H3M4.5S"), Some(93_784_500));
    assert_eq!(ms("by_duration:PT0.25S"), Some(250));
    for bad in [
        "",
        "none",
        "by_duration:",
        "by_duration:PT",
        "by_duration:-PT1H",
        "by_duration:PT-1H",
        "by_duration:1H",
        "by_duration:PT1X",
    ] {
        assert!(ShareAutoOffsetReset::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        ShareAutoOffsetReset::default(),
        ShareAutoOffsetReset::Latest
    );
}

struct Log;
impl LogOffsets for Log {
    fn earliest(&self) -> i64 {
        3
    }
    fn latest(&self) -> i64 {
        100
    }
    fn for_timestamp(&self, ts: i64) -> Option<i64> {
        (ts <= 50_000).then_some(40)
    }
}

#[test]
fn initial_start_offsets_follow_the_reset_strategy() {
    assert_eq!(
        initial_start_offset(ShareAutoOffsetReset::Earliest, &Log, 0),
        Ok(3)
    );
    assert_eq!(
        initial_start_offset(ShareAutoOffsetReset::Latest, &Log, 0),
        Ok(100)
    );
    let by = |d| ShareAutoOffsetReset::ByDuration { duration_ms: d };
    assert_eq!(initial_start_offset(by(60_000), &Log, 100_000), Ok(40));
    assert_eq!(
        initial_start_offset(by(10_000), &Log, 100_000),
        Err(OffsetNotAvailable(90_000))
    );
}

#[test]
fn a_never_initialized_partition_starts_where_the_strategy_says() {
    let persisted = PersistedState {
        state_epoch: 0,
        start_offset: -1,
        state_batches: vec![],
    };
    let sp = SharePartition::initialize(config(), 3, &persisted, || Ok(100)).unwrap();
    assert_eq!(
        (sp.start_offset(), sp.end_offset(), sp.leader_epoch()),
        (100, 100, 3)
    );
    let err = SharePartition::initialize(config(), 3, &persisted, || {
        Err(ShareError::OffsetNotAvailable(7))
    })
    .unwrap_err();
    assert_eq!(
        err.response_error(),
        kafka_protocol::error::ResponseError::OffsetNotAvailable
    );
}
