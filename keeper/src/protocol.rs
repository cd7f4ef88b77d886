//! The C2SP tlog-witness wire format (c2sp.org/tlog-witness, `add-checkpoint`),
//! shared by the server and the client.
//!
//! Design constraints:
//! - Request body, every line `\n`-terminated:
//!   ```text
//!   old <size>                 (ASCII decimal, no leading zeros; `0` for zero)
//!   <base64 hash>              (0..=63 consistency proof lines, RFC 6962 §2.1.2)
//!   <empty line>
//!   <signed checkpoint note>   (c2sp.org/tlog-checkpoint)
//!   ```
//! - 200 body: one or more note signature lines (`— <name> <base64>\n`), the
//!   witness's `cosignature/v1` lines over the checkpoint.
//! - 409 body: the witness's latest co-signed size in decimal and `\n`, with
//!   `Content-Type: text/x.tlog.size`.
//! - Parsing is strict and total: canonical padded base64 of exactly 32 bytes per
//!   proof line, at most [`MAX_PROOF_LINES`] of them, a canonical decimal size;
//!   anything else is a [`RequestError`] (the server's 400), never a panic.

use audita_evidence::Hash;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use thiserror::Error;

/// The spec's bound on consistency proof lines (a proof in a tree of at most
/// 2^63 leaves has at most 63 hashes).
pub const MAX_PROOF_LINES: usize = 63;
/// Content type of a 409 answer's body.
pub const SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";
/// The em dash and space that open a note signature line.
pub const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// A parsed `add-checkpoint` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// Size of the checkpoint the client believes the witness co-signed last.
    pub old_size: u64,
    /// Consistency proof from `old_size` to the checkpoint's size.
    pub proof: Vec<Hash>,
    /// The signed checkpoint note, byte for byte.
    pub note: Vec<u8>,
}

/// Why a request body is malformed (the server answers 400). Permanent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequestError {
    /// The first line is not `old <canonical decimal>`.
    #[error("first line is not `old <size>` with a canonical decimal size")]
    BadOldSize,
    /// A proof line is not canonical base64 of 32 bytes.
    #[error("consistency proof line {line} is not the base64 of a 32-byte hash")]
    BadProofLine {
        /// 1-based line number in the body.
        line: usize,
    },
    /// More than [`MAX_PROOF_LINES`] proof lines.
    #[error("more than {MAX_PROOF_LINES} consistency proof lines")]
    ProofTooLong,
    /// No empty line before the checkpoint, or no checkpoint after it.
    #[error("no empty line followed by a checkpoint")]
    NoCheckpoint,
}

/// Parses a canonical ASCII decimal (no sign, no leading zeros except `0`).
pub fn parse_decimal(text: &str) -> Option<u64> {
    if text.is_empty()
        || !text.bytes().all(|b| b.is_ascii_digit())
        || (text.len() > 1 && text.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

fn parse_hash(line: &str) -> Option<Hash> {
    // 32 bytes are 44 base64 characters; a longer line cannot be one.
    if line.len() != 44 {
        return None;
    }
    let raw = STANDARD.decode(line).ok()?;
    let hash: Hash = raw.try_into().ok()?;
    (STANDARD.encode(hash) == line).then_some(hash)
}

/// Parses a request body (strict, total).
pub fn parse_request(body: &[u8]) -> Result<AddCheckpoint, RequestError> {
    let mut rest = body;
    let next_line = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let end = rest.iter().position(|&b| b == b'\n')?;
        let line = rest[..end].to_vec();
        *rest = &rest[end + 1..];
        Some(line)
    };
    let first = next_line(&mut rest).ok_or(RequestError::BadOldSize)?;
    let old_size = std::str::from_utf8(&first)
        .ok()
        .and_then(|l| l.strip_prefix("old "))
        .and_then(parse_decimal)
        .ok_or(RequestError::BadOldSize)?;
    let mut proof = Vec::new();
    let mut line_no = 1;
    loop {
        line_no += 1;
        let line = next_line(&mut rest).ok_or(RequestError::NoCheckpoint)?;
        if line.is_empty() {
            break;
        }
        if proof.len() == MAX_PROOF_LINES {
            return Err(RequestError::ProofTooLong);
        }
        let hash = std::str::from_utf8(&line)
            .ok()
            .and_then(parse_hash)
            .ok_or(RequestError::BadProofLine { line: line_no })?;
        proof.push(hash);
    }
    if rest.is_empty() {
        return Err(RequestError::NoCheckpoint);
    }
    Ok(AddCheckpoint {
        old_size,
        proof,
        note: rest.to_vec(),
    })
}

/// Formats a request body.
pub fn format_request(old_size: u64, proof: &[Hash], note: &[u8]) -> Vec<u8> {
    let mut out = format!("old {old_size}\n").into_bytes();
    for h in proof {
        out.extend_from_slice(STANDARD.encode(h).as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(note);
    out
}

/// Parses a 409 body: a canonical decimal and `\n`.
pub fn parse_size_body(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    parse_decimal(text.strip_suffix('\n')?)
}

/// Splits a 200 body into its signature lines (each with its `\n`); `None` if the
/// body is empty or any line is not a note signature line.
pub fn parse_signature_lines(body: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(body).ok()?;
    let text = text.strip_suffix('\n')?;
    let lines: Vec<String> = text.split('\n').map(|l| format!("{l}\n")).collect();
    lines
        .iter()
        .all(|l| l.starts_with(SIGNATURE_PREFIX) && l.trim_end().contains(' '))
        .then_some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_roundtrips_and_rejects_every_malformation() {
        let note = b"o\n1\nAAAA\n\n\xe2\x80\x94 o x\n";
        let proof = [[1u8; 32], [2u8; 32]];
        let body = format_request(5, &proof, note);
        let parsed = parse_request(&body).unwrap();
        assert_eq!(parsed.old_size, 5);
        assert_eq!(parsed.proof, proof.to_vec());
        assert_eq!(parsed.note, note.to_vec());
        assert_eq!(
            parse_request(&format_request(0, &[], note))
                .unwrap()
                .old_size,
            0
        );

        let bad = |b: &[u8]| parse_request(b).unwrap_err();
        assert_eq!(bad(b"old 05\n\nx"), RequestError::BadOldSize);
        assert_eq!(bad(b"old -1\n\nx"), RequestError::BadOldSize);
        assert_eq!(bad(b"old  1\n\nx"), RequestError::BadOldSize);
        assert_eq!(bad(b"new 1\n\nx"), RequestError::BadOldSize);
        assert_eq!(
            bad(b"old 99999999999999999999\n\nx"),
            RequestError::BadOldSize
        );
        assert_eq!(bad(b"old 1"), RequestError::BadOldSize);
        assert_eq!(bad(b"old 1\n\n"), RequestError::NoCheckpoint);
        let zero = STANDARD.encode([0u8; 32]);
        assert_eq!(
            bad(format!("old 1\n{zero}\n").as_bytes()),
            RequestError::NoCheckpoint
        );
        assert_eq!(
            bad(b"old 1\nnot base64!\n\nx"),
            RequestError::BadProofLine { line: 2 }
        );
        // 31 bytes, and a non-canonical encoding of 32 bytes.
        let short = STANDARD.encode([0u8; 31]);
        assert!(matches!(
            bad(format!("old 1\n{short}\n\nx").as_bytes()),
            RequestError::BadProofLine { .. }
        ));
        let mut b64 = STANDARD.encode([0u8; 32]);
        b64.replace_range(42..43, "B");
        assert!(matches!(
            bad(format!("old 1\n{b64}\n\nx").as_bytes()),
            RequestError::BadProofLine { .. }
        ));
        let too_long = format_request(1, &[[0u8; 32]; 64], b"x");
        assert_eq!(bad(&too_long), RequestError::ProofTooLong);
        assert!(parse_request(&format_request(1, &[[0u8; 32]; 63], b"x")).is_ok());
    }

    #[test]
    fn size_and_signature_bodies() {
        assert_eq!(parse_size_body(b"42\n"), Some(42));
        assert_eq!(parse_size_body(b"42"), None);
        assert_eq!(parse_size_body(b"042\n"), None);
        let lines = parse_signature_lines("\u{2014} a AAAA\n\u{2014} b BBBB\n".as_bytes()).unwrap();
        assert_eq!(lines, vec!["\u{2014} a AAAA\n", "\u{2014} b BBBB\n"]);
        assert!(parse_signature_lines(b"").is_none());
        assert!(parse_signature_lines("- a AAAA\n".as_bytes()).is_none());
    }
}
