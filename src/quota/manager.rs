//! Kafka's `ClientQuotaManager`s (produce, fetch, request) and its
//! `ControllerMutationQuotaManager`, as one manager with the default quota callback.
//!
//! Which quota a client's request counts against follows Kafka's `DefaultQuotaCallback`,
//! per quota type, most specific first:
//!
//! 1. `/config/users/<user>/clients/<client-id>`
//! 2. `/config/users/<user>/clients/<default>`
//! 3. `/config/users/<user>`
//! 4. `/config/users/<default>/clients/<client-id>`
//! 5. `/config/users/<default>/clients/<default>`
//! 6. `/config/users/<default>`
//! 7. `/config/clients/<client-id>`
//! 8. `/config/clients/<default>`
//!
//! The level found also says who shares the measured rate (Kafka's metric tags): a
//! user-level quota is one rate for all the user's client ids, a client-id-level one is
//! one rate per client id across users, a user + client-id one is per pair; a default
//! entity's bound applies to each user (or client id) on its own.
//!
//! The per-request path allocates nothing and takes no global lock: a connection holds
//! its client's resolved quotas ([`ConnectionQuota`], in its session), resolved on its
//! first request and again only when the client id it sends changes or a quota change
//! has bumped the generation number (so an altered quota reaches open connections at
//! their next request). Resolving goes through a sharded map per (principal, client id),
//! looked up with a key built in a thread-local buffer. Each rate has its own mutex, held
//! for one record and one measure. Before any quota of a type is set, nothing is
//! recorded for it (Kafka's `quotasEnabled`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use parking_lot::{Mutex, RwLock};

use super::configs::{ClientQuotas, QuotaType};
use super::entity::{EntityName, QuotaEntity};
use super::rate::{self, Rate, TokenBucket, Windows};
use super::{Caller, MutationQuota, QuotaManager, Verdict};
use crate::metrics::exposition::{Exposition, Kind};
use crate::protocol::fetch_size::fetch_quota_bytes;
use crate::router::RequestContext;

/// Kafka's `ClientQuotaManager.InactiveSensorExpirationTimeSeconds`: a client's rates are
/// forgotten after an hour without requests.
const INACTIVE_EXPIRATION_MS: i64 = 3_600_000;
/// How many new clients between two sweeps of the inactive ones.
const SWEEP_EVERY: u64 = 1024;
/// `request_percentage` counts handler time in percent of one second per second.
const NANOS_TO_PERCENTAGE_PER_SECOND: f64 = 100.0 / 1_000_000_000.0;

/// Whose request it is: the principal's name and the client id ("" when none).
#[derive(Clone, Copy, Debug)]
pub struct QuotaClient<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

/// What one handled request measured.
pub struct Recorded<'a> {
    pub api_key: ApiKey,
    pub request_bytes: usize,
    /// The response's size, computed only if a consumer quota needs it.
    pub response_bytes: Option<&'a dyn Fn() -> usize>,
    pub handler_time: Duration,
}

/// The broker's quota settings (`quota.window.*`, `controller.quota.window.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaSettings {
    pub windows: Windows,
    pub controller_windows: Windows,
}

impl Default for QuotaSettings {
    fn default() -> Self {
        QuotaSettings {
            windows: Windows::new(11, 1),
            controller_windows: Windows::new(11, 1),
        }
    }
}

/// The quotas configured for one type: entity → bound.
type Overrides = HashMap<QuotaEntity, f64>;

/// One measured quantity shared by the clients its metric tags group together.
pub(super) struct Sensor {
    stat: Mutex<Stat>,
    /// The throttle times given (Kafka's `throttle-time` sensor, an average over the
    /// quota's windows of the throttled requests).
    throttles: Mutex<Rate>,
    last_record_ms: AtomicI64,
}

enum Stat {
    Rate(Rate),
    Bucket(TokenBucket),
}

/// A client's sensor for one quota type, with the bound that applies to it.
#[derive(Clone)]
pub(super) struct Slot {
    pub(super) sensor: Arc<Sensor>,
    pub(super) bound: f64,
}

/// A (principal, client id)'s resolved quotas, valid for one generation.
struct Client {
    generation: u64,
    slots: [Option<Slot>; 4],
    last_used_ms: AtomicI64,
}

pub struct ClientQuotaManager {
    /// Tells this manager's resolutions held by connections from another's (a process
    /// may run several brokers).
    id: u64,
    settings: QuotaSettings,
    epoch: Instant,
    /// The quotas in force per type, replaced whole on every change.
    overrides: RwLock<Arc<[Overrides; 4]>>,
    /// Per type: whether any quota of the type was ever set (Kafka never unsets it).
    enabled: [AtomicBool; 4],
    any_enabled: AtomicBool,
    generation: AtomicU64,
    clients: DashMap<Box<[u8]>, Arc<Client>>,
    /// Sensors by type and metric tags (user, client id; "" when not part of the tags).
    sensors: DashMap<(QuotaType, String, String), Arc<Sensor>>,
    new_clients: AtomicU64,
}

/// The next manager's id.
static NEXT_MANAGER_ID: AtomicU64 = AtomicU64::new(1);

/// A connection's resolved quotas, kept in its session: its requests reach their sensors
/// without the shared map of clients (a map read and a reference count that every
/// connection of the user would write). Empty when cloned: a re-authenticated session,
/// whose principal may differ, resolves afresh.
#[derive(Default)]
pub struct ConnectionQuota(Mutex<Option<Held>>);

impl Clone for ConnectionQuota {
    fn clone(&self) -> ConnectionQuota {
        ConnectionQuota::default()
    }
}

struct Held {
    manager: u64,
    client_id: Box<str>,
    client: Arc<Client>,
}

thread_local! {
    /// The (principal, client id) key of the request being recorded: reused, so a
    /// lookup allocates nothing once the buffer has grown.
    static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl ClientQuotaManager {
    pub fn new(settings: QuotaSettings) -> ClientQuotaManager {
        ClientQuotaManager {
            id: NEXT_MANAGER_ID.fetch_add(1, Ordering::Relaxed),
            settings,
            epoch: Instant::now(),
            overrides: RwLock::new(Arc::new(Default::default())),
            enabled: Default::default(),
            any_enabled: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            clients: DashMap::new(),
            sensors: DashMap::new(),
            new_clients: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> i64 {
        self.ms_at(Instant::now())
    }

    fn ms_at(&self, at: Instant) -> i64 {
        at.saturating_duration_since(self.epoch).as_millis() as i64
    }

    /// Puts `quotas` (every entity's, as the cluster keeps them) in force.
    pub fn update(&self, quotas: &ClientQuotas) {
        let mut next: [Overrides; 4] = Default::default();
        for (entity, values) in quotas {
            for (key, value) in values {
                if let Some(t) = QuotaType::of_key(key) {
                    next[t.index()].insert(entity.clone(), *value);
                    self.enabled[t.index()].store(true, Ordering::Release);
                    self.any_enabled.store(true, Ordering::Release);
                }
            }
        }
        *self.overrides.write() = Arc::new(next);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn is_enabled(&self, t: QuotaType) -> bool {
        self.enabled[t.index()].load(Ordering::Acquire)
    }

    /// The bound that applies to (`user`, `client_id`) for `t`, if any (for tests and
    /// the fetch size bound).
    pub fn quota(&self, t: QuotaType, user: &str, client_id: &str) -> Option<f64> {
        let overrides = self.overrides.read().clone();
        resolve(&overrides[t.index()], user, client_id).map(|(_, _, bound)| bound)
    }

    /// The resolved quotas of (`user`, `client_id`), from the cache when current.
    fn client(&self, user: &str, client_id: &str, now_ms: i64) -> Arc<Client> {
        let generation = self.generation.load(Ordering::Acquire);
        let cached = KEY.with(|key| {
            let mut key = key.borrow_mut();
            key.clear();
            key.extend_from_slice(&(user.len() as u32).to_le_bytes());
            key.extend_from_slice(user.as_bytes());
            key.extend_from_slice(client_id.as_bytes());
            self.clients.get(key.as_slice()).map(|c| c.clone())
        });
        if let Some(c) = cached.filter(|c| c.generation == generation) {
            c.last_used_ms.store(now_ms, Ordering::Relaxed);
            return c;
        }
        let client = Arc::new(self.resolve_client(user, client_id, generation, now_ms));
        let mut key = Vec::with_capacity(4 + user.len() + client_id.len());
        key.extend_from_slice(&(user.len() as u32).to_le_bytes());
        key.extend_from_slice(user.as_bytes());
        key.extend_from_slice(client_id.as_bytes());
        self.clients.insert(key.into_boxed_slice(), client.clone());
        if self.new_clients.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep(now_ms);
        }
        client
    }

    fn resolve_client(&self, user: &str, client_id: &str, generation: u64, now_ms: i64) -> Client {
        let overrides = self.overrides.read().clone();
        let slots = QuotaType::ALL.map(|t| {
            let (user_tag, client_tag, bound) = resolve(&overrides[t.index()], user, client_id)?;
            let tags = (
                t,
                if user_tag {
                    user.to_string()
                } else {
                    String::new()
                },
                if client_tag {
                    client_id.to_string()
                } else {
                    String::new()
                },
            );
            let sensor = self
                .sensors
                .entry(tags)
                .or_insert_with(|| Arc::new(Sensor::new(t, self.settings.windows, now_ms)))
                .clone();
            Some(Slot { sensor, bound })
        });
        Client {
            generation,
            slots,
            last_used_ms: AtomicI64::new(now_ms),
        }
    }

    /// Forgets clients and sensors idle for an hour (Kafka expires its sensors so).
    fn sweep(&self, now_ms: i64) {
        self.clients.retain(|_, c| {
            now_ms - c.last_used_ms.load(Ordering::Relaxed) < INACTIVE_EXPIRATION_MS
        });
        self.sensors.retain(|_, s| {
            Arc::strong_count(s) > 1
                || now_ms - s.last_record_ms.load(Ordering::Relaxed) < INACTIVE_EXPIRATION_MS
        });
    }

    /// Records `value` for `t` and answers the throttle time (Kafka's
    /// `recordAndGetThrottleTimeMs`).
    fn record_type(&self, client: &Client, t: QuotaType, value: f64, now_ms: i64) -> i64 {
        let Some(slot) = &client.slots[t.index()] else {
            return 0;
        };
        let windows = self.settings.windows;
        let throttle = slot.sensor.record_rate(value, slot.bound, now_ms);
        let throttle = match t {
            // The request quota's throttle is bounded by one window (Kafka's
            // `ClientRequestQuotaManager.throttleTime`); the byte rates' are not.
            QuotaType::Request => throttle.min(windows.window_ms),
            _ => throttle,
        };
        if throttle > 0 {
            slot.sensor.throttles.lock().record(throttle as f64, now_ms);
        }
        throttle
    }

    /// Each client sensor's throttle time and measured rate, under the names Strimzi's
    /// quota rules give Kafka's `kafka.server:type=<Produce|Fetch|Request>,user=,client-id=`
    /// metrics: `kafka_server_quota_throttle_time` (ms, the mean of the throttles given
    /// over the quota's windows, NaN without one), `kafka_server_quota_byte_rate`
    /// (Produce, Fetch: bytes/s) and `kafka_server_quota_request_time` (Request: percent
    /// of one thread).
    pub fn write_metrics(&self, out: &mut Exposition) {
        let now_ms = self.now_ms();
        let mut rows: Vec<(QuotaType, String, String, f64, f64)> = self
            .sensors
            .iter()
            .filter(|e| e.key().0 != QuotaType::ControllerMutation)
            .map(|e| {
                let (t, user, client_id) = e.key().clone();
                let throttle = e.value().throttles.lock().average(now_ms);
                let rate = match &mut *e.value().stat.lock() {
                    Stat::Rate(r) => r.measure(now_ms),
                    Stat::Bucket(_) => 0.0,
                };
                (t, user, client_id, throttle, rate)
            })
            .collect();
        rows.sort_by(|a, b| (a.0.index(), &a.1, &a.2).cmp(&(b.0.index(), &b.1, &b.2)));
        let families = [
            (
                "kafka_server_quota_throttle_time",
                "Mean throttle time given to the client over the quota's windows, ms",
                None,
            ),
            (
                "kafka_server_quota_byte_rate",
                "The client's measured rate against its byte-rate quota, bytes/s",
                Some([QuotaType::Produce, QuotaType::Fetch].as_slice()),
            ),
            (
                "kafka_server_quota_request_time",
                "The client's measured request handler time, percent of one thread",
                Some([QuotaType::Request].as_slice()),
            ),
        ];
        for (name, help, types) in families {
            out.family(name, Kind::Gauge, help);
            for (t, user, client_id, throttle, rate) in &rows {
                let value = match types {
                    None => *throttle,
                    Some(types) if types.contains(t) => *rate,
                    Some(_) => continue,
                };
                let labels = [
                    ("resource", t.resource()),
                    ("user", user.as_str()),
                    ("clientId", client_id.as_str()),
                ];
                out.sample("", &labels, value);
            }
        }
    }

    /// Records one handled client request at `now_ms`; the throttle time in ms.
    pub fn record_at(&self, who: QuotaClient<'_>, request: Recorded<'_>, now_ms: i64) -> i32 {
        let QuotaClient { user, client_id } = who;
        if !self.any_enabled.load(Ordering::Acquire) {
            return 0;
        }
        let client = self.client(user, client_id, now_ms);
        self.record_client(&client, request, now_ms)
    }

    /// [`ClientQuotaManager::record_at`] for a request of the connection holding `held`:
    /// its resolved quotas are used while current (same client id, no quota change
    /// since), resolved and held again otherwise. The principal is the session's, fixed
    /// for the life of `held`.
    pub fn record_held(
        &self,
        held: &ConnectionQuota,
        who: QuotaClient<'_>,
        request: Recorded<'_>,
        now_ms: i64,
    ) -> i32 {
        if !self.any_enabled.load(Ordering::Acquire) {
            return 0;
        }
        self.with_held(
            held,
            who,
            || now_ms,
            |client| self.record_client(client, request, now_ms),
        )
    }

    /// `f` of the client's resolved quotas that `held` keeps, resolved (and kept) first
    /// unless current: the same client id, no quota change since. `held`'s lock is the
    /// connection's alone. The clock (`now_ms`) is read only to resolve.
    fn with_held<R>(
        &self,
        held: &ConnectionQuota,
        who: QuotaClient<'_>,
        now_ms: impl FnOnce() -> i64,
        f: impl FnOnce(&Client) -> R,
    ) -> R {
        let generation = self.generation.load(Ordering::Acquire);
        let mut held = held.0.lock();
        if let Some(h) = &*held {
            if h.manager == self.id
                && h.client.generation == generation
                && *h.client_id == *who.client_id
            {
                return f(&h.client);
            }
        }
        let client = self.client(who.user, who.client_id, now_ms());
        let held = held.insert(Held {
            manager: self.id,
            client_id: who.client_id.into(),
            client,
        });
        f(&held.client)
    }

    /// Records one handled request against `client`'s sensors; the throttle time in ms.
    fn record_client(&self, client: &Client, request: Recorded<'_>, now_ms: i64) -> i32 {
        let Recorded {
            api_key,
            request_bytes,
            response_bytes,
            handler_time,
        } = request;
        let mut throttle = 0;
        if self.is_enabled(QuotaType::Request) {
            // Through u64 (584 years of nanoseconds): the same f64, without the software
            // conversion a u128 takes.
            let nanos = u64::try_from(handler_time.as_nanos()).unwrap_or(u64::MAX);
            let percent = nanos as f64 * NANOS_TO_PERCENTAGE_PER_SECOND;
            throttle = self.record_type(client, QuotaType::Request, percent, now_ms);
        }
        let bytes = match api_key {
            ApiKey::Produce if self.is_enabled(QuotaType::Produce) => {
                Some((QuotaType::Produce, request_bytes))
            }
            ApiKey::Fetch if self.is_enabled(QuotaType::Fetch) => {
                Some((QuotaType::Fetch, response_bytes.map_or(0, |f| f())))
            }
            _ => None,
        };
        if let Some((t, n)) = bytes {
            throttle = throttle.max(self.record_type(client, t, n as f64, now_ms));
        }
        throttle.clamp(0, i32::MAX as i64) as i32
    }

    /// A controller mutation quota for one request (Kafka's `newQuotaFor`): strict (a
    /// mutation over the quota is refused) or permissive (accepted, then throttled).
    pub fn mutation_quota_at(
        &self,
        user: &str,
        client_id: &str,
        strict: bool,
        now_ms: i64,
    ) -> MutationQuota {
        if !self.is_enabled(QuotaType::ControllerMutation) {
            return MutationQuota::unbounded();
        }
        let client = self.client(user, client_id, now_ms);
        match &client.slots[QuotaType::ControllerMutation.index()] {
            None => MutationQuota::unbounded(),
            Some(slot) => MutationQuota::new(
                slot.clone(),
                self.settings.controller_windows,
                strict,
                self.epoch,
            ),
        }
    }

    /// The most a single fetch may return without being throttled for sure (Kafka's
    /// `getMaxValueInQuotaWindow`): the quota over all but one window.
    pub fn max_fetch_bytes(&self, user: &str, client_id: &str) -> Option<usize> {
        if !self.is_enabled(QuotaType::Fetch) {
            return None;
        }
        let bound = self.client(user, client_id, self.now_ms()).slots[QuotaType::Fetch.index()]
            .as_ref()?
            .bound;
        Some(self.max_value_in_window(bound))
    }

    /// Kafka's `getMaxValueInQuotaWindow` for a bound.
    fn max_value_in_window(&self, bound: f64) -> usize {
        let w = self.settings.windows;
        let seconds = (w.samples as f64 - 1.0) * (w.window_ms as f64 / 1000.0);
        (bound * seconds).clamp(0.0, i32::MAX as f64) as usize
    }
}

impl Sensor {
    fn new(t: QuotaType, windows: Windows, now_ms: i64) -> Sensor {
        let stat = match t {
            QuotaType::ControllerMutation => Stat::Bucket(TokenBucket::new()),
            _ => Stat::Rate(Rate::new(windows)),
        };
        Sensor {
            stat: Mutex::new(stat),
            throttles: Mutex::new(Rate::new(windows)),
            last_record_ms: AtomicI64::new(now_ms),
        }
    }

    /// Records `value` and checks the rate against `bound` (Kafka's `Sensor.record` with
    /// `checkQuotas`): the throttle time, 0 within the quota.
    fn record_rate(&self, value: f64, bound: f64, now_ms: i64) -> i64 {
        self.last_record_ms.store(now_ms, Ordering::Relaxed);
        let mut stat = self.stat.lock();
        let Stat::Rate(r) = &mut *stat else {
            return 0;
        };
        r.record(value, now_ms);
        let (measured, window_size_ms) = r.measure_over(now_ms);
        if measured <= bound {
            return 0;
        }
        rate::throttle_time_ms(measured, bound, window_size_ms)
    }

    /// Takes `permits` from the token bucket (strict: only if it is not in debt); the
    /// throttle time when in debt.
    pub(super) fn record_tokens(
        &self,
        windows: Windows,
        bound: f64,
        permits: f64,
        strict: bool,
        now_ms: i64,
    ) -> Result<(), i64> {
        self.last_record_ms.store(now_ms, Ordering::Relaxed);
        let mut stat = self.stat.lock();
        let Stat::Bucket(b) = &mut *stat else {
            return Ok(());
        };
        if strict {
            let tokens = b.measure(windows, bound, now_ms);
            if tokens < 0.0 {
                return Err(rate::token_throttle_time_ms(tokens, bound));
            }
            b.record(windows, bound, permits, now_ms);
            return Ok(());
        }
        b.record(windows, bound, permits, now_ms);
        let tokens = b.measure(windows, bound, now_ms);
        match tokens < 0.0 {
            true => Err(rate::token_throttle_time_ms(tokens, bound)),
            false => Ok(()),
        }
    }
}

/// Kafka's `DefaultQuotaCallback.quotaMetricTags` then `quotaLimit`: whether the user
/// and the client id are part of the tags, and the bound; None without a quota.
fn resolve(overrides: &Overrides, user: &str, client_id: &str) -> Option<(bool, bool, f64)> {
    if overrides.is_empty() {
        return None;
    }
    let u = || EntityName::Named(user.to_string());
    let c = || EntityName::Named(client_id.to_string());
    let d = || EntityName::Default;
    let has = |e: QuotaEntity| overrides.contains_key(&e);
    let (user_tag, client_tag) = if has(QuotaEntity::user_client_id(u(), c()))
        || has(QuotaEntity::user_client_id(u(), d()))
    {
        (true, true)
    } else if has(QuotaEntity::user(u())) {
        (true, false)
    } else if has(QuotaEntity::user_client_id(d(), c()))
        || has(QuotaEntity::user_client_id(d(), d()))
    {
        (true, true)
    } else if has(QuotaEntity::user(d())) {
        (true, false)
    } else {
        (false, true)
    };
    // The limit is looked up from the tags alone, so an empty name in them (a client
    // without a client id) falls to the other side's quotas, as in Kafka.
    let user_tag = user_tag && !user.is_empty();
    let client_tag = client_tag && !client_id.is_empty();
    let get = |e: QuotaEntity| overrides.get(&e).copied();
    let bound = match (user_tag, client_tag) {
        (true, true) => get(QuotaEntity::user_client_id(u(), c()))
            .or_else(|| get(QuotaEntity::user_client_id(u(), d())))
            .or_else(|| get(QuotaEntity::user_client_id(d(), c())))
            .or_else(|| get(QuotaEntity::user_client_id(d(), d()))),
        (true, false) => get(QuotaEntity::user(u())).or_else(|| get(QuotaEntity::user(d()))),
        (false, true) => {
            get(QuotaEntity::client_id(c())).or_else(|| get(QuotaEntity::client_id(d())))
        }
        (false, false) => None,
    }?;
    Some((user_tag, client_tag, bound))
}

impl QuotaManager for ClientQuotaManager {
    fn enabled(&self) -> bool {
        self.any_enabled.load(Ordering::Acquire)
    }

    fn record(
        &self,
        caller: &Caller<'_>,
        api_key: ApiKey,
        request_bytes: usize,
        response: &ResponseKind,
        handler_time: Duration,
    ) -> Verdict {
        let response_bytes = || match response {
            ResponseKind::Fetch(f) => fetch_quota_bytes(f, caller.api_version),
            _ => 0,
        };
        let who = QuotaClient {
            user: &caller.session.principal.name,
            client_id: caller.client_id,
        };
        let recorded = Recorded {
            api_key,
            request_bytes,
            response_bytes: Some(&response_bytes),
            handler_time,
        };
        let held = &caller.session.held.quota;
        let throttle_ms = self.record_held(held, who, recorded, self.ms_at(caller.at));
        Verdict { throttle_ms }
    }

    fn mutation_quota(&self, ctx: &RequestContext, strict: bool) -> MutationQuota {
        let client_id = ctx.client_id.as_deref().unwrap_or("");
        self.mutation_quota_at(
            &ctx.session.principal.name,
            client_id,
            strict,
            self.now_ms(),
        )
    }

    fn max_fetch_bytes(&self, ctx: &RequestContext) -> Option<usize> {
        if !self.is_enabled(QuotaType::Fetch) {
            return None;
        }
        let who = QuotaClient {
            user: &ctx.session.principal.name,
            client_id: ctx.client_id.as_deref().unwrap_or(""),
        };
        let held = &ctx.session.held.quota;
        let bound = self.with_held(
            held,
            who,
            || self.now_ms(),
            |c| c.slots[QuotaType::Fetch.index()].as_ref().map(|s| s.bound),
        )?;
        Some(self.max_value_in_window(bound))
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
