//! `audita.suspect`: input that did not pass a check, with the reason. Ingest
//! quarantines what fails form, citation or signature checks; the sealer quarantines
//! envelopes older than its dedupe horizon (`late`).

/// A record that failed a check, as published on `audita.suspect`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quarantined {
    /// Short machine-readable reason (`decode`, `signature`, `citation`, `unknown_topic`,
    /// `too_large`; `late` from the sealer). The fields are declared in the order an
    /// operator reads them (`audita tail suspect` prints them so): why, then where
    /// from, then the bytes.
    pub reason: String,
    /// Human-readable detail, one line.
    pub detail: String,
    /// Topic the bytes came from.
    pub source_topic: String,
    /// Partition they came from.
    pub partition: u32,
    /// Offset they came from.
    pub offset: u64,
    /// The rejected bytes, hex: all of them up to [`MAX_QUARANTINED_BYTES`]; of a
    /// larger record only its first [`MAX_QUARANTINED_BYTES`] (the detail then gives
    /// its length and SHA-256), so a quarantine record always fits the bus.
    pub bytes_hex: String,
}

/// Most bytes of a rejected record a quarantine record carries (64 KiB).
pub const MAX_QUARANTINED_BYTES: usize = 64 << 10;

impl Quarantined {
    /// The quarantine record of `bytes` read from (`topic`, `partition`, `offset`),
    /// failing `reason` with one-line `detail` (bytes beyond
    /// [`MAX_QUARANTINED_BYTES`] are left out; the detail then says how many there
    /// were and their SHA-256).
    pub fn of(
        topic: &str,
        partition: u32,
        offset: u64,
        reason: &str,
        detail: &str,
        bytes: &[u8],
    ) -> Quarantined {
        let mut detail = detail.replace('\n', " ");
        if bytes.len() > MAX_QUARANTINED_BYTES {
            detail.push_str(&format!(
                " (bytes_hex holds the first {MAX_QUARANTINED_BYTES} of {} bytes; sha256 {})",
                bytes.len(),
                hex::encode(audita_evidence::sha256(bytes))
            ));
        }
        Quarantined {
            source_topic: topic.to_string(),
            partition,
            offset,
            reason: reason.to_string(),
            detail,
            bytes_hex: hex::encode(&bytes[..bytes.len().min(MAX_QUARANTINED_BYTES)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_record_is_quarantined_by_its_head_and_digest() {
        let big = vec![7u8; MAX_QUARANTINED_BYTES + 10];
        let q = Quarantined::of("t", 0, 1, "too_large", "too big\nreally", &big);
        assert_eq!(q.bytes_hex.len(), 2 * MAX_QUARANTINED_BYTES);
        assert!(q
            .detail
            .contains(&format!("of {} bytes; sha256 ", big.len())));
        assert!(!q.detail.contains('\n'));
        let small = Quarantined::of("t", 0, 1, "decode", "bad", b"abc");
        assert_eq!(small.bytes_hex, "616263");
        assert_eq!(small.detail, "bad");
    }
}
