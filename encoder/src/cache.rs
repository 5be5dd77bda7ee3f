//! A memo of Algorithm 1 results, readable without a lock: ⟨site, callee, caller version⟩ →
//! ⟨add, callee version⟩.
//!
//! Why a memo is exact: an update of edge ⟨p, l, n⟩ entered with caller version `v_in` produced
//! ⟨c + add, v_out⟩ where either v_out = v_in and av(e) = add at v_in (a stay), or graph `v_out`
//! is a Link of ⟨site, callee⟩ to v_in with av(e) = add (encoder.rs, "Versions"). Graph versions
//! are persistent, so the same answer stays decodable for any later caller context ⟨c, v_in⟩ at the
//! same site and callee, whatever the graph did since. The steady-state path is therefore one
//! seqlock read of this table.
//!
//! A call site inside a method entered in many contexts sees many caller versions, so the table
//! is indexed by a hash of the whole key, not by site: bucket `bucket_index(site, callee, v_in)`.
//! Layout (stable, so that code outside Rust can read it at `base + bucket * SLOT_BYTES`, base
//! aligned to `SLOT_BYTES`):
//! `seq: u64` (odd while a writer is inside), then [`WAYS`] ways of
//! `{ key: u64 = site << 32 | (callee + 1) (0 = empty), v_in: u64, add: u64, v_out: u64 }`. All
//! fields are read and written as atomics; writers are serialized by the encoder's lock.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{fence, AtomicU64, Ordering};

#[repr(C)]
struct Way {
    key: AtomicU64,
    v_in: AtomicU64,
    add: AtomicU64,
    v_out: AtomicU64,
}

/// Entries per bucket: a bucket is two aligned cache lines, and the sequence word and the first
/// way share the first, so a hit in way 0 (the common case: most buckets hold one key) reads one
/// line. (Four ways in an unaligned 136-byte bucket made half the lookups read two lines.)
pub const WAYS: usize = 3;

/// The multiplier of [`bucket_index`] (also in agent/java/lucce/Runtime.java).
pub const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// The way key of ⟨site, callee⟩: never 0.
#[inline]
pub fn way_key(site: u32, callee: u32) -> u64 {
    ((site as u64) << 32) | (callee as u64 + 1)
}

/// The bucket of a key in a table of `buckets` (a power of two) buckets: the top bits of a
/// multiplicative hash of the way key mixed with the caller version.
#[inline]
pub fn bucket_index(site: u32, callee: u32, v_in: u64, buckets: usize) -> usize {
    let h = (way_key(site, callee) ^ v_in.rotate_left(29)).wrapping_mul(HASH_MUL);
    (h >> 32) as usize & (buckets - 1)
}

impl Way {
    /// Whether this way holds `key` with second field `second` (and third field `third`, when
    /// given).
    #[inline]
    fn matches(&self, key: u64, second: u64, third: Option<u64>) -> bool {
        self.key.load(Ordering::Relaxed) == key
            && self.v_in.load(Ordering::Relaxed) == second
            && third.is_none_or(|t| self.add.load(Ordering::Relaxed) == t)
    }
}

#[repr(C, align(128))]
struct Slot {
    seq: AtomicU64,
    ways: [Way; WAYS],
}

/// Size of one site's slot in bytes (the bucket stride; its ways end at 8 + 32 * WAYS).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
const _: () = assert!(SLOT_BYTES == 128 && 8 + 32 * WAYS <= SLOT_BYTES);

/// A fixed-size table of buckets. The memory is reserved zeroed up front and committed by the OS
/// only where buckets are used.
pub struct SiteCache {
    /// Bucket 0, aligned to `SLOT_BYTES` inside `raw`.
    slots: *mut Slot,
    capacity: usize,
    /// The allocation, with `raw_layout`: over-aligned by hand, because the allocator zeroes
    /// (commits) a whole over-aligned block itself, where `calloc` leaves fresh pages to the OS.
    raw: *mut u8,
    raw_layout: Layout,
}

// SAFETY: every field of every slot is an atomic; the raw pointer is owned and never reallocated.
unsafe impl Send for SiteCache {}
// SAFETY: as above; concurrent readers only do atomic loads, the single writer atomic stores.
unsafe impl Sync for SiteCache {}

impl SiteCache {
    /// A table of `capacity` buckets (rounded up to a power of two).
    pub fn new(capacity: usize) -> SiteCache {
        let capacity = capacity.max(1).next_power_of_two();
        let raw_layout = capacity
            .checked_mul(SLOT_BYTES)
            .and_then(|n| n.checked_add(SLOT_BYTES))
            .and_then(|n| Layout::from_size_align(n, 16).ok())
            .expect("site cache capacity overflows");
        // SAFETY: the layout has non-zero size.
        let raw = unsafe { alloc_zeroed(raw_layout) };
        if raw.is_null() {
            std::alloc::handle_alloc_error(raw_layout);
        }
        // SAFETY: at most SLOT_BYTES - 1 bytes in, so `capacity` slots still fit in the block; all
        // zero bytes are a valid `Slot` (atomics of 0: "empty way, even sequence").
        let slots = unsafe { raw.add(raw.align_offset(SLOT_BYTES)) } as *mut Slot;
        advise_huge_pages(raw, raw_layout.size());
        SiteCache { slots, capacity, raw, raw_layout }
    }

    /// Number of buckets (a power of two).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Address of slot 0, for readers outside Rust (see the module docs for the layout).
    pub fn base_address(&self) -> usize {
        self.slots as usize
    }

    #[inline]
    fn slot(&self, site: u32, callee: u32, hash_in: u64) -> &Slot {
        let i = bucket_index(site, callee, hash_in, self.capacity);
        // SAFETY: i is masked into the allocation, which lives as long as `self`.
        unsafe { &*self.slots.add(i) }
    }

    /// The ⟨third, fourth⟩ fields of the way of `key` whose second field is `second` (and whose
    /// third is `third`, when given), in the bucket of `hash_in`; None while a writer is inside.
    #[inline]
    fn find(&self, site: u32, callee: u32, hash_in: u64, second: u64, third: Option<u64>) -> Option<(u64, u64)> {
        let slot = self.slot(site, callee, hash_in);
        let s1 = slot.seq.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            return None;
        }
        let key = way_key(site, callee);
        let hit = slot
            .ways
            .iter()
            .find(|w| w.matches(key, second, third))
            .map(|w| (w.add.load(Ordering::Relaxed), w.v_out.load(Ordering::Relaxed)));
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != s1 {
            return None;
        }
        hit
    }

    /// Writes the fields after the key of a way: the way that [`SiteCache::find`] would answer
    /// for the same key (`third` is part of it when `third_is_key`), else the ways in turn. Must
    /// be called by one writer at a time (the encoder holds its lock).
    fn put(&self, site: u32, callee: u32, hash_in: u64, [second, third, fourth]: [u64; 3], third_is_key: bool) {
        let slot = self.slot(site, callee, hash_in);
        let key = way_key(site, callee);
        let s = slot.seq.load(Ordering::Relaxed);
        let way = slot
            .ways
            .iter()
            .position(|w| w.matches(key, second, third_is_key.then_some(third)))
            .unwrap_or(((s >> 1) as usize) % WAYS);
        slot.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let w = &slot.ways[way];
        w.key.store(key, Ordering::Relaxed);
        w.v_in.store(second, Ordering::Relaxed);
        w.add.store(third, Ordering::Relaxed);
        w.v_out.store(fourth, Ordering::Relaxed);
        slot.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The memoized ⟨add, v_out⟩ for entering `callee` through `site` with caller version `v_in`.
    #[inline]
    pub fn lookup(&self, site: u32, callee: u32, v_in: u64) -> Option<(u64, u64)> {
        self.find(site, callee, v_in, v_in, None)
    }

    /// Records a result. Must be called by one writer at a time (the encoder holds its lock).
    pub(crate) fn store(&self, site: u32, callee: u32, v_in: u64, add: u64, v_out: u64) {
        self.put(site, callee, v_in, [v_in, add, v_out], false)
    }

    /// The anchor table's use of the layout: the anchored version of ⟨site, callee⟩ entered from
    /// caller context ⟨c, v⟩, in way `{key, c, v, anchored}` of bucket `bucket_index(site,
    /// callee, anchor_hash_in(c, v))`.
    #[inline]
    pub fn lookup_anchor(&self, site: u32, callee: u32, c: u64, v: u64) -> Option<u64> {
        self.find(site, callee, anchor_hash_in(c, v), c, Some(v)).map(|(_, anchored)| anchored)
    }

    /// Records an anchor (one writer at a time, as [`SiteCache::store`]).
    pub(crate) fn store_anchor(&self, site: u32, callee: u32, c: u64, v: u64, anchored: u64) {
        self.put(site, callee, anchor_hash_in(c, v), [c, v, anchored], true)
    }
}

/// What the anchor table's bucket hashes besides ⟨site, callee⟩ (also in
/// agent/java/lucce/Runtime.java): all of ⟨c, v⟩, since the anchored callers of a recursion all
/// have c = 0 and differ only in v; an anchored v's two halves are added, because its anchor
/// part (bits 32–62) alone would reach the bucket index only partly (`bucket_index` rotates it
/// into bits 61–63 and 0–27: 8 anchors in a row shared a bucket of 3 ways).
#[inline]
fn anchor_hash_in(c: u64, v: u64) -> u64 {
    c ^ v.wrapping_add(v >> 32)
}

/// Asks Linux to back the whole 2 MiB pages inside `[start, start + len)` with transparent huge
/// pages (honoured with THP in `madvise` or `always` mode). Lookups hash all over the table, so
/// with 4 KiB pages nearly every probe of the memo also missed the TLB: FOP's CPU time fell by
/// about 6% with this alone (README, performance). The advice changes no contents.
fn advise_huge_pages(start: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let first = (start as usize).next_multiple_of(HUGE);
        let end = (start as usize + len) & !(HUGE - 1);
        if end > first {
            // SAFETY: the range lies inside the live allocation `start..start + len`, which this
            // table owns; MADV_HUGEPAGE is advice about backing, it never changes the bytes. An
            // error (THP off, old kernel) leaves ordinary pages, so it is ignored.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}

impl Drop for SiteCache {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout, and dropped once.
        unsafe { dealloc(self.raw, self.raw_layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_exact_and_empty_slots_never_hit() {
        let c = SiteCache::new(4);
        c.store(2, 7, 10, 3, 11);
        c.store(2, 8, 10, 5, 12);
        c.store(3, 7, 10, 6, 13);
        assert_eq!(c.lookup(2, 7, 10), Some((3, 11)));
        assert_eq!(c.lookup(2, 8, 10), Some((5, 12)));
        assert_eq!(c.lookup(3, 7, 10), Some((6, 13)), "the site is part of the key");
        assert_eq!(c.lookup(2, 7, 9), None, "other caller version must miss");
        c.store(2, 7, 20, 4, 21);
        assert_eq!(c.lookup(2, 7, 20), Some((4, 21)));
        assert_eq!(c.lookup(0, 0, 0), None, "zeroed slot is empty");
        // A full table forgets but never answers wrongly.
        for k in 0..1000u32 {
            c.store(k, k, k as u64, k as u64 * 2, k as u64 * 3);
        }
        for k in 0..1000u32 {
            if let Some(hit) = c.lookup(k, k, k as u64) {
                assert_eq!(hit, (k as u64 * 2, k as u64 * 3));
            }
        }
    }

    #[test]
    fn anchors_of_one_site_with_equal_c_coexist() {
        // A recursion's anchored callers all have c = 0: each ⟨c, v⟩ must keep its own answer.
        // Anchored versions of consecutive anchors at one graph version (a recursion going
        // deeper) differ in their anchor part only.
        let c = SiteCache::new(1 << 10);
        let v = |a: u64| crate::ids::anchored_version(a, 40).unwrap();
        for a in 41..=48u64 {
            c.store_anchor(5, 5, 0, v(a), 100 + a);
        }
        let kept = (41..=48u64).filter(|&a| c.lookup_anchor(5, 5, 0, v(a)) == Some(100 + a)).count();
        assert_eq!(kept, 8, "only {kept} of 8 anchors kept");
        assert_eq!(c.lookup_anchor(5, 5, 0, v(49)), None);
        assert_eq!(c.lookup_anchor(5, 5, 1, v(41)), None, "c is part of the key");
        c.store_anchor(5, 5, 0, v(41), 200);
        assert_eq!(c.lookup_anchor(5, 5, 0, v(41)), Some(200), "same key overwrites");
    }
}
