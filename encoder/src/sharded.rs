//! A hash map in shards, for the encoder's big memos (the locked memo's tables and the anchor
//! memo), some of them bounded ([`ShardedMap::insert_bounded`]).
//!
//! Growing one `HashMap` allocates the doubled table while the old one is still live, so the
//! memo of ⟨site, callee, version⟩ made the agent's peak RSS jump by 1.5× the table at each
//! doubling (heaptrack on lucene_search: a 17 MB table, 26 MB more while it doubled). With
//! [`SHARDS`] tables each doubling moves a sixteenth of the entries.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

/// Number of shards (a power of two).
const SHARDS: usize = 16;

pub(crate) struct ShardedMap<K, V> {
    shards: [FxHashMap<K, V>; SHARDS],
}

impl<K: Hash + Eq, V> ShardedMap<K, V> {
    pub(crate) fn new() -> Self {
        ShardedMap { shards: std::array::from_fn(|_| FxHashMap::default()) }
    }

    /// The shard of `key`: the top bits of its hash multiplied again, which depend on all of its
    /// bits, so that the entries of one shard still spread over all of its table's buckets. (Bits
    /// 48–51 of the hash alone depend only on the low 26 bits of the last field hashed: the
    /// anchors of one recursion, whose anchored versions differ above bit 32, all fell into one
    /// shard.)
    fn shard(&self, key: &K) -> usize {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        (h.finish().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize & (SHARDS - 1)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.shards[self.shard(key)].get(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        let i = self.shard(&key);
        self.shards[i].insert(key, value);
    }

    /// [`ShardedMap::insert`] into a map that holds about `capacity` entries at most: a full
    /// shard is emptied first, keeping its table, so its memory stays at the bound.
    ///
    /// A shard is full at `capacity / SHARDS` entries, or earlier when its table is: one more
    /// entry would reallocate it, and it already holds half the bound. A table holds 7/8 of its
    /// power-of-two buckets before it doubles, so a bound of 2^k entries per shard would
    /// otherwise end in a table of 2^(k+1) buckets, half of them empty (heaptrack on javac: the
    /// memo of stays took 22 MB at its 2^19 entries), and pay a doubling to get there.
    pub(crate) fn insert_bounded(&mut self, key: K, value: V, capacity: usize) {
        let i = self.shard(&key);
        let shard = &mut self.shards[i];
        let bound = capacity.div_ceil(SHARDS);
        let table_full = shard.len() >= shard.capacity() && shard.len() >= bound / 2;
        if shard.len() >= bound || table_full {
            shard.clear();
        }
        shard.insert(key, value);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_entry_and_uses_every_shard() {
        let mut m = ShardedMap::new();
        for i in 0..100_000u64 {
            m.insert((i as u32, 7u32, i * 3), (i, i + 1));
        }
        m.insert((5, 7, 15), (50, 51)); // replaces
        assert_eq!(m.len(), 100_000);
        assert_eq!(m.get(&(5, 7, 15)), Some(&(50, 51)));
        for i in (0..100_000u64).filter(|&i| i != 5) {
            assert_eq!(m.get(&(i as u32, 7, i * 3)), Some(&(i, i + 1)));
        }
        assert_eq!(m.get(&(5, 8, 15)), None);
        assert_even(&m);
        // The memo's narrow key (memo.rs): versions counting up under one site and callee.
        let mut narrow = ShardedMap::new();
        for i in 0..100_000u32 {
            narrow.insert((3u32, 7u32, i), [i; 3]);
        }
        assert_even(&narrow);
        // The anchor memo's key (encoder.rs): the anchors of one recursion at one graph version.
        let mut anchors = ShardedMap::new();
        for a in 1000..101_000u64 {
            anchors.insert((3u32, 7u32, 0u64, crate::ids::anchored_version(a, 999).unwrap()), a);
        }
        assert_even(&anchors);
    }

    #[test]
    fn a_bounded_map_forgets_a_shard_at_a_time() {
        let mut m = ShardedMap::new();
        for i in 0..10_000u64 {
            m.insert_bounded(i, i, 1600);
            assert_eq!(m.get(&i), Some(&i), "the new entry is kept");
            assert!(m.len() <= 1600, "{}", m.len());
        }
    }

    #[test]
    fn a_bounded_shard_never_outgrows_its_bound() {
        // 2^12 entries per shard: a table that held them all would have 2^13 buckets.
        let capacity = SHARDS << 12;
        let mut m = ShardedMap::new();
        for i in 0..(capacity as u64 * 4) {
            m.insert_bounded(i, i, capacity);
            assert_eq!(m.get(&i), Some(&i), "the new entry is kept");
        }
        for s in &m.shards {
            assert!(s.capacity() <= capacity / SHARDS, "a shard's table grew to {} entries", s.capacity());
            assert!(!s.is_empty(), "every shard is in use");
        }
    }

    /// Unevenly filled shards would bring back a big table's doubling.
    fn assert_even<K, V>(m: &ShardedMap<K, V>) {
        for s in &m.shards {
            assert!((100_000 / SHARDS / 2..100_000 / SHARDS * 2).contains(&s.len()), "{}", s.len());
        }
    }
}
