//! What the slicer's workers send each other inside the dataflow, and where each
//! record goes.
//!
//! Design constraints:
//! - A message is a [`Key`]: the first 128 bits of its SHA-256 digest. It is the same
//!   in every process, so the citation graph is exchanged by it without an interner
//!   (a table of ids per process would give one message two keys in two processes).
//!   Two sealed messages sharing a key would take an author 2^64 work to make; the
//!   full id travels with the bytes wherever it matters (a bundle is built from them).
//! - Every message has one **owner**, the worker `key mod peers` ([`owner`]): it
//!   holds the message's bytes, indexes and completeness, and answers for it.
//!   Receipts go to the owner of the message they acknowledge; each epoch's inclusion
//!   proofs are kept by the worker `epoch mod peers`; an incident's slice is put
//!   together by the worker `incident mod peers` (its **emitter**).
//! - Records name their destination in the value they carry (a key, an epoch, an
//!   asker), and the dataflow's exchanges route by exactly that value, so a record
//!   reaches the same worker in every run of the same cluster shape.

use serde::{Deserialize, Serialize};

/// A message inside the slicer: the first 128 bits of its SHA-256 digest.
pub type Key = u128;

/// An incident number, unique in the cluster: its emitter's counter × peers + the
/// emitter's index, so `incident mod peers` is its emitter.
pub type IncidentId = u64;

/// The key of a message digest.
pub fn key(digest: &[u8; 32]) -> Key {
    let mut k = [0u8; 16];
    k.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(k)
}

/// The worker (of `peers`) that owns a message: how the dataflow routes by key.
pub fn owner(key: Key, peers: usize) -> usize {
    (route(key) % peers.max(1) as u64) as usize
}

/// The exchange hash of a key (timely routes a record to `hash mod peers`).
pub fn route(key: Key) -> u64 {
    key as u64
}

/// An anchor entering (+1) or leaving (−1) an incident's closure:
/// `((anchor, incident), diff)`.
pub type AnchorUpdate = ((Key, IncidentId), isize);

/// A record time window `[start, end]` (ms).
pub type Window = (u64, u64);

/// A sealed item, routed to the owner of the message it is (or acknowledges).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Arrival {
    /// The signed envelope sealed as leaf `leaf` (index in the log) of epoch `epoch`;
    /// `before` is the sealer's event-time watermark before that epoch (what its
    /// lateness is measured against).
    Envelope {
        /// The message.
        key: Key,
        /// The epoch that sealed it.
        epoch: u64,
        /// Its leaf index in the log.
        leaf: u64,
        /// The watermark before the epoch.
        before: u64,
        /// Signed envelope bytes.
        bytes: Vec<u8>,
    },
    /// A signed receipt of message `of`, the `index`-th receipt epoch `epoch`'s seal
    /// names, signed at record time `time`.
    Receipt {
        /// The message it acknowledges.
        of: Key,
        /// The epoch that sealed it.
        epoch: u64,
        /// Its place among the receipts of the epoch.
        index: u32,
        /// Its timestamp.
        time: u64,
        /// Signed receipt bytes.
        bytes: Vec<u8>,
    },
}

impl Arrival {
    /// Where the arrival goes.
    pub fn route(&self) -> u64 {
        match self {
            Arrival::Envelope { key, .. } => route(*key),
            Arrival::Receipt { of, .. } => route(*of),
        }
    }
}

/// Completeness between shards: a held message that cites another learns from the
/// parent's owner when the parent is held.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Link {
    /// `child` (held by the sender) cites `parent`: say so when `parent` is held.
    /// Goes to `parent`'s owner.
    Await {
        /// The cited message.
        parent: Key,
        /// The citing message.
        child: Key,
    },
    /// `parent`, stamped `time`, is held. Goes to `child`'s owner.
    Held {
        /// The citing message.
        child: Key,
        /// The cited message.
        parent: Key,
        /// The parent's timestamp.
        time: u64,
    },
    /// `child` was evicted: stop awaiting `parent` for it. Goes to `parent`'s owner.
    Forget {
        /// The cited message.
        parent: Key,
        /// The evicted citing message.
        child: Key,
    },
}

impl Link {
    /// Where the link goes.
    pub fn route(&self) -> u64 {
        match self {
            Link::Await { parent, .. } | Link::Forget { parent, .. } => route(*parent),
            Link::Held { child, .. } => route(*child),
        }
    }
}

/// What every worker tells every other (broadcast), once per turn or when it changes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Control {
    /// Worker `from` has fed its share of every epoch up to `epoch` (`None`: none).
    Fed {
        /// The worker.
        from: u32,
        /// The last epoch fed.
        epoch: Option<u64>,
        /// The sealer's watermark after that epoch.
        watermark: u64,
    },
    /// The earliest window start among worker `from`'s waiting declarations
    /// (`u64::MAX`: none): no shard evicts within the horizon before it; and
    /// whether its input has been idle for the stage's idle limit (the members stop
    /// together, in the turn after every one of them said so).
    Hold {
        /// The worker.
        from: u32,
        /// The earliest window start.
        start: u64,
        /// Idle past the limit, with nothing in flight.
        idle: bool,
    },
    /// The shard of worker `from` evicted every message stamped before `before`.
    Evicted {
        /// The worker.
        from: u32,
        /// Its eviction point.
        before: u64,
    },
    /// The largest lateness among the messages of `epoch` a shard took (only sent
    /// when positive).
    Late {
        /// The epoch.
        epoch: u64,
        /// The lateness (ms).
        worst: u64,
    },
}

/// An epoch's count of live messages changed by `delta` at one shard. Goes to the
/// epoch's proof keeper.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Live {
    /// The epoch.
    pub epoch: u64,
    /// Messages taken (+) or evicted (−).
    pub delta: i64,
}

/// The names a narrowed window is picked by (hashed by each shard with its own key).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Asked {
    /// Targets in scope (messages naming one).
    pub targets: Vec<String>,
    /// Principals in scope (messages authored by one).
    pub principals: Vec<String>,
    /// The declared targets (as author, target or monitor-read target).
    pub declared: Vec<String>,
    /// Sites whose telemetry the monitor reads (`None`: the default site).
    pub sites: Vec<Option<String>>,
    /// Every site's telemetry (a declaration without targets).
    pub every_site: bool,
}

/// A question an emitter asks the shards about one incident, answered within the
/// turn it is asked in.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Query {
    /// The emitter asking.
    pub asker: u32,
    /// The incident.
    pub incident: IncidentId,
    /// What is asked.
    pub ask: Ask,
}

/// The kinds of [`Query`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Ask {
    /// Which of `keys` each shard holds and which of those are still pending (a parent
    /// or their receipt not held), and whether any message of `window` is pending.
    Status {
        /// The window.
        window: Window,
        /// The messages asked about.
        keys: Vec<Key>,
    },
    /// The records of `keys`, and what each shard knows of `window`'s completeness.
    Fetch {
        /// The window.
        window: Window,
        /// The messages wanted.
        keys: Vec<Key>,
    },
    /// The window's messages the names pick (or, `exhaustive`, every one of them),
    /// and with `parents` the records of their parents (any time).
    Picks {
        /// The window.
        window: Window,
        /// What picks a message.
        asked: Asked,
        /// Every message of the window instead.
        exhaustive: bool,
        /// Also the picks' parents.
        parents: bool,
    },
    /// The inclusion proofs of `keys` (those held), and the header and checkpoint of
    /// every epoch proving one and of epoch `root`.
    Prove {
        /// The messages to prove.
        keys: Vec<Key>,
        /// The record root's epoch.
        root: u64,
    },
}

/// A held message as a shard ships it to an emitter.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// Its epoch.
    pub epoch: u64,
    /// Its leaf index.
    pub leaf: u64,
    /// Signed envelope bytes.
    pub bytes: Vec<u8>,
    /// Its receipts, each with (epoch, index) of its sealing.
    pub receipts: Vec<(u64, u32, Vec<u8>)>,
}

/// What a shard knows of a window's completeness.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct WindowCheck {
    /// A held message of the window does not have every parent held yet.
    pub unsettled: bool,
    /// The oldest parent timestamp cited by a settled message of the window
    /// (`u64::MAX`: none).
    pub oldest_cited: u64,
}

/// A shard's answer to a [`Query`], sent to its asker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Answer {
    /// The emitter that asked.
    pub to: u32,
    /// The incident.
    pub incident: IncidentId,
    /// What is answered.
    pub reply: Reply,
}

/// The kinds of [`Answer`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Of the keys asked: those held, those of them pending; whether the window has a
    /// pending message at this shard.
    Status {
        /// Held keys.
        held: Vec<Key>,
        /// Held keys still pending.
        pending: Vec<Key>,
        /// A message of the window is pending.
        window_pending: bool,
    },
    /// Records of held messages, and the window's completeness at this shard.
    Records {
        /// The records.
        records: Vec<Record>,
        /// The window as this shard holds it (fetch answers only).
        check: Option<WindowCheck>,
    },
    /// The inclusion proof of a held message (empty when its epoch's proofs are gone).
    Proof {
        /// The message.
        key: Key,
        /// Its epoch.
        epoch: u64,
        /// The encoded proof.
        proof: Vec<u8>,
    },
    /// The header and checkpoint of an epoch.
    Epoch {
        /// The epoch.
        number: u64,
        /// Signed header bytes.
        header: Vec<u8>,
        /// Checkpoint note.
        checkpoint: Vec<u8>,
    },
}

/// A request a shard forwards within the turn: the record of a parent (to the
/// parent's owner), or a proof (to the epoch's keeper).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Forward {
    /// Send the record of `key`, if held, to `to`.
    Parent {
        /// The emitter.
        to: u32,
        /// The incident.
        incident: IncidentId,
        /// The message.
        key: Key,
    },
    /// Prove leaf `leaf` of epoch `epoch` (message `key`) to `to`.
    Prove {
        /// The emitter.
        to: u32,
        /// The incident.
        incident: IncidentId,
        /// The message.
        key: Key,
        /// Its epoch.
        epoch: u64,
        /// Its leaf index.
        leaf: u64,
    },
    /// Send the header and checkpoint of `epoch` to `to`.
    Epoch {
        /// The emitter.
        to: u32,
        /// The incident.
        incident: IncidentId,
        /// The epoch.
        epoch: u64,
    },
}

impl Forward {
    /// Where the request goes.
    pub fn route(&self) -> u64 {
        match self {
            Forward::Parent { key, .. } => route(*key),
            Forward::Prove { epoch, .. } | Forward::Epoch { epoch, .. } => *epoch,
        }
    }
}
