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
//!
//! [`AnchorMemo`] beside it keeps the anchors logged, by caller context.

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

/// ⟨site, callee, caller c, caller v⟩ of an anchored entry.
pub(crate) type AnchorKey = (u32, u32, u64, u64);

/// Lookups after which [`AnchorMemo`] judges whether it pays.
pub(crate) const ANCHOR_MEMO_WINDOW: u32 = 1 << 20;

/// The locked anchor memo: the anchored version logged for a caller context, so that a recursion
/// entered again from the same context reuses its anchor instead of logging another. It is
/// consulted only while it pays: a program whose anchored contexts rarely come back pays two
/// cache misses per anchor for nothing (javac: 3.8% of 33.5M lookups hit the 2^18-entry table,
/// and without it javac ran 13% faster, for a store 10% larger). So after a window of `window`
/// lookups with fewer than one hit in 16 the next `7 * window` anchors skip it (neither looked
/// up nor remembered); then it is judged again. What it remembers stays true while skipped (an
/// anchor never changes), and an anchor logged twice decodes like the first.
pub(crate) struct AnchorMemo {
    map: ShardedMap<AnchorKey, u64>,
    /// About the most entries it keeps (`EncoderConfig::anchor_memo_capacity`; 0: none).
    capacity: usize,
    window: u32,
    lookups: u32,
    hits: u32,
    /// Anchors left to skip.
    skip: u64,
}

impl AnchorMemo {
    pub(crate) fn new(capacity: usize, window: u32) -> AnchorMemo {
        AnchorMemo { map: ShardedMap::new(), capacity, window: window.max(1), lookups: 0, hits: 0, skip: 0 }
    }

    /// The anchored version for `key`: the one remembered, else the one `log` makes (a new
    /// anchor, logged), which is then remembered. Each call counts as one anchor.
    pub(crate) fn get_or_log<E>(&mut self, key: AnchorKey, log: impl FnOnce() -> Result<u64, E>) -> Result<u64, E> {
        if self.capacity == 0 {
            return log();
        }
        if self.skip > 0 {
            self.skip -= 1;
            return log();
        }
        let found = self.map.get(&key).copied();
        self.lookups += 1;
        self.hits += found.is_some() as u32;
        if self.lookups == self.window {
            if self.hits < self.window / 16 {
                self.skip = 7 * self.window as u64;
            }
            (self.lookups, self.hits) = (0, 0);
        }
        if let Some(v) = found {
            return Ok(v);
        }
        let v = log()?;
        self.map.insert_bounded(key, v, self.capacity);
        Ok(v)
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

    #[test]
    fn the_anchor_memo_is_skipped_while_it_does_not_pay_and_judged_again() {
        let key = |i: u64| (1u32, 2u32, i, 5u64);
        let mut m = AnchorMemo::new(1 << 12, 64);
        // What an anchor gets: the remembered version, or a new one (`logged` counts them).
        let mut logged = 0u64;
        let mut anchor = |m: &mut AnchorMemo, i: u64| {
            m.get_or_log(key(i), || -> Result<u64, ()> {
                logged += 1;
                Ok(1000 + logged)
            })
            .unwrap()
        };
        assert_eq!(anchor(&mut m, 0), 1001);
        // Repeated contexts: it pays, so it stays in use past many windows.
        for _ in 0..10 * 64 {
            assert_eq!(anchor(&mut m, 0), 1001);
        }
        // Contexts that never come back: after a window with fewer than 4 hits in 64 (this one
        // has 1 + 63 new ones), the next 7 windows' anchors skip it: nothing found, nothing kept.
        for i in 1..64 {
            assert_eq!(anchor(&mut m, i), 1001 + i);
        }
        assert_eq!(anchor(&mut m, 0), 1065, "skipped: a new anchor");
        for i in 1..7 * 64 {
            assert_eq!(anchor(&mut m, 64 + i), 1065 + i);
        }
        // Judged again: what it knew is still there, what came while skipping is not.
        assert_eq!(anchor(&mut m, 0), 1001);
        assert_eq!(anchor(&mut m, 64 + 5), 1000 + 7 * 64 + 65, "anchored while skipped: not kept");
        assert_eq!(anchor(&mut m, 64 + 5), 1000 + 7 * 64 + 65, "kept since");
        // A capacity of 0 is no memo at all.
        let mut none = AnchorMemo::new(0, 64);
        assert_eq!(anchor(&mut none, 0), 1000 + 7 * 64 + 66);
        assert_eq!(anchor(&mut none, 0), 1000 + 7 * 64 + 67);
    }
}
