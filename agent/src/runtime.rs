//! The Rust side of the runtime class `lucce/Runtime`: the counter memory its probes write, the
//! embedded class file (in two forms), defining it into the bootstrap loader, and the two natives
//! the VM finds by name (`counters`, `failed0`).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::jvmti::{jclass, jlong, jstring, Jni, JniEnv, Jvmti};
use crate::options::CounterMode;

/// The class file of `agent/java/lucce/Runtime.java`, compiled by build.rs.
pub static RUNTIME_CLASS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/java-classes/lucce/Runtime.class"));
/// The same class with `jdk.internal.misc.Unsafe` in place of `sun.misc.Unsafe` (build.rs).
pub static RUNTIME_CLASS_INTERNAL_UNSAFE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/java-classes-internal/lucce/Runtime.class"));
pub const RUNTIME_CLASS_NAME: &CStr = c"lucce/Runtime";
/// The public API class `lucce/Lucce` (agent/java/lucce/Lucce.java).
pub static API_CLASS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/java-classes/lucce/Lucce.class"));
pub const API_CLASS_NAME: &CStr = c"lucce/Lucce";

/// Header of the region, read once by `Runtime.<clinit>`: method limit, site limit, atomic flag,
/// record flag, then (record mode) site cache base and capacity, callId limit, thread slots base
/// and index mask, sample interval, bytes per cache bucket, anchor table base and buckets, index
/// bits of the threads' answer caches.
const HEADER_BYTES: usize = 128;
/// The header word of the record flag; record mode counts nothing (the site counters' memory is
/// left untouched).
const RECORD_WORD: usize = 3;
/// Reserved counters. Virtual address space only: the mapping is lazily committed, so a page is
/// backed by memory only once a probe bumps a counter in it.
pub const MAX_METHODS: usize = 1 << 23;
pub const MAX_SITES: usize = 1 << 26;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot reserve {0} bytes for counters: {1}")]
    Mmap(usize, std::io::Error),
    #[error("could not define {0} in the bootstrap class loader (a Java exception was pending)")]
    Define(String),
    #[error("could not register the natives of {0}")]
    Natives(&'static str),
    #[error("could not export jdk.internal.misc to lucce/Runtime: {0}")]
    Export(String),
}

/// The counter region: `[header | method counters | site counters]`, u64 each, never unmapped
/// (instrumented daemon threads may still run while the VM shuts down).
/// Where the record-mode tables are, for the runtime class.
pub struct RecordTables {
    pub cache_base: usize,
    pub cache_buckets: usize,
    pub anchor_base: usize,
    pub anchor_buckets: usize,
    pub limit: u64,
    pub slots: usize,
    pub slot_mask: u64,
    pub sample: u64,
    /// log2 of the entries of each thread's answer cache; 0 = none.
    pub answer_bits: u64,
}

pub struct Counters {
    base: *mut u8,
    len: usize,
}

// SAFETY: the region is a fixed mapping that lives until process exit; all accesses after
// creation go through atomics (Rust) or Unsafe (Java), both fine from any thread.
unsafe impl Send for Counters {}
// SAFETY: as above.
unsafe impl Sync for Counters {}

/// `len` bytes of fresh zero pages, committed only when touched (MAP_NORESERVE): memory the
/// runtime class reads and writes with `Unsafe`, so the agent never unmaps it.
pub(crate) fn map_zeroed(len: usize) -> std::io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

impl Counters {
    pub fn new(mode: CounterMode, record: bool) -> Result<Counters, RuntimeError> {
        let len = HEADER_BYTES + (MAX_METHODS + MAX_SITES) * 8;
        let p = map_zeroed(len).map_err(|e| RuntimeError::Mmap(len, e))?;
        let c = Counters { base: p, len };
        c.slot(0).store(MAX_METHODS as u64, Ordering::Relaxed);
        c.slot(1).store(MAX_SITES as u64, Ordering::Relaxed);
        c.slot(2).store((mode == CounterMode::Atomic) as u64, Ordering::Relaxed);
        c.slot(RECORD_WORD).store(record as u64, Ordering::Relaxed);
        Ok(c)
    }

    /// The record-mode part of the header (before `lucce/Runtime` is initialized).
    pub fn set_record_header(&self, t: &RecordTables) {
        let slot_bytes = lucce_encoder::SLOT_BYTES as u64;
        let words = [
            t.cache_base as u64,
            t.cache_buckets as u64,
            t.limit,
            t.slots as u64,
            t.slot_mask,
            t.sample,
            slot_bytes,
            t.anchor_base as u64,
            t.anchor_buckets as u64,
            t.answer_bits,
        ];
        for (i, v) in words.into_iter().enumerate() {
            self.slot(4 + i).store(v, Ordering::Relaxed);
        }
    }

    /// The u64 at byte offset `i * 8` of the region.
    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i * 8 + 8 <= self.len);
        // SAFETY: in bounds (checked), 8-aligned (mmap is page-aligned), and the mapping lives
        // for the rest of the process; Java writes these words with Unsafe, which is the same
        // memory model as atomics on x86-64/aarch64 for aligned 64-bit accesses.
        unsafe { &*(self.base.add(i * 8) as *const AtomicU64) }
    }

    pub fn base_address(&self) -> usize {
        self.base as usize
    }

    pub fn method_entries(&self, id: u32) -> u64 {
        let i = id as usize;
        if i >= MAX_METHODS {
            return 0;
        }
        self.slot(HEADER_BYTES / 8 + i).load(Ordering::Relaxed)
    }

    pub fn site_count(&self, id: u32) -> u64 {
        let i = id as usize;
        if i >= MAX_SITES || self.slot(RECORD_WORD).load(Ordering::Relaxed) != 0 {
            return 0;
        }
        self.slot(HEADER_BYTES / 8 + MAX_METHODS + i).load(Ordering::Relaxed)
    }
}

static COUNTERS: OnceLock<Counters> = OnceLock::new();

/// Reserves the counter region (once); the native `counters()` hands out its address.
pub fn install_counters(mode: CounterMode, record: bool) -> Result<&'static Counters, RuntimeError> {
    if let Some(c) = COUNTERS.get() {
        return Ok(c);
    }
    let c = Counters::new(mode, record)?;
    Ok(COUNTERS.get_or_init(|| c))
}

pub fn counters() -> Option<&'static Counters> {
    COUNTERS.get()
}

/// Defines `lucce/Runtime` into the bootstrap class loader (JNI DefineClass with a null loader),
/// so every class, java.base included, can resolve it. Called at VMInit, before the hook starts
/// instrumenting: no instrumented code can run before the class exists. The class is only linked
/// and initialized on the first probe call.
///
/// Its form with `sun.misc.Unsafe` when the boot layer has that class's module, jdk.unsupported,
/// as it has for a class-path program. A program started with `java -m` whose modules do not
/// require jdk.unsupported (javap's, for one) gets the form with `jdk.internal.misc.Unsafe`, whose
/// package [`export_unsafe`] exports to it: with the first form the class could not initialize
/// there, and every probe stayed a no-op. The second form only where needed: full encoding ran
/// rhino about 10% slower with it (stop 51; why is not known).
pub fn define_runtime_class(jvmti: Jvmti, jni: Jni) -> Result<jclass, RuntimeError> {
    if let Ok(sun_misc) = jvmti.named_module(std::ptr::null_mut(), c"sun/misc") {
        if !sun_misc.is_null() {
            jni.delete_local_ref(sun_misc);
            return define(jni, RUNTIME_CLASS_NAME, RUNTIME_CLASS);
        }
    }
    let class = define(jni, RUNTIME_CLASS_NAME, RUNTIME_CLASS_INTERNAL_UNSAFE)?;
    if let Err(e) = export_unsafe(jvmti, jni, class) {
        jni.delete_local_ref(class);
        return Err(e);
    }
    Ok(class)
}

/// Defines `lucce/Lucce` the same way (record mode only: without the agent recording, the API
/// does not exist).
pub fn define_api_class(jni: Jni) -> Result<jclass, RuntimeError> {
    define(jni, API_CLASS_NAME, API_CLASS)
}

/// Exports java.base's `jdk.internal.misc` to the module of `runtime_class` (the boot loader's
/// unnamed module), so that its probes can use `jdk.internal.misc.Unsafe`. Called before the
/// class is initialized.
///
/// Through `Module.addExports0`, the native that `Module.implAddExportsOrOpens` calls to tell the
/// VM, which is what linking checks. JVMTI `AddModuleExports` calls that too, and also records the
/// export for reflection with a lambda, whose first use brings up `java.lang.invoke` before the
/// program starts: about 110 classes more in the VMInit batch and 60 ms of startup (stop 51).
/// Nothing reflects on `Unsafe`.
fn export_unsafe(jvmti: Jvmti, jni: Jni, runtime_class: jclass) -> Result<(), RuntimeError> {
    let java_base = jvmti.named_module(std::ptr::null_mut(), c"java/lang").map_err(|e| RuntimeError::Export(e.to_string()))?;
    let class_class = jni.find_class(c"java/lang/Class");
    let module_class = jni.find_class(c"java/lang/Module");
    let package = jni.new_string(c"jdk.internal.misc");
    let mut module = std::ptr::null_mut();
    let done = (|| {
        let nonnull = |p: *mut std::ffi::c_void, what: &str| if p.is_null() { Err(RuntimeError::Export(what.to_string())) } else { Ok(p) };
        nonnull(java_base, "no module java.base")?;
        nonnull(package, "NewStringUTF failed")?;
        let get_module = nonnull(jni.method_id(nonnull(class_class, "no java.lang.Class")?, c"getModule", c"()Ljava/lang/Module;"), "no Class.getModule")?;
        module = nonnull(jni.call_object_method(runtime_class, get_module, &[]), "Class.getModule failed")?;
        let sig = c"(Ljava/lang/Module;Ljava/lang/String;Ljava/lang/Module;)V";
        let add_exports0 = nonnull(jni.static_method_id(nonnull(module_class, "no java.lang.Module")?, c"addExports0", sig), "no Module.addExports0")?;
        let exported = jni.call_static_void_method(module_class, add_exports0, &[java_base as u64, package as u64, module as u64]);
        if exported { Ok(()) } else { Err(RuntimeError::Export("Module.addExports0 threw".to_string())) }
    })();
    jni.exception_clear();
    for r in [package, module, module_class, class_class, java_base] {
        if !r.is_null() {
            jni.delete_local_ref(r);
        }
    }
    done
}

/// Defines a class into the bootstrap loader; returns a local reference to it.
fn define(jni: Jni, name: &CStr, bytes: &[u8]) -> Result<jclass, RuntimeError> {
    let cls = jni.define_class(name, std::ptr::null_mut(), bytes);
    if cls.is_null() {
        jni.exception_clear();
        return Err(RuntimeError::Define(name.to_string_lossy().into_owned()));
    }
    Ok(cls)
}

/// `private static native void failed0(String)` of `lucce/Runtime`: its initialization failed,
/// so every probe stays a no-op and nothing is counted or recorded; says so on stderr (found by
/// the VM's native lookup, like `counters`).
#[no_mangle]
pub extern "C" fn Java_lucce_Runtime_failed0(env: *mut JniEnv, _cls: jclass, why: jstring) {
    let _ = std::panic::catch_unwind(|| {
        let why = Jni(env).string(why).unwrap_or_default();
        eprintln!("lucce-agent: the runtime class could not start ({why}); nothing will be counted or recorded");
    });
}

/// `private static native long counters()` of `lucce/Runtime`: the region address, or 0 (the
/// probes then stay no-ops). Found by the VM's native lookup, which searches agent libraries for
/// natives of bootstrap classes.
#[no_mangle]
pub extern "C" fn Java_lucce_Runtime_counters(_env: *mut JniEnv, _cls: jclass) -> jlong {
    std::panic::catch_unwind(|| counters().map_or(0, |c| c.base_address() as jlong)).unwrap_or(0)
}
