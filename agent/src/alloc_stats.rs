//! What holds the agent's heap (cargo feature `alloc-stats`, for memory work only): a global
//! allocator that counts the bytes the library has allocated and not freed (the agent, the
//! encoder, the store writer, sled) and remembers where each block of [`min_tracked`] bytes or
//! more came from; VMDeath prints them by allocation site, with how much of each is resident
//! (`mincore`), since a zeroed block nobody wrote costs no memory. heaptrack does this for most
//! programs, but its unwinder crashes some JVMs (fop, stop 59). Capturing a backtrace per large
//! block costs time, and printing them loads the library's debug information: read the report,
//! not the run's time or peak RSS. `scripts/agent_heap.sh` builds it and runs the kit with it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Blocks at least this large are tracked one by one, with their allocation site, unless the
/// environment variable `LUCCE_ALLOC_STATS_MIN` gives another size in bytes (1 tracks every
/// block, at the cost of a backtrace per allocation).
pub const DEFAULT_MIN_TRACKED: usize = 64 * 1024;

/// Frames of a site key: the innermost ones of the agent's, the store's and sled's code.
const SITE_FRAMES: usize = 4;

/// The large blocks live now, by address, each with its size and its allocation site.
pub struct Ledger<S> {
    blocks: HashMap<usize, (usize, S)>,
}

/// One allocation site's live large blocks.
#[derive(Debug, PartialEq, Eq)]
pub struct SiteTotal {
    pub site: String,
    pub blocks: usize,
    pub bytes: usize,
    pub resident: usize,
}

impl<S> Default for Ledger<S> {
    fn default() -> Self {
        Ledger { blocks: HashMap::new() }
    }
}

impl<S> Ledger<S> {
    pub fn alloc(&mut self, addr: usize, size: usize, site: S) {
        self.blocks.insert(addr, (size, site));
    }

    pub fn free(&mut self, addr: usize) {
        self.blocks.remove(&addr);
    }

    /// Totals per site (`key` names a site), largest first; `resident(addr, size)` says how
    /// many of a block's bytes are in memory.
    pub fn by_site(&self, key: impl Fn(&S) -> String, resident: impl Fn(usize, usize) -> usize) -> Vec<SiteTotal> {
        let mut sites: HashMap<String, SiteTotal> = HashMap::new();
        for (&addr, (size, s)) in &self.blocks {
            let k = key(s);
            let t = sites.entry(k.clone()).or_insert(SiteTotal { site: k, blocks: 0, bytes: 0, resident: 0 });
            t.blocks += 1;
            t.bytes += size;
            t.resident += resident(addr, *size);
        }
        let mut v: Vec<SiteTotal> = sites.into_values().collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
        v
    }
}

/// A site's key from a printed backtrace: its innermost [`SITE_FRAMES`] frames in lucce's
/// crates, sled or rkyv (the allocator's own frames and std's left out), innermost first.
pub fn site_key(backtrace: &str) -> String {
    let frames: Vec<&str> = backtrace
        .lines()
        .filter_map(|l| l.trim_start().split_once(": ").filter(|(n, _)| n.parse::<u32>().is_ok()).map(|(_, f)| f))
        .filter(|f| ["lucce", "sled::", "rkyv::"].iter().any(|c| f.contains(c)) && !f.contains("alloc_stats"))
        .take(SITE_FRAMES)
        .collect();
    if frames.is_empty() {
        "(no frame of lucce, sled or rkyv)".to_string()
    } else {
        frames.join(" <- ")
    }
}

/// The bytes of `[addr, addr + size)` in resident pages (0 if `mincore` fails).
fn resident(addr: usize, size: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = addr / page * page;
    let pages = (addr + size).div_ceil(page) - start / page;
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is this live block's pages (mapped: the block is allocated), and `vec`
    // has one byte per page, as mincore writes.
    if unsafe { libc::mincore(start as *mut libc::c_void, pages * page, vec.as_mut_ptr()) } != 0 {
        return 0;
    }
    (vec.iter().filter(|&&b| b & 1 != 0).count() * page).min(size)
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LEDGER: Mutex<Option<Ledger<Backtrace>>> = Mutex::new(None);

thread_local! {
    /// Set while this thread is inside the ledger: the ledger's own allocations (its map, the
    /// backtraces) are neither counted nor tracked (tracking them would recurse).
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` unless this thread is in the ledger already (or is exiting).
fn outside_ledger(f: impl FnOnce()) {
    let _ = BUSY.try_with(|busy| {
        if !busy.replace(true) {
            f();
            busy.set(false);
        }
    });
}

/// Counts `delta` bytes unless the ledger allocated or freed them for itself.
fn count(delta: isize) {
    if BUSY.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    let now = LIVE.fetch_add(delta as usize, Relaxed).wrapping_add(delta as usize);
    PEAK.fetch_max(now, Relaxed);
}

/// Parses `LUCCE_ALLOC_STATS_MIN`'s value: a size in bytes, at least 1.
fn parse_min(v: Option<&[u8]>) -> usize {
    v.and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.trim().parse().ok()).filter(|&n| n >= 1).unwrap_or(DEFAULT_MIN_TRACKED)
}

/// The smallest block tracked (read once, without allocating: this runs inside the allocator).
pub fn min_tracked() -> usize {
    static MIN: AtomicUsize = AtomicUsize::new(0);
    match MIN.load(Relaxed) {
        0 => {
            // SAFETY: the name is a NUL-terminated literal; getenv's result, when not null, is a
            // NUL-terminated string that lives while the environment is not changed (read here
            // at once).
            let v = unsafe {
                let p = libc::getenv(c"LUCCE_ALLOC_STATS_MIN".as_ptr());
                (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_bytes())
            };
            let n = parse_min(v);
            MIN.store(n, Relaxed);
            n
        }
        n => n,
    }
}

fn track(p: *mut u8, size: usize) {
    if size >= min_tracked() {
        outside_ledger(|| {
            let site = Backtrace::force_capture();
            if let Ok(mut l) = LEDGER.lock() {
                l.get_or_insert_with(Ledger::default).alloc(p as usize, size, site);
            }
        });
    }
}

fn untrack(p: *mut u8, size: usize) {
    if size >= min_tracked() {
        outside_ledger(|| {
            if let Ok(mut l) = LEDGER.lock() {
                if let Some(l) = l.as_mut() {
                    l.free(p as usize);
                }
            }
        });
    }
}

/// Counts and tracks a new block `p` of `size` bytes (none when null); returns `p`.
fn allocated(p: *mut u8, size: usize) -> *mut u8 {
    if !p.is_null() {
        count(size as isize);
        track(p, size);
    }
    p
}

/// The system allocator, counted.
pub struct Counted;

// SAFETY: every call goes to the system allocator with the caller's arguments; the counting
// around it neither touches the blocks nor changes what is returned.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        allocated(unsafe { System.alloc(l) }, l.size())
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        allocated(unsafe { System.alloc_zeroed(l) }, l.size())
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        untrack(p, l.size());
        // SAFETY: as in `alloc`.
        unsafe { System.dealloc(p, l) };
        count(-(l.size() as isize));
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // Out of the ledger first: once moved, `p` may go to another thread's allocation.
        untrack(p, l.size());
        // SAFETY: as in `alloc`.
        let q = unsafe { System.realloc(p, l, new_size) };
        if q.is_null() {
            track(p, l.size());
        } else {
            count(new_size as isize - l.size() as isize);
            track(q, new_size);
        }
        q
    }
}

/// Prints the heap's totals and its large blocks by site to stderr (at VMDeath).
pub fn report() {
    outside_ledger(|| {
        let (live, peak) = (LIVE.load(Relaxed), PEAK.load(Relaxed));
        let Ok(l) = LEDGER.lock() else { return };
        let sites = l.as_ref().map(|l| l.by_site(|b| site_key(&b.to_string()), resident)).unwrap_or_default();
        let mb = |b: usize| b as f64 / 1e6;
        let (bytes, res, blocks) = sites.iter().fold((0, 0, 0), |a, s| (a.0 + s.bytes, a.1 + s.resident, a.2 + s.blocks));
        eprintln!(
            "lucce-agent heap: {:.1} MB live at VMDeath (peak {:.1} MB); {:.1} MB in {blocks} blocks of {} bytes or more, {:.1} MB of them resident",
            mb(live),
            mb(peak),
            mb(bytes),
            min_tracked(),
            mb(res)
        );
        // SAFETY: mallinfo2 only reads malloc's statistics.
        let m = unsafe { libc::mallinfo2() };
        eprintln!(
            "lucce-agent heap: the process's malloc (the JVM's too): {:.1} MB in use, {:.1} MB free in its arenas, {:.1} MB mapped apart",
            mb(m.uordblks),
            mb(m.fordblks),
            mb(m.hblkhd)
        );
        for s in &sites {
            eprintln!("lucce-agent heap: {:8.1} MB {:8.1} MB resident {:5} blocks  {}", mb(s.bytes), mb(s.resident), s.blocks, s.site);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_totals_live_blocks_by_site() {
        let mut l = Ledger::default();
        l.alloc(0x1000, 100, "a");
        l.alloc(0x2000, 300, "b");
        l.alloc(0x3000, 50, "a");
        l.alloc(0x4000, 999, "b");
        l.free(0x4000);
        // Resident: half of each block.
        let t = l.by_site(|s| s.to_string(), |_, size| size / 2);
        assert_eq!(
            t,
            [
                SiteTotal { site: "b".into(), blocks: 1, bytes: 300, resident: 150 },
                SiteTotal { site: "a".into(), blocks: 2, bytes: 150, resident: 75 },
            ]
        );
    }

    #[test]
    fn site_key_keeps_lucce_and_sled_frames_innermost_first() {
        let bt = "   0: std::backtrace::Backtrace::force_capture\n\
                  \x20            at /rustc/library/std/src/backtrace.rs:312:9\n\
                  \x20  1: lucce_agent::alloc_stats::track\n\
                  \x20  2: alloc::raw_vec::finish_grow\n\
                  \x20  3: lucce_encoder::memo::Memo::insert\n\
                  \x20            at /work/encoder/src/memo.rs:10:5\n\
                  \x20  4: sled::tree::Tree::insert\n\
                  \x20  5: lucce_agent::hook::install\n\
                  \x20  6: lucce_agent::hook::a\n\
                  \x20  7: lucce_agent::hook::b\n";
        assert_eq!(
            site_key(bt),
            "lucce_encoder::memo::Memo::insert <- sled::tree::Tree::insert <- lucce_agent::hook::install <- lucce_agent::hook::a"
        );
        assert_eq!(site_key("   0: std::rt::lang_start\n"), "(no frame of lucce, sled or rkyv)");
    }

    #[test]
    fn the_smallest_block_tracked_comes_from_the_environment_or_is_64_kib() {
        assert_eq!(parse_min(Some(b"1024")), 1024);
        assert_eq!(parse_min(Some(b" 1 ")), 1);
        for bad in [&b"0"[..], b"-5", b"64k", b"", b"\xff"] {
            assert_eq!(parse_min(Some(bad)), DEFAULT_MIN_TRACKED, "{bad:?}");
        }
        assert_eq!(parse_min(None), DEFAULT_MIN_TRACKED);
    }

    #[test]
    fn resident_counts_written_pages_only() {
        // A fresh anonymous mapping: no page is resident until written.
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = 16 * page;
        let p = crate::runtime::map_zeroed(len).unwrap() as usize;
        assert_eq!(resident(p, len), 0);
        // SAFETY: p..p+len is the mapping just made, writable.
        unsafe { *((p + 3 * page) as *mut u8) = 1 };
        assert_eq!(resident(p, len), page);
        assert_eq!(resident(p + 3 * page + 10, 20), 20, "a block within one resident page");
        // SAFETY: the mapping made above, not used after.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
}
