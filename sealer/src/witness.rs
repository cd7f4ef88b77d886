//! The sealer as a witness client (C2SP tlog-witness): every new checkpoint is
//! offered to each of the deployment's keepers with a consistency proof from the size
//! that keeper last co-signed; the epoch counts as *witnessed* once a quorum (k of n)
//! returned valid co-signatures.
//!
//! Design constraints:
//! - Witnessing never holds up sealing: a keeper that is down, slow or refusing costs
//!   at most one bounded request per back-off period (1 s doubling to 60 s), and the
//!   epoch is sealed, written and published either way — *under-witnessed* when fewer
//!   than the quorum co-signed (counted, logged). A keeper that comes back is offered
//!   every checkpoint it missed, oldest first, each with the proof from the size it
//!   co-signed last (at the next epoch, or from the idle loop), and the record's
//!   checkpoint notes gain its lines: once the keepers are back every epoch is
//!   witnessed. The checkpoints already published downstream keep the lines they
//!   had (a verdict computed meanwhile states what was witnessed then).
//! - Nothing a keeper returns is trusted: a co-signature line is added to the note
//!   only if it verifies under that keeper's registered key (C2SP cosignature/v1 over
//!   this very checkpoint body).
//! - A `409` names the keeper's size; the sealer retries once from that size when it
//!   can prove from it (at most the log's current size). A keeper claiming a larger
//!   tree of this log than the log has is a fork signal, logged as an error.
//! - Proofs are computed from memory for keepers within [`MAX_LAG_LEAVES`] leaves of
//!   the head (the compact range at the oldest retained size plus the leaf hashes
//!   since), and from the record on disk beyond that.
//! - Keepers are asked concurrently (one thread per due keeper for the round), so
//!   an epoch waits for the slowest keeper's round trip, not their sum; the lines
//!   each returns are verified against the note it was shown and then joined.
//! - The transport is a [`Witness`]: [`LocalWitness`] runs a keeper in this process
//!   (deployments that hold a keeper's key, and tests); the HTTP client of a keeper
//!   service implements the same trait outside this crate.

use audita_evidence::checkpoint::{SignatureLine, SignedCheckpoint};
use audita_evidence::merkle::{leaf_hash, CompactRange, ConsistencyProof, TailProver};
use audita_evidence::{EpochHeader, Hash, Keeper, KeyRegistry};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a witness answered to one `add-checkpoint` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Signature lines (`— <name> <base64>\n` each) to append to the note.
    Cosigned(String),
    /// The witness's latest size for this log is not the old size sent (HTTP 409).
    Conflict(u64),
    /// Refused for good for this input (bad proof 422, unknown log 403/404,
    /// malformed 400): the reason, one line.
    Refused(String),
    /// Unreachable, timed out or failing (5xx): worth retrying later.
    Unavailable(String),
}

/// A keeper the sealer can ask for co-signatures.
pub trait Witness: Send {
    /// The keeper's key name (its co-signature lines carry it).
    fn name(&self) -> &str;
    /// Offers `note` (a checkpoint the log signed) with the consistency proof from
    /// `old_size` to the note's size.
    fn add_checkpoint(&mut self, old_size: u64, proof: &[Hash], note: &str) -> Answer;
}

/// A keeper run inside the sealer's process, with its key: the deployments that hold
/// a keeper's private key (`[[witness.keepers]] key = …`) and tests. It applies the
/// keeper rule of [`audita_evidence::Keeper`] (never a smaller or inconsistent
/// checkpoint after a larger one) and answers like a tlog-witness service.
pub struct LocalWitness {
    keeper: Keeper,
    keys: KeyRegistry,
    /// The POSIX second its co-signatures carry, when not its wall clock's (a record
    /// sealed offline is a function of its input: see [`crate::log`]).
    clock: Option<Arc<AtomicU64>>,
}

impl LocalWitness {
    /// A keeper `keeper` checking checkpoints against `keys` (the log's key).
    pub fn new(keeper: Keeper, keys: KeyRegistry) -> LocalWitness {
        LocalWitness {
            keeper,
            keys,
            clock: None,
        }
    }

    /// The keeper co-signing at the POSIX second `clock` holds instead of its wall
    /// clock's.
    pub fn with_clock(mut self, clock: Arc<AtomicU64>) -> LocalWitness {
        self.clock = Some(clock);
        self
    }

    /// Its latest co-signed size.
    pub fn size(&self) -> u64 {
        self.keeper.latest().map_or(0, |c| c.checkpoint().size)
    }
}

impl Witness for LocalWitness {
    fn name(&self) -> &str {
        self.keeper.name()
    }

    fn add_checkpoint(&mut self, old_size: u64, proof: &[Hash], note: &str) -> Answer {
        if old_size != self.size() {
            return Answer::Conflict(self.size());
        }
        let mut cp = match SignedCheckpoint::parse(note.as_bytes()) {
            Ok(cp) => cp,
            Err(e) => return Answer::Refused(format!("checkpoint: {e}")),
        };
        let proof = ConsistencyProof {
            old_size,
            size: cp.checkpoint().size,
            path: proof.to_vec(),
        };
        let before = cp.to_text();
        let now = match &self.clock {
            Some(c) => c.load(Ordering::Relaxed),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        match self.keeper.cosign(&mut cp, &proof, &self.keys, now) {
            Ok(_) => Answer::Cosigned(
                cp.to_text()
                    .strip_prefix(before.as_str())
                    .unwrap_or_default()
                    .to_string(),
            ),
            Err(e) => Answer::Refused(e.to_string()),
        }
    }
}

/// Leaves of log history the sealer keeps in memory for proofs to lagging keepers
/// (32 bytes each: 128 MiB); a keeper further behind gets its proof from the disk.
pub const MAX_LAG_LEAVES: usize = 1 << 22;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The log's recent history: the compact range at `base` and every leaf hash since,
/// enough to prove consistency from any size in `base..=size` to the head.
pub(crate) struct History {
    base: CompactRange,
    tail: Vec<Hash>,
}

impl History {
    pub(crate) fn new(at: CompactRange) -> History {
        History {
            base: at,
            tail: Vec::new(),
        }
    }

    pub(crate) fn size(&self) -> u64 {
        self.base.size() + self.tail.len() as u64
    }

    pub(crate) fn append(&mut self, hashes: &[Hash]) {
        self.tail.extend_from_slice(hashes);
    }

    /// The consistency proof from `old` to `new`, if both are within the history.
    pub(crate) fn prove(&self, old: u64, new: u64) -> Option<Vec<Hash>> {
        let base = self.base.size();
        if old < base || old > new || new > self.size() {
            return None;
        }
        let (k, n) = ((old - base) as usize, (new - base) as usize);
        let mut prefix = self.base.clone();
        for h in &self.tail[..k] {
            prefix.append(*h);
        }
        TailProver::new(&prefix, &self.tail[k..n])
            .consistency()
            .ok()
            .map(|p| p.path)
    }

    /// The consistency proof from `old` to `new`; what precedes the history comes
    /// from the record in `dir`.
    pub(crate) fn prove_with_disk(
        &self,
        old: u64,
        new: u64,
        dir: &Path,
    ) -> Result<Vec<Hash>, String> {
        if old > new || new > self.size() {
            return Err(format!(
                "no consistency proof from size {old} to {new} in a log of {}",
                self.size()
            ));
        }
        if let Some(p) = self.prove(old, new) {
            return Ok(p);
        }
        let base = self.base.size();
        let (prefix, mut tail) = leaves_from_disk(dir, old, new.min(base))?;
        if new > base {
            tail.extend_from_slice(&self.tail[..(new - base) as usize]);
        }
        TailProver::new(&prefix, &tail)
            .consistency()
            .map(|p| p.path)
            .map_err(|e| e.to_string())
    }

    /// Forgets what no proof from `keep_from` on needs, keeping at most `cap` leaves.
    pub(crate) fn trim(&mut self, keep_from: u64, cap: usize) {
        let floor = self.size().saturating_sub(cap as u64);
        let target = keep_from.max(floor).min(self.size());
        if target <= self.base.size() {
            return;
        }
        let k = (target - self.base.size()) as usize;
        for h in self.tail.drain(..k) {
            self.base.append(h);
        }
    }
}

/// The log's compact range at `old` and the leaf hashes of `old..upto`, read from the
/// record on disk (for a keeper further behind than the history kept in memory).
fn leaves_from_disk(dir: &Path, old: u64, upto: u64) -> Result<(CompactRange, Vec<Hash>), String> {
    let mut epochs = audita_record::Stream::segments(dir, "epochs", "epoch-", b'H')
        .map_err(|e| e.to_string())?;
    let mut prefix = CompactRange::new();
    let mut tail = Vec::new();
    while prefix.size() + (tail.len() as u64) < upto {
        let Some(frames) = epochs.next_file() else {
            break;
        };
        let mut frames = frames.map_err(|e| e.to_string())?.into_iter();
        EpochHeader::decode(frames.next().unwrap_or_default()).map_err(|e| e.to_string())?;
        for leaf in frames {
            if prefix.size() < old {
                prefix.append(leaf_hash(&leaf));
            } else if prefix.size() + (tail.len() as u64) < upto {
                tail.push(leaf_hash(&leaf));
            }
        }
    }
    if prefix.size() != old || prefix.size() + tail.len() as u64 != upto {
        return Err(format!(
            "the record on disk holds no tree of size {upto} extending size {old}"
        ));
    }
    Ok((prefix, tail))
}

/// One keeper as the sealer tracks it.
struct Tracked {
    witness: Box<dyn Witness>,
    /// The size the keeper co-signed last, as far as the sealer knows.
    size: u64,
    retry_at: Option<Instant>,
    backoff: Duration,
}

impl Tracked {
    fn fail(&mut self, now: Instant) {
        self.retry_at = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

/// A checkpoint some keeper has not co-signed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// Its position among the record's checkpoint files (the epoch number).
    pub index: u64,
    /// The note with the valid co-signatures collected so far.
    pub checkpoint: SignedCheckpoint,
    /// Whether it carries the quorum.
    pub quorum_met: bool,
    /// Keepers whose valid co-signature it carries (verified once, when the line is
    /// added, so settling never re-verifies every pending note).
    pub cosigned_by: std::collections::BTreeSet<String>,
}

/// Checkpoints kept for keepers that missed them (about 400 bytes each); beyond this
/// the oldest stay as they are (under-witnessed, if they lacked the quorum).
pub const MAX_PENDING: usize = 1 << 16;

/// Every keeper of the deployment, with what the sealer knows of each.
pub struct Witnesses {
    tracked: Vec<Tracked>,
    quorum: usize,
    history: History,
    /// Checkpoints not co-signed by every keeper, by tree size.
    pending: std::collections::BTreeMap<u64, Pending>,
    /// Valid co-signatures collected since start.
    collected: u64,
}

impl Witnesses {
    /// Keepers `witnesses`, `quorum` of which must co-sign; the log's compact range
    /// at its latest checkpoint is `log`, which each keeper is assumed to hold until
    /// it says otherwise (a 409 corrects it).
    pub fn new(witnesses: Vec<Box<dyn Witness>>, quorum: usize, log: CompactRange) -> Witnesses {
        let mut w = Witnesses {
            tracked: Vec::new(),
            quorum,
            history: History::new(log),
            pending: Default::default(),
            collected: 0,
        };
        for x in witnesses {
            w.add(x);
        }
        w
    }

    /// Adds a keeper, assumed to hold the log's head until it says otherwise.
    pub fn add(&mut self, witness: Box<dyn Witness>) {
        self.tracked.push(Tracked {
            witness,
            size: self.history.size(),
            retry_at: None,
            backoff: FIRST_BACKOFF,
        });
    }

    /// Sets the co-signatures an epoch needs.
    pub fn set_quorum(&mut self, quorum: usize) {
        self.quorum = quorum;
    }

    /// Number of keepers.
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    /// Whether there are no keepers.
    pub fn is_empty(&self) -> bool {
        self.tracked.is_empty()
    }

    /// The co-signatures an epoch needs.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Valid co-signatures collected since start.
    pub fn collected(&self) -> u64 {
        self.collected
    }

    /// Keepers known to be behind the log's head.
    pub fn behind(&self) -> usize {
        let head = self.history.size();
        self.tracked.iter().filter(|t| t.size < head).count()
    }

    /// Whether a keeper that missed checkpoints is due for another try (idle
    /// catch-up).
    pub fn catch_up_due(&self, now: Instant) -> bool {
        !self.pending.is_empty()
            && self.tracked.iter().any(|t| {
                t.retry_at.is_none_or(|r| now >= r)
                    && self
                        .pending
                        .range(t.size.saturating_add(1)..)
                        .next()
                        .is_some()
            })
    }

    /// A sealed epoch: its leaf hashes join the history and its log-signed
    /// checkpoint (file `index`) is offered to the keepers with what they missed.
    /// Returns every checkpoint whose co-signatures changed — the new one last when
    /// it did — and the new checkpoint as it stands.
    pub fn seal(
        &mut self,
        index: u64,
        hashes: &[Hash],
        checkpoint: &SignedCheckpoint,
        keys: &KeyRegistry,
        dir: &Path,
    ) -> (Vec<Pending>, Pending) {
        self.history.append(hashes);
        let size = checkpoint.checkpoint().size;
        let cosigned_by = cosigners(checkpoint, keys);
        let head = Pending {
            index,
            checkpoint: checkpoint.clone(),
            quorum_met: cosigned_by.len() >= self.quorum,
            cosigned_by,
        };
        self.pending.insert(size, head.clone());
        let changed = self.run(keys, dir);
        let head = self
            .pending
            .get(&size)
            .or_else(|| {
                changed
                    .iter()
                    .find(|p| p.checkpoint.checkpoint().size == size)
            })
            .cloned()
            .unwrap_or(head);
        (changed, head)
    }

    /// Offers every keeper due the checkpoints it has not co-signed, oldest first,
    /// each with the proof from the keeper's last size; returns the checkpoints whose
    /// co-signatures changed (in size order).
    pub fn run(&mut self, keys: &KeyRegistry, dir: &Path) -> Vec<Pending> {
        let now = Instant::now();
        // Every due keeper at once (an epoch waits for the slowest keeper, not for
        // the sum of them): each walks the pending checkpoints it lacks, oldest
        // first, against the notes as they stand, and returns its verified lines.
        let (pending, history) = (&self.pending, &self.history);
        let mut due: Vec<&mut Tracked> = self
            .tracked
            .iter_mut()
            .filter(|t| t.retry_at.is_none_or(|r| now >= r))
            .collect();
        let answers: Vec<(String, Vec<(u64, String)>)> = if due.len() < 2 {
            due.iter_mut()
                .map(|t| offer_all(t, pending, history, keys, dir))
                .collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = due
                    .into_iter()
                    .map(|t| scope.spawn(move || offer_all(t, pending, history, keys, dir)))
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            })
        };
        let mut changed = std::collections::BTreeSet::new();
        for (name, lines) in answers {
            for (size, line) in lines {
                let Some(p) = self.pending.get_mut(&size) else {
                    continue;
                };
                match p.checkpoint.with_signature_lines(&line) {
                    Ok(next) => {
                        p.checkpoint = next;
                        p.cosigned_by.insert(name.clone());
                        changed.insert(size);
                        self.collected += 1;
                    }
                    Err(e) => {
                        tracing::error!(keeper = %name, size, error = %e, "co-signature line does not join the note; ignored")
                    }
                }
            }
        }
        // Settle: quorum flags, and drop what every keeper co-signed (or the oldest
        // beyond the bound).
        let names: Vec<String> = self
            .tracked
            .iter()
            .map(|t| t.witness.name().to_string())
            .collect();
        let mut out = Vec::new();
        let mut done = Vec::new();
        for (size, p) in self.pending.iter_mut() {
            let cosigned = names.iter().filter(|n| p.cosigned_by.contains(*n)).count();
            p.quorum_met = cosigned >= self.quorum;
            if changed.contains(size) {
                out.push(p.clone());
            }
            if cosigned == names.len() {
                done.push(*size);
            }
        }
        for s in done {
            self.pending.remove(&s);
        }
        while self.pending.len() > MAX_PENDING {
            if let Some((size, p)) = self.pending.pop_first() {
                tracing::warn!(
                    size,
                    quorum_met = p.quorum_met,
                    "checkpoint dropped from the keepers' catch-up queue"
                );
            }
        }
        let keep_from = self
            .tracked
            .iter()
            .map(|t| t.size)
            .chain(self.pending.keys().copied())
            .min()
            .unwrap_or(self.history.size());
        self.history.trim(keep_from, MAX_LAG_LEAVES);
        out
    }
}

/// The keepers whose valid co-signature `cp` carries.
fn cosigners(cp: &SignedCheckpoint, keys: &KeyRegistry) -> std::collections::BTreeSet<String> {
    cp.classify(keys)
        .into_iter()
        .filter_map(|l| match l {
            SignatureLine::Cosigned(c) => Some(c.keeper),
            _ => None,
        })
        .collect()
}

/// Offers keeper `t` every checkpoint of `pending` it has not co-signed, oldest
/// first, until one fails (the keeper is then backed off); returns its name and the
/// verified signature lines it returned, by tree size.
fn offer_all(
    t: &mut Tracked,
    pending: &std::collections::BTreeMap<u64, Pending>,
    history: &History,
    keys: &KeyRegistry,
    dir: &Path,
) -> (String, Vec<(u64, String)>) {
    let name = t.witness.name().to_string();
    let mut out = Vec::new();
    for (&size, p) in pending {
        if p.cosigned_by.contains(&name) {
            t.size = t.size.max(size);
            continue;
        }
        if size < t.size {
            // The keeper co-signed a larger tree already: this one stays without
            // its line (a witness never signs a smaller tree). A checkpoint of the
            // same tree (an epoch of receipts only) is offered with the empty proof.
            continue;
        }
        match offer_one(t, &name, history, &p.checkpoint, keys, dir) {
            Some(lines) => out.push((size, lines)),
            None => break,
        }
    }
    (name, out)
}

/// Offers one checkpoint to one keeper (retrying once from the size a 409 names);
/// the keeper's signature lines once they verify on the note, or `None` (the keeper
/// is backed off).
fn offer_one(
    t: &mut Tracked,
    name: &str,
    history: &History,
    cp: &SignedCheckpoint,
    keys: &KeyRegistry,
    dir: &Path,
) -> Option<String> {
    let now = Instant::now();
    let size = cp.checkpoint().size;
    for tries in 1..=2 {
        let proof = match history.prove_with_disk(t.size, size, dir) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(keeper = %name, error = %e, "cannot prove consistency for keeper");
                t.fail(now);
                return None;
            }
        };
        match t.witness.add_checkpoint(t.size, &proof, &cp.to_text()) {
            Answer::Cosigned(lines) => {
                // Only the keeper's own valid line joins the note: anything else it
                // returned (other names, junk) is dropped.
                let own = lines.lines().map(|l| format!("{l}\n")).find(|l| {
                    cp.with_signature_lines(l)
                        .is_ok_and(|next| cosigners(&next, keys).contains(name))
                });
                return match own {
                    Some(line) => {
                        t.size = size;
                        t.retry_at = None;
                        t.backoff = FIRST_BACKOFF;
                        Some(line)
                    }
                    None => {
                        tracing::error!(keeper = %name, "keeper returned no valid co-signature; ignored");
                        t.fail(now);
                        None
                    }
                };
            }
            Answer::Conflict(theirs) if theirs > history.size() => {
                tracing::error!(keeper = %name, keeper_size = theirs, log_size = history.size(),
                    "keeper co-signed a larger tree of this log than the log holds: a fork or a rollback of the log");
                t.size = theirs;
                t.fail(now);
                return None;
            }
            Answer::Conflict(theirs) if tries < 2 && theirs != t.size => {
                t.size = theirs;
                if theirs > size {
                    // It holds a larger tree already.
                    return None;
                }
            }
            Answer::Conflict(theirs) => {
                tracing::warn!(keeper = %name, keeper_size = theirs, "keeper keeps answering 409");
                t.size = theirs;
                t.fail(now);
                return None;
            }
            Answer::Refused(why) => {
                tracing::error!(keeper = %name, reason = %why, "keeper refused the checkpoint");
                t.fail(now);
                return None;
            }
            Answer::Unavailable(why) => {
                tracing::warn!(keeper = %name, reason = %why, "keeper unavailable; sealing goes on");
                t.fail(now);
                return None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::merkle::root_from_leaf_hashes;

    fn hashes(n: u64) -> Vec<Hash> {
        (0..n).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn history_proves_from_every_retained_size_and_trims() {
        let all = hashes(300);
        let mut h = History::new(CompactRange::new());
        h.append(&all[..100]);
        h.append(&all[100..]);
        let root = root_from_leaf_hashes(&all);
        for old in [0u64, 1, 99, 100, 255, 256, 299, 300] {
            let path = h.prove(old, 300).expect("within the history");
            let p = ConsistencyProof {
                old_size: old,
                size: 300,
                path,
            };
            if old > 0 {
                let old_root = root_from_leaf_hashes(&all[..old as usize]);
                p.verify(&old_root, &root)
                    .unwrap_or_else(|e| panic!("from {old}: {e}"));
            }
        }
        for (old, new) in [
            (0u64, 1u64),
            (1, 2),
            (3, 8),
            (100, 256),
            (255, 257),
            (17, 17),
        ] {
            let p = ConsistencyProof {
                old_size: old,
                size: new,
                path: h.prove(old, new).expect("within the history"),
            };
            if old > 0 {
                p.verify(
                    &root_from_leaf_hashes(&all[..old as usize]),
                    &root_from_leaf_hashes(&all[..new as usize]),
                )
                .unwrap_or_else(|e| panic!("from {old} to {new}: {e}"));
            }
        }
        h.trim(120, usize::MAX);
        assert!(h.prove(119, 300).is_none(), "trimmed below 120");
        assert!(h.prove(120, 300).is_some());
        assert!(h.prove(120, 200).is_some(), "to a size below the head");
        assert!(h.prove(200, 120).is_none());
        h.trim(0, 50);
        assert_eq!(h.size(), 300);
        assert!(h.prove(249, 300).is_none(), "the cap keeps 50 leaves");
        assert!(h.prove(250, 300).is_some());
        assert!(h.prove(250, 301).is_none(), "nothing beyond the head");
    }
}
