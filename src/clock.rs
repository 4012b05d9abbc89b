//! The broker's wall clock: milliseconds since the Unix epoch, as Kafka's `Time.milliseconds`
//! stamps records, sessions and deadlines. One function for every layer, so a clock that
//! reads before 1970 (a broken RTC) reads as 0 everywhere rather than differently per
//! module. The ZooKeeper controller takes its clock injected (`controller::zk::clock`) so
//! its simulation runs on tokio's paused time; everything else reads this one.

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
