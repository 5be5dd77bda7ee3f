//! liblucce_agent.so: the lucce JVMTI agent (`java -agentpath:/abs/liblucce_agent.so=OPTIONS`).
//!
//! It rewrites every class the JVM loads (java.base included) in the ClassFileLoadHook so that
//! methods call the probes of the runtime class `lucce/Runtime`, which for now count method
//! entries, calls and allocations into memory this library owns. See docs/agent.md.
//!
//! Module map: `jvmti` (hand-written FFI), `options` (the option string), `hook` (JVMTI events:
//! the load hook, VMInit retransformation, VMDeath), `registry` (method and site ids), `runtime`
//! (counter memory, the embedded runtime class and its native), `summary`, `count_check`
//! (reference counts from JVMTI MethodEntry events), `log` (the agent's diagnostics),
//! `alloc_stats` (what holds the agent's heap, with the cargo feature `alloc-stats`).
//!
//! Rule for every `extern "C"` entry point: nothing unwinds into the JVM (`catch_unwind`), and a
//! failure leaves the JVM running without the agent rather than stopping it.

pub mod alloc_stats;
pub mod class_cache;
pub mod count_check;
mod ref_threads;
pub mod hook;
pub mod jdk_leaves;
pub mod jimage;
pub mod jvmti;
pub mod log;
pub mod options;
pub mod recorder;
pub mod registry;
pub mod rewrite;
pub mod runtime;
pub mod summary;

#[cfg(feature = "alloc-stats")]
#[global_allocator]
static COUNTED: alloc_stats::Counted = alloc_stats::Counted;

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use jvmti::{jint, JavaVM, JNI_OK};

/// Called by the JVM for `-agentpath:...=options`. Always returns JNI_OK: a bad option or a JVM
/// that lacks a capability prints one message and the program runs without the agent.
///
/// # Safety
/// Called by the JVM with its `JavaVM*` and a NUL-terminated option string (or null).
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(vm: *mut JavaVM, options: *const c_char, _reserved: *mut c_void) -> jint {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let text = if options.is_null() {
            String::new()
        } else {
            // SAFETY: the JVM passes a NUL-terminated string valid during this call.
            match unsafe { CStr::from_ptr(options) }.to_str() {
                Ok(t) => t.to_string(),
                // Paths with their bytes replaced would be other paths.
                Err(_) => {
                    eprintln!("lucce-agent: the agent's options are not UTF-8 text; the JVM continues WITHOUT the agent");
                    return;
                }
            }
        };
        let opts = match options::Options::parse(&text) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("lucce-agent: {e}; the JVM continues WITHOUT the agent");
                return;
            }
        };
        log::init(&opts.log, opts.log_level);
        // Panics are caught at every boundary; their messages go to the agent log, never to the
        // program's stderr.
        std::panic::set_hook(Box::new(|info| diag!(Error, "{info}")));
        // SAFETY: `vm` is the JavaVM* of this Agent_OnLoad call.
        if let Err(e) = unsafe { hook::install(vm, opts, text) } {
            eprintln!("lucce-agent: {e}; the JVM continues WITHOUT the agent");
        }
    }));
    if r.is_err() {
        eprintln!("lucce-agent: internal error while loading; the JVM continues WITHOUT the agent");
    }
    JNI_OK
}

/// Called by the JVM when it unloads the library at exit.
///
/// # Safety
/// Called by the JVM only.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnUnload(_vm: *mut JavaVM) {
    let _ = catch_unwind(hook::unload);
}
