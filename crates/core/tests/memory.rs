//! What the engine's memory holds, counted by the allocator itself: bounds that hold whatever model traffic comes
//! (distinct rate-limit keys, sessions), and structures that allocate as they fill rather than up front.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolgate_core::store::{Bucket, MemoryLimits, MemoryStore, Store};
use toolgate_core::{Engine, EngineOptions};

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measurement at a time: the tests of this file share the counter.
static SERIAL: Mutex<()> = Mutex::new(());

/// Bytes still live after `f`, of what it allocated.
fn held_by<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    let value = f();
    (value, LIVE.load(Ordering::Relaxed) - before)
}

const MB: isize = 1 << 20;

fn limits() -> MemoryLimits {
    let defaults = EngineOptions::default();
    MemoryLimits {
        max_entries: defaults.cache.max_entries,
        max_bytes: defaults.cache.max_bytes,
        max_namespaces: defaults.dedup.max_sessions,
        max_counters_per_namespace: defaults.dedup.max_queries_per_session,
    }
}

#[test]
fn two_million_distinct_rate_limit_keys_hold_a_bounded_number_of_buckets() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let bucket = Bucket { capacity: 100.0, refill_per_sec: 100.0 };
    let (store, held) = held_by(|| {
        let mut store = MemoryStore::new(limits());
        let start = Instant::now();
        for i in 0..2_000_000u64 {
            // A call a microsecond, each from another user: a bucket refills 10 ms after its one call.
            let now = start + Duration::from_micros(i);
            store.take_token(&format!("search\u{1}user-{i}"), bucket, Duration::ZERO, now);
        }
        store
    });
    assert!(held < 32 * MB, "{} MB held for 2,000,000 keys", held / MB);
    drop(store);
}

#[test]
fn keys_past_the_cap_evict_the_least_recent_and_a_refilled_bucket_is_as_good_as_new() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // A bucket that takes a day to refill never sweeps out as full: only the cap bounds these.
    let slow = Bucket { capacity: 1.0, refill_per_sec: 1.0 / 86_400.0 };
    let (mut store, held) = held_by(|| {
        let mut store = MemoryStore::new(limits());
        let now = Instant::now();
        for i in 0..300_000u64 {
            store.take_token(&format!("k{i}"), slow, Duration::ZERO, now);
        }
        store
    });
    assert!(held < 48 * MB, "{} MB held for 300,000 slow buckets", held / MB);
    let now = Instant::now();
    assert!(matches!(store.take_token("k299999", slow, Duration::ZERO, now), toolgate_core::store::Take::Refused(_)), "a recent key still holds");
    assert_eq!(store.take_token("k0", slow, Duration::ZERO, now), toolgate_core::store::Take::Now, "the oldest was evicted");
}

#[test]
fn ten_thousand_sessions_hold_what_they_count_not_their_capacity() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (store, held) = held_by(|| {
        let mut store = MemoryStore::new(limits());
        let now = Instant::now();
        for i in 0..10_000 {
            store.increment(&format!("session-{i}"), "search\u{1}{\"q\":\"x\"}", Duration::from_secs(3_600), now);
        }
        store
    });
    assert!(held < 8 * MB, "{} MB held for 10,000 sessions of one query", held / MB);
    drop(store);
}

#[test]
fn an_engine_allocates_little_before_it_holds_anything() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    drop(Engine::new(EngineOptions::default())); // what is compiled once per process
    let (engine, held) = held_by(|| Engine::new(EngineOptions::default()).unwrap());
    assert!(held < 256 * 1024, "{held} bytes held by an empty engine");
    drop(engine);
}
#[test]
fn full_buckets_keep_being_swept_at_the_cap_so_a_bucket_that_still_limits_stays() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    use toolgate_core::store::{Take, MAX_BUCKETS};
    let mut store = MemoryStore::new(limits());
    let slow = Bucket { capacity: 1.0, refill_per_sec: 1.0 / 3_600.0 };
    let fast = Bucket { capacity: 1.0, refill_per_sec: 1_000.0 };
    let t0 = Instant::now();
    assert_eq!(store.take_token("search\u{1}user-1", slow, Duration::ZERO, t0), Take::Now);
    // 70,000 other users at once (a sweep then frees nothing), then, a second later when all of them are full
    // again, enough more to reach the cap.
    for i in 0..70_000 {
        store.take_token(&format!("other\u{1}{i}"), fast, Duration::ZERO, t0);
    }
    let t1 = t0 + Duration::from_secs(1);
    for i in 70_000..MAX_BUCKETS + 10_000 {
        store.take_token(&format!("other\u{1}{i}"), fast, Duration::ZERO, t1);
    }
    assert!(matches!(store.take_token("search\u{1}user-1", slow, Duration::ZERO, t1), Take::Refused(_)), "user-1's bucket still limits");
}
