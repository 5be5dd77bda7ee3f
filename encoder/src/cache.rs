//! Per-call-site memo of Algorithm 1 results, readable without a lock.
//!
//! Why a memo is exact: an update of edge ⟨p, l, n⟩ entered with caller version `v_in` produced
//! ⟨c + add, v_out⟩ where graph `v_out` has lv(p) = v_in and av(e) = add. Graph versions are
//! persistent, so the same answer stays decodable for any later caller context ⟨c, v_in⟩ at the
//! same site and callee, whatever the graph did since. The steady-state path is therefore one
//! seqlock read of this table.
//!
//! Layout (stable, so that code outside Rust can read it at `base + site * SLOT_BYTES`):
//! `seq: u64` (odd while a writer is inside), then [`WAYS`] ways of
//! `{ callee + 1: u64 (0 = empty), v_in: u64, add: u64, v_out: u64 }`. All fields are read and
//! written as atomics; writers are serialized by the encoder's lock.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{fence, AtomicU64, Ordering};

#[repr(C)]
struct Way {
    callee_plus1: AtomicU64,
    v_in: AtomicU64,
    add: AtomicU64,
    v_out: AtomicU64,
}

/// Entries per site: a site keeps its last four ⟨callee, caller version⟩ results (a call site
/// inside a method that is entered in several contexts sees several caller versions).
pub const WAYS: usize = 4;

#[repr(C)]
struct Slot {
    seq: AtomicU64,
    ways: [Way; WAYS],
}

/// Size of one site's slot in bytes.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// A fixed-capacity table of slots, one per site id. The memory is reserved zeroed up front and
/// committed by the OS only where sites are used.
pub struct SiteCache {
    slots: *mut Slot,
    capacity: usize,
}

// SAFETY: every field of every slot is an atomic; the raw pointer is owned and never reallocated.
unsafe impl Send for SiteCache {}
// SAFETY: as above; concurrent readers only do atomic loads, the single writer atomic stores.
unsafe impl Sync for SiteCache {}

impl SiteCache {
    /// Reserves room for `capacity` sites. Sites at or past the capacity are simply never cached.
    pub fn new(capacity: usize) -> SiteCache {
        let capacity = capacity.max(1);
        let layout = Layout::array::<Slot>(capacity).expect("site cache capacity overflows");
        // SAFETY: the layout has non-zero size; all-zero bytes are a valid `Slot` (atomics of 0,
        // meaning "empty way, even sequence").
        let slots = unsafe { alloc_zeroed(layout) } as *mut Slot;
        if slots.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        SiteCache { slots, capacity }
    }

    /// Number of sites the table can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Address of slot 0, for readers outside Rust (see the module docs for the layout).
    pub fn base_address(&self) -> usize {
        self.slots as usize
    }

    #[inline]
    fn slot(&self, site: u32) -> Option<&Slot> {
        let i = site as usize;
        if i < self.capacity {
            // SAFETY: i is in bounds of the allocation, which lives as long as `self`.
            Some(unsafe { &*self.slots.add(i) })
        } else {
            None
        }
    }

    /// The memoized ⟨add, v_out⟩ for entering `callee` through `site` with caller version `v_in`.
    #[inline]
    pub fn lookup(&self, site: u32, callee: u32, v_in: u64) -> Option<(u64, u64)> {
        let slot = self.slot(site)?;
        let s1 = slot.seq.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            return None;
        }
        let key = callee as u64 + 1;
        let mut hit = None;
        for w in &slot.ways {
            if w.callee_plus1.load(Ordering::Relaxed) == key && w.v_in.load(Ordering::Relaxed) == v_in {
                hit = Some((w.add.load(Ordering::Relaxed), w.v_out.load(Ordering::Relaxed)));
                break;
            }
        }
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != s1 {
            return None;
        }
        hit
    }

    /// Records a result. Must be called by one writer at a time (the encoder holds its lock).
    pub(crate) fn store(&self, site: u32, callee: u32, v_in: u64, add: u64, v_out: u64) {
        let Some(slot) = self.slot(site) else { return };
        let key = callee as u64 + 1;
        let s = slot.seq.load(Ordering::Relaxed);
        // Overwrite the same key if present, else the ways in turn (the sequence counts stores).
        let way = slot
            .ways
            .iter()
            .position(|w| w.callee_plus1.load(Ordering::Relaxed) == key && w.v_in.load(Ordering::Relaxed) == v_in)
            .unwrap_or(((s >> 1) as usize) % WAYS);
        slot.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let w = &slot.ways[way];
        w.callee_plus1.store(key, Ordering::Relaxed);
        w.v_in.store(v_in, Ordering::Relaxed);
        w.add.store(add, Ordering::Relaxed);
        w.v_out.store(v_out, Ordering::Relaxed);
        slot.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl Drop for SiteCache {
    fn drop(&mut self) {
        let layout = Layout::array::<Slot>(self.capacity).expect("layout was valid at creation");
        // SAFETY: allocated in `new` with this very layout, and dropped once.
        unsafe { dealloc(self.slots as *mut u8, layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ways_keep_two_callees_and_out_of_range_sites_never_hit() {
        let c = SiteCache::new(4);
        c.store(2, 7, 10, 3, 11);
        c.store(2, 8, 10, 5, 12);
        assert_eq!(c.lookup(2, 7, 10), Some((3, 11)));
        assert_eq!(c.lookup(2, 8, 10), Some((5, 12)));
        assert_eq!(c.lookup(2, 7, 9), None, "other caller version must miss");
        c.store(2, 7, 20, 4, 21);
        assert_eq!(c.lookup(2, 7, 20), Some((4, 21)));
        assert_eq!(c.lookup(2, 8, 10), Some((5, 12)), "same-callee refresh keeps the other way");
        c.store(9, 1, 1, 1, 1);
        assert_eq!(c.lookup(9, 1, 1), None);
        assert_eq!(c.lookup(0, 0, 0), None, "zeroed slot is empty");
    }
}
