//! Metrics of station 14 (trace): per tool, how many calls ended how, and how long their handlers ran. Latency
//! goes into a log-bucketed histogram (10% wide buckets from 10 µs up), so percentiles cost a fixed few KB per
//! tool however many calls there were.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::result::ToolResult;

/// Each bucket is 10% wider than the one before; the first starts at 10 µs, the last holds everything over ~17 min.
const GROWTH: f64 = 1.1;
const FIRST_MS: f64 = 0.01;
const BUCKETS: usize = 200;

#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Allocated on the first value.
    counts: Vec<u64>,
    total: u64,
    sum: f64,
}

impl Histogram {
    pub fn record(&mut self, ms: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        let index = if ms <= FIRST_MS { 0 } else { ((ms / FIRST_MS).ln() / GROWTH.ln()).ceil() as usize };
        self.counts[index.min(BUCKETS - 1)] += 1;
        self.total += 1;
        self.sum += ms;
    }

    fn merge(&mut self, other: &Histogram) {
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
    }

    /// The upper bound of the bucket holding the `q` quantile (so within 10% above the true value).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let rank = ((self.total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(FIRST_MS * GROWTH.powi(i as i32));
            }
        }
        None
    }
}

/// How one tool's (or all tools') calls ended.
#[derive(Debug, Clone, Default)]
pub struct CallMetrics {
    pub calls: u64,
    pub successes: u64,
    /// By error kind.
    pub failures: BTreeMap<&'static str, u64>,
    /// Of calls whose handler ran: from the first start to the result.
    pub latency: Histogram,
}

impl CallMetrics {
    pub fn record(&mut self, result: &ToolResult) {
        self.calls += 1;
        match result.error_kind {
            None => self.successes += 1,
            Some(kind) => *self.failures.entry(kind.as_str()).or_default() += 1,
        }
        if result.attempts > 0 {
            self.latency.record(result.latency_ms);
        }
    }

    pub fn merge(&mut self, other: &CallMetrics) {
        self.calls += other.calls;
        self.successes += other.successes;
        for (kind, n) in &other.failures {
            *self.failures.entry(kind).or_default() += n;
        }
        self.latency.merge(&other.latency);
    }
}

impl Serialize for CallMetrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let round = |v: Option<f64>| v.map(|ms| (ms * 1000.0).round() / 1000.0);
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("calls", &self.calls)?;
        m.serialize_entry("successes", &self.successes)?;
        m.serialize_entry("failures", &self.failures)?;
        m.serialize_entry(
            "latencyMs",
            &serde_json::json!({
                "count": self.latency.total,
                "sum": round(Some(self.latency.sum)),
                "p50": round(self.latency.quantile(0.5)),
                "p95": round(self.latency.quantile(0.95)),
                "p99": round(self.latency.quantile(0.99)),
            }),
        )?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_bucket_of_the_truth() {
        let mut h = Histogram::default();
        for ms in 1..=1000 {
            h.record(ms as f64);
        }
        let p50 = h.quantile(0.5).unwrap();
        let p99 = h.quantile(0.99).unwrap();
        assert!((500.0..=550.0).contains(&p50), "{p50}");
        assert!((990.0..=1090.0).contains(&p99), "{p99}");
        assert_eq!(Histogram::default().quantile(0.5), None);
        let mut tiny = Histogram::default();
        tiny.record(0.0);
        tiny.record(1e12);
        assert_eq!(tiny.quantile(0.5), Some(FIRST_MS));
    }
}
