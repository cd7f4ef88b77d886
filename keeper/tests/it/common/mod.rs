//! Shared test fixtures: a log (key, leaves, checkpoints, proofs) that can fork,
//! keepers on loopback, raw HTTP posts.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::{Checkpoint, ConsistencyProof, Hash, SignedCheckpoint, SigningKey};
use audita_keeper::{log_vkey, KeeperConfig, KeeperHandle};

/// A log: origin, signing key and its leaves (a fork shares the key).
#[derive(Clone)]
pub struct Log {
    pub origin: String,
    pub key: SigningKey,
    pub leaves: Vec<Hash>,
}

impl Log {
    pub fn new(origin: &str, seed: u64, n: usize) -> Self {
        Self {
            origin: origin.into(),
            key: audita_evidence::derive_signing_key(seed, origin),
            leaves: (0..n)
                .map(|i| leaf_hash(format!("leaf {i}").as_bytes()))
                .collect(),
        }
    }
    /// Same origin and key; the first `prefix` leaves shared, the rest different.
    pub fn fork(&self, prefix: usize) -> Self {
        let mut f = self.clone();
        for (i, l) in f.leaves.iter_mut().enumerate().skip(prefix) {
            *l = leaf_hash(format!("fork leaf {i}").as_bytes());
        }
        f
    }
    pub fn vkey(&self) -> String {
        log_vkey(&self.origin, &self.key.verifying_key())
    }
    pub fn checkpoint(&self, n: usize) -> SignedCheckpoint {
        SignedCheckpoint::sign(
            Checkpoint {
                origin: self.origin.clone(),
                size: n as u64,
                root: root_from_leaf_hashes(&self.leaves[..n]),
            },
            &self.key,
        )
    }
    pub fn note(&self, n: usize) -> Vec<u8> {
        self.checkpoint(n).to_text().into_bytes()
    }
    pub fn proof(&self, old: usize, new: usize) -> Vec<Hash> {
        ConsistencyProof::generate(&self.leaves[..new], old as u64)
            .unwrap()
            .path
    }
}

pub const KEEPER: &str = "keeper.example/k1";

pub fn keeper_key() -> SigningKey {
    audita_evidence::derive_signing_key(7, KEEPER)
}

pub fn config(dir: &Path, logs: &[&Log]) -> KeeperConfig {
    let vkeys: Vec<String> = logs.iter().map(|l| l.vkey()).collect();
    KeeperConfig::new(KEEPER, keeper_key(), &vkeys, dir).unwrap()
}

pub fn start(config: &KeeperConfig) -> KeeperHandle {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    audita_keeper::serve(config, listener).unwrap()
}

/// A raw POST: (status, content type, body).
pub fn post(url: &str, path: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut resp = agent
        .post(&format!("{url}{path}"))
        .send(body)
        .expect("keeper answers");
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .unwrap_or_default();
    (status, ct, body)
}

/// Sends raw request bytes on a fresh connection and returns the answer's status
/// code (`None` if the connection closed without one).
pub fn raw_status(addr: std::net::SocketAddr, request: &[u8]) -> Option<u16> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(request);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}
