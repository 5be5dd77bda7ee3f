//! `count_check=PATTERN`: an independent reference for the probes' method-entry counts.
//!
//! JVMTI MethodEntry events (the JVM's own notion of "a method was entered", no bytecode
//! involved) are counted per `jmethodID` from VMInit on; at VMDeath they are resolved to
//! `class.name descriptor` and compared with the entry counters of the instrumented methods of the
//! classes matching PATTERN. MethodEntry events put threads into interpreter-only mode, so this is
//! a test mode for small programs.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::jvmti::{jmethodID, signature_class, Jni, Jvmti};
use crate::options::Options;
use crate::registry::Registry;
use crate::runtime::Counters;

#[derive(Default)]
pub struct CountCheck {
    counts: Mutex<FxHashMap<usize, u64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MethodCount {
    pub method: String,
    pub jvmti: u64,
    pub probes: u64,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct CheckReport {
    pub methods_compared: u64,
    pub jvmti_entries: u64,
    pub probe_entries: u64,
    /// Methods of matching classes that the JVM entered but that have no probe: native methods
    /// and methods the rewriter skipped. Listed apart because they are expected to differ.
    pub not_instrumented: Vec<MethodCount>,
    pub differences: Vec<MethodCount>,
    /// Every compared method with both counts.
    pub counts: Vec<MethodCount>,
}

impl CountCheck {
    pub fn record(&self, method: jmethodID) {
        let mut m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(method as usize).or_default() += 1;
    }

    /// Compares; called at VMDeath after the MethodEntry event has been disabled.
    pub fn report(
        &self,
        jvmti: Jvmti,
        jni: Jni, opts: &Options, registry: &Registry, counters: Option<&Counters>) -> CheckReport {
        let counts = std::mem::take(&mut *self.counts.lock().unwrap_or_else(|e| e.into_inner()));
        // key: "internal/Class.name(desc)" -> (jvmti, probes)
        let mut both: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (mid, n) in counts {
            let method = mid as jmethodID;
            let Ok(cls) = jvmti.method_declaring_class(method) else { continue };
            let sig = jvmti.class_signature(cls);
            jni.delete_local_ref(cls);
            // The registry knows a hidden class by the name in its bytes, so all hidden classes of
            // one name count together on both sides.
            let Some(class) = sig.ok().and_then(|s| Some(signature_class(&s)?.0.to_string())) else {
                continue;
            };
            if !opts.count_checked(&class) {
                continue;
            }
            let Ok((name, desc)) = jvmti.method_name(method) else { continue };
            both.entry(format!("{class}.{name}{desc}")).or_default().0 += n;
        }
        let mut instrumented = std::collections::HashSet::new();
        {
            let t = registry.tables();
            for (id, m) in t.methods.iter().enumerate() {
                let Some(m) = m else { continue };
                if !opts.count_checked(m.class()) {
                    continue;
                }
                let key = format!("{}.{}{}", m.class(), m.name(), m.descriptor());
                both.entry(key.clone()).or_default().1 += counters.map_or(0, |c| c.method_entries(id as u32));
                instrumented.insert(key);
            }
        }
        let mut r = CheckReport::default();
        for (method, (jvmti, probes)) in both {
            r.jvmti_entries += jvmti;
            r.probe_entries += probes;
            let d = MethodCount { method: method.clone(), jvmti, probes };
            if !instrumented.contains(&method) {
                r.not_instrumented.push(d);
                continue;
            }
            r.methods_compared += 1;
            if jvmti != probes {
                r.differences.push(d.clone());
            }
            r.counts.push(d);
        }
        r
    }
}
