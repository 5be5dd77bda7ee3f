//! Event counts by key for the builder's first phase: an open-addressing table (linear probing,
//! 32-byte slots, two to a cache line) whose slots can be prefetched some events ahead, and that
//! remembers the order keys came in. Counting is one table update per event, and with a
//! profile's hundreds of thousands of distinct keys the table is larger than the core's cache:
//! without prefetching, every update would wait for memory.

/// What an event's context depends on: its site and its frame's ⟨c, v⟩, and its thread when the
/// tree has one root per thread (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct EventKey {
    pub site: u32,
    pub thread: u32,
    pub c: u64,
    pub v: u64,
}

impl EventKey {
    /// A well-mixed 64-bit hash (folded multiplies: every input bit reaches every output bit).
    #[inline]
    pub fn hash(&self) -> u64 {
        #[inline]
        fn fold(x: u64, y: u64) -> u64 {
            let p = x as u128 * y as u128;
            (p as u64) ^ (p >> 64) as u64
        }
        let h = fold(self.c ^ 0x243f_6a88_85a3_08d3, self.v ^ 0x1319_8a2e_0370_7344);
        fold(h ^ ((self.site as u64) << 32 | self.thread as u64), 0xa409_3822_299f_31d1)
    }
}

#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct Slot {
    key: EventKey,
    /// 0: the slot is empty.
    events: u64,
}

/// Counts by key, also kept in the order keys were first added: the counting worker reads its
/// events in stream order, and decoding keys in that order keeps the decoder's working set small
/// (neighbouring events share most of their stack). Allocates nothing until the first key.
#[derive(Debug, Clone, Default)]
pub(crate) struct TallyTable {
    /// Open addressing with linear probing; a power of two of them (or none), at most 3/4 full.
    slots: Vec<Slot>,
    /// The occupied slots in the order their keys were added.
    order: Vec<u32>,
}

const MIN_SLOTS: usize = 1024;

impl TallyTable {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Asks the CPU to fetch the slot where a key of hash `h` would start probing.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        if !self.slots.is_empty() {
            let p: *const Slot = &self.slots[h as usize & self.mask()];
            // SAFETY: a prefetch is only a hint, and `p` points into the table.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }

    /// Adds `events` (> 0) to the count of `key`, whose hash is `h`.
    #[inline]
    pub fn add(&mut self, key: EventKey, h: u64, events: u64) {
        debug_assert!(events > 0);
        // At most 3/4 full: probe runs stay short, and there is always an empty slot.
        if self.order.len() * 4 >= self.slots.len() * 3 {
            self.grow();
        }
        let i = self.find(key, h);
        let s = &mut self.slots[i];
        if s.events == 0 {
            s.key = key;
            self.order.push(i as u32);
        }
        s.events += events;
    }

    /// The slot holding `key`, or the empty one where it belongs.
    #[inline]
    fn find(&self, key: EventKey, h: u64) -> usize {
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.events == 0 || s.key == key {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let len = (self.slots.len() * 2).max(MIN_SLOTS);
        // Slot numbers are kept as u32: 3 · 2^30 keys at most (96 GiB of table).
        assert!(u32::try_from(len - 1).is_ok(), "too many distinct event keys for one table");
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); len]);
        let mut order = std::mem::take(&mut self.order);
        for o in &mut order {
            let s = old[*o as usize];
            let i = self.find(s.key, s.key.hash());
            self.slots[i] = s;
            *o = i as u32;
        }
        self.order = order;
    }

    /// The count of `key` (hash `h`), 0 if it was never added.
    pub fn get(&self, key: EventKey, h: u64) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        self.slots[self.find(key, h)].events
    }

    /// The `k`-th key first added, and its count.
    pub fn nth(&self, k: usize) -> (EventKey, u64) {
        let s = &self.slots[self.order[k] as usize];
        (s.key, s.events)
    }

    /// (key, events) of every key counted, in the order the keys were first added.
    pub fn iter(&self) -> impl Iterator<Item = (EventKey, u64)> + '_ {
        self.order.iter().map(|&i| {
            let s = &self.slots[i as usize];
            (s.key, s.events)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn counts_like_a_hash_map_in_first_seen_order() {
        let mut t = TallyTable::default();
        let mut want = HashMap::new();
        let mut first_seen = Vec::new();
        let mut x = 1u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = EventKey { site: (x >> 60) as u32, thread: (i % 3) as u32, c: (x >> 40) % 5000, v: if i % 7 == 0 { 1 << 63 } else { x % 3 } };
            let n = 1 + i % 4;
            t.add(k, k.hash(), n);
            if !want.contains_key(&k) {
                first_seen.push(k);
            }
            *want.entry(k).or_insert(0) += n;
        }
        assert_eq!(t.len(), want.len());
        assert_eq!(t.iter().collect::<HashMap<_, _>>(), want);
        assert_eq!(t.iter().map(|(k, _)| k).collect::<Vec<_>>(), first_seen);
        for (k, key) in first_seen.iter().enumerate() {
            assert_eq!(t.nth(k), (*key, want[key]));
            assert_eq!(t.get(*key, key.hash()), want[key]);
        }
        let absent = EventKey { site: 99, thread: 0, c: 1 << 50, v: 0 };
        assert_eq!(t.get(absent, absent.hash()), 0);
        assert_eq!(TallyTable::default().get(absent, absent.hash()), 0);
    }
}
