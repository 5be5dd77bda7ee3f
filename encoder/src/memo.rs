//! The encoder's memo of Algorithm 1: ⟨site, callee, caller version⟩ → ⟨add, callee version⟩,
//! every result computed under the lock except those that are cheap to compute again (back
//! edges, and stays: `EncoderConfig::recomputed_stay_edges`); the lock-free `SiteCache` keeps
//! only what fits.
//!
//! It is the agent's biggest table (lucene_search: 434k entries when it kept every stay), so an
//! entry whose two versions are plain graph versions below 2^31 (every run measured so far:
//! javac, the largest, made 112M versions) takes 24 bytes in the hash table instead of 32; the
//! others (anchored versions: an anchored caller's links) keep the full width in a second table.
//! Stays (v_out = v_in) have a narrow table of their own, without v_out.
//!
//! Two of the three tables are bounded, the ones that grew with the anchors (javac, 33.6M
//! anchors: 170 MB of stays and 39 MB of other entries, heaptrack), and a result they forgot is
//! computed again:
//! - stays (`EncoderConfig::stay_memo_capacity`): a stay is a function of the graph's history
//!   at its graph version, computed again without a record (`State::stay`);
//! - the full-width table (`EncoderConfig::wide_memo_capacity`): each anchor makes a version of
//!   its own, whose links are of no use once no frame of it is live and the anchor memo has
//!   forgotten it. A link it forgot is logged again, and a second Link record for the same
//!   caller version decodes like the first.
//!
//! The links of plain versions are kept: logged again, each would give its callee a new version,
//! and every context below it new links in turn.

use crate::sharded::ShardedMap;

/// ⟨site, callee, v_in⟩ → ⟨add, v_out⟩ at full width.
type WideMemo = ShardedMap<(u32, u32, u64), (u64, u64)>;

pub(crate) struct Memo {
    /// Both versions narrowed, not a stay: ⟨site, callee, v_in⟩ → [add low half, add high half,
    /// v_out].
    narrow: ShardedMap<(u32, u32, u32), [u32; 3]>,
    /// Stays at a narrow version: ⟨site, callee, v_in⟩ → [add low half, add high half].
    stays: ShardedMap<(u32, u32, u32), [u32; 2]>,
    /// About the most entries `stays` keeps.
    stay_capacity: usize,
    /// Entries with a version that does not narrow (few in any run measured, so a miss does not
    /// hash its key a second time for it until there is one).
    wide: Option<WideMemo>,
    /// About the most entries `wide` keeps.
    wide_capacity: usize,
}

/// A version in 32 bits: None unless a graph version below 2^31.
fn narrow(v: u64) -> Option<u32> {
    (v < 1 << 31).then_some(v as u32)
}

impl Memo {
    /// A memo whose stay and full-width tables keep about `stay_capacity` and `wide_capacity`
    /// entries at most.
    pub(crate) fn new(stay_capacity: usize, wide_capacity: usize) -> Memo {
        Memo { narrow: ShardedMap::new(), stays: ShardedMap::new(), stay_capacity, wide: None, wide_capacity }
    }

    pub(crate) fn get(&self, site: u32, callee: u32, v_in: u64) -> Option<(u64, u64)> {
        let join = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
        if let Some(v) = narrow(v_in) {
            if let Some(&[lo, hi]) = self.stays.get(&(site, callee, v)) {
                return Some((join(lo, hi), v_in));
            }
            if let Some(&[lo, hi, v_out]) = self.narrow.get(&(site, callee, v)) {
                return Some((join(lo, hi), v_out as u64));
            }
        }
        self.wide.as_ref()?.get(&(site, callee, v_in)).copied()
    }

    /// Records a result for a key that [`Memo::get`] does not know.
    pub(crate) fn insert(&mut self, site: u32, callee: u32, v_in: u64, (add, v_out): (u64, u64)) {
        let (lo, hi) = (add as u32, (add >> 32) as u32);
        match (narrow(v_in), narrow(v_out)) {
            (Some(v), Some(_)) if v_out == v_in => self.stays.insert_bounded((site, callee, v), [lo, hi], self.stay_capacity),
            (Some(v_in), Some(v_out)) => self.narrow.insert((site, callee, v_in), [lo, hi, v_out]),
            _ => self.wide.get_or_insert_with(WideMemo::new).insert_bounded((site, callee, v_in), (add, v_out), self.wide_capacity),
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
        let mut m = Memo::new(1 << 10, 1 << 10);
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

    #[test]
    fn the_links_of_plain_versions_are_never_forgotten() {
        let mut m = Memo::new(32, 64);
        for a in 0..1000u64 {
            m.insert(1, 2, anchored_version(a + 5, 5).unwrap(), (a, 7));
            m.insert(1, 2, a + 2000, (a, a + 2000)); // a stay
            m.insert(1, 2, a, (a, a + 5000));
        }
        let kept = (0..1000u64).filter(|&a| m.get(1, 2, anchored_version(a + 5, 5).unwrap()).is_some()).count();
        assert!((1..=64).contains(&kept), "{kept} full-width entries kept");
        let stays: Vec<u64> = (0..1000u64).filter(|&a| m.get(1, 2, a + 2000).is_some()).collect();
        assert!((1..=32).contains(&stays.len()), "{} stays kept", stays.len());
        assert!(stays.iter().all(|&a| m.get(1, 2, a + 2000) == Some((a, a + 2000))));
        assert!((0..1000u64).all(|a| m.get(1, 2, a) == Some((a, a + 5000))), "plain links are all kept");
    }
}
