//! Opening a store for reading, the way every command does it: refuse what is not a store, say
//! when the recording was not closed cleanly, replay the graph log.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context as _;
use lucce_decoder::Graph;
use lucce_log_format::StoreReader;

/// A store with its replayed graph and thread names.
pub struct OpenedStore {
    pub store: StoreReader,
    pub graph: Graph,
    pub threads: HashMap<u32, String>,
}

impl OpenedStore {
    /// The thread's name, or `#id` for a thread the store does not name.
    pub fn thread_name(&self, id: u32) -> String {
        self.threads.get(&id).cloned().unwrap_or_else(|| format!("#{id}"))
    }
}

/// Opens `path`, printing a note on stderr when the store was not closed cleanly.
pub fn open_store(path: &Path) -> anyhow::Result<OpenedStore> {
    let store = StoreReader::open(path)?;
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
    Ok(OpenedStore { store, graph, threads })
}
