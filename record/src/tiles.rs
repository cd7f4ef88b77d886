//! The record's log as a static tiled transparency log (c2sp.org/tlog-tiles),
//! kept inside the record directory so that standard clients can fetch, verify
//! and monitor it with no Audita code (`audita serve-log` serves it over HTTP).
//!
//! Design constraints (layout, inside the record directory):
//! ```text
//! DIR/checkpoint                  the latest checkpoint note with its keeper cosignatures:
//!                                 the sealer writes the same bytes as the epoch's
//!                                 DIR/checkpoints/checkpoint-NNNNNN.txt
//! DIR/tile/<L>/<N>                full hash tile: 256 hashes × 32 bytes at level L
//! DIR/tile/<L>/<N>.p/<W>          partial hash tile of W (1..=255) hashes
//! DIR/tile/entries/<N>[.p/<W>]    entry bundle: W entries, each `u16 big-endian length || leaf`
//! DIR/keys/log.vkey               the log's C2SP verifier key (note type 0x01), one line
//! DIR/keys/keepers.vkey           the keepers' verifier keys (cosignature/v1, type 0x04),
//!                                 one a line
//! ```
//! - `<N>` is the tile index in 3-digit groups, every group but the last prefixed
//!   with `x` (1234067 → `x001/x234/067`); `<L>` and `<W>` are decimals without
//!   leading zeros. A level-`L` tile holds the Merkle tree hashes of consecutive
//!   subtrees of `256^L` leaves; the partial tile at level `L` of a tree of size
//!   `s` holds `floor(s / 256^L) mod 256` hashes (none: no tile).
//! - The entries are the record's sealed Merkle leaves — exactly the bytes
//!   `evidence::merkle::leaf_hash` hashes (`MessageId::leaf_bytes`, the frames 1..
//!   of each `epochs/epoch-NNNNNN.seg`) — so every entry hashes (RFC 6962
//!   `SHA-256(0x00 || entry)`) to its level-0 tile hash and the tree's root is the
//!   checkpoint's.
//! - Incremental and bounded: [`TileLog`] keeps only the right edge (the partial
//!   tile of each level and the partial bundle: at most 255 hashes per level and 255
//!   entries), reloaded from the partial tiles named by `DIR/checkpoint` on open.
//!   A full tile is written once (a file already holding the same bytes is left
//!   alone); partial tiles are written whole and atomically (tmp + fsync + rename),
//!   and the partials of a tile index are removed once its full tile exists (the
//!   spec allows it); partials of older checkpoints are otherwise kept.
//! - Tiles follow the record, never lead it: they are written only after the epoch
//!   and checkpoint they cover are durable, and `DIR/checkpoint` is replaced last,
//!   after every tile it needs. On open, tiles behind the record are brought up to
//!   its latest checkpoint from the epoch files; tiles whose edge does not
//!   reproduce `DIR/checkpoint`, or whose size is not the end of a record epoch with
//!   that root, are rebuilt from the record (a crash mid-write costs a rebuild, never
//!   a tile that disagrees with the record).
//! - [`check_tiles`] (used by `audita verify`) recomputes every tile and bundle from
//!   the record's leaves and compares bytes; every partial file present is checked
//!   as a prefix of its tile. A record without tiles (older records) is reported as
//!   such, not as a problem.

use std::fs;
use std::path::{Path, PathBuf};

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes, CompactRange};
use audita_evidence::{EpochHeader, Hash, KeyRegistry, Record, SignedCheckpoint};

use crate::layout::vkey_files;
use crate::read::{
    io_err, last_checkpoint, read_bounded, read_registry, Limit, ReadError, Stream,
    DEFAULT_FRAME_BYTES,
};
use crate::write::{write_file, write_vkeys};

/// Hashes in a full tile, entries in a full bundle.
pub const TILE_WIDTH: usize = 256;
/// Bytes of a full hash tile.
pub const FULL_TILE_BYTES: usize = TILE_WIDTH * 32;
/// The longest entry an entry bundle can hold (its length prefix is a `u16`).
pub const MAX_ENTRY_BYTES: usize = u16::MAX as usize;
/// The longest entry bundle: 256 entries of the longest length.
pub const MAX_BUNDLE_BYTES: usize = TILE_WIDTH * (2 + MAX_ENTRY_BYTES);
/// Highest tile level a `u64`-sized tree can need.
pub const MAX_LEVEL: u8 = 7;

/// What a tile holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TileKind {
    /// Merkle tree hashes at this level (0: leaf hashes).
    Hash(u8),
    /// The entries themselves (`tile/entries/`).
    Entries,
}

/// One tile or entry bundle: kind, index within its level and width (1..=256;
/// 256 is a full tile, anything less a partial one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TileId {
    /// Hash level or entries.
    pub kind: TileKind,
    /// Index within the level.
    pub index: u64,
    /// Number of hashes or entries.
    pub width: u16,
}

/// The 3-digit group form of a tile index: 1234067 → `x001/x234/067`.
pub fn index_path(mut n: u64) -> String {
    let mut groups = Vec::new();
    loop {
        groups.push(n % 1000);
        n /= 1000;
        if n == 0 {
            break;
        }
    }
    let last = groups.len() - 1;
    groups
        .iter()
        .rev()
        .enumerate()
        .map(|(i, g)| {
            if i == last {
                format!("{g:03}")
            } else {
                format!("x{g:03}")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

impl TileId {
    /// Whether the tile is full (256 wide).
    pub fn is_full(&self) -> bool {
        self.width as usize == TILE_WIDTH
    }

    /// The tile's path relative to the log prefix (and to the record directory).
    pub fn path(&self) -> String {
        let kind = match self.kind {
            TileKind::Hash(l) => l.to_string(),
            TileKind::Entries => "entries".to_owned(),
        };
        let mut p = format!("tile/{kind}/{}", index_path(self.index));
        if !self.is_full() {
            p.push_str(&format!(".p/{}", self.width));
        }
        p
    }

    /// The same tile with another width.
    fn with_width(self, width: u16) -> Self {
        Self { width, ..self }
    }

    /// Parses a tile path in its one canonical form (what [`TileId::path`]
    /// writes): anything else — leading zeros, `x000` groups, `..`, a level above
    /// [`MAX_LEVEL`], a width outside 1..=255 — is `None`.
    pub fn parse(path: &str) -> Option<TileId> {
        let rest = path.strip_prefix("tile/")?;
        let (kind, rest) = rest.split_once('/')?;
        let kind = if kind == "entries" {
            TileKind::Entries
        } else {
            if kind.is_empty() || kind.len() > 1 || !kind.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let l: u8 = kind.parse().ok()?;
            if l > MAX_LEVEL {
                return None;
            }
            TileKind::Hash(l)
        };
        let (index, width) = match rest.split_once(".p/") {
            Some((i, w)) => {
                if w.is_empty() || w.len() > 3 || !w.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let w: u16 = w.parse().ok()?;
                if w == 0 || w as usize >= TILE_WIDTH {
                    return None;
                }
                (i, w)
            }
            None => (rest, TILE_WIDTH as u16),
        };
        let groups: Vec<&str> = index.split('/').collect();
        if groups.len() > 7 {
            return None;
        }
        let mut n: u64 = 0;
        for (i, g) in groups.iter().enumerate() {
            let digits = if i + 1 < groups.len() {
                g.strip_prefix('x')?
            } else {
                g
            };
            if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n = n
                .checked_mul(1000)?
                .checked_add(digits.parse::<u64>().ok()?)?;
        }
        let id = TileId {
            kind,
            index: n,
            width,
        };
        // One canonical form only (no `x000/` groups in front).
        (id.path() == path).then_some(id)
    }

    /// The longest file this tile may be.
    pub fn max_bytes(&self) -> u64 {
        match self.kind {
            TileKind::Hash(_) => self.width as u64 * 32,
            TileKind::Entries => self.width as u64 * (2 + MAX_ENTRY_BYTES as u64),
        }
    }
}

/// Why the tiles could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum TileError {
    /// Reading or writing a file failed (see [`ReadError::is_transient`]).
    #[error(transparent)]
    Disk(#[from] ReadError),
    /// The record itself cannot be tiled as it stands (a leaf too long for a
    /// bundle, an epoch header that does not decode, a checkpoint that the leaves
    /// do not reproduce). Permanent.
    #[error("{path}: {reason}")]
    Record {
        /// The record file at fault.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The right edge of the tiled log: the hashes of the partial tile of each level
/// and the entries of the partial bundle — all the state appending needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edge {
    size: u64,
    levels: Vec<Vec<Hash>>,
    entries: Vec<Vec<u8>>,
}

fn bundle(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.iter().map(|e| e.len() + 2).sum());
    for e in entries {
        out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        out.extend_from_slice(e);
    }
    out
}

fn parse_bundle(bytes: &[u8], width: usize) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(width);
    let mut rest = bytes;
    while !rest.is_empty() {
        let [a, b, tail @ ..] = rest else {
            return None;
        };
        let len = u16::from_be_bytes([*a, *b]) as usize;
        if tail.len() < len {
            return None;
        }
        out.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    (out.len() == width).then_some(out)
}

fn concat(hashes: &[Hash]) -> Vec<u8> {
    hashes.iter().flatten().copied().collect()
}

fn split_hashes(bytes: &[u8], width: usize) -> Option<Vec<Hash>> {
    if bytes.len() != width * 32 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(32)
            .map(|c| c.try_into().expect("32-byte chunk"))
            .collect(),
    )
}

/// `size / 256^(level)` without overflow.
fn at_level(size: u64, level: usize) -> u64 {
    size.checked_shr(8 * level as u32).unwrap_or(0)
}

impl Edge {
    /// The empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves appended so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one leaf; `full` receives every tile and bundle this completes
    /// (bottom-up), with its bytes.
    pub fn append<E>(
        &mut self,
        leaf: &[u8],
        full: &mut impl FnMut(TileId, Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let index = self.size / TILE_WIDTH as u64;
        self.entries.push(leaf.to_vec());
        if self.entries.len() == TILE_WIDTH {
            let bytes = bundle(&std::mem::take(&mut self.entries));
            full(
                TileId {
                    kind: TileKind::Entries,
                    index,
                    width: TILE_WIDTH as u16,
                },
                bytes,
            )?;
        }
        let mut hash = leaf_hash(leaf);
        // Index, at the current level, of the hash being pushed.
        let mut pos = self.size;
        let mut level = 0usize;
        loop {
            if self.levels.len() <= level {
                self.levels.push(Vec::with_capacity(TILE_WIDTH));
            }
            self.levels[level].push(hash);
            if self.levels[level].len() < TILE_WIDTH {
                break;
            }
            let tile = std::mem::take(&mut self.levels[level]);
            hash = root_from_leaf_hashes(&tile);
            full(
                TileId {
                    kind: TileKind::Hash(level as u8),
                    index: pos / TILE_WIDTH as u64,
                    width: TILE_WIDTH as u16,
                },
                concat(&tile),
            )?;
            pos /= TILE_WIDTH as u64;
            level += 1;
        }
        self.size += 1;
        Ok(())
    }

    /// The partial tiles and bundle of the current size, with their bytes (hash
    /// levels bottom-up, then the bundle).
    pub fn partials(&self) -> Vec<(TileId, Vec<u8>)> {
        let mut out = Vec::new();
        for (l, hashes) in self.levels.iter().enumerate() {
            if !hashes.is_empty() {
                out.push((
                    TileId {
                        kind: TileKind::Hash(l as u8),
                        index: at_level(self.size, l + 1),
                        width: hashes.len() as u16,
                    },
                    concat(hashes),
                ));
            }
        }
        if !self.entries.is_empty() {
            out.push((
                TileId {
                    kind: TileKind::Entries,
                    index: self.size / TILE_WIDTH as u64,
                    width: self.entries.len() as u16,
                },
                bundle(&self.entries),
            ));
        }
        out
    }

    /// The compact range of the log so far, from the partial tiles alone: each
    /// set bit `b` of a level-`L` partial tile's width is one perfect subtree of
    /// `2^(8L+b)` leaves.
    pub fn range(&self) -> CompactRange {
        let mut nodes = Vec::new();
        for hashes in self.levels.iter().rev() {
            let w = hashes.len();
            let mut off = 0usize;
            for b in (0..8).rev() {
                if w >> b & 1 == 1 {
                    nodes.push(root_from_leaf_hashes(&hashes[off..off + (1 << b)]));
                    off += 1 << b;
                }
            }
        }
        CompactRange::from_nodes(self.size, &nodes).expect("one node per set bit of the size")
    }

    /// The tree's RFC 9162 root.
    pub fn root(&self) -> Hash {
        self.range().root()
    }

    /// The edge of a tree of `size` leaves from the partial tiles under `dir`
    /// (`None` if one is missing or malformed).
    fn load(dir: &Path, size: u64) -> Result<Option<Edge>, ReadError> {
        let mut edge = Edge {
            size,
            levels: Vec::new(),
            entries: Vec::new(),
        };
        let mut level = 0usize;
        while at_level(size, level) > 0 {
            let width = (at_level(size, level) % TILE_WIDTH as u64) as usize;
            let mut hashes = Vec::new();
            if width > 0 {
                let id = TileId {
                    kind: TileKind::Hash(level as u8),
                    index: at_level(size, level + 1),
                    width: width as u16,
                };
                let Some(bytes) = read_tile(dir, &id)? else {
                    return Ok(None);
                };
                let Some(h) = split_hashes(&bytes, width) else {
                    return Ok(None);
                };
                hashes = h;
            }
            edge.levels.push(hashes);
            level += 1;
        }
        let width = (size % TILE_WIDTH as u64) as usize;
        if width > 0 {
            let id = TileId {
                kind: TileKind::Entries,
                index: size / TILE_WIDTH as u64,
                width: width as u16,
            };
            let Some(bytes) = read_tile(dir, &id)? else {
                return Ok(None);
            };
            let Some(entries) = parse_bundle(&bytes, width) else {
                return Ok(None);
            };
            // The bundle must hash to the level-0 partial tile.
            let level0 = edge.levels.first().map(Vec::as_slice).unwrap_or(&[]);
            if entries
                .iter()
                .map(|e| leaf_hash(e))
                .ne(level0.iter().copied())
            {
                return Ok(None);
            }
            edge.entries = entries;
        }
        Ok(Some(edge))
    }
}

/// Reads one tile file (bounded by its width); `None` if absent.
pub fn read_tile(dir: &Path, id: &TileId) -> Result<Option<Vec<u8>>, ReadError> {
    let path = dir.join(id.path());
    match read_bounded(&path, id.max_bytes(), Limit::FrameBytes) {
        Ok(b) => Ok(Some(b)),
        Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn record_err(path: &Path, reason: impl Into<String>) -> TileError {
    TileError::Record {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Writes a tile unless the file already holds exactly these bytes; a full tile
/// also removes the partials of its index (`<N>.p/`).
fn put_tile(dir: &Path, id: &TileId, bytes: &[u8]) -> Result<(), ReadError> {
    let path = dir.join(id.path());
    if read_tile(dir, id)?.as_deref() != Some(bytes) {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        write_file(&path, bytes)?;
    }
    if id.is_full() {
        let mut partials = path.into_os_string();
        partials.push(".p");
        let partials = PathBuf::from(partials);
        match fs::remove_dir_all(&partials) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&partials)(e)),
        }
    }
    Ok(())
}

/// The tiled log of one record directory, kept up to date by the sealer.
#[derive(Debug)]
pub struct TileLog {
    dir: PathBuf,
    edge: Edge,
}

/// What [`TileLog::open`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The tiles were current.
    Current,
    /// The tiles were behind the record (or absent) and were brought up to it.
    CaughtUp {
        /// Tree size the tiles had.
        from: u64,
    },
    /// The tiles did not reproduce their own checkpoint, or their checkpoint is
    /// not the end of a record epoch: they were rebuilt from the record.
    Rebuilt,
}

fn parse_note(path: &Path, bytes: &[u8]) -> Result<(u64, Hash), TileError> {
    let cp = SignedCheckpoint::parse(bytes)
        .map_err(|e| record_err(path, format!("checkpoint does not parse: {e}")))?;
    Ok((cp.checkpoint().size, cp.checkpoint().root))
}

impl TileLog {
    /// Opens the tiles of the record `dir` and brings them up to the record's
    /// latest checkpoint (see the module doc: caught up from the epoch files, or
    /// rebuilt if they disagree with the record); writes the vkey files if absent.
    pub fn open(dir: &Path) -> Result<(TileLog, Opened), TileError> {
        let keys = read_registry(dir)?;
        if !dir.join("keys/log.vkey").exists() || !dir.join("keys/keepers.vkey").exists() {
            write_vkeys(dir, &keys)?;
        }
        let cp_path = dir.join("checkpoint");
        let held = match read_bounded(&cp_path, DEFAULT_FRAME_BYTES, Limit::FrameBytes) {
            Ok(b) => Some(b),
            Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                None
            }
            Err(e) => return Err(e.into()),
        };
        let mut log = TileLog {
            dir: dir.to_owned(),
            edge: Edge::new(),
        };
        let mut opened = Opened::CaughtUp { from: 0 };
        let latest = last_checkpoint(dir)?;
        let latest_tree = latest
            .as_deref()
            .and_then(|n| parse_note(&dir.join("checkpoints"), n).ok());
        if let Some(note) = held {
            let loaded = match parse_note(&cp_path, &note) {
                Ok((size, root)) => Edge::load(dir, size)?
                    .filter(|e| e.root() == root)
                    .map(|e| (e, root)),
                Err(_) => None,
            };
            match loaded {
                // The usual restart: the tiles state the record's latest tree, so
                // no epoch file needs reading to place them.
                Some((edge, root))
                    if latest_tree == Some((edge.size, root))
                        || log.record_has(edge.size, &root)? =>
                {
                    opened = Opened::CaughtUp { from: edge.size };
                    log.edge = edge;
                }
                _ => {
                    log.clear()?;
                    opened = Opened::Rebuilt;
                }
            }
        }
        let Some(latest) = latest else {
            return Ok((log, opened));
        };
        let latest_path = dir.join("checkpoints");
        let (size, _) = parse_note(&latest_path, &latest)?;
        if size == log.edge.size && opened != Opened::Rebuilt {
            // Rewrites `checkpoint` only if the record's latest differs (same tree,
            // more cosignatures).
            if !matches!(read_bounded(&cp_path, DEFAULT_FRAME_BYTES, Limit::FrameBytes), Ok(b) if b == latest)
            {
                log.publish(&latest)?;
            }
            return Ok((log, Opened::Current));
        }
        if log.edge.size > size {
            // Tiles beyond the record's latest checkpoint (its newer checkpoint
            // files are gone): nothing signed covers them; rebuild to the latest.
            log.clear()?;
            opened = Opened::Rebuilt;
        }
        log.catch_up(size)?;
        log.publish(&latest)?;
        Ok((log, opened))
    }

    /// Tree size the tiles cover.
    pub fn size(&self) -> u64 {
        self.edge.size
    }

    /// Whether an epoch of the record ends at `size` with log root `root`.
    fn record_has(&self, size: u64, root: &Hash) -> Result<bool, TileError> {
        if size == 0 {
            return Ok(true);
        }
        let mut epochs = Stream::segments(&self.dir, "epochs", "epoch-", b'H')?;
        while let Some(frames) = epochs.next_file() {
            let header = frames?.into_iter().next().unwrap_or_default();
            let Ok(h) = EpochHeader::decode(header) else {
                return Ok(false);
            };
            if h.size == size {
                return Ok(h.log_root == *root);
            }
            if h.size > size {
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// Removes every tile and the `checkpoint` file (before a rebuild).
    fn clear(&mut self) -> Result<(), TileError> {
        let tdir = self.dir.join("tile");
        match fs::remove_dir_all(&tdir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&tdir)(e).into()),
        }
        let cp = self.dir.join("checkpoint");
        match fs::remove_file(&cp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&cp)(e).into()),
        }
        self.edge = Edge::new();
        Ok(())
    }

    /// Appends the record's leaves from the tiles' size up to `target` (from the
    /// epoch files, one at a time), writing full tiles as they complete.
    fn catch_up(&mut self, target: u64) -> Result<(), TileError> {
        if self.edge.size >= target {
            return Ok(());
        }
        let mut epochs = Stream::segments(&self.dir, "epochs", "epoch-", b'H')?;
        let mut start = 0u64;
        while let Some(frames) = epochs.next_file() {
            let frames = frames?;
            let leaves = frames.len().saturating_sub(1) as u64;
            let end = start + leaves;
            if end > self.edge.size {
                for leaf in frames.iter().skip(1 + (self.edge.size - start) as usize) {
                    if self.edge.size >= target {
                        break;
                    }
                    self.append_leaf(leaf)?;
                }
            }
            start = end;
            if self.edge.size >= target {
                break;
            }
        }
        if self.edge.size != target {
            return Err(record_err(
                &self.dir.join("epochs"),
                format!(
                    "the epochs hold {} leaves, fewer than the latest checkpoint's {target}",
                    self.edge.size
                ),
            ));
        }
        Ok(())
    }

    fn append_leaf(&mut self, leaf: &[u8]) -> Result<(), TileError> {
        if leaf.len() > MAX_ENTRY_BYTES {
            return Err(record_err(
                &self.dir.join("epochs"),
                format!(
                    "leaf {} is {} bytes, longer than an entry bundle holds",
                    self.edge.size,
                    leaf.len()
                ),
            ));
        }
        let dir = self.dir.clone();
        self.edge
            .append(leaf, &mut |id, bytes| put_tile(&dir, &id, &bytes))?;
        Ok(())
    }

    /// Writes the partial tiles of the current size, checks that the tree
    /// reproduces `note`, then replaces `checkpoint` with it.
    fn publish(&mut self, note: &[u8]) -> Result<(), TileError> {
        let cp_path = self.dir.join("checkpoint");
        let (size, root) = parse_note(&cp_path, note)?;
        if size != self.edge.size || root != self.edge.root() {
            return Err(record_err(
                &cp_path,
                format!(
                    "checkpoint of size {size} does not match the tiled tree of size {}",
                    self.edge.size
                ),
            ));
        }
        for (id, bytes) in self.edge.partials() {
            put_tile(&self.dir, &id, &bytes)?;
        }
        write_file(&cp_path, note)?;
        Ok(())
    }

    /// Replaces `checkpoint` with `note` when it states the tiled tree (the same
    /// checkpoint with more keeper co-signatures, after keepers caught up); a note
    /// of another tree is left alone (`Ok(false)`): the tiles publish only their
    /// own size.
    pub fn update_checkpoint(&mut self, note: &[u8]) -> Result<bool, TileError> {
        let (size, root) = parse_note(&self.dir.join("checkpoint"), note)?;
        if size != self.edge.size || root != self.edge.root() {
            return Ok(false);
        }
        write_file(&self.dir.join("checkpoint"), note)?;
        Ok(true)
    }

    /// Appends one sealed epoch — its first leaf index `start`, its leaves and its
    /// (co-signed) checkpoint note — after the epoch and checkpoint are durable in
    /// the record. Tiles behind `start` are first caught up from the record.
    pub fn append_epoch(
        &mut self,
        start: u64,
        leaves: &[Vec<u8>],
        checkpoint: &[u8],
    ) -> Result<(), TileError> {
        if start < self.edge.size {
            // Already tiled (a re-run after a crash): only the checkpoint may be new.
            let (size, _) = parse_note(&self.dir.join("checkpoint"), checkpoint)?;
            if size == self.edge.size {
                return self.publish(checkpoint);
            }
            return Err(record_err(
                &self.dir.join("checkpoint"),
                format!(
                    "epoch starting at leaf {start} is behind the tiles' size {}",
                    self.edge.size
                ),
            ));
        }
        self.catch_up(start)?;
        for leaf in leaves {
            self.append_leaf(leaf)?;
        }
        self.publish(checkpoint)
    }
}

/// Builds the tiles of an existing record directory from scratch (removing any
/// tiles it had): every epoch's leaves, then `checkpoint` = the record's latest
/// checkpoint. Returns the tree size. A record without epochs gets no tiles.
pub fn rebuild(dir: &Path) -> Result<u64, TileError> {
    let mut log = TileLog {
        dir: dir.to_owned(),
        edge: Edge::new(),
    };
    log.clear()?;
    write_vkeys(dir, &read_registry(dir)?)?;
    let Some(latest) = last_checkpoint(dir)? else {
        return Ok(0);
    };
    let (size, _) = parse_note(&dir.join("checkpoints"), &latest)?;
    log.catch_up(size)?;
    log.publish(&latest)?;
    Ok(log.edge.size)
}

/// One disagreement between the tiles and the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileProblem {
    /// Stable code: `tile_mismatch`, `tile_missing`, `checkpoint_unreadable`,
    /// `checkpoint_not_in_record`, `checkpoint_unsigned`, `checkpoint_bad_signature`,
    /// `checkpoint_root_mismatch`, `tiles_ahead`, `vkey_mismatch`.
    pub code: &'static str,
    /// The file at fault, relative to the record directory.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

/// What [`check_tiles`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TileReport {
    /// Whether the record has tiles at all (`checkpoint` or `tile/`).
    pub present: bool,
    /// Tree size of the tiles' `checkpoint` (0 if absent or unreadable).
    pub size: u64,
    /// Leaves in the record's epochs.
    pub record_size: u64,
    /// Tile and bundle files compared byte for byte.
    pub files_checked: u64,
    /// Disagreements (empty: the tiles are the record's).
    pub problems: Vec<TileProblem>,
}

/// Checks the tiles of record `dir` against its (already read) `record`: every
/// tile and bundle of the tiles' checkpoint size is recomputed from the record's
/// leaves and compared, every partial file present is checked as a prefix of its
/// tile, the `checkpoint` must state the tree of one of the record's checkpoints
/// with a valid log signature and nothing but valid keeper cosignatures besides,
/// and the vkey files must hold the record's log and keeper keys.
pub fn check_tiles(dir: &Path, record: &Record, keys: &KeyRegistry) -> TileReport {
    let mut report = TileReport {
        record_size: record.epochs.iter().map(|e| e.leaves.len() as u64).sum(),
        ..TileReport::default()
    };
    check_vkeys(dir, keys, &mut report);
    let cp_path = dir.join("checkpoint");
    let note = match read_bounded(&cp_path, DEFAULT_FRAME_BYTES, Limit::FrameBytes) {
        Ok(b) => Some(b),
        Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            checkpoint_unreadable(&mut report, e.to_string());
            None
        }
    };
    report.present = note.is_some() || dir.join("tile").exists();
    if !report.present {
        return report;
    }
    let Some(note) = note else {
        checkpoint_unreadable(&mut report, "tile/ exists but checkpoint is absent".into());
        return report;
    };
    let held = match SignedCheckpoint::parse(&note) {
        Ok(cp) => cp,
        Err(e) => {
            checkpoint_unreadable(&mut report, e.to_string());
            return report;
        }
    };
    let (size, root) = (held.checkpoint().size, held.checkpoint().root);
    report.size = size;
    check_checkpoint_signatures(&held, record, keys, &mut report);
    if size > report.record_size {
        let have = report.record_size;
        problem(
            &mut report,
            "tiles_ahead",
            "checkpoint",
            format!("size {size} is beyond the record's {have} leaves"),
        );
        return report;
    }
    check_tile_files(dir, record, size, root, &mut report);
    report
}

/// Records that the checkpoint cannot be read as the tiled log's.
fn checkpoint_unreadable(report: &mut TileReport, detail: String) {
    problem(report, "checkpoint_unreadable", "checkpoint", detail)
}

/// Records one problem found by [`check_tiles`].
fn problem(report: &mut TileReport, code: &'static str, path: &str, detail: String) {
    report.problems.push(TileProblem {
        code,
        path: path.to_owned(),
        detail,
    })
}

/// The `keys/*.vkey` files, when present, hold the record's keys.
fn check_vkeys(dir: &Path, keys: &KeyRegistry, report: &mut TileReport) {
    let (logs, keepers) = vkey_files(keys);
    for (name, want) in [("keys/log.vkey", logs), ("keys/keepers.vkey", keepers)] {
        match read_bounded(&dir.join(name), DEFAULT_FRAME_BYTES, Limit::FrameBytes) {
            Ok(b) if b == want.as_bytes() => {}
            Ok(_) => problem(
                report,
                "vkey_mismatch",
                name,
                "does not hold the record's keys (keys/*.txt)".into(),
            ),
            Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => problem(report, "vkey_mismatch", name, e.to_string()),
        }
    }
}

/// The held checkpoint states a tree of the record, is signed by the log, and every
/// other signature line is a valid keeper cosignature.
fn check_checkpoint_signatures(
    held: &SignedCheckpoint,
    record: &Record,
    keys: &KeyRegistry,
    report: &mut TileReport,
) {
    // The same tree as one of the record's checkpoints, signed by the log; its
    // cosignature lines may differ (keepers that co-signed later add theirs).
    let in_record = record
        .checkpoints
        .iter()
        .any(|c| SignedCheckpoint::parse(c).is_ok_and(|c| c.checkpoint() == held.checkpoint()));
    if !in_record {
        problem(
            report,
            "checkpoint_not_in_record",
            "checkpoint",
            "states a tree (origin, size, root) that no checkpoint of the record states".into(),
        );
    }
    if let Err(e) = held.verify_log(keys) {
        problem(report, "checkpoint_unsigned", "checkpoint", e.to_string());
    }
    // Every other line must be a valid cosignature of one of the record's keepers.
    for line in held.classify(keys) {
        use audita_evidence::SignatureLine as L;
        if let L::Unknown { name } | L::Invalid { name } = line {
            problem(
                report,
                "checkpoint_bad_signature",
                "checkpoint",
                format!("signature line of {name} is not a valid log or keeper signature"),
            );
        }
    }
}

/// Every tile of the first `size` leaves on disk is the one recomputed from the
/// record's leaves, and they reproduce the checkpoint's `root`.
fn check_tile_files(dir: &Path, record: &Record, size: u64, root: Hash, report: &mut TileReport) {
    let mut edge = Edge::new();
    let compare = |report: &mut TileReport, id: TileId, bytes: &[u8]| {
        report.files_checked += 1;
        match read_tile(dir, &id) {
            Ok(Some(b)) if b == bytes => {}
            Ok(Some(_)) => problem(
                report,
                "tile_mismatch",
                &id.path(),
                "differs from the tile recomputed from the record's leaves".into(),
            ),
            Ok(None) => problem(report, "tile_missing", &id.path(), "absent".into()),
            Err(e) => problem(report, "tile_mismatch", &id.path(), e.to_string()),
        }
        // Partials of older checkpoints still on disk must be prefixes.
        check_partial_files(dir, &id, bytes, report);
    };
    let leaves = record.epochs.iter().flat_map(|e| e.leaves.iter());
    for leaf in leaves.take(size as usize) {
        if leaf.len() > MAX_ENTRY_BYTES {
            problem(
                report,
                "tile_mismatch",
                "tile/entries",
                format!("leaf {} is too long for an entry bundle", edge.size()),
            );
            return;
        }
        let _ = edge.append(leaf, &mut |id, bytes| {
            compare(report, id, &bytes);
            Ok::<(), ()>(())
        });
    }
    for (id, bytes) in edge.partials() {
        compare(report, id, &bytes);
    }
    if edge.root() != root {
        problem(
            report,
            "checkpoint_root_mismatch",
            "checkpoint",
            "the record's leaves do not reproduce its root".into(),
        );
    }
}

/// Checks every `<N>.p/<W>` file of tile `id` (whose bytes at the checked size
/// are `bytes`) as a prefix of it; a wider partial than the tile is a mismatch.
fn check_partial_files(dir: &Path, id: &TileId, bytes: &[u8], report: &mut TileReport) {
    let mut pdir = dir
        .join(id.with_width(TILE_WIDTH as u16).path())
        .into_os_string();
    pdir.push(".p");
    let Ok(entries) = fs::read_dir(PathBuf::from(pdir)) else {
        return;
    };
    for entry in entries.flatten().take(TILE_WIDTH) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(w) = name.parse::<u16>() else {
            continue;
        };
        if w == 0 || w as usize >= TILE_WIDTH || w == id.width {
            continue;
        }
        let pid = id.with_width(w);
        report.files_checked += 1;
        let want = match id.kind {
            TileKind::Hash(_) => bytes.get(..w as usize * 32).map(<[u8]>::to_vec),
            TileKind::Entries => parse_bundle(bytes, id.width as usize)
                .filter(|e| e.len() >= w as usize)
                .map(|e| bundle(&e[..w as usize])),
        };
        let ok = matches!((read_tile(dir, &pid), want), (Ok(Some(b)), Some(w)) if b == w);
        if !ok {
            report.problems.push(TileProblem {
                code: "tile_mismatch",
                path: pid.path(),
                detail: "partial tile is not a prefix of the tile recomputed from the record"
                    .into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(i: u64) -> Vec<u8> {
        let mut v = vec![1u8, b'a'];
        v.extend_from_slice(&audita_evidence::sha256(&i.to_be_bytes()));
        v
    }

    #[test]
    fn index_paths_are_three_digit_groups() {
        assert_eq!(index_path(0), "000");
        assert_eq!(index_path(5), "005");
        assert_eq!(index_path(999), "999");
        assert_eq!(index_path(1000), "x001/000");
        assert_eq!(index_path(1234067), "x001/x234/067");
        assert_eq!(index_path(u64::MAX), "x018/x446/x744/x073/x709/x551/615");
        for (p, id) in [
            (
                "tile/0/x001/x234/067",
                TileId {
                    kind: TileKind::Hash(0),
                    index: 1234067,
                    width: 256,
                },
            ),
            (
                "tile/entries/x001/234.p/5",
                TileId {
                    kind: TileKind::Entries,
                    index: 1234,
                    width: 5,
                },
            ),
            (
                "tile/3/000.p/255",
                TileId {
                    kind: TileKind::Hash(3),
                    index: 0,
                    width: 255,
                },
            ),
        ] {
            assert_eq!(id.path(), p);
            assert_eq!(TileId::parse(p), Some(id), "{p}");
        }
        for bad in [
            "tile/0/1",
            "tile/00/001",
            "tile/8/000",
            "tile/0/x000/001",
            "tile/0/001.p/0",
            "tile/0/001.p/256",
            "tile/0/001.p/05",
            "tile/0/../001",
            "tile/0/001/",
            "tile/entries/x001",
            "tile/0/x001/x002/x003/x004/x005/x006/x007/008",
            "tile/0/x999/x999/x999/x999/x999/x999/999",
            "checkpoint",
            "tile/data/000",
            "tile/0/001.p/5/",
        ] {
            assert_eq!(TileId::parse(bad), None, "{bad}");
        }
    }

    /// The tiles the spec describes for `size` leaves, computed directly from the
    /// definition (MTH of each `256^L`-leaf subtree), not through [`Edge`].
    fn reference_tiles(hashes: &[Hash]) -> Vec<(TileId, Vec<u8>)> {
        let size = hashes.len() as u64;
        let mut out = Vec::new();
        let mut level = 0usize;
        while at_level(size, level) > 0 {
            let span = 1usize << (8 * level);
            let count = at_level(size, level) as usize; // hashes at this level
            let level_hashes: Vec<Hash> = (0..count)
                .map(|i| root_from_leaf_hashes(&hashes[i * span..(i + 1) * span]))
                .collect();
            for (n, chunk) in level_hashes.chunks(TILE_WIDTH).enumerate() {
                out.push((
                    TileId {
                        kind: TileKind::Hash(level as u8),
                        index: n as u64,
                        width: chunk.len() as u16,
                    },
                    concat(chunk),
                ));
            }
            level += 1;
        }
        out.sort();
        out
    }

    fn run_edge(size: u64) -> (Vec<(TileId, Vec<u8>)>, Edge) {
        let mut edge = Edge::new();
        let mut tiles = Vec::new();
        for i in 0..size {
            edge.append(&leaf(i), &mut |id, b| {
                tiles.push((id, b));
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        (tiles, edge)
    }

    #[test]
    fn edge_tiles_match_the_definition_at_tile_boundaries() {
        for size in [
            0u64, 1, 255, 256, 257, 511, 512, 513, 65535, 65536, 65537, 70000,
        ] {
            let hashes: Vec<Hash> = (0..size).map(|i| leaf_hash(&leaf(i))).collect();
            let (full, edge) = run_edge(size);
            let mut got: Vec<(TileId, Vec<u8>)> = full
                .iter()
                .filter(|(id, _)| matches!(id.kind, TileKind::Hash(_)))
                .cloned()
                .collect();
            got.extend(
                edge.partials()
                    .into_iter()
                    .filter(|(id, _)| matches!(id.kind, TileKind::Hash(_))),
            );
            got.sort();
            assert_eq!(got, reference_tiles(&hashes), "size {size}");
            assert_eq!(edge.root(), root_from_leaf_hashes(&hashes), "size {size}");
            // Bundles: full ones of 256, then one partial of size % 256.
            let bundles = full
                .iter()
                .filter(|(id, _)| id.kind == TileKind::Entries)
                .count() as u64;
            assert_eq!(bundles, size / 256);
            let partial = edge
                .partials()
                .into_iter()
                .find(|(id, _)| id.kind == TileKind::Entries);
            assert_eq!(
                partial.map(|(id, _)| id.width as u64),
                Some(size % 256).filter(|w| *w > 0)
            );
        }
    }

    #[test]
    fn the_spec_examples_hold() {
        // 70,000 leaves: 273 full level-0 tiles, a partial of 112, one full level-1
        // tile, a level-1 partial of 17 and a level-2 partial of 1.
        let (full, edge) = run_edge(70_000);
        let level = |l| {
            full.iter()
                .filter(|(id, _)| id.kind == TileKind::Hash(l))
                .count()
        };
        assert_eq!((level(0), level(1), level(2)), (273, 1, 0));
        let widths: Vec<(TileKind, u16)> = edge
            .partials()
            .iter()
            .map(|(id, _)| (id.kind, id.width))
            .collect();
        assert_eq!(
            widths,
            vec![
                (TileKind::Hash(0), 112),
                (TileKind::Hash(1), 17),
                (TileKind::Hash(2), 1),
                (TileKind::Entries, 112)
            ]
        );
        // 256 leaves: a full level-0 tile and a level-1 partial of width 1.
        let (full, edge) = run_edge(256);
        assert_eq!(full.len(), 2); // tile/0/000 and tile/entries/000
        let p: Vec<String> = edge.partials().iter().map(|(id, _)| id.path()).collect();
        assert_eq!(p, vec!["tile/1/000.p/1"]);
    }

    #[test]
    fn edge_reloads_from_partial_tiles() {
        let dir = tempfile::tempdir().unwrap();
        for size in [1u64, 255, 256, 257, 600, 65537] {
            let (_, edge) = run_edge(size);
            for (id, bytes) in edge.partials() {
                put_tile(dir.path(), &id, &bytes).unwrap();
            }
            let loaded = Edge::load(dir.path(), size).unwrap().unwrap();
            assert_eq!(loaded, edge, "size {size}");
            assert_eq!(loaded.range(), edge.range());
        }
        assert_eq!(Edge::load(dir.path(), 3).unwrap(), None);
    }

    #[test]
    fn bundles_round_trip() {
        let entries = vec![vec![], vec![1, 2, 3], vec![7; 300]];
        let b = bundle(&entries);
        assert_eq!(&b[..2], &[0, 0]);
        assert_eq!(&b[2..4], &[0, 3]);
        assert_eq!(parse_bundle(&b, 3), Some(entries));
        assert_eq!(parse_bundle(&b, 2), None);
        assert_eq!(parse_bundle(&b[..b.len() - 1], 3), None);
    }

    use crate::{read_record, write_record, RecordWriter};
    use audita_evidence::sample::sample_record;

    /// Every file under `tile/` and `checkpoint`, relative path → bytes.
    fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, at: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
            for e in fs::read_dir(at).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.insert(rel, fs::read(&p).unwrap());
                }
            }
        }
        let mut out = std::collections::BTreeMap::new();
        if dir.join("tile").exists() {
            walk(dir, &dir.join("tile"), &mut out);
        }
        if let Ok(b) = fs::read(dir.join("checkpoint")) {
            out.insert("checkpoint".into(), b);
        }
        out
    }

    /// A record written epoch by epoch with the tiles appended after each, as the
    /// sealer does.
    fn incremental(dir: &Path, s: &audita_evidence::sample::Sample, epochs: usize) -> TileLog {
        let mut w = RecordWriter::create(dir, &s.keys).unwrap();
        let (mut tiles, _) = TileLog::open(dir).unwrap();
        for e in &s.epochs[..epochs] {
            w.write_epoch(e).unwrap();
            let leaves: Vec<Vec<u8>> = e.leaves.iter().map(|l| l.leaf_bytes()).collect();
            tiles
                .append_epoch(e.header.start, &leaves, e.checkpoint.to_text().as_bytes())
                .unwrap();
        }
        tiles
    }

    fn check(dir: &Path) -> TileReport {
        let (record, keys) = read_record(dir).unwrap();
        check_tiles(dir, &record, &keys)
    }

    #[test]
    fn incremental_tiles_equal_tiles_rebuilt_from_scratch() {
        let s = sample_record(3, 700);
        assert!(s.record.epochs.len() >= 3);
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_record(a.path(), &s.record, &s.keys).unwrap();
        let size = rebuild(a.path()).unwrap();
        assert_eq!(size, s.envelopes.len() as u64);
        assert!(size > 512, "crosses two tile boundaries");
        let tiles = incremental(b.path(), &s, s.epochs.len());
        assert_eq!(tiles.size(), size);
        let (ta, tb) = (tree(a.path()), tree(b.path()));
        for (path, bytes) in &ta {
            assert_eq!(tb.get(path), Some(bytes), "{path}");
        }
        // What the incremental writer kept beyond: partials of older checkpoints.
        for path in tb.keys().filter(|p| !ta.contains_key(*p)) {
            assert!(path.contains(".p/"), "{path}");
        }
        for d in [a.path(), b.path()] {
            let r = check(d);
            assert!(r.present && r.problems.is_empty(), "{:?}", r.problems);
            assert_eq!(r.size, size);
            assert!(r.files_checked >= 6);
        }
        assert_eq!(
            fs::read(b.path().join("checkpoint")).unwrap(),
            s.record.checkpoints.last().unwrap().clone()
        );
        // The vkeys are the record's keys.
        let vkeys = fs::read_to_string(b.path().join("keys/keepers.vkey")).unwrap();
        assert_eq!(vkeys.lines().count(), s.keys.keepers().count());
    }

    #[test]
    fn a_record_without_tiles_reports_them_absent() {
        let s = sample_record(1, 30);
        let d = tempfile::tempdir().unwrap();
        write_record(d.path(), &s.record, &s.keys).unwrap();
        let r = check(d.path());
        assert!(!r.present && r.problems.is_empty());
    }

    #[test]
    fn tampered_tiles_are_reported() {
        let s = sample_record(4, 700);
        let d = tempfile::tempdir().unwrap();
        incremental(d.path(), &s, s.epochs.len());
        let files = tree(d.path());
        let size = s.envelopes.len() as u64;
        let current: Vec<String> = Edge::load(d.path(), size)
            .unwrap()
            .unwrap()
            .partials()
            .iter()
            .map(|(id, _)| id.path())
            .collect();
        assert!(
            current.contains(&"tile/1/000.p/2".to_string()),
            "{current:?}"
        );
        let stale = files
            .keys()
            .find(|p| p.contains(".p/") && !current.contains(p))
            .cloned();
        assert!(stale.is_some(), "an older checkpoint's partial is kept");
        for victim in ["tile/0/000", "tile/entries/001", "tile/1/000.p/2"]
            .into_iter()
            .map(String::from)
            .chain(stale)
        {
            let path = d.path().join(&victim);
            let original = fs::read(&path).unwrap_or_else(|e| panic!("{victim}: {e}"));
            let mut bad = original.clone();
            let i = bad.len() - 1;
            bad[i] ^= 1;
            fs::write(&path, &bad).unwrap();
            let r = check(d.path());
            assert!(
                r.problems
                    .iter()
                    .any(|p| p.code == "tile_mismatch" && p.path == victim),
                "{victim}: {:?}",
                r.problems
            );
            fs::remove_file(&path).unwrap();
            let r = check(d.path());
            if !current.contains(&victim) && victim.contains(".p/") {
                // A stale partial may be removed (the spec allows it).
                assert!(r.problems.is_empty(), "{victim}: {:?}", r.problems);
            } else {
                assert!(!r.problems.is_empty(), "{victim} removed");
            }
            fs::write(&path, &original).unwrap();
            assert!(check(d.path()).problems.is_empty());
        }
        // An older checkpoint of the record: a consistent but stale view whose
        // tiles are checked at that size (the newer partials are then extra).
        let cp = d.path().join("checkpoint");
        let note = fs::read(&cp).unwrap();
        fs::write(&cp, &s.record.checkpoints[0]).unwrap();
        let codes: Vec<&str> = check(d.path()).problems.iter().map(|p| p.code).collect();
        assert!(
            !codes.is_empty() && !codes.contains(&"checkpoint_not_in_record"),
            "{codes:?}"
        );
        fs::write(&cp, b"garbage\n").unwrap();
        let codes: Vec<&str> = check(d.path()).problems.iter().map(|p| p.code).collect();
        assert_eq!(codes, vec!["checkpoint_unreadable"]);
        // The same tree with a keeper's cosignature dropped: still the record's tree.
        let text = String::from_utf8(note.clone()).unwrap();
        let fewer: Vec<&str> = text.lines().collect();
        let fewer = fewer[..fewer.len() - 1].join("\n") + "\n";
        fs::write(&cp, &fewer).unwrap();
        assert!(check(d.path()).problems.is_empty());
        // The log's signature broken (its first byte after the key id).
        let log_line = text
            .lines()
            .position(|l| l.starts_with('\u{2014}'))
            .unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let at = lines[log_line].rfind(' ').unwrap() + 8;
        let c = lines[log_line].as_bytes()[at];
        let swapped = if c == b'A' { "B" } else { "A" };
        lines[log_line].replace_range(at..at + 1, swapped);
        fs::write(&cp, lines.join("\n") + "\n").unwrap();
        let codes: Vec<&str> = check(d.path()).problems.iter().map(|p| p.code).collect();
        assert_eq!(
            codes,
            vec!["checkpoint_unsigned", "checkpoint_bad_signature"]
        );
        fs::write(&cp, &note).unwrap();
        assert!(check(d.path()).problems.is_empty());
    }

    #[test]
    fn tiles_behind_the_record_catch_up_and_damaged_tiles_are_rebuilt() {
        let s = sample_record(5, 700);
        let d = tempfile::tempdir().unwrap();
        // A crash after epoch 2 was written but before its tiles.
        drop(incremental(d.path(), &s, 1));
        let mut w = RecordWriter::open(d.path()).unwrap();
        w.write_epoch(&s.epochs[1]).unwrap();
        let (log, opened) = TileLog::open(d.path()).unwrap();
        assert_eq!(
            opened,
            Opened::CaughtUp {
                from: s.epochs[0].header.size
            }
        );
        assert_eq!(log.size(), s.epochs[1].header.size);
        assert!(check(d.path()).problems.is_empty());
        // Re-running the same epoch's append (the sealer's retry) changes nothing.
        let mut log = log;
        let leaves: Vec<Vec<u8>> = s.epochs[1].leaves.iter().map(|l| l.leaf_bytes()).collect();
        let before = tree(d.path());
        log.append_epoch(
            s.epochs[1].header.start,
            &leaves,
            s.epochs[1].checkpoint.to_text().as_bytes(),
        )
        .unwrap();
        assert_eq!(tree(d.path()), before);
        assert_eq!(TileLog::open(d.path()).unwrap().1, Opened::Current);
        // A partial tile torn or replaced: the edge no longer reproduces the
        // checkpoint, so the tiles are rebuilt from the record.
        let (_, edge_tile) = Edge::load(d.path(), log.size())
            .unwrap()
            .unwrap()
            .partials()
            .remove(0);
        let p0 = d.path().join(
            Edge::load(d.path(), log.size())
                .unwrap()
                .unwrap()
                .partials()[0]
                .0
                .path(),
        );
        let mut bad = edge_tile.clone();
        bad[0] ^= 0xff;
        fs::write(&p0, &bad).unwrap();
        assert!(!check(d.path()).problems.is_empty());
        assert_eq!(TileLog::open(d.path()).unwrap().1, Opened::Rebuilt);
        assert!(check(d.path()).problems.is_empty());
        assert_eq!(fs::read(&p0).unwrap(), edge_tile);
        // The record's last epoch and checkpoint removed (a record cut short under
        // its tiles): no epoch ends at the tiles' size, so they are rebuilt.
        fs::remove_file(d.path().join("epochs/epoch-000001.seg")).unwrap();
        fs::remove_file(d.path().join("checkpoints/checkpoint-000001.txt")).unwrap();
        let (log, opened) = TileLog::open(d.path()).unwrap();
        assert_eq!(opened, Opened::Rebuilt);
        assert_eq!(log.size(), s.epochs[0].header.size);
        assert!(check(d.path()).problems.is_empty());
        // Only the newest checkpoint file removed: tiles beyond every checkpoint.
        let mut w = RecordWriter::open(d.path()).unwrap();
        w.write_epoch(&s.epochs[1]).unwrap();
        drop(TileLog::open(d.path()).unwrap());
        fs::remove_file(d.path().join("checkpoints/checkpoint-000001.txt")).unwrap();
        let (log, opened) = TileLog::open(d.path()).unwrap();
        assert_eq!(
            (opened, log.size()),
            (Opened::Rebuilt, s.epochs[0].header.size)
        );
        w.write_checkpoint(s.epochs[1].checkpoint.to_text().as_bytes())
            .unwrap();
        // A checkpoint from another log (not the end of any record epoch).
        let other = sample_record(99, 700);
        fs::write(d.path().join("checkpoint"), &other.record.checkpoints[0]).unwrap();
        assert_eq!(TileLog::open(d.path()).unwrap().1, Opened::Rebuilt);
        assert!(check(d.path()).problems.is_empty());
    }
}
