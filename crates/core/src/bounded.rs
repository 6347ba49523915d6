//! A least-recently-used map with a capacity that allocates as it fills. `lru::LruCache::new(cap)` reserves room for
//! `cap` entries at once: ten thousand sessions of a thousand-query capacity each cost hundreds of megabytes before
//! holding anything. This one starts empty and grows to its cap, then evicts the least recently used entry.

use std::borrow::Borrow;
use std::hash::Hash;

use lru::LruCache;

pub struct Bounded<K: Hash + Eq, V> {
    map: LruCache<K, V>,
    cap: usize,
}

impl<K: Hash + Eq, V> Bounded<K, V> {
    /// At most `cap` entries (at least one).
    pub fn new(cap: usize) -> Self {
        Bounded { map: LruCache::unbounded(), cap: cap.max(1) }
    }

    /// Inserts (or replaces) an entry as the most recent; returns the entry pushed out: the one replaced, or the
    /// least recently used one when the map was full.
    pub fn push(&mut self, key: K, value: V) -> Option<(K, V)> {
        let replaced = self.map.push(key, value);
        if replaced.is_some() || self.map.len() <= self.cap {
            return replaced;
        }
        self.map.pop_lru()
    }

    /// The value at `key`, inserted from `make` when absent (evicting the least recently used entry when full).
    pub fn get_or_insert_mut(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V
    where
        K: Clone,
    {
        if !self.map.contains(&key) && self.map.len() >= self.cap {
            self.map.pop_lru();
        }
        self.map.get_or_insert_mut(key, make)
    }

    pub fn get<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.map.get(key)
    }

    pub fn get_mut<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.map.get_mut(key)
    }

    pub fn peek<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.map.peek(key)
    }

    pub fn peek_mut<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.map.peek_mut(key)
    }

    pub fn contains<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.map.contains(key)
    }

    pub fn pop<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.map.pop(key)
    }

    pub fn pop_entry<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
    {
        self.map.pop_entry(key)
    }

    pub fn pop_lru(&mut self) -> Option<(K, V)> {
        self.map.pop_lru()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_its_cap_then_evicts_the_least_recent() {
        let mut m = Bounded::new(2);
        assert_eq!(m.push("a", 1), None);
        assert_eq!(m.push("b", 2), None);
        assert_eq!(m.get("a"), Some(&1), "a is now the most recent");
        assert_eq!(m.push("c", 3), Some(("b", 2)));
        assert_eq!(m.push("a", 9), Some(("a", 1)), "a replace pushes out the old value");
        *m.get_or_insert_mut("d", || 0) += 4;
        assert_eq!((m.len(), m.peek("d"), m.contains("c")), (2, Some(&4), false));
    }
}
