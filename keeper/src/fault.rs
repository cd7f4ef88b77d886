//! Fault-injection points of the co-signing path, at the bottom of the crate so that
//! the server and the state store both reach down to them.

use std::sync::Arc;

/// Points of the co-signing path where a fault hook is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// Checks passed and the cosignature is made; nothing written yet.
    BeforePersist,
    /// The new state's temp file is written and synced, not yet renamed.
    AfterTempWrite,
    /// Renamed over the old state, directory not yet synced.
    AfterRename,
    /// Durable; the 200 answer is not sent yet.
    AfterPersist,
}

/// A fault-injection hook (tests abort the process from it to simulate `kill
/// -9` at each point); production keepers have none.
pub type FaultHook = Arc<dyn Fn(FaultPoint) + Send + Sync>;
