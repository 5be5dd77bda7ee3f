//! The encoder's lossless memo of Algorithm 1: ⟨site, callee, caller version⟩ → ⟨add, callee
//! version⟩, every result computed under the lock except those that are cheap to compute again
//! (back edges, and stays: `EncoderConfig::recomputed_stay_edges`); the lock-free `SiteCache`
//! keeps only what fits.
//!
//! It is the agent's biggest table (lucene_search: 434k entries when it kept every stay), so an
//! entry whose two versions are plain graph versions below 2^31 (every run measured so far:
//! javac, the largest, made 112M versions) takes 24 bytes in the hash table instead of 32; the
//! others (anchored versions: an anchored caller's links) keep the full width in a second table.

use crate::sharded::ShardedMap;

/// ⟨site, callee, v_in⟩ → ⟨add, v_out⟩ at full width.
type WideMemo = ShardedMap<(u32, u32, u64), (u64, u64)>;

pub(crate) struct Memo {
    /// Both versions narrowed: ⟨site, callee, v_in⟩ → [add low half, add high half, v_out].
    narrow: ShardedMap<(u32, u32, u32), [u32; 3]>,
    /// Entries with a version that does not narrow (few in any run measured, so a miss does not
    /// hash its key a second time for it until there is one).
    wide: Option<WideMemo>,
}

/// A version in 32 bits: None unless a graph version below 2^31.
fn narrow(v: u64) -> Option<u32> {
    (v < 1 << 31).then_some(v as u32)
}

impl Memo {
    pub(crate) fn new() -> Memo {
        Memo { narrow: ShardedMap::new(), wide: None }
    }

    pub(crate) fn get(&self, site: u32, callee: u32, v_in: u64) -> Option<(u64, u64)> {
        if let Some(&[lo, hi, v_out]) = narrow(v_in).and_then(|v| self.narrow.get(&(site, callee, v))) {
            return Some((lo as u64 | (hi as u64) << 32, v_out as u64));
        }
        self.wide.as_ref()?.get(&(site, callee, v_in)).copied()
    }

    /// Records a result for a key that [`Memo::get`] does not know.
    pub(crate) fn insert(&mut self, site: u32, callee: u32, v_in: u64, (add, v_out): (u64, u64)) {
        match (narrow(v_in), narrow(v_out)) {
            (Some(v_in), Some(v_out)) => self.narrow.insert((site, callee, v_in), [add as u32, (add >> 32) as u32, v_out]),
            _ => self.wide.get_or_insert_with(WideMemo::new).insert((site, callee, v_in), (add, v_out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::anchored_version;

    #[test]
    fn entries_come_back_exactly_at_either_width() {
        // The entry is the hash table's bucket: the reason for this module.
        assert_eq!(std::mem::size_of::<((u32, u32, u32), [u32; 3])>(), 24);
        let mut m = Memo::new();
        let big = 1u64 << 31;
        let anchored = |a, g| anchored_version(a, g).unwrap();
        let cases = [
            (1, 2, 0, (0, 0)),
            (1, 2, 5, (u64::MAX >> 1, 5)),                  // a stay
            (1, 3, 5, (1 << 62, 0)),                        // a back edge's answer
            (1, 2, anchored(6, 5), (7, 9)),                 // an anchored caller's link
            (1, 2, anchored(5, 5), (7, 10)),                // another anchor at the same graph version
            (1, 2, big - 1, (9, big - 1)),                  // the largest narrow versions
            (1, 2, big, (9, 1)),                            // v_in too wide
            (1, 2, 8, (9, big)),                            // v_out too wide
            (2, 1, 5, (11, 12)),                            // site and callee are both key
        ];
        for (site, callee, v_in, r) in cases {
            assert_eq!(m.get(site, callee, v_in), None);
            m.insert(site, callee, v_in, r);
        }
        for (site, callee, v_in, r) in cases {
            assert_eq!(m.get(site, callee, v_in), Some(r), "{site} {callee} {v_in:#x}");
        }
        // A graph version that differs only in bits above 31 is another key.
        assert_eq!(m.get(1, 2, 5 | 1 << 40), None);
        assert_eq!(m.get(1, 2, anchored(7, 5)), None);
    }
}
