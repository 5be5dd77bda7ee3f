use lucce_log_format::StoreError;

/// Why a context does not decode. Never answered with an invented trace.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("unknown site id {0} (not in the store)")]
    UnknownSite(u32),
    #[error("unknown method id {0} (not in the store)")]
    UnknownMethod(u32),
    #[error("graph version {version} is past the store's last committed version {last} (the recording stopped before it was flushed?)")]
    VersionBeyondStore { version: u64, last: u64 },
    #[error("callId {c} does not decode at {method} in graph version {version}: no incoming edge covers it")]
    NoEdge { method: String, c: u64, version: u64 },
    #[error("anchor {0} is not in the store, or does not belong to this frame")]
    BadAnchor(u64),
    #[error("callId {0} reaches a thread root (it must be 0 there)")]
    RootWithCallId(u64),
    #[error("decoding does not terminate after {0} frames (damaged store?)")]
    TooDeep(usize),
    #[error("damaged graph log: {0}")]
    BadGraph(String),
}
