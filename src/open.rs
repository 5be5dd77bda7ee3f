//! Opening a store for reading, the way every command does it: refuse what is not a store, say
//! when the recording was not closed cleanly, replay the graph log.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context as _;
use lucce_decoder::Graph;
use lucce_log_format::{StoreError, StoreReader};

/// A store with its replayed graph and thread names.
pub struct OpenedStore {
    pub store: StoreReader,
    pub graph: Graph,
    pub threads: HashMap<u32, String>,
    /// The copy read in place of a store that cannot be opened where it is (removed on drop).
    _copy: Option<tempfile::TempDir>,
}

impl OpenedStore {
    /// The thread's name, or `#id` for a thread the store does not name.
    pub fn thread_name(&self, id: u32) -> String {
        self.threads.get(&id).cloned().unwrap_or_else(|| format!("#{id}"))
    }
}

/// Opens `path`, printing a note on stderr when the store was not closed cleanly. sled writes to
/// a store's files as it opens them: a store this user may not write, on a read-only or full
/// disk, is copied into a temporary directory and read there.
pub fn open_store(path: &Path) -> anyhow::Result<OpenedStore> {
    let (store, copy) = match StoreReader::open(path) {
        Err(StoreError::Disk(why)) => {
            let copy = tempfile::Builder::new().prefix("lucce-store-").tempdir().context("making a temporary directory")?;
            let bytes = copy_dir(path, copy.path())
                .with_context(|| format!("{} cannot be opened where it is ({why}), and copying it to {} failed", path.display(), copy.path().display()))?;
            say!(
                "lucce: note: {} cannot be opened where it is ({why}): reading a copy in {} ({:.1} MB, removed afterwards)",
                path.display(),
                copy.path().display(),
                bytes as f64 / 1e6
            );
            (StoreReader::open(copy.path())?, Some(copy))
        }
        opened => (opened?, None),
    };
    let tail = store.tail()?;
    if !tail.is_empty() {
        say!(
            "lucce: note: {} was not closed cleanly; ignoring its unflushed tail ({} graph events, {} events{})",
            path.display(),
            tail.graph,
            tail.events,
            if tail.damaged { ", damaged" } else { "" }
        );
    } else if !store.commit().clean {
        // The database keeps what came before a damaged spot of its files and drops the rest, so
        // damage after a clean close reads like a kill too.
        say!(
            "lucce: note: {} was not closed cleanly (the recording process was killed, writing it failed, or the files were damaged after it); everything committed before that is here",
            path.display()
        );
    }
    let graph = Graph::from_store(&store).context("replaying the graph log")?;
    let threads = store.threads()?.into_iter().map(|(id, t)| (id, t.name)).collect();
    Ok(OpenedStore { store, graph, threads, _copy: copy })
}

/// Copies the files under `from` into `to` (which exists); returns the bytes copied.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir(&target)?;
            bytes += copy_dir(&entry.path(), &target)?;
        } else {
            bytes += std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(bytes)
}
