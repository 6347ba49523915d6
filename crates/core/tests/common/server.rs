//! A store shared between processes, as the fake host's server: it answers the stations' operations as the Redis
//! store's scripts do (lib/stores/redis-scripts.js). Cache entries, buckets, budgets and breakers it leaves to the
//! memory store, which answers them alike; a session's hash (query counts, results kept for reuse, approvals
//! remembered, the rollback count, with one expiry that writes prolong and a cap on its fields) and the leases of
//! single flight across processes it keeps as the scripts do.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_core::ops::{Reply, Word};
use toolgate_core::shared::Op;
use toolgate_core::store::{MemoryLimits, MemoryStore, Store};
use toolgate_core::EngineOptions;

/// The fields a session's hash holds at most (`redisStore`'s `maxSessionKeys`, by default).
const MAX_SESSION_KEYS: usize = 10_000;

pub struct Server {
    store: MemoryStore,
    /// Each cache key's lease: its owner, and when it runs out.
    leases: HashMap<String, (String, Instant)>,
    sessions: HashMap<String, Session>,
}

/// A session's hash.
#[derive(Default)]
struct Session {
    expires: Option<Instant>,
    counts: HashMap<String, u64>,
    kept: HashMap<String, Arc<str>>,
    approvals: HashSet<String>,
    rollbacks: Option<u32>,
}

impl Session {
    fn fields(&self) -> usize {
        self.counts.len() + self.kept.len() + self.approvals.len() + usize::from(self.rollbacks.is_some())
    }

    /// Whether a new field fits under the cap.
    fn has_room(&self) -> bool {
        self.fields() < MAX_SESSION_KEYS
    }
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
            sessions: HashMap::new(),
        }
    }
}

impl Server {
    /// A ticket's replies, as the host hands them back (a JSON array, one reply per operation).
    pub fn run(&mut self, ops: Vec<Op>, now: Instant) -> String {
        let replies: Vec<Reply> = ops.into_iter().map(|op| self.answer(op, now)).collect();
        serde_json::to_string(&replies).unwrap()
    }

    /// A session's hash as it stands at `now` (empty once expired), its life prolonged by `ttl_ms` when given.
    fn session(&mut self, id: &str, now: Instant, ttl_ms: Option<u64>) -> &mut Session {
        let session = self.sessions.entry(id.to_string()).or_default();
        if session.expires.is_some_and(|at| at <= now) {
            *session = Session::default();
        }
        if let Some(ms) = ttl_ms {
            session.expires = Some(now + Duration::from_millis(ms));
        }
        session
    }

    fn answer(&mut self, op: Op, now: Instant) -> Reply {
        match op {
            Op::Count { session, key, ttl_ms, refuse, reuse, rollbacks } => {
                let session = self.session(&session, now, Some(ttl_ms));
                let mut reply = Reply { earlier: Some(0), rollbacks: rollbacks.then(|| session.rollbacks.unwrap_or(0)), ..Reply::default() };
                if let Some(key) = key.map(Cow::into_owned) {
                    // A full session counts nothing new: earlier stays 0.
                    if session.counts.contains_key(&key) || session.has_room() {
                        let count = session.counts.entry(key.clone()).or_default();
                        let earlier = *count;
                        *count += u64::from(!(refuse && earlier > 0));
                        reply.earlier = Some(earlier);
                    }
                    if reuse && reply.earlier > Some(0) {
                        reply.reused = session.kept.get(&key).cloned();
                    }
                }
                reply
            }
            Op::Uncount { session, key } => {
                if let Some(count) = self.session(&session, now, None).counts.get_mut(&*key) {
                    *count = count.saturating_sub(1);
                }
                Reply::default()
            }
            Op::Keep { session, key, value, ttl_ms } => {
                let session = self.session(&session, now, None);
                if session.kept.contains_key(&*key) || session.has_room() {
                    session.kept.insert(key.into_owned(), value);
                    session.expires = Some(now + Duration::from_millis(ttl_ms));
                }
                Reply::default()
            }
            Op::Remembered { session, field } => {
                Reply { remembered: Some(self.session(&session, now, None).approvals.contains(&*field)), ..Reply::default() }
            }
            Op::Remember { session, field, ttl_ms } => {
                let session = self.session(&session, now, None);
                if session.approvals.contains(&*field) || session.has_room() {
                    session.approvals.insert(field.into_owned());
                    session.expires = Some(now + Duration::from_millis(ttl_ms));
                }
                Reply::default()
            }
            // Not capped: a rollback count left unrecorded would let a full session roll back more than allowed.
            Op::Rollbacks { session, flagged, ttl_ms } => {
                let session = self.session(&session, now, Some(ttl_ms));
                session.rollbacks = Some(if flagged { session.rollbacks.unwrap_or(0) + 1 } else { 0 });
                Reply::default()
            }
            Op::Lookup { key, owner, lease_ms } => {
                let value = self.store.get(&key, now);
                if value.is_some() {
                    return Reply { value, ..Reply::default() };
                }
                let (Some(owner), Some(lease_ms)) = (owner, lease_ms) else { return Reply::default() };
                match self.leases.get(&*key).filter(|(holder, until)| *until > now && *holder != owner) {
                    Some((_, until)) => {
                        let left = until.saturating_duration_since(now).as_millis() as f64;
                        Reply { lease: Some(Word::Held), lease_left_ms: Some(left), ..Reply::default() }
                    }
                    None => {
                        self.leases.insert(key.into_owned(), (owner.into_owned(), now + Duration::from_millis(lease_ms)));
                        Reply { lease: Some(Word::Taken), ..Reply::default() }
                    }
                }
            }
            // Written only while its lease is still the owner's.
            Op::Put { key, value, ttl_ms, owner: Some(owner) } => {
                if self.release(&key, &owner, now) {
                    self.store.put(key.into_owned(), value, Duration::from_millis(ttl_ms), now);
                }
                Reply::default()
            }
            Op::Release { key, owner } => {
                self.release(&key, &owner, now);
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
