//! Deadlines (a call's total and idle limits, retry backoffs, turn deadlines), watched by one task that wakes the
//! driver only when one passes.
//!
//! The driver (the JS thread, or a Rust loop in tests) owns all call state; the watcher never touches it. On a
//! wake the driver calls `pop_expired`, so a call that settled just before its deadline cannot also time out.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The resolution of tokio's timer.
const TICK: Duration = Duration::from_millis(1);

struct State<K> {
    entries: BTreeSet<(Instant, K)>,
    /// When the sleeping watcher will look again by itself; arming a later deadline need not wake it.
    looks_at: Option<Instant>,
    closed: bool,
}

struct Shared<K> {
    state: Mutex<State<K>>,
    notify: Notify,
}

/// `now` plus `wait`, saturating: a limit, TTL or backoff too large to add to a clock (a programmer's `u64::MAX`) is
/// a deadline a century away, not a panic.
pub fn after(now: Instant, wait: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    now.checked_add(wait.min(CENTURY)).unwrap_or(now)
}

/// A wait in seconds as a `Duration`, saturating (negative or NaN reads as none, too long as the longest).
pub fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX)
}

/// What a deadline key must be: ordered (ties between equal instants break on it) and cheap to copy.
pub trait Key: Ord + Copy + Send + 'static {}
impl<K: Ord + Copy + Send + 'static> Key for K {}

#[derive(Clone)]
pub struct Deadlines<K> {
    shared: Arc<Shared<K>>,
}

impl<K: Key> Default for Deadlines<K> {
    fn default() -> Self {
        let state = State { entries: BTreeSet::new(), looks_at: None, closed: false };
        Deadlines { shared: Arc::new(Shared { state: Mutex::new(state), notify: Notify::new() }) }
    }
}

impl<K: Key> Deadlines<K> {
    fn state(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding this lock cannot leave the set half-written; keep going.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn arm(&self, at: Instant, key: K) {
        let mut state = self.state();
        let earlier = state.looks_at.is_none_or(|looks_at| at < looks_at);
        state.entries.insert((at, key));
        drop(state);
        if earlier {
            self.shared.notify.notify_one();
        }
    }

    pub fn disarm(&self, at: Instant, key: K) {
        self.state().entries.remove(&(at, key));
    }

    /// Removes and returns every key whose deadline is at or before `now`, earliest first.
    pub fn pop_expired(&self, now: Instant) -> Vec<K> {
        let mut state = self.state();
        let mut expired = Vec::new();
        while let Some(&(at, key)) = state.entries.first() {
            if at > now {
                break;
            }
            state.entries.pop_first();
            expired.push(key);
        }
        drop(state);
        self.shared.notify.notify_one();
        expired
    }

    pub fn is_empty(&self) -> bool {
        self.state().entries.is_empty()
    }

    /// The earliest armed deadline: a host that moves its own clock moves it there next.
    pub fn next(&self) -> Option<Instant> {
        self.state().entries.first().map(|&(at, _)| at)
    }

    /// Stops the watcher; armed deadlines are forgotten.
    pub fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.entries.clear();
        drop(state);
        self.shared.notify.notify_one();
    }

    /// The watcher: run it on a tokio runtime. It calls `wake` when the earliest deadline has passed, then waits
    /// until the driver has taken the expired keys (or armed an earlier one) before looking again.
    pub fn watch(&self, wake: impl Fn() + Send + 'static) -> impl Future<Output = ()> + Send + 'static {
        let shared = self.shared.clone();
        async move {
            loop {
                let changed = shared.notify.notified();
                let next = {
                    let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
                    if state.closed {
                        return;
                    }
                    let next = state.entries.first().map(|&(at, _)| at);
                    state.looks_at = next.filter(|&at| at > Instant::now());
                    next
                };
                match next {
                    None => changed.await,
                    Some(at) if at <= Instant::now() => {
                        wake();
                        changed.await;
                    }
                    Some(at) => {
                        // tokio's timer ticks in whole milliseconds and rounds up, a tick late on average. The
                        // watcher wakes a tick early, looks again (the deadline may be gone by then), and waits out
                        // the rest in a precise thread sleep, off the runtime's workers.
                        let early = at.checked_sub(TICK).unwrap_or(at);
                        if early > Instant::now() {
                            tokio::select! {
                                _ = tokio::time::sleep_until(early.into()) => {}
                                _ = changed => {}
                            }
                        } else {
                            let rest = at.saturating_duration_since(Instant::now());
                            tokio::select! {
                                _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)) => {}
                                _ = changed => {}
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The fixed time window (budgets count calls per window) a time falls in, and how long until the next one starts.
pub fn window_of(now_ms: u64, window: Duration) -> (u64, Duration) {
    let width = (window.as_millis() as u64).max(1);
    let number = now_ms / width;
    (number, Duration::from_millis((number + 1) * width - now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_what_has_passed_in_deadline_order() {
        let d = Deadlines::<u32>::default();
        let t0 = Instant::now();
        d.arm(t0 + Duration::from_millis(30), 3);
        d.arm(t0 + Duration::from_millis(10), 1);
        d.arm(t0 + Duration::from_millis(20), 2);
        d.disarm(t0 + Duration::from_millis(20), 2);
        assert_eq!(d.pop_expired(t0 + Duration::from_millis(25)), vec![1]);
        assert_eq!(d.pop_expired(t0 + Duration::from_millis(40)), vec![3]);
        assert!(d.is_empty());
    }

    #[tokio::test]
    async fn the_watcher_wakes_once_per_passed_deadline_and_stops_on_close() {
        let d = Deadlines::<u32>::default();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(d.watch(move || {
            let _ = tx.send(());
        }));
        let start = Instant::now();
        d.arm(start + Duration::from_millis(200), 2);
        d.arm(start + Duration::from_millis(20), 1); // earlier than the one being waited on
        rx.recv().await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(d.pop_expired(Instant::now()), vec![1]);
        rx.recv().await.unwrap();
        assert_eq!(d.pop_expired(Instant::now()), vec![2]);
        d.close();
        tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
        assert!(rx.try_recv().is_err(), "no wake without a deadline");
    }
}
