//! A store shared between processes, as the fake host's server: it answers the stations' operations as the Redis
//! store's scripts do. What the memory store answers alike (counts, entries, buckets, budgets, breakers) it answers;
//! what only a shared store keeps (the leases of single flight across processes, approvals remembered for a
//! session, a session's rollbacks) is kept here, as the scripts keep it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use toolgate_core::ops::{Op, Reply};
use toolgate_core::store::{MemoryLimits, MemoryStore, Store};
use toolgate_core::EngineOptions;

pub struct Server {
    store: MemoryStore,
    /// Each cache key's lease: its owner, and when it runs out.
    leases: HashMap<String, (String, Instant)>,
    /// Approvals given for a session: the session, then the tool and rule.
    approvals: HashSet<(String, String)>,
    rollbacks: HashMap<String, u32>,
    /// Fails every operation with this reason (a store that is down), while set.
    pub down: Option<String>,
    /// Every operation asked, by name, in order.
    pub asked: Vec<&'static str>,
}

impl Default for Server {
    fn default() -> Self {
        let defaults = EngineOptions::default();
        Server {
            store: MemoryStore::new(MemoryLimits {
                max_entries: defaults.cache.max_entries,
                max_bytes: defaults.cache.max_bytes,
                max_namespaces: defaults.dedup.max_sessions,
                max_counters_per_namespace: defaults.dedup.max_queries_per_session,
            }),
            leases: HashMap::new(),
            approvals: HashSet::new(),
            rollbacks: HashMap::new(),
            down: None,
            asked: Vec::new(),
        }
    }
}

impl Server {
    /// A ticket's replies, as the host hands them back (a JSON array, one reply per operation).
    pub fn run(&mut self, ops: Vec<Op>, now: Instant) -> String {
        let replies: Vec<Reply> = ops.into_iter().map(|op| self.answer(op, now)).collect();
        serde_json::to_string(&replies).unwrap()
    }

    fn answer(&mut self, op: Op, now: Instant) -> Reply {
        self.asked.push(name(&op));
        if let Some(why) = &self.down {
            return Reply::failed(why);
        }
        match op {
            Op::Count { ref session, rollbacks, .. } => {
                let count = rollbacks.then(|| self.rollbacks.get(session).copied().unwrap_or(0));
                Reply { rollbacks: count, ..self.store.answer(op, now) }
            }
            Op::Lookup { key, owner, lease_ms } => {
                let value = self.store.get(&key, now);
                if value.is_some() {
                    return Reply { value, ..Reply::default() };
                }
                let (Some(owner), Some(lease_ms)) = (owner, lease_ms) else { return Reply::default() };
                match self.leases.get(&key).filter(|(holder, until)| *until > now && *holder != owner) {
                    Some((_, until)) => {
                        let left = until.saturating_duration_since(now).as_millis() as f64;
                        Reply { lease: Some("held".into()), lease_left_ms: Some(left), ..Reply::default() }
                    }
                    None => {
                        self.leases.insert(key, (owner, now + Duration::from_millis(lease_ms)));
                        Reply { lease: Some("taken".into()), ..Reply::default() }
                    }
                }
            }
            // Written only while its lease is still the owner's.
            Op::Put { key, value, ttl_ms, owner: Some(owner) } => {
                if self.release(&key, &owner, now) {
                    self.store.put(key, value, Duration::from_millis(ttl_ms), now);
                }
                Reply::default()
            }
            Op::Release { key, owner } => {
                self.release(&key, &owner, now);
                Reply::default()
            }
            Op::Remembered { session, field } => Reply { remembered: Some(self.approvals.contains(&(session, field))), ..Reply::default() },
            Op::Remember { session, field, .. } => {
                self.approvals.insert((session, field));
                Reply::default()
            }
            Op::Rollbacks { session, flagged, .. } => {
                let count = self.rollbacks.entry(session).or_default();
                *count = if flagged { *count + 1 } else { 0 };
                Reply::default()
            }
            op => self.store.answer(op, now),
        }
    }

    /// Drops the lease of `key` if `owner` holds it; true when it did.
    fn release(&mut self, key: &str, owner: &str, now: Instant) -> bool {
        let owns = self.leases.get(key).is_some_and(|(holder, until)| holder == owner && *until > now);
        if owns {
            self.leases.remove(key);
        }
        owns
    }

    /// Deletes the cached entries (and their leases) whose key starts with `prefix`, as the store's `invalidate`.
    pub fn invalidate(&mut self, prefix: &str) -> usize {
        self.leases.retain(|key, _| !key.starts_with(prefix));
        self.store.invalidate_prefix(prefix)
    }
}

pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Count { .. } => "count",
        Op::Remembered { .. } => "remembered",
        Op::Lookup { .. } => "lookup",
        Op::Take { .. } => "take",
        Op::Refund { .. } => "refund",
        Op::Put { .. } => "put",
        Op::Release { .. } => "release",
        Op::Uncount { .. } => "uncount",
        Op::Keep { .. } => "keep",
        Op::Remember { .. } => "remember",
        Op::Rollbacks { .. } => "rollbacks",
        Op::Spend { .. } => "spend",
        Op::Unspend { .. } => "unspend",
        Op::BreakerAdmit { .. } => "breakerAdmit",
        Op::BreakerRecord { .. } => "breakerRecord",
    }
}
