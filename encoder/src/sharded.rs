//! A hash map in shards, for the encoder's two ever-growing memos.
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

    /// The shard of `key`: bits of its hash that the shard's own table uses neither for the
    /// bucket index (the low bits) nor for its control bytes (the top seven), so the entries of
    /// one shard still spread over all of its buckets.
    fn shard(&self, key: &K) -> usize {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        (h.finish() >> 48) as usize & (SHARDS - 1)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.shards[self.shard(key)].get(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        let i = self.shard(&key);
        self.shards[i].insert(key, value);
    }

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
    }

    /// Unevenly filled shards would bring back a big table's doubling.
    fn assert_even<K, V>(m: &ShardedMap<K, V>) {
        for s in &m.shards {
            assert!((100_000 / SHARDS / 2..100_000 / SHARDS * 2).contains(&s.len()), "{}", s.len());
        }
    }
}
