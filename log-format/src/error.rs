use std::path::PathBuf;

/// Everything that can go wrong with a store; each message is one line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: no such store (the path does not exist)")]
    NotFound { path: PathBuf },
    #[error("{path}: not a lucce store ({why})")]
    NotAStore { path: PathBuf, why: String },
    #[error("{path}: already exists; a store is written once, choose a new directory")]
    AlreadyExists { path: PathBuf },
    #[error("{path}: store format version {found}, this lucce reads versions {oldest} to {newest}")]
    WrongFormat { path: PathBuf, found: u32, oldest: u32, newest: u32 },
    #[error("store is corrupt: {0}")]
    Corrupt(String),
    #[error("{path}: in use by another process (a JVM still recording into it, or another lucce command); try again once it has ended")]
    InUse { path: PathBuf },
    #[error("the store's database (sled) failed: {0}")]
    Backend(String),
    /// The disk refused a write: full, over a size limit or quota, read-only, not ours. sled
    /// writes to a store's files as it opens them, so a reader meets these too.
    #[error("{0}")]
    Disk(String),
    #[error("the store writer has stopped: {0}")]
    WriterGone(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
