//! Restarts the JDK's reference-processing threads, `Reference Handler` and `Finalizer`, on
//! rewritten code (record mode, right after the VMInit retransform).
//!
//! Both threads start before any class can be rewritten, and their loops go on running the
//! bytecode they started with: obsolete frames. A call out of such a frame writes no call-site
//! record, so the entry it reaches walks the stack and ends truncated there. That was one walk per
//! reference the Reference Handler enqueues (`Reference.enqueueFromPending`, called from the
//! obsolete `processPendingReferences`), and two more per finalizable object on the Finalizer
//! thread (`ReferenceQueue.remove`, `Finalizer.runFinalizer`). On jython that was 11.6M walks;
//! the Finalizer thread fell behind and the Java heap grew by 1.2 GB.
//!
//! So the agent replaces each thread while it is idle:
//! - Suspended, its stack must be exactly its loop waiting for work, obsolete (`IDLE`). It holds
//!   nothing then: no reference, no finalizer.
//! - The old thread's uncaught-exception handler becomes a silent one (`Runtime.retired`).
//! - A new thread of the same class, name, group, priority, daemon flag and context class loader
//!   is started. It runs the rewritten loop from its first frame, so what it runs has complete
//!   traces.
//! - StopThread gives the old thread a `ThreadDeath`. HotSpot throws it as the native wait
//!   returns (an asynchronous exception is delivered on the way back from native code, before
//!   any bytecode of the loop runs, so nothing is taken from the queue or the pending list), and
//!   the loop does not catch it. The Finalizer thread's `Object.wait` returns at once
//!   (StopThread interrupts it) and VMInit joins it. The Reference Handler's wait is not
//!   interruptible: both threads wake when a collection hands over references, and the old one
//!   dies if it sees them before the new one has taken them (else it waits for the next).
//!
//! Anything unexpected leaves the old thread as it was: still correct, only slower.

use std::ffi::CStr;

use crate::diag;
use crate::jvmti::{jclass, jmethodID, jobject, jthread, FrameInfo, Jni, Jvmti};

/// What became of one of the threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new thread runs the rewritten loop; the old one dies.
    Replaced,
    /// Left as it was, and why.
    Kept(&'static str),
}

/// A JDK thread whose loop the agent restarts.
pub struct Loop {
    /// Its `Thread` subclass.
    pub class: &'static CStr,
    /// Whether its constructor takes a name, `(ThreadGroup, String)`, or only `(ThreadGroup)`.
    takes_name: bool,
    /// The idle stack, innermost first: class signature and method name of each frame.
    idle: &'static [(&'static str, &'static str)],
    /// Whether the idle wait ends when interrupted (then VMInit waits for the thread to die).
    interruptible: bool,
}

pub const LOOPS: [Loop; 2] = [
    Loop {
        class: c"java/lang/ref/Reference$ReferenceHandler",
        takes_name: true,
        idle: &[
            ("Ljava/lang/ref/Reference;", "waitForReferencePendingList"),
            ("Ljava/lang/ref/Reference;", "processPendingReferences"),
            ("Ljava/lang/ref/Reference$ReferenceHandler;", "run"),
        ],
        interruptible: false,
    },
    Loop {
        class: c"java/lang/ref/Finalizer$FinalizerThread",
        takes_name: false,
        idle: &[
            ("Ljava/lang/Object;", "wait"),
            ("Ljava/lang/ref/ReferenceQueue;", "remove"),
            ("Ljava/lang/ref/ReferenceQueue;", "remove"),
            ("Ljava/lang/ref/Finalizer$FinalizerThread;", "run"),
        ],
        interruptible: true,
    },
];

/// How long VMInit waits for an interrupted old thread to die (it only has to leave `wait`).
const JOIN_MILLIS: u64 = 2_000;

/// `Thread` methods the restart calls.
struct ThreadMethods {
    name: jmethodID,
    group: jmethodID,
    priority: jmethodID,
    set_priority: jmethodID,
    set_daemon: jmethodID,
    loader: jmethodID,
    set_loader: jmethodID,
    set_handler: jmethodID,
    start: jmethodID,
    join: jmethodID,
}

/// Replaces the JVM's thread of `what` if it is idle in its obsolete loop (see the module doc).
pub fn restart(jvmti: Jvmti, jni: Jni, what: &Loop) -> Outcome {
    let class = jni.find_class(what.class);
    if class.is_null() {
        jni.exception_clear();
        return Outcome::Kept("no such class");
    }
    let Ok(threads) = jvmti.all_threads() else { return Outcome::Kept("GetAllThreads failed") };
    let old = threads.iter().copied().find(|&t| jni.is_instance_of(t, class));
    let outcome = match old {
        Some(old) => replace(jvmti, jni, what, class, old),
        None => Outcome::Kept("no such thread"),
    };
    for t in threads {
        jni.delete_local_ref(t);
    }
    jni.delete_local_ref(class);
    outcome
}

fn replace(jvmti: Jvmti, jni: Jni, what: &Loop, class: jclass, old: jthread) -> Outcome {
    let Some(m) = thread_methods(jni) else { return Outcome::Kept("a Thread method is missing") };
    let sig = if what.takes_name { c"(Ljava/lang/ThreadGroup;Ljava/lang/String;)V" } else { c"(Ljava/lang/ThreadGroup;)V" };
    let init = jni.method_id(class, c"<init>", sig);
    let runtime = jni.find_class(c"lucce/Runtime");
    let retired = if runtime.is_null() { std::ptr::null_mut() } else { jni.static_method_id(runtime, c"retired", c"()Ljava/lang/Thread$UncaughtExceptionHandler;") };
    let death_class = jni.find_class(c"java/lang/ThreadDeath");
    let death_init = if death_class.is_null() { std::ptr::null_mut() } else { jni.method_id(death_class, c"<init>", c"()V") };
    if init.is_null() || retired.is_null() || death_init.is_null() {
        jni.exception_clear();
        [runtime, death_class].into_iter().for_each(|r| jni.delete_local_ref(r));
        return Outcome::Kept("a constructor or lucce.Runtime.retired is missing");
    }
    // Everything that can fail is made before the old thread is touched.
    let name = jni.call_object_method(old, m.name, &[]);
    let group = jni.call_object_method(old, m.group, &[]);
    let args: &[u64] = if what.takes_name { &[group as u64, name as u64] } else { &[group as u64] };
    let fresh = if group.is_null() || name.is_null() { std::ptr::null_mut() } else { jni.new_object(class, init, args) };
    let handler = jni.call_static_object_noargs(runtime, retired).unwrap_or_else(|thrown| {
        jni.delete_local_ref(thrown);
        std::ptr::null_mut()
    });
    let death = jni.new_object(death_class, death_init, &[]);
    // The constructor takes these from the thread that runs it (main): set them as the old
    // thread has them (both threads are daemons; their context class loader is null).
    let loader = jni.call_object_method(old, m.loader, &[]);
    let set_up = !fresh.is_null()
        && !handler.is_null()
        && !death.is_null()
        && jni.call_int_method(old, m.priority).is_some_and(|p| jni.call_void_method(fresh, m.set_priority, &[p as u64]))
        && jni.call_void_method(fresh, m.set_daemon, &[1])
        && jni.call_void_method(fresh, m.set_loader, &[loader as u64]);
    let outcome = if set_up { swap(jvmti, jni, what, &m, old, fresh, handler, death) } else { Outcome::Kept("cannot make the new thread") };
    for r in [name, group, fresh, handler, death, death_class, runtime, loader] {
        jni.delete_local_ref(r);
    }
    outcome
}

fn thread_methods(jni: Jni) -> Option<ThreadMethods> {
    let thread = jni.find_class(c"java/lang/Thread");
    if thread.is_null() {
        jni.exception_clear();
        return None;
    }
    let id = |name: &CStr, sig: &CStr| Some(jni.method_id(thread, name, sig)).filter(|m| !m.is_null());
    let m = (|| {
        Some(ThreadMethods {
            name: id(c"getName", c"()Ljava/lang/String;")?,
            group: id(c"getThreadGroup", c"()Ljava/lang/ThreadGroup;")?,
            priority: id(c"getPriority", c"()I")?,
            set_priority: id(c"setPriority", c"(I)V")?,
            set_daemon: id(c"setDaemon", c"(Z)V")?,
            loader: id(c"getContextClassLoader", c"()Ljava/lang/ClassLoader;")?,
            set_loader: id(c"setContextClassLoader", c"(Ljava/lang/ClassLoader;)V")?,
            set_handler: id(c"setUncaughtExceptionHandler", c"(Ljava/lang/Thread$UncaughtExceptionHandler;)V")?,
            start: id(c"start", c"()V")?,
            join: id(c"join", c"(J)V")?,
        })
    })();
    jni.delete_local_ref(thread);
    m
}

/// With the old thread suspended and idle: silence it, start `fresh`, stop the old one.
#[allow(clippy::too_many_arguments)]
fn swap(jvmti: Jvmti, jni: Jni, what: &Loop, m: &ThreadMethods, old: jthread, fresh: jobject, handler: jobject, death: jobject) -> Outcome {
    if jvmti.suspend_thread(old).is_err() {
        return Outcome::Kept("cannot suspend it");
    }
    let outcome = if let Err(why) = idle_in_obsolete_loop(jvmti, what, old) {
        Outcome::Kept(why)
    } else if !jni.call_void_method(old, m.set_handler, &[handler as u64]) {
        Outcome::Kept("cannot set its handler")
    } else if !jni.call_void_method(fresh, m.start, &[]) {
        Outcome::Kept("the new thread did not start")
    } else if jvmti.stop_thread(old, death).is_err() {
        // Two loops on one queue, as with the JDK's secondary finalizers: correct, rarely seen.
        Outcome::Kept("StopThread failed (a second thread runs beside it)")
    } else {
        Outcome::Replaced
    };
    if jvmti.resume_thread(old).is_err() {
        diag!(Warn, "ref_threads: cannot resume the old {:?}", what.class);
    }
    if outcome == Outcome::Replaced && what.interruptible && !jni.call_void_method(old, m.join, &[JOIN_MILLIS]) {
        diag!(Warn, "ref_threads: joining the old {:?} failed", what.class);
    }
    outcome
}

/// Whether suspended `thread` is `what`'s loop waiting for work, obsolete; else why not.
fn idle_in_obsolete_loop(jvmti: Jvmti, what: &Loop, thread: jthread) -> Result<(), &'static str> {
    let mut frames: Vec<FrameInfo> = Vec::new();
    // One frame more than the idle stack has, to see that there is none.
    jvmti.stack(thread, 0, what.idle.len() + 1, &mut frames).map_err(|_| "GetStackTrace failed")?;
    let place = |f: &FrameInfo| Some((jvmti.declaring_class_signature(f.method).ok()?, jvmti.method_name(f.method).ok()?.0));
    let places: Vec<(String, String)> = frames.iter().map(place).collect::<Option<_>>().ok_or("unreadable frames")?;
    let idle = places.len() == what.idle.len() && places.iter().zip(what.idle).all(|((c, n), (ic, iname))| c == ic && n == iname);
    if !idle || !jvmti.is_method_native(frames[0].method).unwrap_or(false) {
        return Err("busy (not idle in its loop)");
    }
    if !frames[1..].iter().all(|f| jvmti.is_method_obsolete(f.method).unwrap_or(false)) {
        return Err("its loop is not obsolete");
    }
    Ok(())
}
