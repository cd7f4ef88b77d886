//! Keepers as independent witnesses (SPEC §2, issue 12): a keeper is a service of
//! its own, in its own trust domain, with its own key, that co-signs a log's
//! checkpoints over the C2SP tlog-witness protocol only if they extend what it
//! co-signed before.
//!
//! - [`server`]: `POST /add-checkpoint` (c2sp.org/tlog-witness), answering 200 with
//!   a `cosignature/v1` line (c2sp.org/tlog-cosignature), 409 / 422 / 403 / 404 /
//!   400 as the spec says; [`serve`] runs one on a listener from a background
//!   thread (the demo runs keepers in-process on loopback, `audita keeper serve`
//!   runs one per process).
//! - [`state`]: per log the latest co-signed checkpoint, written atomically and
//!   durably before the keeper answers; loaded at start (fails closed).
//! - [`evidence`](mod@evidence): refused conflicting checkpoints the log signed, kept on disk in
//!   the documented `audita.keeper-evidence/v1` JSON form, exported by
//!   [`evidence()`](evidence::evidence) and checked offline against the log's key.
//! - [`judge`]: what such evidence shows about a record, judged against its tree
//!   (`audita verify --keeper-evidence`).
//! - [`client`]: the blocking client a log uses ([`add_checkpoint`]).
//! - [`config`]: the keeper's name, key file (mode 0600, C2SP note private key),
//!   followed logs (origin + vkey) and limits.
//!
//! Design constraints:
//! - The co-sign rule is the evidence crate's (`audita_evidence::keeper`): a keeper
//!   never co-signs two inconsistent checkpoints of one log, nor a smaller tree
//!   after a larger one. Checkpoint notes, cosignatures, consistency proofs and
//!   equivocations are `audita_evidence` types; nothing here re-implements them.
//! - Interoperable: the interop tests (`tests/it/interop.rs`, Go programs under
//!   `interop/`) drive this keeper with Tessera's witness client, verify its
//!   cosignatures with `golang.org/x/mod/sumdb/note` and
//!   `github.com/transparency-dev/formats/note`, and have [`client`] obtain
//!   cosignatures from litewitness (`filippo.io/torchwood`).
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod client;
pub mod config;
pub mod evidence;
mod fault;
pub mod judge;
pub mod protocol;
pub mod server;
pub mod state;

/// The accept loop, at its old path (it lives in `audita_http`).
pub use audita_http::{serve_connections, MAX_CONNECTIONS};
pub use client::{
    add_checkpoint, cosigned_by, ClientError, Outcome, WitnessClient, WitnessError, Witnessed,
};
pub use config::{generate_key, keeper_vkey, load_key, log_vkey, KeeperConfig, KeeperFile, Limits};
pub use evidence::{evidence, ConflictKind, ConflictRecord, Finding};
pub use server::{serve, serve_with, Answer, FaultHook, FaultPoint, Keeper, KeeperHandle};
