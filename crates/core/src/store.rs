//! The memory store: what the stations that remember keep in this process (the result cache, rate-limit buckets,
//! session counters, budget counters, circuit breakers), and its answers to their operations (`Store::answer`, one
//! per `ops::Op`), given at once, inside the engine. A store shared between processes answers the same operations
//! through the host (see `shared`); each station builds its operations and reads the replies the same way whichever
//! store answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::bounded::Bounded;
use crate::breaker::{Admission, BreakerConfig, BreakerState, Outcome};
use crate::budget;
use crate::keys::SEP;
use crate::ops::{wait_ms, Op, Reply, Word};
pub use crate::ratelimit::Bucket;
use crate::timer::{after, seconds, window_of};

/// Whether a token was taken at once, after a wait the store reserved, or not at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Take {
    Now,
    /// Reserved: the caller may go ahead after this wait. Later takers queue behind it (arrival order).
    After(Duration),
    /// No token within the wait allowed: try again after this long.
    Refused(Duration),
}

pub trait Store: Send {
    /// A cached value, unless absent or expired.
    fn get(&mut self, key: &str, now: Instant) -> Option<Arc<str>>;
    fn put(&mut self, key: String, value: Arc<str>, ttl: Duration, now: Instant);
    /// Removes every cached value whose key starts with `prefix`; returns how many.
    fn invalidate_prefix(&mut self, prefix: &str) -> usize;
    fn clear(&mut self);
    /// Takes one token from the bucket at `key`, reserving one up to `max_wait` ahead when none is left now.
    fn take_token(&mut self, key: &str, bucket: Bucket, max_wait: Duration, now: Instant) -> Take;
    /// Gives back a token taken for a call that did not run after all.
    fn refund_token(&mut self, key: &str, bucket: Bucket);
    /// Adds one to a counter in `namespace` (a session) and returns the new count. The namespace expires after
    /// `ttl` without increments.
    fn increment(&mut self, namespace: &str, key: &str, ttl: Duration, now: Instant) -> u64;
    /// Takes one back from a counter (a call counted on arrival that never ran).
    fn decrement(&mut self, namespace: &str, key: &str);
    /// The store's clock, which breaker and budget windows are counted on.
    fn clock(&self) -> StoreClock;
    /// A tool's circuit breaker.
    fn breaker(&mut self, tool: &str) -> &mut BreakerState;
    fn peek_breaker(&self, tool: &str) -> Option<&BreakerState>;
    /// Adds `amount` to the budget counter at `key` unless that would pass `limit`. A counter with a `window` starts
    /// over with each window; one without expires `ttl` after its last spending.
    fn spend(&mut self, key: &str, amount: f64, limit: f64, window: Option<Duration>, ttl: Duration, now: Instant) -> Spend;
    /// Gives back what a call spent that never ran (in the window it spent in).
    fn unspend(&mut self, key: &str, amount: f64, window: u64);
    /// What the store holds now, for a page that shows it: at most `limit` buckets and budget counters, the most
    /// used first.
    fn view(&self, now: Instant, limit: usize) -> StoreView;

    /// Answers one of the stations' operations from this store's state, as the shared store's script for it does.
    /// Approvals and rollbacks given for a session, and leases, are for other processes to see: the engine keeps its
    /// own, so here they answer nothing.
    fn answer(&mut self, op: Op, now: Instant) -> Reply {
        let ms = Duration::from_millis;
        match op {
            Op::Count { session, key: Some(key), ttl_ms, refuse, reuse, .. } => {
                let earlier = self.increment(&session, &key, ms(ttl_ms), now) - 1;
                if refuse && earlier > 0 {
                    self.decrement(&session, &key);
                }
                let reused = (reuse && earlier > 0).then(|| self.get(&reuse_key(&session, &key), now)).flatten();
                Reply { earlier: Some(earlier), reused, ..Reply::default() }
            }
            Op::Count { key: None, .. } => Reply { earlier: Some(0), ..Reply::default() },
            Op::Lookup { key, .. } => Reply { value: self.get(&key, now), ..Reply::default() },
            Op::Put { key, value, ttl_ms, .. } => {
                self.put(key.into_owned(), value, ms(ttl_ms), now);
                Reply::default()
            }
            Op::Keep { session, key, value, ttl_ms } => {
                self.put(reuse_key(&session, &key), value, ms(ttl_ms), now);
                Reply::default()
            }
            Op::Uncount { session, key } => {
                self.decrement(&session, &key);
                Reply::default()
            }
            Op::Take { key, capacity, refill_per_sec, max_wait_ms } => {
                let (take, wait) = match self.take_token(&key, Bucket { capacity, refill_per_sec }, seconds(max_wait_ms / 1000.0), now) {
                    Take::Now => (Word::Now, Duration::ZERO),
                    Take::After(wait) => (Word::After, wait),
                    Take::Refused(wait) => (Word::Refused, wait),
                };
                Reply { take: Some(take), wait_ms: Some(wait_ms(wait)), exact_wait: Some(wait), ..Reply::default() }
            }
            Op::Refund { key, capacity, refill_per_sec } => {
                self.refund_token(&key, Bucket { capacity, refill_per_sec });
                Reply::default()
            }
            Op::Spend { key, amount, limit, ttl_ms, window_ms } => match self.spend(&key, amount, limit, window_ms.map(ms), ms(ttl_ms), now) {
                Spend::Spent { window } => Reply { spent: Some(Word::Ok), window: Some(window), ..Reply::default() },
                Spend::Over { used, resets_in } => {
                    Reply { spent: Some(Word::Over), used: Some(used), wait_ms: resets_in.map(wait_ms), exact_wait: resets_in, ..Reply::default() }
                }
            },
            Op::Unspend { key, amount, window } => {
                self.unspend(&key, amount, window);
                Reply::default()
            }
            Op::BreakerAdmit { key, half_open_calls, trial_wait_ms, .. } => {
                let clock = self.clock();
                // Admission reads only halfOpenCalls of the settings.
                let config = BreakerConfig { half_open_calls, ..BreakerConfig::default() };
                let state = self.breaker(&key);
                let (admission, changed) = state.admit(&key, &config, ms(trial_wait_ms), || clock.ms(now));
                state.reply(Some(admission), changed, clock.ms(now))
            }
            Op::BreakerRecord { key, admission, generation, outcome, failure_rate, min_calls, window_ms, open_ms, half_open_calls, .. } => {
                let now_ms = self.clock().ms(now);
                let config = BreakerConfig { failure_rate, min_calls, window_ms, open_ms, half_open_calls };
                let admission = if admission == "trial" { Admission::Trial(generation) } else { Admission::Counted(Some(generation)) };
                let state = self.breaker(&key);
                let changed = state.record(&key, &config, admission, Outcome::parse(outcome), now_ms);
                state.reply(None, changed, now_ms)
            }
            Op::Remembered { .. } => Reply { remembered: Some(false), ..Reply::default() },
            Op::Release { .. } | Op::Remember { .. } | Op::Rollbacks { .. } => Reply::default(),
        }
    }
}

/// Where a session keeps a query's last result for `reuse`: apart from the cache, in the session's own keys.
fn reuse_key(session: &str, query_key: &str) -> String {
    format!("\u{2}{session}{SEP}{query_key}")
}

/// A store's clock in ms: from its start (the memory store's).
#[derive(Debug, Clone, Copy)]
pub struct StoreClock {
    origin: Instant,
}

impl StoreClock {
    pub fn ms(self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_millis() as u64
    }
}

/// What a budget counter said to a spending.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spend {
    /// Added, in this window (0 for a counter without one).
    Spent { window: u64 },
    /// Not added: it would pass the limit. What was used, and when a window's counter starts over.
    Over { used: f64, resets_in: Option<Duration> },
}

/// What the memory store holds, as `inspect()` shows it. Keys as the stations made them (tool, holder, values).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreView {
    pub cache_entries: usize,
    pub cache_bytes: usize,
    pub max_cache_entries: usize,
    pub max_cache_bytes: usize,
    /// Sessions whose repeated queries are counted.
    pub sessions: usize,
    /// Buckets not full again yet, the emptiest first (of `bucket_count`).
    pub buckets: Vec<BucketView>,
    pub bucket_count: usize,
    /// Budget counters, the most used first (of `budget_count`).
    pub budgets: Vec<BudgetView>,
    pub budget_count: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketView {
    pub key: String,
    /// Tokens left when it was last taken from.
    pub tokens: f64,
    pub full_in_ms: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub key: String,
    pub used: f64,
    /// When the counter goes (a window's end, or its time to live after the last spending).
    pub expires_in_ms: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct MemoryLimits {
    pub max_entries: usize,
    pub max_bytes: usize,
    pub max_namespaces: usize,
    pub max_counters_per_namespace: usize,
}

struct Cached {
    value: Arc<str>,
    expires: Instant,
}

struct TokenState {
    tokens: f64,
    at: Instant,
    /// When the bucket is full again: from then on it is the same as no bucket, and may go.
    full_at: Instant,
}

struct Namespace {
    expires: Instant,
    counters: Bounded<String, u64>,
}

struct BudgetCounter {
    used: f64,
    window: u64,
    expires: Instant,
}

/// Budget counters kept at most (one per holder and limit); past this, the least recently used is forgotten.
pub const MAX_BUDGET_COUNTERS: usize = 100_000;

/// Buckets kept at most (one per rate-limit key value, a user id say); past this, the least recently used goes,
/// as if it had refilled (it most likely has: it was used longest ago).
pub const MAX_BUCKETS: usize = 100_000;
/// New buckets before the first sweep for full ones; later, as many as the sweep before left.
const FIRST_SWEEP: usize = 1_024;

pub struct MemoryStore {
    limits: MemoryLimits,
    cache: Bounded<String, Cached>,
    bytes: usize,
    buckets: Bounded<String, TokenState>,
    /// Buckets made since the last sweep for full ones, and how many make the next one due: as many as that sweep
    /// left, so a sweep's cost is paid for by the buckets made since, at the cap too.
    made_since_sweep: usize,
    sweep_after: usize,
    namespaces: Bounded<String, Namespace>,
    /// One per tool with a breaker (registered tools only, so bounded by them), found by name.
    breakers: Vec<BreakerState>,
    breaker_at: FxHashMap<String, usize>,
    budgets: Bounded<String, BudgetCounter>,
    /// Where the store's ms clock starts.
    origin: Instant,
}

impl MemoryStore {
    pub fn new(limits: MemoryLimits) -> Self {
        MemoryStore {
            breakers: Vec::new(),
            breaker_at: FxHashMap::default(),
            budgets: Bounded::new(MAX_BUDGET_COUNTERS),
            origin: Instant::now(),
            limits,
            cache: Bounded::new(limits.max_entries),
            bytes: 0,
            buckets: Bounded::new(MAX_BUCKETS),
            made_since_sweep: 0,
            sweep_after: FIRST_SWEEP,
            namespaces: Bounded::new(limits.max_namespaces),
        }
    }

    /// Removes every bucket that has refilled: a full bucket and no bucket take tokens alike.
    fn sweep_full_buckets(&mut self, now: Instant) {
        let full: Vec<String> = self.buckets.iter().filter(|(_, b)| b.full_at <= now).map(|(k, _)| k.clone()).collect();
        for key in full {
            self.buckets.pop(&key);
        }
        self.made_since_sweep = 0;
        self.sweep_after = self.buckets.len().max(FIRST_SWEEP);
    }

    fn size(key: &str, value: &str) -> usize {
        key.len() + value.len()
    }

    #[cfg(test)]
    fn cached_bytes(&self) -> usize {
        self.bytes
    }
}

/// The first `limit` of `items` by `order`, in that order; the others are set aside unsorted (a store may hold
/// 100,000 buckets, and a page shows twenty).
fn first<T>(items: impl Iterator<Item = T>, limit: usize, order: impl Fn(&T, &T) -> std::cmp::Ordering) -> std::vec::IntoIter<T> {
    let mut items: Vec<T> = items.collect();
    if limit < items.len() {
        if limit > 0 {
            items.select_nth_unstable_by(limit - 1, &order);
        }
        items.truncate(limit);
    }
    items.sort_by(order);
    items.into_iter()
}

impl Store for MemoryStore {
    fn view(&self, now: Instant, limit: usize) -> StoreView {
        let left = |at: Instant| at.saturating_duration_since(now).as_millis() as u64;
        // Keys are copied only for the entries shown.
        let buckets = first(self.buckets.iter().filter(|(_, b)| b.full_at > now), limit, |(_, a), (_, b)| a.tokens.total_cmp(&b.tokens))
            .map(|(key, b)| BucketView { key: key.clone(), tokens: b.tokens, full_in_ms: left(b.full_at) })
            .collect();
        let budgets = first(self.budgets.iter().filter(|(_, c)| c.expires > now), limit, |(_, a), (_, b)| b.used.total_cmp(&a.used))
            .map(|(key, c)| BudgetView { key: key.clone(), used: c.used, expires_in_ms: left(c.expires) })
            .collect();
        StoreView {
            cache_entries: self.cache.len(),
            cache_bytes: self.bytes,
            max_cache_entries: self.limits.max_entries,
            max_cache_bytes: self.limits.max_bytes,
            sessions: self.namespaces.len(),
            bucket_count: self.buckets.len(),
            buckets,
            budget_count: self.budgets.len(),
            budgets,
        }
    }

    fn get(&mut self, key: &str, now: Instant) -> Option<Arc<str>> {
        match self.cache.get(key) {
            Some(c) if c.expires > now => Some(c.value.clone()),
            Some(_) => {
                let (k, c) = self.cache.pop_entry(key).expect("just seen");
                self.bytes -= Self::size(&k, &c.value);
                None
            }
            None => None,
        }
    }

    fn put(&mut self, key: String, value: Arc<str>, ttl: Duration, now: Instant) {
        let size = Self::size(&key, &value);
        if size > self.limits.max_bytes {
            return; // larger than the whole budget: not worth evicting everything for
        }
        if let Some(old) = self.cache.pop(&key) {
            self.bytes -= Self::size(&key, &old.value);
        }
        while self.bytes + size > self.limits.max_bytes {
            let Some((k, c)) = self.cache.pop_lru() else { break };
            self.bytes -= Self::size(&k, &c.value);
        }
        self.bytes += size;
        if let Some((k, c)) = self.cache.push(key, Cached { value, expires: after(now, ttl) }) {
            self.bytes -= Self::size(&k, &c.value); // an entry evicted by the entry bound
        }
    }

    fn invalidate_prefix(&mut self, prefix: &str) -> usize {
        let keys: Vec<String> = self.cache.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, _)| k.clone()).collect();
        for k in &keys {
            if let Some(c) = self.cache.pop(k) {
                self.bytes -= Self::size(k, &c.value);
            }
        }
        keys.len()
    }

    fn clear(&mut self) {
        self.cache.clear();
        self.bytes = 0;
    }

    fn take_token(&mut self, key: &str, bucket: Bucket, max_wait: Duration, now: Instant) -> Take {
        if !self.buckets.contains(key) {
            self.made_since_sweep += 1;
            // At the cap, full buckets are swept before one still limiting would be evicted (every tenth of the cap
            // at most, so a cap of buckets that all still limit costs no sweep per call).
            let at_cap = self.buckets.len() >= MAX_BUCKETS && self.made_since_sweep >= MAX_BUCKETS / 10;
            if self.made_since_sweep >= self.sweep_after || at_cap {
                self.sweep_full_buckets(now);
            }
        }
        let state = match self.buckets.get_mut(key) {
            Some(state) => state,
            None => self.buckets.get_or_insert_mut(key.to_string(), || TokenState { tokens: bucket.capacity, at: now, full_at: now }),
        };
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        state.tokens = (state.tokens + elapsed * bucket.refill_per_sec).min(bucket.capacity);
        state.at = now;
        let take = if state.tokens >= 1.0 {
            state.tokens -= 1.0;
            Take::Now
        } else {
            // Tokens below zero are reservations already handed out: the next one is further away.
            let wait = seconds((1.0 - state.tokens) / bucket.refill_per_sec);
            if wait <= max_wait {
                state.tokens -= 1.0;
                Take::After(wait)
            } else {
                Take::Refused(wait)
            }
        };
        state.full_at = after(now, seconds((bucket.capacity - state.tokens) / bucket.refill_per_sec));
        take
    }

    fn refund_token(&mut self, key: &str, bucket: Bucket) {
        if let Some(state) = self.buckets.peek_mut(key) {
            state.tokens = (state.tokens + 1.0).min(bucket.capacity);
            state.full_at = after(state.at, seconds((bucket.capacity - state.tokens) / bucket.refill_per_sec));
        }
    }

    fn decrement(&mut self, namespace: &str, key: &str) {
        if let Some(count) = self.namespaces.peek_mut(namespace).and_then(|ns| ns.counters.peek_mut(key)) {
            *count = count.saturating_sub(1);
        }
    }

    fn clock(&self) -> StoreClock {
        StoreClock { origin: self.origin }
    }

    fn breaker(&mut self, tool: &str) -> &mut BreakerState {
        let at = match self.breaker_at.get(tool) {
            Some(&at) => at,
            None => {
                self.breakers.push(BreakerState::default());
                self.breaker_at.insert(tool.to_string(), self.breakers.len() - 1);
                self.breakers.len() - 1
            }
        };
        &mut self.breakers[at]
    }

    fn peek_breaker(&self, tool: &str) -> Option<&BreakerState> {
        self.breaker_at.get(tool).map(|&at| &self.breakers[at])
    }

    fn spend(&mut self, key: &str, amount: f64, limit: f64, window: Option<Duration>, ttl: Duration, now: Instant) -> Spend {
        let (number, resets_in) = match window {
            Some(w) => {
                let (n, left) = window_of(self.clock().ms(now), w);
                (n, Some(left))
            }
            None => (0, None),
        };
        let counter = match self.budgets.get_mut(key) {
            Some(c) => c,
            None => self.budgets.get_or_insert_mut(key.to_string(), || BudgetCounter { used: 0.0, window: number, expires: now }),
        };
        if counter.expires < now || counter.window != number {
            (counter.used, counter.window) = (0.0, number);
        }
        if budget::passes(counter.used, amount, limit) {
            return Spend::Over { used: counter.used, resets_in };
        }
        counter.used += amount;
        counter.expires = after(now, resets_in.unwrap_or(ttl));
        Spend::Spent { window: number }
    }

    fn unspend(&mut self, key: &str, amount: f64, window: u64) {
        if let Some(counter) = self.budgets.peek_mut(key).filter(|c| c.window == window) {
            counter.used = (counter.used - amount).max(0.0);
        }
    }

    fn increment(&mut self, namespace: &str, key: &str, ttl: Duration, now: Instant) -> u64 {
        let per_namespace = self.limits.max_counters_per_namespace;
        if self.namespaces.peek(namespace).is_some_and(|ns| ns.expires <= now) {
            self.namespaces.pop(namespace);
        }
        if !self.namespaces.contains(namespace) {
            self.namespaces.push(namespace.to_string(), Namespace { expires: after(now, ttl), counters: Bounded::new(per_namespace) });
        }
        let ns = self.namespaces.get_mut(namespace).expect("just ensured");
        ns.expires = after(now, ttl);
        let count = ns.counters.get_or_insert_mut(key.to_string(), || 0);
        *count += 1;
        *count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(max_entries: usize, max_bytes: usize) -> MemoryStore {
        MemoryStore::new(MemoryLimits { max_entries, max_bytes, max_namespaces: 2, max_counters_per_namespace: 2 })
    }

    #[test]
    fn entries_expire_and_the_least_recent_goes_first() {
        let mut s = store(2, 1 << 20);
        let t0 = Instant::now();
        s.put("a".into(), "1".into(), Duration::from_secs(10), t0);
        s.put("b".into(), "2".into(), Duration::from_secs(1), t0);
        assert_eq!(s.get("a", t0).as_deref(), Some("1")); // a is now the most recent
        s.put("c".into(), "3".into(), Duration::from_secs(10), t0);
        assert!(s.get("b", t0).is_none(), "b was least recently used");
        assert!(s.get("a", t0 + Duration::from_secs(11)).is_none(), "expired");
        assert_eq!(s.cached_bytes(), 2, "only c is left");
    }

    #[test]
    fn the_byte_budget_evicts_and_refuses_what_cannot_fit() {
        let mut s = store(100, 10);
        let t0 = Instant::now();
        s.put("a".into(), "12345".into(), Duration::from_secs(10), t0);
        s.put("b".into(), "12345".into(), Duration::from_secs(10), t0);
        assert!(s.get("a", t0).is_none(), "evicted to fit b");
        s.put("huge".into(), "x".repeat(100).into(), Duration::from_secs(10), t0);
        assert!(s.get("huge", t0).is_none() && s.get("b", t0).is_some());
        assert_eq!(s.invalidate_prefix("b"), 1);
        assert_eq!(s.cached_bytes(), 0);
    }

    #[test]
    fn a_bucket_admits_its_capacity_then_reserves_in_arrival_order() {
        let mut s = store(1, 1);
        let b = Bucket { capacity: 2.0, refill_per_sec: 10.0 };
        let t0 = Instant::now();
        let wait = Duration::from_millis(250);
        assert_eq!(s.take_token("k", b, Duration::ZERO, t0), Take::Now);
        assert_eq!(s.take_token("k", b, Duration::ZERO, t0), Take::Now);
        assert!(matches!(s.take_token("k", b, Duration::ZERO, t0), Take::Refused(d) if d == Duration::from_millis(100)));
        let Take::After(first) = s.take_token("k", b, wait, t0) else { panic!() };
        let Take::After(second) = s.take_token("k", b, wait, t0) else { panic!() };
        assert!(first < second, "each reservation waits behind the one before");
        assert!(matches!(s.take_token("k", b, wait, t0), Take::Refused(_)), "a third would wait past 250 ms");
        assert_eq!(s.take_token("k", b, Duration::ZERO, t0 + Duration::from_secs(10)), Take::Now, "refilled");
    }

    #[test]
    fn counters_count_per_namespace_within_bounds_and_expire() {
        let mut s = store(1, 1);
        let t0 = Instant::now();
        let ttl = Duration::from_secs(60);
        assert_eq!(s.increment("s1", "q", ttl, t0), 1);
        assert_eq!(s.increment("s1", "q", ttl, t0), 2);
        assert_eq!(s.increment("s2", "q", ttl, t0), 1, "sessions are apart");
        s.decrement("s1", "q");
        assert_eq!(s.increment("s1", "q", ttl, t0), 2, "a decrement takes one back");
        assert_eq!(s.increment("s1", "q", ttl, t0 + Duration::from_secs(61)), 1, "the session expired");
        s.increment("s3", "q", ttl, t0);
        s.increment("s4", "q", ttl, t0);
        assert_eq!(s.namespaces.len(), 2, "bounded overall");
    }
}
