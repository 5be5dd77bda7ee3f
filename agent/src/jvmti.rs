//! Hand-written FFI for the parts of JVMTI and JNI the agent uses.
//!
//! The JVMTI and JNI environments are pointers to pointers to function tables. Rather than
//! mirroring the whole C structs (hundreds of members) we index the tables: the slot numbers below
//! are copied from `jvmti.h` / `jni.h` of OpenJDK 17 (`/* 46 : Allocate */` in jvmti.h is slot 46,
//! counted from 1, so index 45 of the table). These tables are part of the stable JVMTI/JNI ABI:
//! new functions are only ever added at the end or in reserved slots.

#![allow(non_camel_case_types)]
// jobject/jclass/jmethodID are opaque JVM handles that Rust never dereferences; the JVM checks
// them. The wrappers below are only called with handles the JVM gave the current callback.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr};

pub type jint = i32;
pub type jlong = i64;
pub type jboolean = u8;
pub type jobject = *mut c_void;
pub type jclass = jobject;
pub type jthread = jobject;
pub type jmethodID = *mut c_void;
pub type jstring = jobject;
pub type jbyteArray = jobject;
pub type jlocation = i64;
pub type JvmtiError = u32;

/// The class a JVMTI class signature names: its internal name and whether it is hidden. JVMTI
/// signs a hidden class `Lname.suffix;` (no internal name contains a `.`); the name returned
/// leaves the suffix out, as the class's own bytes have it. None for arrays and primitives.
pub fn signature_class(sig: &str) -> Option<(&str, bool)> {
    let name = sig.strip_prefix('L')?.strip_suffix(';')?;
    Some(name.split_once('.').map_or((name, false), |(n, _)| (n, true)))
}

pub const JNI_OK: jint = 0;
pub const JNI_ERR: jint = -1;
pub const JVMTI_VERSION_1_2: jint = 0x3001_0200;

pub const JVMTI_ERROR_NONE: JvmtiError = 0;
/// GetLocal*: the slot holds no value of that type at the frame's location.
pub const JVMTI_ERROR_INVALID_SLOT: JvmtiError = 35;
pub const JVMTI_ERROR_ABSENT_INFORMATION: JvmtiError = 101;
pub const JVMTI_ERROR_ILLEGAL_ARGUMENT: JvmtiError = 103;

pub const JVMTI_ENABLE: c_int = 1;
pub const JVMTI_DISABLE: c_int = 0;

pub const JVMTI_PHASE_LIVE: c_int = 4;

pub const JVMTI_EVENT_VM_INIT: c_int = 50;
pub const JVMTI_EVENT_VM_DEATH: c_int = 51;
pub const JVMTI_EVENT_CLASS_FILE_LOAD_HOOK: c_int = 54;
pub const JVMTI_EVENT_THREAD_END: c_int = 53;
pub const JVMTI_EVENT_METHOD_ENTRY: c_int = 65;

/// `jvmtiFrameInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FrameInfo {
    pub method: jmethodID,
    pub location: jlocation,
}

/// `jvmtiLineNumberEntry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LineNumberEntry {
    pub start_location: jlocation,
    pub line_number: jint,
}

/// `JNINativeMethod`.
#[repr(C)]
pub struct NativeMethod {
    pub name: *const c_char,
    pub signature: *const c_char,
    pub fn_ptr: *mut c_void,
}

/// `jvmtiEnv` is `const struct jvmtiInterface_1_ *`; a `jvmtiEnv*` handed to us points at it.
#[repr(C)]
pub struct JvmtiEnv {
    functions: *const *const c_void,
}

/// `JNIEnv` is `const struct JNINativeInterface_ *`.
#[repr(C)]
pub struct JniEnv {
    functions: *const *const c_void,
}

/// `JavaVM` is `const struct JNIInvokeInterface_ *`.
#[repr(C)]
pub struct JavaVM {
    functions: *const *const c_void,
}

/// The capabilities bitfield: 128 bits in declaration order, bit 0 of the first `unsigned int`
/// being `can_tag_objects` (the x86-64 SysV/GCC layout of C bitfields).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Capabilities {
    words: [u32; 4],
}

impl Capabilities {
    pub const GET_BYTECODES: u32 = 3;
    pub const SIGNAL_THREAD: u32 = 10;
    pub const GET_SOURCE_FILE_NAME: u32 = 11;
    pub const GET_LINE_NUMBERS: u32 = 12;
    pub const ACCESS_LOCAL_VARIABLES: u32 = 14;
    pub const MAINTAIN_ORIGINAL_METHOD_ORDER: u32 = 15;
    pub const SUSPEND: u32 = 20;
    pub const GENERATE_METHOD_ENTRY_EVENTS: u32 = 24;
    pub const GENERATE_ALL_CLASS_HOOK_EVENTS: u32 = 26;
    pub const GET_CONSTANT_POOL: u32 = 35;
    pub const RETRANSFORM_CLASSES: u32 = 37;
    pub const RETRANSFORM_ANY_CLASS: u32 = 38;

    pub fn set(&mut self, bit: u32) {
        self.words[(bit / 32) as usize] |= 1 << (bit % 32);
    }
    pub fn has(&self, bit: u32) -> bool {
        self.words[(bit / 32) as usize] & (1 << (bit % 32)) != 0
    }
}

pub type ClassFileLoadHookFn = unsafe extern "C" fn(
    jvmti: *mut JvmtiEnv,
    jni: *mut JniEnv,
    class_being_redefined: jclass,
    loader: jobject,
    name: *const c_char,
    protection_domain: jobject,
    class_data_len: jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut jint,
    new_class_data: *mut *mut c_uchar,
);
pub type VmInitFn = unsafe extern "C" fn(jvmti: *mut JvmtiEnv, jni: *mut JniEnv, thread: jthread);
pub type VmDeathFn = unsafe extern "C" fn(jvmti: *mut JvmtiEnv, jni: *mut JniEnv);
pub type ThreadEndFn = unsafe extern "C" fn(jvmti: *mut JvmtiEnv, jni: *mut JniEnv, thread: jthread);
pub type MethodEntryFn =
    unsafe extern "C" fn(jvmti: *mut JvmtiEnv, jni: *mut JniEnv, thread: jthread, method: jmethodID);

/// `jvmtiEventCallbacks`: one function pointer per event type 50..=86, in event-number order.
#[repr(C)]
pub struct EventCallbacks {
    pub slots: [*const c_void; 37],
}

impl EventCallbacks {
    pub fn new() -> Self {
        EventCallbacks { slots: [std::ptr::null(); 37] }
    }
    fn slot(event: c_int) -> usize {
        (event - JVMTI_EVENT_VM_INIT) as usize
    }
    pub fn vm_init(&mut self, f: VmInitFn) {
        self.slots[Self::slot(JVMTI_EVENT_VM_INIT)] = f as *const c_void;
    }
    pub fn vm_death(&mut self, f: VmDeathFn) {
        self.slots[Self::slot(JVMTI_EVENT_VM_DEATH)] = f as *const c_void;
    }
    pub fn class_file_load_hook(&mut self, f: ClassFileLoadHookFn) {
        self.slots[Self::slot(JVMTI_EVENT_CLASS_FILE_LOAD_HOOK)] = f as *const c_void;
    }
    pub fn thread_end(&mut self, f: ThreadEndFn) {
        self.slots[Self::slot(JVMTI_EVENT_THREAD_END)] = f as *const c_void;
    }
    pub fn method_entry(&mut self, f: MethodEntryFn) {
        self.slots[Self::slot(JVMTI_EVENT_METHOD_ENTRY)] = f as *const c_void;
    }
}

impl Default for EventCallbacks {
    fn default() -> Self {
        Self::new()
    }
}

/// A JVMTI error with its code; the name comes from `GetErrorName` when available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("JVMTI error {0}")]
pub struct Error(pub JvmtiError);

fn check(e: JvmtiError) -> Result<(), Error> {
    if e == JVMTI_ERROR_NONE {
        Ok(())
    } else {
        Err(Error(e))
    }
}

/// A copyable handle on a `jvmtiEnv*`. JVMTI environments are valid from `GetEnv` until the VM
/// exits and their functions may be called from any thread (each documents its phase), so the
/// handle is `Send + Sync`.
#[derive(Clone, Copy, Debug)]
pub struct Jvmti(pub *mut JvmtiEnv);

// SAFETY: a jvmtiEnv is explicitly usable from every thread attached to the VM (JVMTI spec,
// "Function Table": environments are not thread-specific); it lives until the VM exits.
unsafe impl Send for Jvmti {}
// SAFETY: as above; JVMTI functions do their own locking.
unsafe impl Sync for Jvmti {}

macro_rules! jvmti_fn {
    ($self:ident, $slot:expr, $ty:ty) => {{
        // SAFETY: `self.0` is a live jvmtiEnv (see `Jvmti`), whose `functions` table has at
        // least 156 slots in every JDK >= 11; `$slot` is the 1-based number from jvmti.h and `$ty`
        // the exact C signature of that slot, so the transmute reinterprets a function pointer as
        // its own type.
        unsafe {
            let table = (*$self.0).functions;
            let f = *table.add($slot - 1);
            std::mem::transmute::<*const c_void, $ty>(f)
        }
    }};
}

impl Jvmti {
    pub fn set_event_notification_mode(
        self,
        enable: bool,
        event: c_int,
        thread: jthread,
    ) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, c_int, c_int, jthread, ...) -> JvmtiError;
        let f = jvmti_fn!(self, 2, F);
        let mode = if enable { JVMTI_ENABLE } else { JVMTI_DISABLE };
        // SAFETY: signature from jvmti.h slot 2; `thread` may be null (= all threads).
        check(unsafe { f(self.0, mode, event, thread) })
    }

    pub fn is_modifiable_class(self, class: jclass) -> Result<bool, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jclass, *mut jboolean) -> JvmtiError;
        let f = jvmti_fn!(self, 45, F);
        let mut out: jboolean = 0;
        // SAFETY: slot 45; `class` is a valid reference supplied by the caller; out is a local.
        check(unsafe { f(self.0, class, &mut out) })?;
        Ok(out != 0)
    }

    /// JVMTI `Allocate`: memory the VM may take ownership of (new class bytes must come from it).
    pub fn allocate(self, size: usize) -> Result<*mut u8, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jlong, *mut *mut c_uchar) -> JvmtiError;
        let f = jvmti_fn!(self, 46, F);
        let mut out: *mut c_uchar = std::ptr::null_mut();
        // SAFETY: slot 46; out is a local.
        check(unsafe { f(self.0, size as jlong, &mut out) })?;
        Ok(out)
    }

    pub fn deallocate(self, p: *mut u8) {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *mut c_uchar) -> JvmtiError;
        let f = jvmti_fn!(self, 47, F);
        if !p.is_null() {
            // SAFETY: slot 47; `p` came from a JVMTI function that allocates with Allocate.
            unsafe { f(self.0, p) };
        }
    }

    /// JVMTI `GetNamedModule`: the module of `loader` (null: the boot loader) that defines the
    /// package `package` (internal form, `java/lang`); null when no named module does.
    pub fn named_module(self, loader: jobject, package: &CStr) -> Result<jobject, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jobject, *const c_char, *mut jobject) -> JvmtiError;
        let f = jvmti_fn!(self, 40, F);
        let mut out: jobject = std::ptr::null_mut();
        // SAFETY: slot 40; `package` is NUL-terminated, out is a local.
        check(unsafe { f(self.0, loader, package.as_ptr(), &mut out) })?;
        Ok(out)
    }

    /// JVMTI `GetSystemProperty`: a VM system property (`java.home`).
    pub fn system_property(self, name: &CStr) -> Result<String, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *const c_char, *mut *mut c_char) -> JvmtiError;
        let f = jvmti_fn!(self, 131, F);
        let mut value: *mut c_char = std::ptr::null_mut();
        // SAFETY: slot 131; `name` is NUL-terminated, value is a local the JVM allocates.
        check(unsafe { f(self.0, name.as_ptr(), &mut value) })?;
        Ok(self.take_string(value))
    }

    /// The JVM type signature of a class, e.g. `Ljava/lang/String;`.
    pub fn class_signature(self, class: jclass) -> Result<String, Error> {
        type F =
            unsafe extern "C" fn(*mut JvmtiEnv, jclass, *mut *mut c_char, *mut *mut c_char) -> JvmtiError;
        let f = jvmti_fn!(self, 48, F);
        let mut sig: *mut c_char = std::ptr::null_mut();
        // SAFETY: slot 48; the generic pointer may be null (not wanted).
        check(unsafe { f(self.0, class, &mut sig, std::ptr::null_mut()) })?;
        Ok(self.take_string(sig))
    }

    pub fn method_name(self, method: jmethodID) -> Result<(String, String), Error> {
        type F = unsafe extern "C" fn(
            *mut JvmtiEnv,
            jmethodID,
            *mut *mut c_char,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> JvmtiError;
        let f = jvmti_fn!(self, 64, F);
        let mut name: *mut c_char = std::ptr::null_mut();
        let mut sig: *mut c_char = std::ptr::null_mut();
        // SAFETY: slot 64; the generic pointer may be null.
        check(unsafe { f(self.0, method, &mut name, &mut sig, std::ptr::null_mut()) })?;
        Ok((self.take_string(name), self.take_string(sig)))
    }

    pub fn method_declaring_class(self, method: jmethodID) -> Result<jclass, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jmethodID, *mut jclass) -> JvmtiError;
        let f = jvmti_fn!(self, 65, F);
        let mut out: jclass = std::ptr::null_mut();
        // SAFETY: slot 65; out is a local.
        check(unsafe { f(self.0, method, &mut out) })?;
        Ok(out)
    }

    /// The type signature of the class declaring `method` (`Lpkg/Cls;`). The class's local
    /// reference is left to the current native frame, which frees it when it returns: for a few
    /// calls per native, not for a loop over many methods.
    pub fn declaring_class_signature(self, method: jmethodID) -> Result<String, Error> {
        self.method_declaring_class(method).and_then(|c| self.class_signature(c))
    }

    /// All loaded classes as JNI local references (`GetLoadedClasses`, slot 78; the caller
    /// deletes them).
    pub fn loaded_classes(self) -> Result<Vec<jclass>, Error> {
        self.references(78)
    }

    /// All live threads as JNI local references (`GetAllThreads`, slot 4; the caller deletes them).
    pub fn all_threads(self) -> Result<Vec<jthread>, Error> {
        self.references(4)
    }

    /// Calls a function of the form `(env, jint* count, jobject** array)` and copies the array.
    fn references(self, slot: usize) -> Result<Vec<jobject>, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *mut jint, *mut *mut jobject) -> JvmtiError;
        let f = jvmti_fn!(self, slot, F);
        let mut n: jint = 0;
        let mut arr: *mut jobject = std::ptr::null_mut();
        // SAFETY: slots 4 (GetAllThreads) and 78 (GetLoadedClasses) have this signature (jclass
        // and jthread are jobject); outs are locals.
        check(unsafe { f(self.0, &mut n, &mut arr) })?;
        let v = if arr.is_null() || n <= 0 {
            Vec::new()
        } else {
            // SAFETY: the VM returned an array of `n` references allocated with Allocate.
            unsafe { std::slice::from_raw_parts(arr, n as usize) }.to_vec()
        };
        self.deallocate(arr as *mut u8);
        Ok(v)
    }

    pub fn set_event_callbacks(self, cb: &EventCallbacks) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *const EventCallbacks, jint) -> JvmtiError;
        let f = jvmti_fn!(self, 122, F);
        // SAFETY: slot 122; the VM copies the struct, so a reference to a local is fine.
        check(unsafe { f(self.0, cb, std::mem::size_of::<EventCallbacks>() as jint) })
    }

    pub fn get_phase(self) -> Result<c_int, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *mut c_int) -> JvmtiError;
        let f = jvmti_fn!(self, 133, F);
        let mut p: c_int = 0;
        // SAFETY: slot 133; out is a local.
        check(unsafe { f(self.0, &mut p) })?;
        Ok(p)
    }

    pub fn potential_capabilities(self) -> Result<Capabilities, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *mut Capabilities) -> JvmtiError;
        let f = jvmti_fn!(self, 140, F);
        let mut c = Capabilities::default();
        // SAFETY: slot 140; out is a local of the C struct's size and layout.
        check(unsafe { f(self.0, &mut c) })?;
        Ok(c)
    }

    pub fn add_capabilities(self, caps: &Capabilities) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *const Capabilities) -> JvmtiError;
        let f = jvmti_fn!(self, 142, F);
        // SAFETY: slot 142; the VM reads the struct during the call.
        check(unsafe { f(self.0, caps) })
    }

    /// JVMTI `RelinquishCapabilities`: gives up `caps` (which this environment holds).
    pub fn relinquish_capabilities(self, caps: &Capabilities) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, *const Capabilities) -> JvmtiError;
        let f = jvmti_fn!(self, 143, F);
        // SAFETY: slot 143; the VM reads the struct during the call.
        check(unsafe { f(self.0, caps) })
    }

    pub fn retransform_classes(self, classes: &[jclass]) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jint, *const jclass) -> JvmtiError;
        let f = jvmti_fn!(self, 152, F);
        // SAFETY: slot 152; the slice holds valid class references for the call's duration.
        check(unsafe { f(self.0, classes.len() as jint, classes.as_ptr()) })
    }

    /// The top `max` frames of the current thread, innermost first (`GetStackTrace`, slot 104).
    pub fn current_stack(self, start_depth: jint, max: usize, out: &mut Vec<FrameInfo>) -> Result<(), Error> {
        self.stack(std::ptr::null_mut(), start_depth, max, out)
    }

    /// The top `max` frames of `thread` (null: the current thread), innermost first, from
    /// `start_depth` (none when the stack is not that deep).
    pub fn stack(self, thread: jthread, start_depth: jint, max: usize, out: &mut Vec<FrameInfo>) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jthread, jint, jint, *mut FrameInfo, *mut jint) -> JvmtiError;
        let f = jvmti_fn!(self, 104, F);
        out.clear();
        out.reserve(max);
        let mut n: jint = 0;
        // SAFETY: slot 104; `thread` is null (the current thread) or a live thread reference;
        // the buffer has room for `max` frames and the VM writes `n <= max` of them.
        let e = unsafe { f(self.0, thread, start_depth, max as jint, out.as_mut_ptr(), &mut n) };
        // A walk that read a full chunk asks for the next; with exactly that many frames, the
        // JVM calls the depth illegal.
        if e == JVMTI_ERROR_ILLEGAL_ARGUMENT && start_depth > 0 {
            return Ok(());
        }
        check(e)?;
        // SAFETY: the VM initialized the first `n` elements.
        unsafe { out.set_len(n.clamp(0, max as jint) as usize) };
        Ok(())
    }

    /// `SuspendThread` (slot 5; needs `can_suspend`).
    pub fn suspend_thread(self, thread: jthread) -> Result<(), Error> {
        self.thread_op(5, thread)
    }

    /// `ResumeThread` (slot 6; needs `can_suspend`).
    pub fn resume_thread(self, thread: jthread) -> Result<(), Error> {
        self.thread_op(6, thread)
    }

    fn thread_op(self, slot: usize, thread: jthread) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jthread) -> JvmtiError;
        let f = jvmti_fn!(self, slot, F);
        // SAFETY: slots 5 (SuspendThread) and 6 (ResumeThread) share this signature; `thread`
        // is a live thread reference.
        check(unsafe { f(self.0, thread) })
    }

    /// `StopThread` (slot 7; needs `can_signal_thread`): `thread` throws `exception` asynchronously.
    pub fn stop_thread(self, thread: jthread, exception: jobject) -> Result<(), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jthread, jobject) -> JvmtiError;
        let f = jvmti_fn!(self, 7, F);
        // SAFETY: slot 7; both are live references.
        check(unsafe { f(self.0, thread, exception) })
    }

    /// An int local of the current thread's frame at `depth` (`GetLocalInt`, slot 22).
    pub fn local_int(self, depth: jint, slot: jint) -> Result<jint, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jthread, jint, jint, *mut jint) -> JvmtiError;
        self.local(jvmti_fn!(self, 22, F), depth, slot)
    }

    /// A long local of the current thread's frame at `depth` (`GetLocalLong`, slot 23).
    pub fn local_long(self, depth: jint, slot: jint) -> Result<jlong, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jthread, jint, jint, *mut jlong) -> JvmtiError;
        self.local(jvmti_fn!(self, 23, F), depth, slot)
    }

    /// Calls `GetLocal<T>` `f` for the current thread's frame at `depth`.
    fn local<T: Default>(
        self,
        f: unsafe extern "C" fn(*mut JvmtiEnv, jthread, jint, jint, *mut T) -> JvmtiError,
        depth: jint,
        slot: jint,
    ) -> Result<T, Error> {
        let mut v = T::default();
        // SAFETY: `f` is the GetLocal function whose out type is T (the callers above); a null
        // thread is the current thread (allowed without suspension); out is a local.
        check(unsafe { f(self.0, std::ptr::null_mut(), depth, slot, &mut v) })?;
        Ok(v)
    }

    /// `GetMaxLocals` (slot 68).
    pub fn max_locals(self, method: jmethodID) -> Result<jint, Error> {
        self.method_int(68, method)
    }

    /// A method's access flags (`GetMethodModifiers`, slot 66).
    pub fn method_modifiers(self, method: jmethodID) -> Result<jint, Error> {
        self.method_int(66, method)
    }

    fn method_int(self, slot: usize, method: jmethodID) -> Result<jint, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jmethodID, *mut jint) -> JvmtiError;
        let f = jvmti_fn!(self, slot, F);
        let mut v: jint = 0;
        // SAFETY: slots 66 (GetMethodModifiers) and 68 (GetMaxLocals) share this signature; the
        // out is a local.
        check(unsafe { f(self.0, method, &mut v) })?;
        Ok(v)
    }

    /// `GetLineNumberTable` (slot 70); an empty table when the method has none.
    pub fn line_table(self, method: jmethodID) -> Result<Vec<LineNumberEntry>, Error> {
        // SAFETY: slot 70 is GetLineNumberTable(env, jmethodID, jint*, jvmtiLineNumberEntry**).
        match unsafe { self.array_of(70, method) } {
            Err(Error(JVMTI_ERROR_ABSENT_INFORMATION)) => Ok(Vec::new()),
            r => r,
        }
    }

    /// The methods `class` declares (`GetClassMethods`, slot 52).
    pub fn class_methods(self, class: jclass) -> Result<Vec<jmethodID>, Error> {
        // SAFETY: slot 52 is GetClassMethods(env, jclass, jint*, jmethodID**).
        unsafe { self.array_of(52, class) }
    }

    /// Calls a function of the form `(env, handle, jint* count, T** array)` and copies the array
    /// the VM allocated.
    ///
    /// # Safety
    /// Slot `slot` must have exactly that signature, with `handle` a live reference or id.
    unsafe fn array_of<H, T: Copy>(self, slot: usize, handle: H) -> Result<Vec<T>, Error> {
        let f = jvmti_fn!(self, slot, unsafe extern "C" fn(*mut JvmtiEnv, H, *mut jint, *mut *mut T) -> JvmtiError);
        let mut n: jint = 0;
        let mut p: *mut T = std::ptr::null_mut();
        // SAFETY: the signature is the caller's promise; outs are locals.
        check(unsafe { f(self.0, handle, &mut n, &mut p) })?;
        let v = if p.is_null() || n <= 0 {
            Vec::new()
        } else {
            // SAFETY: the VM returned an array of `n` elements allocated with Allocate.
            unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()
        };
        self.deallocate(p as *mut u8);
        Ok(v)
    }

    /// The constant pool of `class` as in a class file, without its count, and that count
    /// (`GetConstantPool`, slot 146; needs `can_get_constant_pool`).
    pub fn constant_pool(self, class: jclass) -> Result<(u16, Box<[u8]>), Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jclass, *mut jint, *mut jint, *mut *mut u8) -> JvmtiError;
        let f = jvmti_fn!(self, 146, F);
        let (mut count, mut n): (jint, jint) = (0, 0);
        let mut p: *mut u8 = std::ptr::null_mut();
        // SAFETY: slot 146; outs are locals.
        check(unsafe { f(self.0, class, &mut count, &mut n, &mut p) })?;
        let pool = if p.is_null() || n <= 0 {
            Box::default()
        } else {
            // SAFETY: the VM returned `n` bytes allocated with Allocate.
            unsafe { std::slice::from_raw_parts(p, n as usize) }.into()
        };
        self.deallocate(p);
        Ok((u16::try_from(count).unwrap_or(0), pool))
    }

    /// A method's bytecode as the VM runs it (`GetBytecodes`, slot 75: a copy the VM reconstitutes).
    pub fn bytecodes(self, method: jmethodID) -> Result<Box<[u8]>, Error> {
        // SAFETY: slot 75 is GetBytecodes(env, jmethodID, jint*, unsigned char**).
        unsafe { self.array_of::<_, u8>(75, method) }.map(Vec::into_boxed_slice)
    }

    fn method_flag(self, slot: usize, method: jmethodID) -> Result<bool, Error> {
        type F = unsafe extern "C" fn(*mut JvmtiEnv, jmethodID, *mut jboolean) -> JvmtiError;
        let f = jvmti_fn!(self, slot, F);
        let mut v: jboolean = 0;
        // SAFETY: slots 76 (IsMethodNative) and 91 (IsMethodObsolete) share this signature.
        check(unsafe { f(self.0, method, &mut v) })?;
        Ok(v != 0)
    }

    pub fn is_method_native(self, method: jmethodID) -> Result<bool, Error> {
        self.method_flag(76, method)
    }

    pub fn is_method_obsolete(self, method: jmethodID) -> Result<bool, Error> {
        self.method_flag(91, method)
    }

    /// Copies a JVMTI-allocated C string and frees it.
    fn take_string(self, p: *mut c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI returns NUL-terminated modified-UTF-8 strings allocated with Allocate.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        self.deallocate(p as *mut u8);
        s
    }
}

/// A `jvalue` array for the JNI `Call…A` functions: a valid pointer even without arguments.
fn jvalues(args: &[u64]) -> *const u64 {
    static NONE: [u64; 1] = [0];
    if args.is_empty() { NONE.as_ptr() } else { args.as_ptr() }
}

/// A `JNIEnv*`, valid only on the thread it was handed to.
#[derive(Clone, Copy)]
pub struct Jni(pub *mut JniEnv);

macro_rules! jni_fn {
    ($self:ident, $index:expr, $ty:ty) => {{
        // SAFETY: `self.0` is the JNIEnv of the current thread (handed to a callback running on
        // it); `$index` is the 0-based index in `struct JNINativeInterface_` from jni.h and `$ty`
        // that member's exact signature.
        unsafe {
            let table = (*$self.0).functions;
            let f = *table.add($index);
            std::mem::transmute::<*const c_void, $ty>(f)
        }
    }};
}

impl Jni {
    /// JNI `DefineClass`; a null loader means the bootstrap class loader.
    pub fn define_class(self, name: &CStr, loader: jobject, bytes: &[u8]) -> jclass {
        type F = unsafe extern "C" fn(*mut JniEnv, *const c_char, jobject, *const i8, jint) -> jclass;
        let f = jni_fn!(self, 5, F);
        // SAFETY: index 5 = DefineClass; the VM copies the bytes during the call.
        unsafe { f(self.0, name.as_ptr(), loader, bytes.as_ptr() as *const i8, bytes.len() as jint) }
    }

    /// Clears a pending Java exception, returning whether there was one.
    pub fn exception_clear(self) -> bool {
        type Check = unsafe extern "C" fn(*mut JniEnv) -> jboolean;
        type Clear = unsafe extern "C" fn(*mut JniEnv);
        let check = jni_fn!(self, 228, Check);
        let clear = jni_fn!(self, 17, Clear);
        // SAFETY: indexes 228 = ExceptionCheck and 17 = ExceptionClear, both callable with an
        // exception pending.
        unsafe {
            if check(self.0) != 0 {
                clear(self.0);
                true
            } else {
                false
            }
        }
    }

    /// JNI `NewGlobalRef` (index 21).
    pub fn new_global_ref(self, obj: jobject) -> jobject {
        type F = unsafe extern "C" fn(*mut JniEnv, jobject) -> jobject;
        let f = jni_fn!(self, 21, F);
        // SAFETY: index 21 = NewGlobalRef on a live reference.
        unsafe { f(self.0, obj) }
    }

    /// JNI `GetStaticMethodID` (index 113); null (exception cleared) when absent.
    pub fn static_method_id(self, class: jclass, name: &CStr, sig: &CStr) -> jmethodID {
        type F = unsafe extern "C" fn(*mut JniEnv, jclass, *const c_char, *const c_char) -> jmethodID;
        let f = jni_fn!(self, 113, F);
        // SAFETY: index 113 = GetStaticMethodID with NUL-terminated name and signature.
        let m = unsafe { f(self.0, class, name.as_ptr(), sig.as_ptr()) };
        if m.is_null() {
            self.exception_clear();
        }
        m
    }

    /// Calls a static method without arguments that returns an object (`CallStaticObjectMethodA`,
    /// index 116); when it threw, the exception (a local reference, no longer pending).
    pub fn call_static_object_noargs(self, class: jclass, method: jmethodID) -> Result<jobject, jobject> {
        type F = unsafe extern "C" fn(*mut JniEnv, jclass, jmethodID, *const u64) -> jobject;
        type Occurred = unsafe extern "C" fn(*mut JniEnv) -> jobject;
        let f = jni_fn!(self, 116, F);
        let occurred = jni_fn!(self, 15, Occurred);
        let no_args = [0u64; 1];
        // SAFETY: index 116 = CallStaticObjectMethodA; `method` takes no arguments, so the VM
        // reads nothing from the argument array. Index 15 = ExceptionOccurred, callable with an
        // exception pending.
        let (r, thrown) = unsafe { (f(self.0, class, method, no_args.as_ptr()), occurred(self.0)) };
        if thrown.is_null() {
            return Ok(r);
        }
        self.exception_clear();
        Err(thrown)
    }

    /// JNI `Throw` (index 13): makes `exception` pending, to be thrown when the native method
    /// returns to Java.
    pub fn throw(self, exception: jobject) {
        type F = unsafe extern "C" fn(*mut JniEnv, jobject) -> jint;
        let f = jni_fn!(self, 13, F);
        // SAFETY: index 13 = Throw on a live reference to a Throwable.
        unsafe { f(self.0, exception) };
    }

    /// JNI `DeleteGlobalRef` (index 22).
    pub fn delete_global_ref(self, obj: jobject) {
        type F = unsafe extern "C" fn(*mut JniEnv, jobject);
        let f = jni_fn!(self, 22, F);
        // SAFETY: index 22 = DeleteGlobalRef on a global reference this agent made.
        unsafe { f(self.0, obj) }
    }

    /// JNI `GetMethodID` (index 33); null (exception cleared) when absent.
    pub fn method_id(self, class: jclass, name: &CStr, sig: &CStr) -> jmethodID {
        type F = unsafe extern "C" fn(*mut JniEnv, jclass, *const c_char, *const c_char) -> jmethodID;
        let f = jni_fn!(self, 33, F);
        // SAFETY: index 33 = GetMethodID with NUL-terminated name and signature.
        let m = unsafe { f(self.0, class, name.as_ptr(), sig.as_ptr()) };
        if m.is_null() {
            self.exception_clear();
        }
        m
    }

    /// A JNI `…A` function taking a reference, a method and a `jvalue` array (NewObjectA,
    /// Call<Type>MethodA) on `target`, with `args` (each a `jvalue`: an object reference or a
    /// `long` as its 64 bits); None when it threw (cleared).
    ///
    /// # Safety
    /// `index` must be such a function whose result is an `R`, and `args` must hold one value
    /// per parameter of `method`.
    unsafe fn call_a<R>(self, index: usize, target: jobject, method: jmethodID, args: &[u64]) -> Option<R> {
        type F<R> = unsafe extern "C" fn(*mut JniEnv, jobject, jmethodID, *const u64) -> R;
        let f = jni_fn!(self, index, F<R>);
        // SAFETY: the caller's contract: `f` has this signature and `args` fits `method`.
        let r = unsafe { f(self.0, target, method, jvalues(args)) };
        (!self.exception_clear()).then_some(r)
    }

    /// JNI `NewObjectA` (index 30): a new `class` built by constructor `init` with `args`; null
    /// when it threw (cleared).
    pub fn new_object(self, class: jclass, init: jmethodID, args: &[u64]) -> jobject {
        // SAFETY: index 30 = NewObjectA, a jobject; the caller passes one jvalue per parameter of
        // `init`.
        unsafe { self.call_a(30, class, init, args) }.unwrap_or(std::ptr::null_mut())
    }

    /// JNI `CallObjectMethodA` (index 36); null when it threw (cleared).
    pub fn call_object_method(self, obj: jobject, method: jmethodID, args: &[u64]) -> jobject {
        // SAFETY: index 36 = CallObjectMethodA, a jobject; one jvalue per parameter (as above).
        unsafe { self.call_a(36, obj, method, args) }.unwrap_or(std::ptr::null_mut())
    }

    /// JNI `CallIntMethodA` (index 51) of a method without arguments; None when it threw (cleared).
    pub fn call_int_method(self, obj: jobject, method: jmethodID) -> Option<jint> {
        // SAFETY: index 51 = CallIntMethodA, a jint; `method` takes no arguments.
        unsafe { self.call_a(51, obj, method, &[]) }
    }

    /// JNI `CallVoidMethodA` (index 63); false when it threw (cleared).
    pub fn call_void_method(self, obj: jobject, method: jmethodID, args: &[u64]) -> bool {
        // SAFETY: index 63 = CallVoidMethodA, no result; one jvalue per parameter (as above).
        unsafe { self.call_a::<()>(63, obj, method, args) }.is_some()
    }

    /// JNI `IsInstanceOf` (index 32).
    pub fn is_instance_of(self, obj: jobject, class: jclass) -> bool {
        type F = unsafe extern "C" fn(*mut JniEnv, jobject, jclass) -> jboolean;
        let f = jni_fn!(self, 32, F);
        // SAFETY: index 32 = IsInstanceOf on live references.
        unsafe { f(self.0, obj, class) != 0 }
    }

    /// JNI `RegisterNatives` (index 215); false when the VM refused (an exception is cleared).
    pub fn register_natives(self, class: jclass, methods: &[NativeMethod]) -> bool {
        type F = unsafe extern "C" fn(*mut JniEnv, jclass, *const NativeMethod, jint) -> jint;
        let f = jni_fn!(self, 215, F);
        // SAFETY: index 215 = RegisterNatives; names and signatures are NUL-terminated statics.
        let r = unsafe { f(self.0, class, methods.as_ptr(), methods.len() as jint) };
        if r != JNI_OK {
            self.exception_clear();
        }
        r == JNI_OK
    }

    /// JNI `FindClass` (index 6).
    pub fn find_class(self, name: &CStr) -> jclass {
        type F = unsafe extern "C" fn(*mut JniEnv, *const c_char) -> jclass;
        let f = jni_fn!(self, 6, F);
        // SAFETY: index 6 = FindClass with a NUL-terminated name.
        unsafe { f(self.0, name.as_ptr()) }
    }

    /// A Java string as Rust text (modified UTF-8 read leniently); None for null.
    pub fn string(self, s: jstring) -> Option<String> {
        if s.is_null() {
            return None;
        }
        type Chars = unsafe extern "C" fn(*mut JniEnv, jstring, *mut jboolean) -> *const c_char;
        type Release = unsafe extern "C" fn(*mut JniEnv, jstring, *const c_char);
        let chars = jni_fn!(self, 169, Chars);
        let release = jni_fn!(self, 170, Release);
        // SAFETY: indexes 169/170 = GetStringUTFChars/ReleaseStringUTFChars on a live string;
        // the chars are NUL-terminated and released right after copying.
        unsafe {
            let p = chars(self.0, s, std::ptr::null_mut());
            if p.is_null() {
                self.exception_clear();
                return None;
            }
            let text = CStr::from_ptr(p).to_string_lossy().into_owned();
            release(self.0, s, p);
            Some(text)
        }
    }

    /// The contents of a Java `byte[]`; None for null or when the VM refused (cleared).
    pub fn byte_array(self, array: jbyteArray) -> Option<Vec<u8>> {
        if array.is_null() {
            return None;
        }
        type Len = unsafe extern "C" fn(*mut JniEnv, jobject) -> jint;
        type Region = unsafe extern "C" fn(*mut JniEnv, jbyteArray, jint, jint, *mut i8);
        let len = jni_fn!(self, 171, Len);
        let region = jni_fn!(self, 200, Region);
        // SAFETY: indexes 171 = GetArrayLength and 200 = GetByteArrayRegion on a live byte[];
        // the region read is exactly the array's length, into a buffer of that many bytes.
        unsafe {
            let n = usize::try_from(len(self.0, array)).ok()?;
            let mut v = vec![0u8; n];
            region(self.0, array, 0, n as jint, v.as_mut_ptr().cast());
            (!self.exception_clear()).then_some(v)
        }
    }

    /// JNI `CallStaticVoidMethodA` (index 143); false when it threw (cleared).
    pub fn call_static_void_method(self, class: jclass, method: jmethodID, args: &[u64]) -> bool {
        // SAFETY: index 143 = CallStaticVoidMethodA, no result; one jvalue per parameter (as in
        // `call_object_method`).
        unsafe { self.call_a::<()>(143, class, method, args) }.is_some()
    }

    /// JNI `GetJavaVM` (index 219): the VM this thread runs in.
    pub fn java_vm(self) -> Option<*mut JavaVM> {
        type F = unsafe extern "C" fn(*mut JniEnv, *mut *mut JavaVM) -> jint;
        let f = jni_fn!(self, 219, F);
        let mut vm: *mut JavaVM = std::ptr::null_mut();
        // SAFETY: index 219 = GetJavaVM; `vm` is a local the VM writes.
        let r = unsafe { f(self.0, &mut vm) };
        (r == JNI_OK && !vm.is_null()).then_some(vm)
    }

    /// JNI `NewStringUTF` (index 167); null when the VM refused (cleared).
    pub fn new_string(self, text: &CStr) -> jstring {
        type F = unsafe extern "C" fn(*mut JniEnv, *const c_char) -> jstring;
        let f = jni_fn!(self, 167, F);
        // SAFETY: index 167 = NewStringUTF with a NUL-terminated (ASCII) text.
        let s = unsafe { f(self.0, text.as_ptr()) };
        if s.is_null() {
            self.exception_clear();
        }
        s
    }

    /// A new Java `byte[]` holding `bytes`; null when the VM refused (the exception cleared).
    pub fn new_byte_array(self, bytes: &[u8]) -> jbyteArray {
        let Ok(n) = jint::try_from(bytes.len()) else { return std::ptr::null_mut() };
        type New = unsafe extern "C" fn(*mut JniEnv, jint) -> jbyteArray;
        type Region = unsafe extern "C" fn(*mut JniEnv, jbyteArray, jint, jint, *const i8);
        let new = jni_fn!(self, 176, New);
        let region = jni_fn!(self, 208, Region);
        // SAFETY: indexes 176 = NewByteArray and 208 = SetByteArrayRegion; the region written is
        // the new array's whole length, from `bytes`, which holds that many.
        unsafe {
            let a = new(self.0, n);
            if a.is_null() {
                self.exception_clear();
                return a;
            }
            region(self.0, a, 0, n, bytes.as_ptr().cast());
            if self.exception_clear() {
                self.delete_local_ref(a);
                return std::ptr::null_mut();
            }
            a
        }
    }

    pub fn delete_local_ref(self, obj: jobject) {
        type F = unsafe extern "C" fn(*mut JniEnv, jobject);
        let f = jni_fn!(self, 23, F);
        if !obj.is_null() {
            // SAFETY: index 23 = DeleteLocalRef; `obj` is a local reference of this thread.
            unsafe { f(self.0, obj) }
        }
    }
}

impl JavaVM {
    /// `JavaVM->GetEnv(vm, &env, version)` (JNIInvokeInterface_ index 6).
    ///
    /// # Safety
    /// `vm` must be the `JavaVM*` handed to `Agent_OnLoad`.
    pub unsafe fn get_jvmti(vm: *mut JavaVM) -> Option<Jvmti> {
        type F = unsafe extern "C" fn(*mut JavaVM, *mut *mut c_void, jint) -> jint;
        // SAFETY: caller guarantees `vm` is live; index 6 of JNIInvokeInterface_ is GetEnv.
        let f = std::mem::transmute::<*const c_void, F>(*(*vm).functions.add(6));
        let mut env: *mut c_void = std::ptr::null_mut();
        if f(vm, &mut env, JVMTI_VERSION_1_2) != JNI_OK || env.is_null() {
            return None;
        }
        Some(Jvmti(env as *mut JvmtiEnv))
    }
}

#[cfg(test)]
mod tests {
    use super::signature_class;

    #[test]
    fn class_signatures() {
        assert_eq!(signature_class("Ljava/lang/String;"), Some(("java/lang/String", false)));
        assert_eq!(signature_class("LFoo$$Lambda$14.0x0000000800c0b000;"), Some(("Foo$$Lambda$14", true)));
        assert_eq!(signature_class("[Ljava/lang/String;"), None);
        assert_eq!(signature_class("I"), None);
    }
}
