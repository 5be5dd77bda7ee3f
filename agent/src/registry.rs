//! Site tables: dense ids for instrumented methods and their call/allocation sites.
//!
//! The ClassFileLoadHook runs on many threads at once. Ids come from two atomic counters, so
//! handing one out never takes a lock; each rewrite collects its records in a per-class
//! [`ClassRegistrar`] and publishes them under the table lock once, when the class is done. An id
//! whose class has not been published yet (or whose rewrite failed) reads as a `None` slot.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde::Serialize;

use crate::rewrite::{MethodInfo, SiteInfo, SiteKind, SiteRegistry};

#[derive(Debug, Clone)]
pub struct MethodRecord {
    /// Internal name, `java/lang/String`.
    pub class: Arc<str>,
    pub name: Box<str>,
    pub descriptor: Box<str>,
    pub source_file: Option<Arc<str>>,
    pub access_flags: u16,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SiteRecord {
    pub method: u32,
    pub kind: SiteKindTag,
    /// Bytecode index in the original method.
    pub bci: u32,
    /// Source line, -1 when unknown.
    pub line: i32,
    /// Calls the lucce API.
    pub api: bool,
}

/// Serializable mirror of the rewriter's `SiteKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SiteKindTag {
    Call,
    Alloc,
}

#[derive(Default)]
pub struct Tables {
    pub methods: Vec<Option<MethodRecord>>,
    pub sites: Vec<Option<SiteRecord>>,
}

/// Told about each class's records when they are published (the recorder forwards them to the
/// encoder and the store), before the class's code can run.
pub type PublishSink = Box<dyn Fn(&[(u32, MethodRecord)], &[(u32, SiteRecord)]) + Send + Sync>;

#[derive(Default)]
pub struct Registry {
    next_method: AtomicU32,
    next_site: AtomicU32,
    tables: Mutex<Tables>,
    sink: OnceLock<PublishSink>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry whose first ids are `method` and `site` (ids below belong to someone else:
    /// the encoder's virtual roots).
    pub fn starting_at(method: u32, site: u32) -> Self {
        let r = Self::default();
        r.next_method.store(method, Ordering::Relaxed);
        r.next_site.store(site, Ordering::Relaxed);
        r
    }

    /// Sets the publish sink (once).
    pub fn set_sink(&self, sink: PublishSink) {
        let _ = self.sink.set(sink);
    }

    /// A registrar for one class rewrite; call [`ClassRegistrar::publish`] when it succeeded.
    pub fn registrar(&self) -> ClassRegistrar<'_> {
        ClassRegistrar { reg: self, methods: Vec::new(), sites: Vec::new(), class: None, source: None }
    }

    pub fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A site id for a site the rewriter did not make (the recorder's location sites).
    pub fn reserve_site(&self) -> u32 {
        self.next_site.fetch_add(1, Ordering::Relaxed)
    }

    pub fn method_count(&self) -> u32 {
        self.next_method.load(Ordering::Relaxed)
    }

    pub fn site_count(&self) -> u32 {
        self.next_site.load(Ordering::Relaxed)
    }
}

pub struct ClassRegistrar<'a> {
    reg: &'a Registry,
    methods: Vec<(u32, MethodRecord)>,
    sites: Vec<(u32, SiteRecord)>,
    // The last class name and source file seen, so that the methods of a class share one
    // allocation of each.
    class: Option<Arc<str>>,
    source: Option<Arc<str>>,
}

impl ClassRegistrar<'_> {
    /// Makes the collected records visible in the tables (one lock per class).
    pub fn publish(self) {
        if self.methods.is_empty() && self.sites.is_empty() {
            return;
        }
        if let Some(sink) = self.reg.sink.get() {
            sink(&self.methods, &self.sites);
        }
        let mut t = self.reg.tables();
        for (id, m) in self.methods {
            put(&mut t.methods, id, m);
        }
        for (id, s) in self.sites {
            put(&mut t.sites, id, s);
        }
    }
}

fn put<T>(v: &mut Vec<Option<T>>, id: u32, x: T) {
    let i = id as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(x);
}

impl SiteRegistry for ClassRegistrar<'_> {
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        let id = self.reg.next_method.fetch_add(1, Ordering::Relaxed);
        let class = match &self.class {
            Some(c) if **c == *m.class => c.clone(),
            _ => {
                let c: Arc<str> = Arc::from(m.class);
                self.class = Some(c.clone());
                c
            }
        };
        let source = m.source_file.map(|s| match &self.source {
            Some(c) if **c == *s => c.clone(),
            _ => {
                let c: Arc<str> = Arc::from(s);
                self.source = Some(c.clone());
                c
            }
        });
        self.methods.push((
            id,
            MethodRecord {
                class,
                name: m.name.into(),
                descriptor: m.descriptor.into(),
                source_file: source,
                access_flags: m.access_flags,
            },
        ));
        id
    }

    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        let id = self.reg.next_site.fetch_add(1, Ordering::Relaxed);
        let kind = match site.kind {
            SiteKind::Call => SiteKindTag::Call,
            SiteKind::Alloc => SiteKindTag::Alloc,
        };
        self.sites.push((id, SiteRecord { method: method_id, kind, bci: site.bci, line: site.line, api: site.api }));
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_across_threads() {
        let reg = Registry::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                let reg = &reg;
                s.spawn(move || {
                    for c in 0..100 {
                        let mut r = reg.registrar();
                        let cls = format!("C{t}_{c}");
                        for k in 0..3 {
                            let name = format!("m{k}");
                            let mid = r.method(&MethodInfo {
                                class: &cls,
                                name: &name,
                                descriptor: "()V",
                                source_file: Some("X.java"),
                                access_flags: 0,
                            });
                            r.site(mid, &SiteInfo { kind: SiteKind::Call, bci: 3, line: 7, api: false });
                        }
                        r.publish();
                    }
                });
            }
        });
        let t = reg.tables();
        assert_eq!(t.methods.len(), 1200);
        assert_eq!(t.sites.len(), 1200);
        assert!(t.methods.iter().all(Option::is_some));
        for s in t.sites.iter().flatten() {
            let m = t.methods[s.method as usize].as_ref().unwrap();
            assert_eq!(&*m.descriptor, "()V");
        }
    }
}
